"""Points and lines (terrain/io/points.py): a GeoJSON position is two finite JSON numbers,
and each bad document is an InputError naming the file; OGR's files (written here by GDAL
through pyogrio) give their points, reprojected; lines go to GeoJSON, GeoPackage and
FlatGeobuf."""

import json
import re

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


# ------------------------------------------------------------------ CRS of points and paths
# The oracle is pyproj's own Transformer (always_xy), not rasterio.warp, which terrain uses.

UTM17 = "EPSG:32617"


def _to_utm(lon, lat):
    from pyproj import Transformer
    return Transformer.from_crs("EPSG:4326", UTM17, always_xy=True).transform(lon, lat)


def _to_lonlat(x, y):
    from pyproj import Transformer
    return Transformer.from_crs(UTM17, "EPSG:4326", always_xy=True).transform(x, y)


def test_geojson_without_crs_is_lon_lat_reprojected_into_the_raster_crs(tmp_path):
    path = tmp_path / "p.geojson"
    path.write_text('{"type": "Point", "coordinates": [-78.75, 35.19]}')
    (x, y), = read_points(path, crs=UTM17)
    assert (x, y) == pytest.approx(_to_utm(-78.75, 35.19), abs=1e-6)


def test_geojson_crs_member_names_the_crs_of_its_positions(tmp_path):
    path = tmp_path / "p.geojson"
    path.write_text('{"type": "FeatureCollection", "crs": {"type": "name", "properties": '
                    '{"name": "urn:ogc:def:crs:EPSG::32617"}}, "features": [{"type": "Feature",'
                    ' "properties": {}, "geometry": {"type": "Point", '
                    '"coordinates": [704515, 3896985]}}]}')
    assert read_points(path, crs=UTM17) == [(704515.0, 3896985.0)]
    (lon, lat), = read_points(path, crs="EPSG:4326")
    assert (lon, lat) == pytest.approx(_to_lonlat(704515, 3896985), abs=1e-9)


def test_projected_positions_in_geojson_without_crs_are_refused_with_a_hint(tmp_path):
    path = tmp_path / "p.geojson"  # UTM metres where RFC 7946 says longitude/latitude
    path.write_text('{"type": "Point", "coordinates": [704515, 3896985]}')
    with pytest.raises(InputError, match=r"p.geojson: point \(704515, 3896985\) is not "
                                         r"longitude/latitude.*'crs' member"):
        read_points(path, crs=UTM17)


def test_csv_columns_by_name_in_any_position(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("id,name,Northing,Easting\n1,a,3896985,704515\n2,b,3896000,704000.5\n")
    assert read_points(path, crs=UTM17) == [(704515.0, 3896985.0), (704000.5, 3896000.0)]
    path.write_text("id,POINT_Y,POINT_X\n1,3896985,704515\n")
    assert read_points(path, crs=UTM17) == [(704515.0, 3896985.0)]


def test_csv_lon_lat_columns_are_wgs84_reprojected_into_the_raster_crs(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("name,lat,lon\nA,35.19,-78.75\n")
    (x, y), = read_points(path, crs=UTM17)
    assert (x, y) == pytest.approx(_to_utm(-78.75, 35.19), abs=1e-6)
    path.write_text("x,y\n704515,3896985\n")  # x,y: the raster's CRS, as they are
    assert read_points(path, crs=UTM17) == [(704515.0, 3896985.0)]



def test_a_byte_order_mark_is_read_past_as_gdal_does(tmp_path):
    """Excel's "CSV UTF-8" starts with a byte order mark: it was part of the first name, so
    ``lat,lon`` read as x,y columns in the raster's CRS (and a GeoJSON file was not JSON).
    The oracle is GDAL's reading of the same files (pyogrio)."""
    import struct

    import pyogrio.raw
    csv_path = tmp_path / "bom.csv"
    csv_path.write_bytes(b"\xef\xbb\xbflat,lon\n35.19,-78.75\n35.2,-78.7\n")
    meta, _, _, fields = pyogrio.raw.read(csv_path)
    gdal = dict(zip(meta["fields"], fields))
    want = [_to_utm(float(lon), float(lat)) for lat, lon in zip(gdal["lat"], gdal["lon"])]
    got = read_points(csv_path, crs=UTM17)
    assert [v for p in got for v in p] == pytest.approx([v for p in want for v in p], abs=1e-6)
    json_path = tmp_path / "bom.geojson"
    json_path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {}, "geometry": {"type": "Point", "coordinates": p}}
        for p in ([-78.75, 35.19], [-78.7, 35.2])]}).encode())
    points = pyogrio.raw.read(json_path, force_2d=True)[2]  # WKB Points: x, y after 5 bytes
    assert read_points(json_path) == [struct.unpack_from("<2d", bytes(g), 5) for g in points]


