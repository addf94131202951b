"""Grid MST: the exact forest against scipy and an independent Kruskal; the CLI end to end.

Oracles: ``scipy.sparse.csgraph.minimum_spanning_tree`` (total weight, tree count via
``connected_components``) and a small reference Kruskal written here (NumPy lexsort by
(weight, id) + union-find), whose edge set must equal ours exactly.
"""

import json
import subprocess
import sys

import numpy as np
import pytest
import zarr
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

from terrain.grid import grid_mst
from terrain.run import main
from grids import dem
from oracles import mask_ids, ref_edges, ref_kruskal

WEIGHTS = ("max", "absdiff", "slope", "length3d")


# -- independent reference ----------------------------------------------------------------------


# -- against scipy ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["random", "integer", "plateau", "holes"])
@pytest.mark.parametrize("conn", [4, 8])
def test_total_weight_and_trees_match_scipy(kind, conn):
    z = dem(kind, (90, 130), seed=conn)
    r = grid_mst(z, conn, "max", tile=32, backend="cpu", in_core=False)
    _, u, v, w = ref_edges(z, conn, "max")
    shift = 1.0 - float(w.min())  # scipy drops zero entries: shift all weights to >= 1
    g = csr_matrix((w.astype(np.float64) + shift, (u, v)), shape=(z.size, z.size))
    t = minimum_spanning_tree(g)
    assert r.edges == t.nnz
    assert r.total_weight == pytest.approx(float(t.data.sum()) - shift * t.nnz, rel=1e-12, abs=1e-6)
    valid = ~np.isnan(z).ravel()
    n_comp, labels = connected_components(g, directed=False)
    assert r.vertices == int(valid.sum())
    assert r.trees == len(np.unique(labels[valid]))


# -- exact edge sets ----------------------------------------------------------------------------
@pytest.mark.parametrize("tile", [32, 64, 256, 1024])
@pytest.mark.parametrize("shape", [(100, 150), (300, 77)])
def test_same_edge_set_for_every_tile_size(tile, shape):
    z = dem("integer", shape, seed=tile)
    z[np.random.default_rng(tile).random(shape) < 0.05] = np.nan
    want, _ = ref_kruskal(z, 8, "max")
    r = grid_mst(z, 8, "max", tile=tile, backend="cpu", in_core=False)
    assert np.array_equal(mask_ids(r.mask), want)


@pytest.mark.parametrize("weight", WEIGHTS)
@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("kind", ["random", "integer", "holes"])
def test_same_edge_set_every_weight_model(weight, conn, kind):
    z = dem(kind, (70, 45), seed=len(weight))
    cellsize = (10.0, 7.5)
    want, w = ref_kruskal(z, conn, weight, cellsize)
    r = grid_mst(z, conn, weight, tile=16, backend="cpu", cellsize=cellsize, group_tiles=2,
                 in_core=False)
    assert np.array_equal(mask_ids(r.mask), want)
    assert r.total_weight == pytest.approx(float(np.sum(w, dtype=np.float64)), rel=1e-12)


@pytest.mark.parametrize("group_tiles", [1, 2, 8])
def test_group_size_does_not_change_the_forest(group_tiles):
    z = dem("random", (130, 97), seed=5)
    want, _ = ref_kruskal(z)
    r = grid_mst(z, 8, "max", tile=8, backend="cpu", group_tiles=group_tiles, in_core=False)
    assert np.array_equal(mask_ids(r.mask), want)


def test_1024_square_matches_reference():
    z = dem("integer", (1024, 1024), seed=11)
    z[300:310, :] = np.nan
    want, w = ref_kruskal(z)
    r = grid_mst(z, 8, "max", tile=256, backend="cpu", in_core=False)
    assert np.array_equal(mask_ids(r.mask), want)
    assert r.total_weight == float(np.sum(w, dtype=np.float64))


@pytest.mark.parametrize("in_core", ["auto", False])
def test_all_nodata_is_an_empty_forest(in_core):
    r = grid_mst(np.full((40, 33), np.nan, np.float32), tile=16, backend="cpu", in_core=in_core)
    assert (r.mask == 0).all() and r.edges == 0 and r.trees == 0 and r.vertices == 0
    assert r.total_weight == 0.0


