"""A source, stop or path end read from a points file that lies on nodata is refused naming
its place in the file (a CSV file's line, a GeoJSON feature) beside its index, on every
cost-distance algorithm and in the Python API. The oracle for the cells and the nodata is
rasterio: ``index`` of the points and the DEM's mask."""

import json
import re

import numpy as np
import pytest
import rasterio

from cli import run_main
from grids import random_dem

#: GeoJSON of the DEM's own coordinates (the ESRI grid has no CRS to reproject them into)
GRID_CRS = {"type": "name", "properties": {"name": "unknown (grid coordinates)"}}


@pytest.fixture
def dem(tmp_path):
    return random_dem(tmp_path, 1, (45, 37), 30, [(3, 4), (40, 30), (44, 0)],
                      5, barrier=(20, slice(None, 30)))[1]


def _points(dem_path, seed):
    """Two points anywhere in their cells, the first on data and the second on nodata, and
    the second's cell, as rasterio reads the DEM."""
    rng = np.random.default_rng(seed)
    with rasterio.open(dem_path) as src:
        valid = src.read_masks(1) > 0
        b = src.bounds
        points = []
        while len(points) < 2:
            x = b.left + rng.random() * (b.right - b.left)
            y = b.bottom + rng.random() * (b.top - b.bottom)
            r, c = src.index(x, y)
            if valid[r, c] == (not points):
                points.append(((x, y), (int(r), int(c))))
    return [p for p, _ in points], points[1][1]


def _files(tmp_path, name, points):
    """The points as a CSV file (a header, then a point a line) and as GeoJSON features;
    ``{path: the second point's place}``."""
    csv = tmp_path / f"{name}.csv"
    csv.write_text("x,y\n" + "".join(f"{x!r},{y!r}\n" for x, y in points))
    gj = tmp_path / f"{name}.geojson"
    gj.write_text(json.dumps({"type": "FeatureCollection", "crs": GRID_CRS, "features": [
        {"type": "Feature", "properties": {"n": n},
         "geometry": {"type": "Point", "coordinates": [x, y]}}
        for n, (x, y) in enumerate(points)]}))
    return {csv: f"{csv}:3", gj: f"{gj} feature 2"}


def _refused(capsys, tmp_path, *argv, scheduler="synchronous"):
    """The one line of stderr of a run refused with exit 2 that left nothing behind."""
    before = sorted(tmp_path.iterdir())
    rc, _, err = run_main(capsys, *argv, scheduler=scheduler)
    assert rc == 2, err
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("terrain: ")
    assert sorted(tmp_path.iterdir()) == before  # no output, no partial
    return err[len("terrain: "):-1]


@pytest.mark.parametrize("route", ["in-core", "tiled", "blocked"])
def test_a_source_on_nodata_names_its_line_or_feature(capsys, tmp_path, dem, small_shards,
                                                      route):
    points, (r, c) = _points(dem, 3)
    for path, place in _files(tmp_path, "wells", points).items():
        said = _refused(capsys, tmp_path, "cost-distance", dem, "--sources", path,
                        "-o", tmp_path / "c.zarr", "--tile", 8, "--route", route)
        assert said == f"{dem}: source 1 ({place}) at cell (row, col) = ({r}, {c}) is on nodata"
    # a source given as a cell has no file to name: the message as it was
    said = _refused(capsys, tmp_path, "cost-distance", dem, "--source-cell", f"{r},{c}",
                    "-o", tmp_path / "c.zarr", "--tile", 8, "--route", route)
    assert said == f"{dem}: source 0 at cell (row, col) = ({r}, {c}) is on nodata"


def test_a_stop_on_nodata_names_its_line_or_feature(capsys, tmp_path, dem):
    """Stops given before the file shift its points' indices, not their places."""
    points, (r, c) = _points(dem, 4)
    for path, place in _files(tmp_path, "stops", points).items():
        said = _refused(capsys, tmp_path, "cost-distance", dem, "--source-cell", "3,4",
                        "--stop-cell", "40,30", "--stops", path, "-o", tmp_path / "c.zarr")
        assert said == f"{dem}: stop 2 ({place}) at cell (row, col) = ({r}, {c}) is on nodata"


def test_a_path_end_on_nodata_names_its_line_or_feature(capsys, tmp_path, dem):
    store = tmp_path / "c.zarr"
    rc, _, err = run_main(capsys, "cost-distance", dem, "--source-cell", "3,4", "-o", store)
    assert rc == 0, err
    points, (r, c) = _points(dem, 5)
    for path, place in _files(tmp_path, "ends", points).items():
        said = _refused(capsys, tmp_path, "path", store, "--targets", path,
                        "-o", tmp_path / "p.gpkg", scheduler=None)
        assert said == (f"{store}: target 1 ({place}) at cell (row, col) = ({r}, {c}) is not "
                        "reached from any source")


def test_the_apis_points_file_on_nodata_names_its_line_or_feature(tmp_path, dem):
    import terrain
    from terrain.errors import InputError
    points, (r, c) = _points(dem, 6)
    for path, place in _files(tmp_path, "wells", points).items():
        with pytest.raises(InputError, match=re.escape(
                f"source 2 ({place}) at cell (row, col) = ({r}, {c}) is on nodata") + "$"):
            terrain.cost_distance(str(dem), [(3, 4)], points=str(path), backend="cpu")