@pytest.mark.parametrize("text", ["502005 4001505\n", "502005;4001505\n"])
def test_a_first_line_of_one_column_is_a_bad_point_not_a_header(tmp_path, text):
    """Two names make a header; a line of one field (spaces or semicolons between the
    numbers) is a point the parser cannot read, said at its line."""
    path = tmp_path / "o.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=rf"^{path}:1: expected x,y numbers"):
        read_points(path)


def test_csv_header_naming_no_coordinates_is_refused(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("id,height,name\n1,3896985,704515\n")
    with pytest.raises(InputError, match=r"p.csv:1: no x and y columns among id, height, name"):
        read_points(path)


def _ogr_file(path, geometries, geometry_type, crs, driver):
    """A vector file written by GDAL (pyogrio) from ``(type, coordinates)`` geometries."""
    import struct

    import numpy as np
    import pyogrio.raw
    wkb = np.empty(len(geometries), object)
    for i, (kind, xy) in enumerate(geometries):
        if kind is None:  # a feature without a geometry
            wkb[i] = None
        elif kind == "Point":
            wkb[i] = struct.pack("<BI2d", 1, 1, *xy)
        else:  # MultiPoint or LineString: a count, then points (each its own WKB for Multi)
            body = b"".join(struct.pack("<BI2d", 1, 1, *p) if kind == "MultiPoint"
                            else struct.pack("<2d", *p) for p in xy)
            wkb[i] = struct.pack("<BII", 1, 4 if kind == "MultiPoint" else 2, len(xy)) + body
    pyogrio.raw.write(str(path), wkb, [np.arange(len(geometries))], ["id"], driver=driver,
                      geometry_type=geometry_type, crs=crs)
    return path


@pytest.mark.parametrize("suffix, driver", [(".gpkg", "GPKG"), (".shp", "ESRI Shapefile"),
                                            (".fgb", "FlatGeobuf"), (".kml", "KML")])
def test_vector_files_give_their_points_reprojected_into_the_raster_crs(tmp_path, suffix,
                                                                         driver):
    lonlat = [(-78.75, 35.19), (-78.7, 35.2)]
    path = _ogr_file(tmp_path / f"p{suffix}", [("Point", p) for p in lonlat], "Point",
                     "EPSG:4326", driver)
    got = sorted(read_points(path, crs=UTM17))  # FlatGeobuf's index orders its features
    assert [v for p in got for v in p] == pytest.approx(
        [v for p in sorted(lonlat) for v in _to_utm(*p)], abs=1e-6)
    as_written = sorted(read_points(path))  # no raster CRS
    assert [v for p in as_written for v in p] == pytest.approx([v for p in lonlat for v in p])


def test_a_geopackage_of_multipoints_in_the_raster_crs(tmp_path):
    pts = [(704515.0, 3896985.0), (704545.0, 3896955.0), (704575.0, 3896925.0)]
    path = _ogr_file(tmp_path / "m.gpkg", [("MultiPoint", pts[:2]), ("MultiPoint", pts[2:])],
                     "MultiPoint", UTM17, "GPKG")
    assert read_points(path, crs=UTM17) == pts  # the same CRS: the coordinates as stored


def test_vector_files_without_points_are_refused_naming_the_file(tmp_path):
    lines = _ogr_file(tmp_path / "l.gpkg", [("LineString", [(0, 0), (1, 1)])], "LineString",
                      UTM17, "GPKG")
    with pytest.raises(InputError, match=r"l.gpkg: LineString is not a point geometry"):
        read_points(lines)
    junk = tmp_path / "j.gpkg"
    junk.write_bytes(b"SQLite format 3\0" + b"\0" * 64)
    with pytest.raises(InputError, match=r"j.gpkg: not a vector file OGR reads \("):
        read_points(junk)


def test_a_geopackage_of_several_layers_says_which_layer_it_read(tmp_path):
    """The points are read from the first layer: a GeoPackage whose first layer holds lines
    (its gauges in the second) was refused as "LineString is not a point geometry", which
    its author, who had saved points, could not place."""
    import pyogrio
    import pyogrio.raw
    path = _ogr_file(tmp_path / "m.gpkg", [("LineString", [(0, 0), (1, 1)])], "LineString",
                     UTM17, "GPKG")
    _, _, wkb, fields = pyogrio.raw.read(
        _ogr_file(tmp_path / "p.gpkg", [("Point", (704515.0, 3896985.0))], "Point", UTM17,
                  "GPKG"))
    pyogrio.raw.write(str(path), wkb, fields, ["id"], driver="GPKG", geometry_type="Point",
                      crs=UTM17, layer="gauges", append=True)
    first, second = (str(n) for n, _ in pyogrio.list_layers(path))  # GDAL's order
    with pytest.raises(InputError, match=rf"m.gpkg: LineString is not a point geometry \(in "
                       rf"its first layer, '{first}', the one read, of 2: '{first}', "
                       rf"'{second}'\)"):
        read_points(path)


@pytest.mark.parametrize("suffix", [".gpkg", ".fgb"])
def test_paths_to_geopackage_and_flatgeobuf_keep_the_crs_and_properties(tmp_path, suffix):
    import struct

    import pyogrio.raw
    from terrain.io.points import path_format, write_paths
    lines = [[(704515.0, 3896985.0), (704545.0, 3896955.0)], [(704575.0, 3896925.0)]]
    props = [{"cost": 1.5, "to": "a", "cells": 2, "outlet": True},
             {"cost": 0.0, "to": "cell (3, 4)", "cells": 1, "outlet": False}]
    out = tmp_path / f"p{suffix}"
    write_paths(out, lines, props, crs=UTM17, fmt=path_format(out, UTM17), layer="streams")
    meta, _, geometry, fields = pyogrio.raw.read(out)
    assert meta["crs"] == UTM17 and meta["geometry_type"] == "LineString"
    assert pyogrio.list_layers(out)[0][0] == "streams"
    for wkb, want in zip(geometry, lines):
        n = struct.unpack_from("<I", wkb, 5)[0]
        got = list(zip(*[iter(struct.unpack_from(f"<{2 * n}d", wkb, 9))] * 2))
        # in their order, two positions at least
        assert got == (want * 2 if len(want) == 1 else want)
    assert dict(zip(meta["fields"], (list(f) for f in fields))) == {
        k: [p[k] for p in props] for k in props[0]}


def test_lines_of_a_grid_without_a_crs_are_written_without_one_or_a_warning(tmp_path):
    import warnings

    import pyogrio
    from terrain.io.points import write_paths
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_paths(tmp_path / "p.fgb", [[(0.5, 9.5), (1.5, 8.5)]], [{"cost": 1.0}],
                    fmt="FlatGeobuf")
    assert pyogrio.read_info(tmp_path / "p.fgb")["crs"] is None


def test_geojson_lines_without_a_crs_are_refused(tmp_path):
    """RFC 7946 positions are longitude/latitude, as GDAL reads any GeoJSON (its old
    "unknown (grid coordinates)" crs member too): lines without a CRS are not written so."""
    from terrain.io.points import path_format, write_paths
    with pytest.raises(InputError, match=r"^p\.geojson: GeoJSON positions are longitude/"
                                         r"latitude \(RFC 7946\), and the paths have no CRS"):
        path_format("p.geojson", None)
    with pytest.raises(InputError, match=r"p\.geojson: .* the lines have no CRS .* give the "
                                         r"DEM a CRS$"):
        write_paths(tmp_path / "p.geojson", [[(0.5, 9.5), (1.5, 8.5)]], [{"cost": 1.0}])
    assert not (tmp_path / "p.geojson").exists()


def test_an_unknown_lines_format_is_refused():
    from terrain.io.points import path_format
    with pytest.raises(InputError, match=r"s.shp: streams are written as GeoJSON "
                                         r"\(.geojson\), GeoPackage \(.gpkg\) or "
                                         r"FlatGeobuf \(.fgb\)"):
        path_format("s.shp", None, "streams")


def test_paths_are_written_as_rfc7946_lon_lat(tmp_path):
    import json
    from terrain.io.points import write_paths
    line = [(704515.0, 3896985.0), (704545.0, 3896955.0)]
    write_paths(tmp_path / "p.geojson", [line], [{"cost": 1.0}], crs=UTM17)
    doc = json.loads((tmp_path / "p.geojson").read_text())
    assert "crs" not in doc
    got = doc["features"][0]["geometry"]["coordinates"]
    want = [v for p in line for v in _to_lonlat(*p)]
    assert [v for p in got for v in p] == pytest.approx(want, abs=1e-9)


def test_each_point_is_placed_by_its_line_or_feature_and_one_outside_is_named_so(tmp_path):
    """Where each point is in its file (what a refusal of one names): a CSV file's line,
    the feature a GeoJSON or vector file's point is of (counted from 1 in the file's order,
    a MultiPoint's points all of one), else the file. The cells' oracle is rasterio's
    ``rowcol``."""
    import rasterio.transform
    from terrain.io.points import point_cells
    gt, shape = (704500.0, 30.0, 0.0, 3897000.0, 0.0, -30.0), (10, 10)
    pts = [(704515.0, 3896985.0), (704545.0, 3896955.0), (704575.0, 3896925.0)]
    want = [tuple(int(v) for v in rasterio.transform.rowcol(
        rasterio.transform.Affine.from_gdal(*gt), x, y)) for x, y in pts]
    gpkg = _ogr_file(tmp_path / "m.gpkg", [("MultiPoint", pts[:2]), ("Point", pts[2])],
                     "Unknown", UTM17, "GPKG")
    assert point_cells(gpkg, gt, shape, "source", UTM17) == (
        want, [f"{gpkg} feature 1"] * 2 + [f"{gpkg} feature 2"])
    gj = tmp_path / "g.geojson"
    utm = {"type": "name", "properties": {"name": UTM17}}
    gj.write_text(json.dumps({"type": "FeatureCollection", "crs": utm, "features": [
        {"type": "Feature", "properties": {},
         "geometry": {"type": "MultiPoint", "coordinates": [list(p) for p in pts[:2]]}},
        {"type": "Feature", "properties": {},
         "geometry": {"type": "Point", "coordinates": list(pts[2])}}]}))
    assert point_cells(gj, gt, shape, "source", UTM17) == (
        want, [f"{gj} feature 1"] * 2 + [f"{gj} feature 2"])
    bare = tmp_path / "b.geojson"  # no features: the file
    bare.write_text(json.dumps({"type": "MultiPoint", "crs": utm,
                                "coordinates": [list(p) for p in pts]}))
    assert point_cells(bare, gt, shape, "source", UTM17) == (want, [str(bare)] * 3)
    csv = tmp_path / "p.csv"
    csv.write_text("x,y\n" + "".join(f"{x},{y}\n" for x, y in pts))
    assert point_cells(csv, gt, shape, "source", UTM17) == (
        want, [f"{csv}:2", f"{csv}:3", f"{csv}:4"])
    with pytest.raises(InputError, match=rf"^{re.escape(str(gj))} feature 2: source "
                                         r"\(704575\.0, 3896925\.0\) is outside the raster"):
        point_cells(gj, gt, (2, 2), "source", UTM17)


def test_a_feature_without_a_geometry_is_refused_naming_it(tmp_path):
    """Skipped, it gave every point after it the number (label, allocation) of the one
    before: a gauge's basin labelled as the next gauge's. GeoJSON and OGR files alike."""
    gj = tmp_path / "g.geojson"
    gj.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {},
         "geometry": {"type": "Point", "coordinates": [-78.7, 35.2]}},
        {"type": "Feature", "properties": {}, "geometry": None}]}))
    with pytest.raises(InputError, match=r"g\.geojson: feature 2 has no geometry"):
        read_points(gj)
    gpkg = _ogr_file(tmp_path / "g.gpkg", [("Point", (-78.75, 35.19)), (None, None),
                                           ("Point", (-78.7, 35.2))], "Point", "EPSG:4326",
                     "GPKG")
    with pytest.raises(InputError, match=r"g\.gpkg: feature 2 has no geometry"):
        read_points(gpkg)


