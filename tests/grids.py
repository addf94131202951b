"""Test inputs: random and integer DEMs, ASCII grids and GeoTIFFs written for a test, small-shard stores."""

import numpy as np
import pytest
import rasterio
import zarr

XLL, YLL, CS = 1000.0, 2000.0, 10.0


def random_dem(tmp_path, seed, shape, high, cells, value, barrier=None):
    """The cost-distance tests' DEM: integers ``0..high-1`` with 5 % nodata, the nodata
    ``barrier`` (an index) and ``value`` at ``cells`` (the sources: never nodata), written
    to ``tmp_path/dem.asc``; returns ``(z, path)``."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, high, shape).astype(np.float32)
    z[rng.random(z.shape) < 0.05] = np.nan
    if barrier is not None:
        z[barrier] = np.nan
    for r, c in cells:
        z[r, c] = value
    return z, write_asc(tmp_path / "dem.asc", z)


def write_asc(path, z, nodata=-9999, xll=XLL, yll=YLL, cs=CS):
    rows, cols = z.shape
    body = np.where(np.isnan(z), nodata, z)
    with open(path, "w") as fh:
        fh.write(f"ncols {cols}\nnrows {rows}\nxllcorner {xll}\nyllcorner {yll}\n"
                 f"cellsize {cs}\nNODATA_value {nodata}\n")
        for row in body:
            fh.write(" ".join(f"{v:g}" for v in row) + "\n")
    return path


GT = (600000.0, 30.0, 0.0, 3900000.0, 0.0, -30.0)


def write_utm_tif(path, z):
    """``z`` (float32, -32768 = nodata) as a GeoTIFF in EPSG:32617 at ``GT``; ``path``."""
    with rasterio.open(path, "w", driver="GTiff", height=z.shape[0], width=z.shape[1],
                       count=1, dtype="float32", crs="EPSG:32617",
                       transform=rasterio.Affine.from_gdal(*GT), nodata=-32768) as dst:
        dst.write(z, 1)
    return path


def assert_bits_equal(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype == np.float32
    same = got.view(np.uint32) == want.view(np.uint32)
    assert same.all(), f"{(~same).sum()} cells differ, first at {np.argwhere(~same)[0]}"


def esri_text(tokens, header=None, sep=" ", eol="\n", nodata="-9999", center=False):
    rows, cols = tokens.shape
    h = header or [("ncols", cols), ("nrows", rows),
                   ("xllcenter" if center else "xllcorner", 1000.5),
                   ("yllcenter" if center else "yllcorner", -200.25),
                   ("cellsize", 2.5)] + ([("NODATA_value", nodata)] if nodata else [])
    lines = [f"{k}{sep}{v}" for k, v in h] + [sep.join(row) for row in tokens]
    return eol.join(lines) + eol


def grass_text(tokens, null=None, eol="\n"):
    rows, cols = tokens.shape
    h = [f"north: {4000.0 + rows * 2}", "south: 4000", f"east: {300.0 + cols * 2}",
         "west: 300", f"rows: {rows}", f"cols: {cols}"] + ([f"null: {null}"] if null else [])
    return eol.join(h + [" ".join(r) for r in tokens]) + eol


def random_values(rng, shape, kind):
    """Token strings of one kind and the float32 each must parse to (via Python's float)."""
    if kind == "int":
        v = rng.integers(-500, 3000, shape).astype(np.float64)
        tok = np.array([str(int(x)) for x in v.ravel()])
    elif kind == "decimal":
        v = np.round(rng.normal(100, 400, shape), 3)
        tok = np.array([f"{x:.3f}" for x in v.ravel()])
    elif kind == "scientific":
        v = rng.normal(0, 1, shape) * 10.0 ** rng.integers(-30, 30, shape)
        tok = np.array([f"{x:.8E}" if i % 2 else f"{x:.6e}" for i, x in enumerate(v.ravel())])
    elif kind == "long":  # 17 significant digits: the exact slow path
        v = rng.normal(500, 300, shape)
        tok = np.array([repr(float(x)) for x in v.ravel()])
    else:
        raise ValueError(kind)
    return tok.astype(object).reshape(shape)


def with_nodata(rng, tokens, frac=0.1, text="-9999"):
    tokens = tokens.copy()
    tokens[rng.random(tokens.shape) < frac] = text
    return tokens


def dem(kind, shape, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "random":
        return (rng.random(shape) * 1000 - 200).astype(np.float32)
    if kind == "integer":  # many ties
        return rng.integers(0, 6, shape).astype(np.float32)
    if kind == "plateau":  # flat areas with a few steps
        z = np.full(shape, 7.0, np.float32)
        z[: shape[0] // 3] = 3.0
        z[:, shape[1] // 2:] += 1.0
        return z
    if kind == "holes":  # nodata rows/cols splitting the grid, plus random holes
        z = (rng.random(shape) * 50).astype(np.float32)
        z[shape[0] // 2] = np.nan
        z[:, shape[1] // 3] = np.nan
        z[rng.random(shape) < 0.25] = np.nan
        return z
    if kind == "signed-zeros":  # -0.0 and +0.0 side by side, around and in pits
        z = rng.choice(np.array([0.0, -0.0, 0.0, -0.0, -1.0, 1.0, 2.0], np.float32), shape)
        z[4:9, 5:10] = 2.0  # a pit walled at 2, floored with both zeros and a -1
        z[5:8, 6:9] = [[0.0, -0.0, 0.0], [-0.0, -1.0, -0.0], [0.0, -0.0, 0.0]]
        return z
    raise ValueError(kind)


def int_dem(rng, shape, hi=20, nan_frac=0.0):
    z = rng.integers(0, hi, shape).astype(np.float32)
    if nan_frac:
        z[rng.random(shape) < nan_frac] = np.nan
    return z


def write_huge_sparse_tif(path):
    """A 2**40-cell float32 GeoTIFF (about 2.6 TiB as a store) that is sparse on disk."""
    rasterio = pytest.importorskip("rasterio")
    from rasterio.transform import Affine
    side = 1 << 20
    with rasterio.open(path, "w", driver="GTiff", width=side, height=side,
                       count=1, dtype="float32", tiled=True, blockxsize=4096, blockysize=4096,
                       compress="deflate", sparse_ok=True,
                       transform=Affine(1.0, 0.0, 0.0, 0.0, -1.0, float(side))) as dst:
        dst.write(np.ones((16, 16), np.float32), 1, window=rasterio.windows.Window(0, 0, 16, 16))


TRICKY = [
    "0", "-0", "+0", "0.0", "-0.0", "00000", "007", "-007.500", "+12", "+.5", ".5", "-.5", "5.",
    "-5.", "1e0", "1E5", "1e+5", "1e-5", "-1.5E-3", "2.5e+02", "1e22", "1e-22", "9e22", "1e23",
    "1e-23", "123456789012345", "1234567890123456", "12345678901234567890123",
    "0.1", "0.2", "0.3", "3.14159265358979323846", "1e-50",
    "4.9e-324", "1e-45", "1.4e-45", "1.17549435e-38", "3.4028235e38", "3.40282356e38",
    "-3.4028235e38", "16777217", "16777216.5", "9007199254740993",
    "9007199254740992000", "0.000000000000000000000000001", "100000000000000000000000",
    "-9999", "-9999.0", "-9.999e3", "-9999.00000000000000000001", "1e000000000000005",
    "1e-0", "2.5000000000000000000000000000001", "65504.0", "0.1e1", "10e-1",
]

#: tokens float32 cannot hold (they round beyond its largest value): refused with their line
BEYOND_FLOAT32 = ["1.7976931348623157e308", "-1e300", "3.4028236e38", "3.40282357e38", "1e400",
                  "-1e39"]


SHAPE = (150, 130)  # 16² tiles in 64² shards: 3 x 3 shards, the edge ones partial


def shard_files(path):
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file() and p.name != "zarr.json"}


def shard_layer(path, name, dtype, fill, compressors):
    """A layer as create_layer makes them (chunks in shards), at a test's scale."""
    g = zarr.open_group(str(path), mode="a", zarr_format=3)
    return g.create_array(name, shape=SHAPE, dtype=dtype, chunks=(16, 16), shards=(64, 64),
                          fill_value=fill, dimension_names=("y", "x"),
                          compressors=compressors, config={"write_empty_chunks": False})



def small_shards_case(tmp_path, monkeypatch, seed, nodata_seed):
    """An MST job on small shards: a random DEM (150 x 111, 10 % nodata, from the two
    seeds) in ``tmp_path/in.zarr`` with tiles of 8 and shards of 32 cells a side, its
    :class:`~terrain.grid.mst.MSTSpec`, an empty output group ``tmp_path/out.zarr`` and the
    georeference the pipeline takes: ``(z, store, spec, out, geo)``."""
    import terrain.tiles.store as store_mod
    from terrain.grid.mst import MSTSpec

    monkeypatch.setattr(store_mod, "SHARD_TARGET_SIDE", 32)
    z = dem("random", (150, 111), seed=seed)
    z[np.random.default_rng(nodata_seed).random(z.shape) < 0.1] = np.nan
    store = store_mod.create_store(tmp_path / "in.zarr", z.shape, 8)
    for (r0, r1, c0, c1) in store.shard_windows():
        store.elevation[r0:r1, c0:c1] = z[r0:r1, c0:c1]
    out = tmp_path / "out.zarr"
    zarr.open_group(store=str(out), mode="w-", zarr_format=3)
    geo = {"geotransform": list(store.geotransform), "crs": None, "source": "in.zarr"}
    return z, store, MSTSpec(z.shape, 8, 8, "max", (1.0, 1.0)), out, geo


def replaced_after_its_header(monkeypatch, module, name, path):
    """``module.name`` (what opens the grid's header) that replaces ``path`` with another
    grid (rows twice as wide) once it returned, as ``cp other.asc .t; mv .t dem.asc`` does
    while a run reads it."""
    opened = getattr(module, name)

    def then_replaced(*a, **k):
        result = opened(*a, **k)
        other = path.with_name(".t")
        write_asc(other, np.arange(2 * 30 * 40, dtype=np.float32).reshape(30, 80) % 97)
        other.replace(path)
        return result
    monkeypatch.setattr(module, name, then_replaced)

