"""Run ``python -m terrain.run`` as a user would, for the tests, and check what it left."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["run_cli", "run_main", "killed_mid_shard", "dask_cluster", "dask_scheduler",
           "dask_worker", "wait_for_workers", "stop_processes"]


def run_cli(*argv, scheduler="synchronous", timeout=120):
    """Run the command line; ``scheduler=None`` starts the default LocalCluster.

    Returns ``(exit status, stdout, stderr)``.
    """
    extra = ["--scheduler", scheduler] if scheduler else []
    proc = subprocess.run([sys.executable, "-m", "terrain.run", *map(str, argv), *extra],
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def run_main(capsys, *argv, scheduler="synchronous"):
    """``terrain.run.main`` in this process (fast: no interpreter start, kernels loaded once);
    ``capsys`` is pytest's fixture. Returns ``(exit status, stdout, stderr)``."""
    from terrain.run import main

    capsys.readouterr()
    extra = ["--scheduler", scheduler] if scheduler else []
    rc = main([*map(str, argv), *extra])
    out, err = capsys.readouterr()
    return rc, out, err


HEADER = "ncols 4\nnrows 3\nxllcorner 0\nyllcorner 0\ncellsize 1\nNODATA_value -9999\n"


ROWS = "1 2 3 4\n5 6 7 8\n9 10 11 12\n"


def assert_one_line_error(proc, expected):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("terrain") and expected in lines[0], lines[0]


def child_env(*paths, **variables):
    """This process's environment for a child process, with ``variables`` set: the checkout
    first on ``PYTHONPATH`` (importable when not pip-installed), then ``paths``, then what was
    there (a device image's packages)."""
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, **variables,
                PYTHONPATH=os.pathsep.join([str(ROOT), *map(str, paths), *inherited]))


def imported_after(commands, modules):
    """Run the command lines ``commands`` (lists of arguments) through ``terrain.run.main`` in
    a fresh interpreter: ``(its stdout, which of modules it imported)``; each must exit 0."""
    code = ("import sys; from terrain.run import main; "
            f"status = [main(c) for c in {[[str(a) for a in c] for c in commands]!r}]; "
            f"print(sorted(m for m in {tuple(modules)!r} if m in sys.modules)); "
            "sys.exit(max(status))")
    proc = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stdout.strip().splitlines()[-1]


def run_terrain(*argv, cwd, timeout=None):
    # run from the test's directory
    return subprocess.run([sys.executable, "-m", "terrain.run", *map(str, argv)], cwd=cwd,
                          env=child_env(), capture_output=True, text=True, timeout=timeout)


def run_killed(argv, module, step, after, shard_side=None, timeout=300):
    """``terrain ARGV`` in a child process that ends with ``os._exit(9)`` right after its
    ``after``-th call of ``module.step`` returned, as a SIGKILL leaves a run (its partial
    output, no cleanup); ``shard_side``: the stores' shard target (small grids, several
    shards). Asserts that the child ended so."""
    code = f"""
import importlib, os
import terrain.tiles.store as store_mod
if {shard_side!r} is not None:
    store_mod.SHARD_TARGET_SIDE = {shard_side!r}
mod = importlib.import_module({module!r})
step, done = getattr(mod, {step!r}), []
def step_then_die(*a, **k):
    out = step(*a, **k)
    done.append(1)
    if len(done) == {after!r}:
        os._exit(9)
    return out
setattr(mod, {step!r}, step_then_die)
from terrain.run import main
main({[str(a) for a in argv]!r})
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(), timeout=timeout)
    assert proc.returncode == 9, proc.stderr


SAMPLE = ROOT / "data" / "sample.asc"


def snapshot(folder):
    """Every path under ``folder`` (hidden ones too) with a hash of its bytes."""
    out = {}
    for p in sorted(Path(folder).rglob("*")):
        rel = str(p.relative_to(folder))
        out[rel] = (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink()
                    else ("link", os.readlink(p)) if p.is_symlink() else "dir")
    return out



_KILLED_MID_SHARD = """
import builtins, os, re, signal, sys
import terrain.tiles._shards as shards
MARKER = {marker!r}
real_open = builtins.open

class Dying:
    def __init__(self, f):
        self.f = f
    def write(self, data):
        self.f.write(data)
        self.f.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    def __getattr__(self, name):
        return getattr(self.f, name)

