"""A writer killed half-way through a shard leaves the shard whole.

Shards used to be rewritten in place (``open(path, "wb")``): ``mst`` killed during its write
phase left ``mst/c/1/1`` at 95 KB of 1.6 MB, and ``--resume`` then failed ("shard index
checksum mismatch") and deleted the partial with its checkpoints. Now every shard is
written beside and renamed (:func:`terrain.tiles.write_shard`), so a resumed or retried
task reads whole bytes. The kill here is real: the process SIGKILLs itself after the first
chunk of the first shard it *rewrites* (the write phase; the group phase writes each mask
shard once).
"""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import zarr

from cli import child_env, killed_mid_shard

@pytest.fixture(scope="module")
def two_shards(tmp_path_factory):
    from terrain.io import write_synth
    path = tmp_path_factory.mktemp("torn") / "g.asc"
    # 2 shards of 2048 rows at tile 256; more cells than the CPU takes in core (HOST_MAX_CELLS),
    # so the write phase rewrites shards
    write_synth(path, 2200, 1000, seed=5, nodata=0.02)
    return path


def _arrays(path):
    g = zarr.open_group(str(path), mode="r")
    return {k: np.asarray(g[k][:]).tobytes() for k in ("elevation", "mst")}


@pytest.mark.slow
def test_kill_mid_shard_write_then_resume_is_bit_identical(tmp_path, two_shards):
    env = child_env()
    argv = ["mst", str(two_shards), "--tile", "256", "--backend", "cpu", "--json",
            "--scheduler", "synchronous"]
    proc = subprocess.run([sys.executable, "-c", killed_mid_shard(main=True), *argv, "-o",
                           "m.zarr"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    partial, = tmp_path.glob(".m.zarr.partial-*")
    # killed in the write phase: the groups are done
    assert list(partial.glob(".terrain-checkpoints/mst-group-*")), os.listdir(partial)
    resumed = subprocess.run([sys.executable, "-m", "terrain.run", *argv, "-o", "m.zarr",
                              "--resume"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert json.loads(resumed.stdout)["reused_tasks"] > 0
    fresh = subprocess.run([sys.executable, "-m", "terrain.run", *argv, "-o", "fresh.zarr"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr
    assert _arrays(tmp_path / "m.zarr") == _arrays(tmp_path / "fresh.zarr")
    assert sorted(os.listdir(tmp_path)) == ["fresh.zarr", "m.zarr"]
    # nothing half-written left in the finished store
    assert not [p for p in (tmp_path / "m.zarr").rglob("*.partial")]


def test_a_failing_shard_write_leaves_the_old_shard(tmp_path, monkeypatch):
    """An error half-way (here: the disk fills after the first chunk) keeps the old bytes."""
    from terrain.tiles import create_store, fast_layout, read_block, write_block
    import terrain.tiles._shards as shards
    store = create_store(tmp_path / "s.zarr", (64, 64), tile=16, compressors=(
        zarr.codecs.BloscCodec(cname="lz4", clevel=1, shuffle="shuffle"),))
    assert fast_layout(store.elevation) is not None
    write_block(tmp_path / "s.zarr", "elevation", (0, 64, 0, 64),
                np.arange(64 * 64, dtype=np.float32).reshape(64, 64))
    before = (tmp_path / "s.zarr" / "elevation" / "c" / "0" / "0").read_bytes()
    real_open = open

    class Full:
        def __init__(self, f):
            self.f, self.n = f, 0

        def write(self, data):
            self.n += 1
            if self.n > 1:
                raise OSError(28, "No space left on device")
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)

    monkeypatch.setattr(shards, "open", lambda *a, **k: Full(real_open(*a, **k)),
                        raising=False)
    with pytest.raises(OSError):
        write_block(tmp_path / "s.zarr", "elevation", (0, 64, 0, 64),
                    np.zeros((64, 64), np.float32))
    assert (tmp_path / "s.zarr" / "elevation" / "c" / "0" / "0").read_bytes() == before
    assert sorted(os.listdir(tmp_path / "s.zarr" / "elevation" / "c" / "0")) == ["0"]
    monkeypatch.undo()
    assert read_block(tmp_path / "s.zarr", "elevation", (0, 64, 0, 64))[5, 7] == 5 * 64 + 7