@pytest.mark.parametrize("in_core", ["auto", False])
def test_single_cell(in_core):
    r = grid_mst(np.array([[5.0]], np.float32), tile=2, backend="cpu", in_core=in_core)
    assert r.mask.tolist() == [[0]] and (r.edges, r.trees, r.vertices) == (0, 1, 1)


# -- pipeline and CLI ---------------------------------------------------------------------------
def write_asc(path, z, cellsize=10.0, nodata=-9999.0):
    rows, cols = z.shape
    with open(path, "w") as f:
        f.write(f"ncols {cols}\nnrows {rows}\nxllcorner 1000\nyllcorner 2000\n"
                f"cellsize {cellsize}\nNODATA_value {nodata}\n")
        np.savetxt(f, np.where(np.isnan(z), nodata, z), fmt="%.4f")


def test_cli_ascii_end_to_end(tmp_path, capsys):
    z = np.round(dem("holes", (70, 90), seed=3), 2)
    src = tmp_path / "dem.asc"
    write_asc(src, z)
    tif = tmp_path / "mask.tif"
    rc = main(["mst", str(src), "--tile", "16", "--weight", "slope", "--connectivity", "4",
               "--scheduler", "synchronous", "--json", "--geotiff", str(tif)])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    out = tmp_path / "dem.mst.zarr"  # the default output name
    group = zarr.open_group(str(out), mode="r")
    zin = group["elevation"][:]
    want, w = ref_kruskal(zin, 4, "slope", (10.0, 10.0))
    assert np.array_equal(mask_ids(group["mst"][:]), want)
    attrs = group.attrs["mst"]
    assert attrs["edges"] == summary["edges"] == len(want)
    assert attrs["trees"] == summary["trees"] == int((~np.isnan(zin)).sum()) - len(want)
    assert summary["total_weight"] == pytest.approx(float(np.sum(w, dtype=np.float64)), rel=1e-12)
    assert summary["levels"] == 4 and summary["tile"] == 16
    import rasterio
    with rasterio.open(tif) as t:
        # nodata cells of the DEM are 255 in the GeoTIFF (docs/gis.md), the rest the mask
        assert t.nodata == 255
        assert np.array_equal(t.read(1), np.where(np.isnan(zin), 255, group["mst"][:]))
        assert t.transform.c == 1000 and t.transform.f == 2000 + 70 * 10


def test_cli_store_input_with_small_shards(tmp_path, monkeypatch, capsys):
    # small shards put quadtree merge and expansion tasks above the shard-level groups (the
    # tiled route: the in-core bound lowered below the grid)
    import terrain.grid.mst_device as md
    import terrain.tiles.store as store_mod
    monkeypatch.setattr(store_mod, "SHARD_TARGET_SIDE", 32)
    monkeypatch.setattr(md, "HOST_MAX_CELLS", 1000)
    z = dem("random", (150, 111), seed=9)
    z[np.random.default_rng(1).random(z.shape) < 0.1] = np.nan
    store = store_mod.create_store(tmp_path / "in.zarr", z.shape, 8)
    assert store.tiles_per_shard == 4
    for (r0, r1, c0, c1) in store.shard_windows():
        store.elevation[r0:r1, c0:c1] = z[r0:r1, c0:c1]
    out = tmp_path / "out.zarr"
    assert main(["mst", str(tmp_path / "in.zarr"), "-o", str(out), "--weight", "length3d",
                 "--scheduler", "threads"]) == 0
    assert "tiled path" in capsys.readouterr().out
    want, _ = ref_kruskal(z, 8, "length3d")
    assert np.array_equal(mask_ids(zarr.open_array(str(out), path="mst", mode="r")[:]), want)
    assert main(["mst", str(tmp_path / "in.zarr"), "-o", str(out), "--scheduler",
                 "synchronous"]) == 2  # exists, no --overwrite
    assert "output exists" in capsys.readouterr().err


