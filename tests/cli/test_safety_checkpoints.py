"""``--resume`` checkpoints are data, never code.

The partial output's name derives from the input's path, size and mtime, so anyone who can
stat the input and write the output's folder can plant files in it. Before, ``--resume``
unpickled whatever ``.pkl`` it found in ``.terrain-checkpoints``.
"""

import json
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cli import SAMPLE, child_env

from pipelines._resume import CHECKPOINT_DIR, load_result, run_checkpointed, save_result


class _Boom:
    """Unpickling this runs ``os.system``: it writes the marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _plant(folder, names, marker):
    folder.mkdir(parents=True, exist_ok=True)
    payload = pickle.dumps(_Boom(marker))
    for name in names:
        (folder / name).write_bytes(payload)
    # a .npz whose member is a pickled object array: np.load would unpickle it if asked
    bad = np.empty(1, object)
    bad[0] = _Boom(marker)
    with open(folder / "evil.npz", "wb") as f:
        np.savez(f, **{"__tree__": np.frombuffer(b'{"a": "a0"}', np.uint8), "a0": bad})
    return [folder / n for n in names] + [folder / "evil.npz"]


# the command line, killed (SIGKILL) once every task ran, just before the checkpoints are
# dropped and the partial renamed: a partial whose checkpoints have the tasks' real names
KILLED_BEFORE_RENAME = """
import os, signal, sys
import pipelines._resume as resume
def die(*args):
    os.kill(os.getpid(), signal.SIGKILL)
resume.drop_checkpoints = die
import pipelines.mst
pipelines.mst.drop_checkpoints = die
from terrain.run import main
sys.exit(main(sys.argv[1:]))
"""

MST = ["mst", "good.asc", "-o", "m.zarr", "--tile", "64", "--backend", "cpu",
       "--scheduler", "synchronous", "--json"]


def test_resume_never_unpickles_a_planted_checkpoint(tmp_path):
    (tmp_path / "good.asc").write_bytes(SAMPLE.read_bytes())
    env = child_env()
    proc = subprocess.run([sys.executable, "-c", KILLED_BEFORE_RENAME, *MST], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    partial, = tmp_path.glob(".m.zarr.partial-*")
    folder = partial / CHECKPOINT_DIR
    stems = sorted({p.stem for p in folder.iterdir()})
    assert len(stems) >= 4, stems  # create, band, prepare, groups, writes
    # every checkpoint replaced by a pickle that runs code, under the name a task looks for
    # (.npz) and the name older versions looked for (.pkl)
    marker = tmp_path / "PWNED"
    payload = pickle.dumps(_Boom(marker))
    for p in folder.iterdir():
        p.unlink()
    for stem in stems:
        (folder / f"{stem}.npz").write_bytes(payload)
        (folder / f"{stem}.pkl").write_bytes(payload)
    proc = subprocess.run([sys.executable, "-m", "terrain.run", *MST, "--resume"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert not marker.exists(), "a planted checkpoint ran code"
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    resumed = json.loads(proc.stdout)
    assert sorted(os.listdir(tmp_path)) == ["good.asc", "m.zarr"]
    proc = subprocess.run([sys.executable, "-m", "terrain.run", *MST[:3], "fresh.zarr", *MST[4:]],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    fresh = json.loads(proc.stdout)
    for k in ("total_weight", "edges", "trees", "vertices"):
        assert resumed[k] == fresh[k], k
    import zarr
    a, b = (zarr.open_group(str(tmp_path / n), mode="r") for n in ("m.zarr", "fresh.zarr"))
    for k in ("elevation", "mst"):
        assert np.asarray(a[k][:]).tobytes() == np.asarray(b[k][:]).tobytes(), k


def test_planted_npz_with_the_tasks_own_name_is_not_unpickled(tmp_path):
    marker = tmp_path / "PWNED"
    path = tmp_path / "task.npz"
    path.write_bytes(pickle.dumps(_Boom(marker)))
    assert run_checkpointed(path, lambda: 42) == 42  # ignored: the task ran again
    assert not marker.exists()
    assert load_result(path) == 42  # and its own checkpoint replaced the planted file
    evil, = _plant(tmp_path / "p", [], marker)
    with pytest.raises(ValueError):
        load_result(evil)
    assert run_checkpointed(evil, lambda: "ran") == "ran"
    assert not marker.exists()


def test_checkpoint_round_trip_of_the_task_results():
    from terrain.grid.merge import Changes, LevelGraph
    lg = LevelGraph((0, 4, 0, 4), np.arange(3), np.arange(3), np.ones(3, np.float32),
                    np.arange(3), *(np.zeros(4, np.float32) for _ in range(4)))
    value = ({"rows": 3, "w": 1.5, "x": np.float64(2.0), "nan": float("nan")},
             [lg, Changes()], None, True, "s", b"raw", {(1, 2): "tuple key"})
    import tempfile
    p = Path(tempfile.mkdtemp()) / "c.npz"
    save_result(p, value)
    got = load_result(p)
    assert got[0]["rows"] == 3 and np.isnan(got[0]["nan"]) and got[0]["x"] == 2.0
    assert isinstance(got[1][0], LevelGraph) and got[1][0].window == (0, 4, 0, 4)
    assert got[1][0].w.dtype == np.float32 and got[1][0].a.tolist() == [0, 1, 2]
    assert isinstance(got[1][1], Changes) and got[1][1].added.size == 0
    assert got[2:] == (None, True, "s", b"raw", {(1, 2): "tuple key"})


def test_checkpoint_names_only_terrain_dataclasses(tmp_path):
    """A planted tree naming another class (``os:system``-like) is refused, not imported."""
    p = tmp_path / "c.npz"
    for name in ("os:system", "subprocess:Popen", "terrain.io.outputs:os"):
        tree = json.dumps({"c": name, "f": {}}).encode()
        with open(p, "wb") as f:
            np.savez(f, __tree__=np.frombuffer(tree, np.uint8))
        with pytest.raises(ValueError):
            load_result(p)
