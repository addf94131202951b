"""``terrain mst`` of an ASCII grid on the GPU: the text parsed on the device (no store round
trip), the forest in core or as super-tiles reading the device grid, writes the same store as the
CPU's task-graph path: elevation, statistics, mask and summary."""

import numpy as np
import pytest
import zarr

from terrain.io import write_synth

pytestmark = pytest.mark.gpu


def assert_same_as_the_graph_path(fast, src, tmp_path, tile):
    """``fast`` (the summary of a GPU run into ``tmp_path/fast.zarr``) against the CPU task
    graph's run of the same text: the same forest, arrays (bytes and metadata) and attributes."""
    from pipelines.mst import run_mst
    slow = run_mst(src, tmp_path / "slow.zarr", tile=tile, backend="cpu", scheduler="threads")
    for key in ("total_weight", "edges", "trees", "vertices"):
        assert fast[key] == slow[key], key
    a = zarr.open_group(str(tmp_path / "fast.zarr"), mode="r")
    b = zarr.open_group(str(tmp_path / "slow.zarr"), mode="r")
    for name in ("elevation", "mst", "x", "y"):
        assert str(a[name].metadata.to_dict()) == str(b[name].metadata.to_dict()), name
        assert np.array_equal(a[name][:].view(np.uint8), b[name][:].view(np.uint8)), name
    skip = {"mst"}
    assert {k: v for k, v in a.attrs.items() if k not in skip} == \
           {k: v for k, v in b.attrs.items() if k not in skip}


def assert_fails_as_on_the_cpu(src, tmp_path):
    """A bad text ``src``: the GPU run and the CPU task graph's fail with the same error (one
    naming the file), and neither leaves an output behind."""
    from pipelines.mst import run_mst
    from terrain.errors import InputError
    messages = []
    for backend, scheduler in (("gpu", None), ("cpu", "threads")):
        with pytest.raises(InputError) as err:
            run_mst(src, tmp_path / f"{backend}.zarr", tile=64, backend=backend,
                    scheduler=scheduler)
        messages.append(str(err.value))
        assert not (tmp_path / f"{backend}.zarr").exists()
    assert messages[0] == messages[1] and str(src) in messages[0]


@pytest.mark.parametrize("shape, tile", [((1500, 2100), 256), ((333, 517), 64)])
def test_text_in_core_equals_graph_path(tmp_path, shape, tile):
    from pipelines.mst import run_mst
    src = tmp_path / "g.asc"
    write_synth(src, *shape, seed=3, nodata=0.05)
    fast = run_mst(src, tmp_path / "fast.zarr", tile=tile, backend="gpu")
    assert fast["path"] == "in-core" and fast["parse"] == "gpu"
    assert "copy" in fast["wall_seconds"] and fast["phase_seconds"]["boruvka"] > 0
    assert_same_as_the_graph_path(fast, src, tmp_path, tile)


def test_cli_writes_the_library_store(tmp_path):
    import json
    import subprocess
    import sys
    from pipelines.mst import run_mst
    src = tmp_path / "g.asc"
    write_synth(src, 700, 900, seed=5, nodata=0.02)
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "mst", str(src), "-o",
                           str(tmp_path / "cli.zarr"), "--tile", "64", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    cli = json.loads(proc.stdout)
    assert cli["path"] == "in-core" and cli["parse"] == "gpu"
    assert "dashboard" not in proc.stderr  # one device's work: no cluster
    lib = run_mst(src, tmp_path / "lib.zarr", tile=64, backend="gpu")
    a = zarr.open_group(str(tmp_path / "cli.zarr"), mode="r")
    b = zarr.open_group(str(tmp_path / "lib.zarr"), mode="r")
    for name in ("elevation", "mst"):
        assert np.array_equal(a[name][:].view(np.uint8), b[name][:].view(np.uint8)), name
    assert cli["total_weight"] == lib["total_weight"] and cli["edges"] == lib["edges"]


@pytest.mark.parametrize("damage", [(" ", " x"), ("\n", "\n\n")])
def test_bad_text_fails_as_on_the_cpu_and_leaves_nothing(tmp_path, damage):
    src = tmp_path / "g.asc"
    write_synth(src, 300, 200, seed=1, nodata=0.0)
    text = src.read_text()
    head = text.index("\n", text.index("NODATA")) + 1
    src.write_text(text[:head] + text[head:].replace(*damage, 1))
    assert_fails_as_on_the_cpu(src, tmp_path)


@pytest.fixture
def streamed(monkeypatch):
    """Super-tiles of the text on the device for small grids: the in-core route refused,
    pieces of 64 KB."""
    import pipelines.mst as mst
    import terrain.io._parse_gpu as pg
    monkeypatch.setattr(mst, "fits_in_core", lambda *a, **k: False)  # mst_route's question
    monkeypatch.setattr(pg, "PIECE_BYTES", 64 << 10)


@pytest.mark.parametrize("shape, tile", [((2500, 3000), 64), ((4500, 2100), 64)])
def test_text_streamed_equals_graph_path(tmp_path, streamed, shape, tile):
    from pipelines.mst import run_mst
    src = tmp_path / "g.asc"
    write_synth(src, *shape, seed=4, nodata=0.05)
    fast = run_mst(src, tmp_path / "fast.zarr", tile=tile, backend="gpu")
    assert fast["path"] == "super-tiles" and fast["parse"] == "gpu"
    assert fast["wall_seconds"]["read"] > 0 and fast["wall_seconds"]["forest"] > 0
    assert fast["group_tiles"] * tile < max(shape)  # several super-tiles, merged above
    assert_same_as_the_graph_path(fast, src, tmp_path, tile)


def test_text_streamed_bad_text_fails_as_on_the_cpu(tmp_path, streamed):
    src = tmp_path / "g.asc"
    write_synth(src, 400, 300, seed=1, nodata=0.0)
    text = src.read_text()
    at = text.index(" ", len(text) * 3 // 4)  # a bad token in a late piece
    src.write_text(text[:at] + " x" + text[at:])
    assert_fails_as_on_the_cpu(src, tmp_path)


def test_values_beyond_float32_fail_as_on_the_cpu(tmp_path):
    src = tmp_path / "g.asc"
    write_synth(src, 300, 200, seed=1, nodata=0.0)
    lines = src.read_text().split("\n")
    row = lines[150].split(" ")
    row[3] = "1e39"
    lines[150] = " ".join(row)
    src.write_text("\n".join(lines))
    assert_fails_as_on_the_cpu(src, tmp_path)
