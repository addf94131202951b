"""ASCII grids where terrain's reader and GDAL's (rasterio, the oracle) used to part: the
``.prj`` beside a grid, nodata matching, GRASS headers, messages (docs/gis.md, "ASCII grids")."""

import pytest
import rasterio
from rasterio.crs import CRS

from terrain.io import open_grid
from cli import run_main

OLD_STYLE = {"geographic": "Projection GEOGRAPHIC\nDatum WGS84\nSpheroid WGS84\nUnits DD\n"
                           "Zunits NO\nParameters\n",
             "seconds": "Projection GEOGRAPHIC\nDatum WGS84\nUnits DS\nParameters\n",
             "utm": "Projection UTM\nZone 17\nDatum NAD83\nUnits METERS\nParameters\n"}


@pytest.mark.parametrize("suffix", [".prj", ".PRJ"])
@pytest.mark.parametrize("style", sorted(OLD_STYLE))
def test_an_old_style_or_upper_case_prj_gives_gdals_crs_and_transform(tmp_path, style,
                                                                      suffix):
    """Old-style ESRI lines and a .PRJ were ignored: the CRS was lost (a geographic DEM's
    slopes divided by degrees)."""
    path = tmp_path / "g.asc"
    path.write_text("ncols 3\nnrows 2\nxllcorner -79\nyllcorner 35\ncellsize 0.5\n"
                    "1 2 3\n4 5 6\n")
    (tmp_path / f"g{suffix}").write_text(OLD_STYLE[style])
    grid = open_grid(path)
    with rasterio.open(path) as src:
        assert src.crs is not None
        assert CRS.from_wkt(grid.crs) == src.crs
        assert grid.geotransform == src.transform.to_gdal()


def test_mst_slope_of_a_dem_with_an_old_style_geographic_prj_is_refused(tmp_path, capsys):
    path = tmp_path / "g.asc"
    path.write_text("ncols 3\nnrows 3\nxllcorner -79\nyllcorner 35\ncellsize 0.001\n"
                    "1 2 3\n4 5 6\n7 8 9\n")
    (tmp_path / "g.prj").write_text(OLD_STYLE["geographic"])
    rc, _, err = run_main(capsys, "mst", path, "-o", tmp_path / "m.zarr", "--weight", "slope")
    assert rc == 2 and "is geographic" in err
    assert not (tmp_path / "m.zarr").exists()
