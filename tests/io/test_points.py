"""GeoJSON sources (terrain/io/points.py): a position is two finite JSON numbers, and each
bad document is an InputError naming the file."""

import pytest

from terrain.errors import InputError
from terrain.io.points import read_points

BAD = {
    "coordinates_bool": '{"type": "Point", "coordinates": [true, 2]}',
    "coordinates_strings": '{"type": "Point", "coordinates": ["1", "2"]}',
    "coordinates_huge_int": '{"type": "Point", "coordinates": [1' + "0" * 400 + ', 2]}',
    "coordinates_too_many_digits": '{"type": "Point", "coordinates": [1' + "0" * 5000 + ', 2]}',
    "coordinates_infinity": '{"type": "Point", "coordinates": [Infinity, 2]}',
    "coordinates_one": '{"type": "Point", "coordinates": [1]}',
    "features_object": '{"type": "FeatureCollection", "features": {"a": 1}}',
    "geometry_number": '{"type": "Feature", "geometry": 5}',
    "deep_nesting": '{"type": "Point", "coordinates": ' + "[" * 100000 + "]" * 100000 + "}",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_geojson_is_one_input_error_naming_the_file(tmp_path, name):
    path = tmp_path / f"{name}.geojson"
    path.write_text(BAD[name])
    with pytest.raises(InputError) as e:
        read_points(path)
    assert str(e.value).startswith(str(path)), str(e.value)
    assert "\n" not in str(e.value)


def test_a_position_may_carry_an_altitude(tmp_path):
    path = tmp_path / "p.geojson"
    path.write_text('{"type": "MultiPoint", "coordinates": [[1, 2, 30], [3.5, -4]]}')
    assert read_points(path) == [(1.0, 2.0), (3.5, -4.0)]