def first():
    if MARKER is None:
        return True
    try:
        os.close(os.open(MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True

def open_(path, mode="r", *args, **kwargs):
    p = str(path)
    shard = re.sub(r"\\.[0-9a-f]{{32}}\\.partial$", "", p)
    rewrite = "w" in mode and "/mst/c/" in p and os.path.exists(shard)
    f = real_open(path, mode, *args, **kwargs)
    return Dying(f) if rewrite and first() else f

shards.open = open_
"""


def killed_mid_shard(marker=None, main=False):
    """Python source that makes its process SIGKILL itself after the first chunk of the
    first ``mst`` shard it *rewrites* (the write phase: the group phase writes each mask
    shard once), a shard writer's file opened by ``terrain.tiles._shards``.

    ``marker``: a path; only the process that creates it dies (once among all the
    processes given it: the workers of a cluster, ``dask worker --preload FILE``).
    ``main``: the source then runs the command line on ``sys.argv[1:]``
    (``python -c SOURCE mst ...``)."""
    source = _KILLED_MID_SHARD.format(marker=None if marker is None else str(marker))
    if main:
        source += "from terrain.run import main\nsys.exit(main(sys.argv[1:]))\n"
    return source


def rewritten_before_finishing(monkeypatch, tmp_path, store, command):
    """A DEM store ``store`` (a path or URL) ingested from one synthetic DEM, which another
    command's ingest of a second one rewrites just before ``command``'s run finishes its
    output (``finish_store`` of :class:`pipelines._command.CommandOutput`, which publishes
    every grid command's): the run must notice. Returns the command's module."""
    import importlib

    from pipelines.ingest import ingest
    from terrain.io import write_synth
    write_synth(tmp_path / "a.asc", 60, 50, seed=1)
    write_synth(tmp_path / "b.asc", 60, 50, seed=2)
    ingest(tmp_path / "a.asc", store, tile=16, scheduler="synchronous")
    import pipelines._command as publishing
    module = importlib.import_module(f"pipelines.{command}")
    real = publishing.finish_store

    def rewritten_first(path):
        ingest(tmp_path / "b.asc", store, tile=16, scheduler="synchronous", overwrite=True)
        return real(path)

    monkeypatch.setattr(publishing, "finish_store", rewritten_first)
    return module


def gdal_lines(path):
    """The LineStrings of a GeoPackage or FlatGeobuf as GDAL reads them (pyogrio): ``(N, 2)``
    arrays, the fields by name, the layer's CRS."""
    import struct

    import numpy as np
    import pyogrio.raw
    meta, _, geometry, values = pyogrio.raw.read(path)
    lines = []
    for wkb in map(bytes, geometry):
        assert struct.unpack_from("<BI", wkb) == (1, 2)  # little-endian LineString
        n = struct.unpack_from("<I", wkb, 5)[0]
        lines.append(np.frombuffer(wkb, "<f8", 2 * n, 9).reshape(n, 2))
    return lines, dict(zip(meta["fields"], values)), meta["crs"]


def dask_scheduler(folder, name, env=None):
    """A ``dask scheduler`` process on 127.0.0.1 (any free port, no dashboard) run in
    ``folder``, once it has written its file ``folder/NAME.json``: ``(process, that file)``."""
    import json
    import time
    scheduler_file = Path(folder) / f"{name}.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", "0", "--no-dashboard", "--scheduler-file", str(scheduler_file)],
        cwd=folder, env=env or child_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    while not scheduler_file.exists() or not scheduler_file.read_text().strip():
        if proc.poll() is not None or time.monotonic() - t0 > 60:
            proc.kill()
            raise AssertionError("no Dask scheduler started")
        time.sleep(0.1)
    json.loads(scheduler_file.read_text())  # whole
    return proc, scheduler_file


def dask_worker(scheduler_file, *options, preload=None, folder=None, env=None):
    """A ``dask worker`` process of the scheduler of ``scheduler_file`` on 127.0.0.1 (no
    dashboard; by default 2 threads and no nanny, else ``options``), run in ``folder`` (the
    scheduler file's), loading ``preload`` first."""
    options = options or ("--nthreads", "2", "--no-nanny")
    extra = ["--preload", str(preload)] if preload else []
    return subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
         str(scheduler_file), "--host", "127.0.0.1", "--no-dashboard", *options, *extra],
        cwd=folder or Path(scheduler_file).parent, env=env or child_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for_workers(scheduler_file, count=1):
    """The address of the scheduler of ``scheduler_file``, once ``count`` workers joined."""
    import json

    import distributed
    address = json.loads(Path(scheduler_file).read_text())["address"]
    with distributed.Client(address, timeout=60) as client:
        client.wait_for_workers(count, timeout=120)
    return address


def dask_cluster(folder, name, *options, preload=None, workers=1, env=None):
    """``dask scheduler`` + ``workers`` ``dask worker`` processes (:func:`dask_worker`'s
    ``options`` and ``preload``) on 127.0.0.1, run in ``folder``, the workers joined:
    ``(address, [scheduler, worker...])``; :func:`stop_processes` ends them."""
    scheduler, scheduler_file = dask_scheduler(folder, name, env)
    procs = [scheduler]
    try:
        for _ in range(workers):
            procs.append(dask_worker(scheduler_file, *options, preload=preload, env=env))
        return wait_for_workers(scheduler_file, workers), procs
    except BaseException:
        stop_processes(procs)
        raise


def stop_processes(procs):
    """Kill each of ``procs`` and wait for it."""
    for p in procs:
        p.kill()
        p.wait()