def test_cli_all_nodata_and_single_cell(tmp_path, capsys):
    src = tmp_path / "nan.asc"
    write_asc(src, np.full((5, 4), np.nan))
    assert main(["mst", str(src), "--json", "--scheduler", "synchronous"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["edges"], s["trees"], s["vertices"], s["total_weight"]) == (0, 0, 0, 0.0)
    one = tmp_path / "one.asc"
    write_asc(one, np.array([[3.5]]))
    assert main(["mst", str(one), "--json", "--scheduler", "synchronous"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["edges"], s["trees"], s["vertices"]) == (0, 1, 1)


@pytest.mark.parametrize("bad", [["--connectivity", "6"], ["--weight", "steep"], ["--tile", "48"],
                                 ["--tile", "x"]])
def test_cli_usage_errors(tmp_path, bad):
    p = subprocess.run([sys.executable, "-m", "terrain.run", "mst", str(tmp_path / "a.asc")] + bad,
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert "error" in p.stderr and "Traceback" not in p.stderr


def test_cli_missing_input_names_the_file(tmp_path, capsys):
    assert main(["mst", str(tmp_path / "nope.asc"), "--scheduler", "synchronous"]) == 2
    err = capsys.readouterr().err
    assert "nope.asc" in err and not list(tmp_path.iterdir())


# -- super-tile groups and the in-core dispatch ---------------------------------------------------
@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("kind", ["integer", "holes"])
def test_groups_taken_whole_give_the_same_forest(kind, conn):
    # each group's forest from the block as a whole (the GPU's super-tile path; on the CPU the
    # block's own tiled forest), reduced once, then the same merges above
    z = dem(kind, (203, 141), seed=conn)
    want, _ = ref_kruskal(z, conn, "max")
    a = grid_mst(z, conn, "max", tile=16, group_tiles=2, backend="cpu", in_core=False)
    b = grid_mst(z, conn, "max", tile=16, group_tiles=2, backend="cpu", in_core="groups")
    assert np.array_equal(mask_ids(b.mask), want)
    assert (b.total_weight, b.edges, b.trees, b.vertices) == (a.total_weight, a.edges, a.trees,
                                                              a.vertices)


def test_in_core_on_the_cpu_and_a_known_choice(monkeypatch):
    # the CPU's in-core twin (Kruskal in C) is taken for grids it holds, the tiled path above
    import terrain.grid.mst_device as md
    from terrain.errors import InputError

    z = dem("integer", (40, 36), seed=3)
    z[5:9, 2:30] = np.nan
    want, _ = ref_kruskal(z)
    r = grid_mst(z, tile=4, backend="cpu")
    assert r.path == "in-core" and np.array_equal(mask_ids(r.mask), want)
    assert grid_mst(z, tile=4, backend="cpu", in_core=False).path == "tiled"
    with pytest.raises(InputError, match="in_core"):
        grid_mst(z, backend="cpu", in_core="sometimes")
    monkeypatch.setattr(md, "HOST_MAX_CELLS", 100)
    assert grid_mst(z, tile=4, backend="cpu").path == "tiled"
    with pytest.raises(InputError, match="do not fit"):
        grid_mst(z, backend="cpu", in_core=True)


@pytest.mark.parametrize("weight", WEIGHTS)
@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("kind", ["random", "integer", "plateau", "holes"])
def test_host_in_core_forest_is_the_reference(weight, conn, kind):
    # host_mst: keys sorted by NumPy, Kruskal's union-find in C; the exact weight sum
    from terrain.grid.edges import horizontal_lengths, weight_model_code
    from terrain.grid.mst_device import host_mst

    z = dem(kind, (61, 47), seed=conn)
    want, w = ref_kruskal(z, conn, weight, (3.0, 7.0))
    f = host_mst(z, conn, weight_model_code(weight), horizontal_lengths((3.0, 7.0)))
    assert np.array_equal(mask_ids(f.mask), want)
    assert f.edges == len(want) and f.vertices == int((~np.isnan(z)).sum())
    assert f.total_weight == grid_mst(z, conn, weight, tile=16, cellsize=(3.0, 7.0),
                                      backend="cpu", in_core=False).total_weight
