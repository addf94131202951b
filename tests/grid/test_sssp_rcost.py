"""Cost distance against GRASS GIS ``r.cost`` where GRASS is installed (``grass`` on the
PATH): ``--connectivity 8`` is ``r.cost``, 16 is ``r.cost -k``, on a friction GeoTIFF with
nodata and cells that are not square."""

import shutil
import subprocess

import numpy as np
import pytest

from terrain.grid.sssp import grid_sssp

GRASS = shutil.which("grass")

pytestmark = pytest.mark.skipif(GRASS is None, reason="needs GRASS GIS (grass on the PATH)")

DX, DY = 30.0, 20.0
X0, Y0 = 500000.0, 4000000.0
NODATA = -9999.0

SCRIPT = """\
set -e
r.in.gdal -o input='{tif}' output=fr --quiet
g.region raster=fr
r.cost {flags} input=fr output=cost start_coordinates={x},{y} --quiet
r.out.gdal -c input=cost output='{out}' format=GTiff type=Float64 --quiet
"""


def _friction(rows, cols, seed):
    rng = np.random.default_rng(seed)
    f = np.exp(rng.normal(0, 1, (rows, cols))).astype(np.float32)
    f[rng.random((rows, cols)) < 0.12] = np.nan
    return f


def _r_cost(tmp_path, f, source, knight):
    """GRASS's accumulated cost from the cell ``source`` (NaN where null), in our units:
    ``r.cost`` counts lengths in east-west cells, so its costs times ``DX``."""
    import rasterio
    from rasterio.transform import Affine

    rows, cols = f.shape
    tif, out = tmp_path / "friction.tif", tmp_path / f"cost{int(knight)}.tif"
    with rasterio.open(tif, "w", driver="GTiff", height=rows, width=cols, count=1,
                       dtype="float32", crs="EPSG:32617", nodata=NODATA,
                       transform=Affine(DX, 0, X0, 0, -DY, Y0 + rows * DY)) as dst:
        dst.write(np.where(np.isnan(f), np.float32(NODATA), f), 1)
    loc = tmp_path / f"loc{int(knight)}"
    subprocess.run([GRASS, "-c", str(tif), str(loc), "-e"], check=True, capture_output=True)
    r, c = source
    script = SCRIPT.format(tif=tif, out=out, flags="-k" if knight else "",
                           x=X0 + (c + 0.5) * DX, y=Y0 + (rows - r - 0.5) * DY)
    subprocess.run([GRASS, str(loc / "PERMANENT"), "--exec", "bash", "-c", script], check=True,
                   capture_output=True)
    with rasterio.open(out) as ds:
        d = ds.read(1).astype(np.float64)
        nodata = ds.nodata
    if nodata is not None and not np.isnan(nodata):
        d[d == nodata] = np.nan
    return d * DX


@pytest.mark.parametrize("connectivity", [8, 16])
def test_friction_cost_distance_equals_grass_r_cost(tmp_path, connectivity):
    f = _friction(30, 25, 0)
    source = (14, 8)
    assert not np.isnan(f[source])
    ours = grid_sssp(np.zeros_like(f), [source], cost="friction", friction=f,
                     connectivity=connectivity, cellsize=(DX, DY), backend="cpu").distance
    grass = _r_cost(tmp_path, f, source, knight=connectivity == 16)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(grass))
    reached = ~np.isnan(ours)
    assert reached.sum() > 500
    np.testing.assert_allclose(ours[reached], grass[reached], rtol=1e-12, atol=0)