def test_lon_lat_points_on_a_raster_without_a_crs_are_not_told_to_be_reprojected(tmp_path):
    """The hint for points that look like longitude/latitude offered lon,lat columns, which
    the file had: a raster without a CRS has none to reproject them into."""
    from terrain.errors import TerrainWarning
    from terrain.io.points import point_cells
    gt, shape = (500000.0, 10.0, 0.0, 4003000.0, 0.0, -10.0), (300, 400)
    p = tmp_path / "ll.csv"
    p.write_text("lon,lat\n-79.6888,35.2927\n")
    with pytest.raises(InputError, match=r"ll\.csv:2: outlet .* outside the raster .* the "
                                         r"raster has no CRS to reproject it into"), \
            pytest.warns(TerrainWarning, match="the raster has no CRS"):
        point_cells(p, gt, shape, "outlet")
    p.write_text("x,y\n-79.6888,35.2927\n")  # with a CRS: lon,lat columns would be reprojected
    with pytest.raises(InputError, match=r"a CSV file with lon,lat columns, whose points are "
                                         r"reprojected\)$"):
        point_cells(p, gt, shape, "outlet", crs=UTM17)


def test_points_in_a_crs_on_a_raster_without_one_are_taken_as_they_are_with_a_warning(
        tmp_path):
    """GeoJSON positions (longitude/latitude by RFC 7946), lon,lat columns or a layer's CRS
    on a raster without a CRS: nothing can reproject them, and they were taken as the
    raster's own coordinates silently (a lon/lat gauge could land inside a grid of unit
    cells). They still are, as GDAL leaves points it cannot transform, with one warning
    naming the file; points that name no CRS are taken without one. The oracle for the
    cells is rasterio's ``rowcol``."""
    import warnings

    import rasterio.transform
    from terrain.errors import TerrainWarning
    from terrain.io.points import point_cells
    gt, shape = (0.0, 1.0, 0.0, 40.0, 0.0, -1.0), (40, 50)
    pts = [(3.25, 35.5), (12.75, 2.5)]
    want = [tuple(int(v) for v in rasterio.transform.rowcol(
        rasterio.transform.Affine.from_gdal(*gt), x, y)) for x, y in pts]
    gj = tmp_path / "g.geojson"
    gj.write_text(json.dumps({"type": "MultiPoint", "coordinates": [list(p) for p in pts]}))
    ll = tmp_path / "ll.csv"
    ll.write_text("lon,lat\n" + "".join(f"{x},{y}\n" for x, y in pts))
    for path in (gj, ll):
        with pytest.warns(TerrainWarning, match=rf"^{path}: its points are in EPSG:4326 and "
                          r"the raster has no CRS: they are taken as the raster's own "
                          r"coordinates$"):
            assert point_cells(path, gt, shape, "outlet")[0] == want
    xy = tmp_path / "xy.csv"
    xy.write_text("x,y\n" + "".join(f"{x},{y}\n" for x, y in pts))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert point_cells(xy, gt, shape, "outlet")[0] == want


def test_csv_rows_keep_the_first_rows_width_and_a_point_outside_names_its_line(tmp_path):
    """A row of more (or fewer) fields than the first is refused, not cut to x,y; a point
    outside the raster is refused naming its line (as a bad number is)."""
    from terrain.io.points import point_cells
    gt, shape = (500000.0, 10.0, 0.0, 4003000.0, 0.0, -10.0), (300, 400)
    p = tmp_path / "p.csv"
    p.write_text("x,y\n500015,4002985\n1,2,3\n")
    with pytest.raises(InputError, match=r"p\.csv:3: 3 fields, where the first row \(line 1\) "
                                         r"has 2: '1,2,3'$"):
        read_points(p)
    p.write_text("# points\nx,y\n500015,4002985\n\n500025,4002975\n1,2\n")
    with pytest.raises(InputError, match=r"^.*p\.csv:6: source \(1\.0, 2\.0\) is outside"):
        point_cells(p, gt, shape, "source")
    p.write_text("name,x,y\na,500015,4002985\nb,500025,4002975\n")
    assert point_cells(p, gt, shape, "source")[0] == [(1, 1), (2, 2)]


def test_a_sources_raster_in_another_crs_or_unreferenced_is_refused():
    """A raster's cell centres are taken in the grid's CRS: one in another CRS, or without a
    georeference beside a grid that has one, is refused; the same grid maps cell for cell."""
    import numpy as np
    from terrain.io.points import raster_source_cells
    gt = (500000.0, 10.0, 0.0, 4003000.0, 0.0, -10.0)
    a = np.zeros((30, 40), np.float32)
    a[3, 6] = 1
    assert raster_source_cells(a, gt, gt, a.shape, "s.tif", crs="EPSG:32617",
                               grid_crs="EPSG:32617") == [(3, 6)]
    with pytest.raises(InputError, match=r"^s\.tif: its CRS EPSG:4326 is not the DEM's "
                                         r"EPSG:32617: reproject it first"):
        raster_source_cells(a, (-81, 3e-4, 0, 36, 0, -3e-4), gt, a.shape, "s.tif",
                            crs="EPSG:4326", grid_crs="EPSG:32617")
    unreferenced = (0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    with pytest.raises(InputError, match=r"^p\.png: has no georeference, where the DEM has "
                                         r"one: .* give the outlets as cells or points$"):
        raster_source_cells(a, unreferenced, gt, a.shape, "p.png", what="outlet")
    assert raster_source_cells(a, unreferenced, unreferenced, a.shape) == [(3, 6)]


def test_an_outlets_picture_without_a_georeference_is_named_so(tmp_path):
    """A raster without a geotransform is read as cells of 1 from (0, 0), north-up: beside a
    georeferenced DEM it was refused as a cell outside the raster, not as unreferenced."""
    import numpy as np
    import rasterio

    from terrain.io import open_raster
    from terrain.io.points import raster_source_cells
    a = np.zeros((30, 40), np.uint8)
    a[3, 6] = 1
    pic = tmp_path / "p.tif"
    with rasterio.open(pic, "w", driver="GTiff", width=40, height=30, count=1,
                       dtype="uint8") as dst:
        dst.write(a, 1)
    with pytest.warns(UserWarning, match="not georeferenced"):
        grid = open_raster(pic)
    gt = (500000.0, 10.0, 0.0, 4003000.0, 0.0, -10.0)
    with pytest.raises(InputError, match=r"p\.tif: has no georeference, where the DEM has one"):
        raster_source_cells(a, grid.geotransform, gt, a.shape, str(pic), what="outlet",
                            crs=grid.crs, grid_crs="EPSG:32617")


# ------------------------------------------------------------------ points on cell edges
# The oracle is rasterio's rowcol (what DatasetReader.index gives): a point maps to the cell
# rasterio gives it, edges included, where (x - x0) / dx rounds to the other side.

EDGE_TRANSFORMS = {
    "projected_30m": (500000.0, 30.0, 0.0, 4000000.0, 0.0, -30.0),
    "geographic_0.001": (-180.0, 0.001, 0.0, 90.0, 0.0, -0.001),
    "geographic_0.001x0.0008": (-80.0, 0.001, 0.0, 35.0, 0.0, -0.0008),
    "non_square_10x12.5": (300010.0, 10.0, 0.0, 5000000.0, 0.0, -12.5),
    "arc_second": (-120.123, 1 / 3600, 0.0, 45.987, 0.0, -1 / 3600),
}


@pytest.mark.parametrize("name", sorted(EDGE_TRANSFORMS))
def test_points_on_cell_edges_take_rasterios_cell(name):
    from decimal import Decimal

    import numpy as np
    from rasterio.transform import Affine, rowcol

    from terrain.io.points import map_to_cell
    gt = EDGE_TRANSFORMS[name]
    shape = (3000, 3000)
    rng = np.random.default_rng(7)
    rows, cols = rng.integers(0, shape[0], 3000), rng.integers(0, shape[1], 3000)
    # the edges as a user writes them: decimal values rounded to the nearest double
    xs = [float(Decimal(repr(gt[0])) + int(c) * Decimal(repr(gt[1]))) for c in cols]
    ys = [float(Decimal(repr(gt[3])) + int(r) * Decimal(repr(gt[5]))) for r in rows]
    xs[:500] = [gt[0] + c * gt[1] for c in cols[:500]]  # and as a program computes them
    ys[:500] = [gt[3] + r * gt[5] for r in rows[:500]]
    inside = [(x, y) for x, y in zip(xs, ys)
              if all(0 <= v < n for v, n in zip(rowcol(Affine.from_gdal(*gt), x, y), shape))]
    assert len(inside) > 2900
    for x, y in inside:
        want = tuple(int(v) for v in rowcol(Affine.from_gdal(*gt), x, y))
        assert map_to_cell(x, y, gt, shape) == want, (x, y)
