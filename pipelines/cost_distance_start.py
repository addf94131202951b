"""Start-up of ``terrain cost-distance``: the device and the DEM get ready during the imports.

``terrain.run`` dispatches ``cost-distance`` here. When the run will take the in-process
path (:func:`pipelines.cost_distance.in_process_applies`: no ``--scheduler``, ``--gpus`` or
``--dry-run``; the in-core algorithm) on the GPU backend, a thread starts before
:mod:`pipelines.cost_distance` and what it needs (Dask, zarr, Numba: about a second) are
imported, and

1. creates the CUDA context (CuPy's first call: 0.2-0.3 s on the GPU hosts);
2. reads the ``elevation`` layer the solve will read (a tile store INPUT's, or the
   ``--reuse`` store's when the earlier run ingested a raster), shard by shard on a pool of
   threads (:func:`terrain.grid.cost_outputs.read_layer`, the solve's own reader), when the
   grid passes the in-core rule (:func:`in_core_bytes` against the free device memory);
3. loads every kernel the solve launches, CuPy's reductions included, by solving a 64 x 64
   grid (:func:`terrain.grid.sssp.grid_sssp`): a process loads each from CuPy's disk cache
   on first use, and a fresh device compiles them;
4. pins the host staging buffers of the uploads and downloads
   (:mod:`terrain.grid._sssp_gpu`): CuPy's pinned pool keeps them for the solve.

The solve takes the grid with :func:`take_prefetched_elevation`, which waits for the
thread; a grid the thread did not read (another store, a changed file, no GPU) is read by
the solve as before, so the thread changes no result. The thread's own failures are
ignored: the command then meets the same problem itself and reports it. The command waits
for the thread before returning, whether the run took its work or not.

:func:`startup_seconds` gives the wall seconds of these steps and of the start-up before
them (process start to this command, the imports), for the summary's ``wall_seconds``.
"""

import json
import os
import threading
import time

__all__ = ["cost_distance_command", "take_prefetched_elevation", "in_core_bytes",
           "startup_seconds"]

_lock = threading.Lock()
_prefetched = {}  # store identity -> float32 elevation
_jobs = []        # the start-up thread, while there is one
_seconds = {}     # step -> wall seconds (startup_seconds)


def in_core_bytes(shape, has_friction=False):
    """Bytes the in-core SSSP needs for a grid of ``shape``: about 40 a cell (padded
    elevation, distance, labels, outputs), 4 more with a friction raster.

    >>> in_core_bytes((1000, 1000)), in_core_bytes((10, 10), has_friction=True)
    (40000000, 4400)
    """
    return int(shape[0]) * int(shape[1]) * (40 + (4 if has_friction else 0))


def startup_seconds():
    """Wall seconds of the start-up steps of this process's command (module docstring)."""
    return {k: round(v, 6) for k, v in _seconds.items()}


def _process_age():
    """Seconds since this process started (Linux ``/proc``; None elsewhere)."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _identity(store):
    """What says that the ``elevation`` of ``store`` is the one read."""
    meta = os.stat(os.path.join(store, "elevation", "zarr.json"))
    return (os.path.realpath(store), meta.st_ino, meta.st_size, meta.st_mtime_ns)


def take_prefetched_elevation(store):
    """The ``elevation`` of ``store`` read at start-up, once, or None (waits for the
    start-up thread: the caller would otherwise read the grid a second time)."""
    t0 = time.perf_counter()
    for job in list(_jobs):
        job.join()
    if _jobs:
        _seconds["waited for the start-up thread"] = time.perf_counter() - t0
    if store is None:
        return None
    try:
        key = _identity(str(store))
    except OSError:
        return None
    with _lock:
        return _prefetched.pop(key, None)


def _attributes(store):
    with open(os.path.join(store, "zarr.json")) as f:
        return json.load(f).get("attributes") or {}


def _elevation_store(args):
    """The store whose ``elevation`` the solve will read, or None (a raster INPUT)."""
    reuse = getattr(args, "reuse", None)
    if reuse is not None:
        ru = _attributes(str(reuse)).get("cost_reuse")
        if not isinstance(ru, dict):  # a tiled run's store, or none: not the in-core path
            raise ValueError("not an in-core run's store")
        if ru.get("dem") == "elevation":
            return str(reuse)
    inp = str(args.input)
    return inp if os.path.isfile(os.path.join(inp, "zarr.json")) else None


def _wanted(args):
    return not (getattr(args, "scheduler", None) is not None
                or getattr(args, "gpus", None) is not None
                or getattr(args, "dry_run", False)
                or getattr(args, "backend", None) == "cpu"
                or getattr(args, "algorithm", "auto") == "tiled")


def _warm(be, args, store):
    try:
        t0 = time.perf_counter()
        import numpy as np
        free = be.xp.cuda.Device().mem_info[0]  # creates the context
        t1 = time.perf_counter()
        _seconds["CUDA context (thread)"] = t1 - t0
        if store is not None:
            with open(os.path.join(store, "elevation", "zarr.json")) as f:
                shape = json.load(f)["shape"]
            if len(shape) == 2 and in_core_bytes(shape, args.friction is not None) <= free // 2:
                from terrain.grid.cost_outputs import read_layer
                key = _identity(store)
                z = read_layer(store, "elevation", np.float32)
                with _lock:
                    _prefetched[key] = z
                _seconds["elevation read (thread)"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        _warm_device(be)
        _seconds["kernels and pinned buffers (thread)"] = time.perf_counter() - t2
    except Exception:  # noqa: BLE001 - the command meets the problem itself and says so
        return


def _warm_device(be):
    """Loads the solve's kernels and pins the staging buffers (module docstring)."""
    import cupyx
    import numpy as np

    from terrain.grid._sssp_gpu import _STAGE_BYTES, _STAGES
    from terrain.grid.sssp import grid_sssp
    z = (np.arange(64 * 64, dtype=np.float32).reshape(64, 64) % 7)
    z[3, 5] = np.nan
    grid_sssp(z, [(0, 0), (40, 50)], backend=be, hops=False, on_distance=lambda d: None)
    stages = [cupyx.empty_pinned(_STAGE_BYTES, np.uint8) for _ in range(2 * _STAGES)]
    del stages  # back to CuPy's pinned pool, pinned


def cost_distance_command(args):
    """``terrain cost-distance``: :func:`pipelines.cost_distance.cost_distance_command`,
    the device and the DEM made ready meanwhile (module docstring)."""
    age = _process_age()
    _seconds.clear()
    if age is not None:
        _seconds["process start to the command"] = age
    job = None
    try:
        if _wanted(args):
            from terrain.backend import get_backend
            t0 = time.perf_counter()
            be = get_backend(getattr(args, "backend", None))  # CuPy imported here, not in
            _seconds["backend"] = time.perf_counter() - t0    # both threads at once
            if be.is_gpu:
                job = threading.Thread(target=_warm, args=(be, args, _elevation_store(args)),
                                       daemon=True, name="terrain-cost-start")
                _jobs.append(job)
                job.start()
    except Exception:  # noqa: BLE001 - a bad input: the command says so
        job = None
    try:
        t0 = time.perf_counter()
        from .cost_distance import cost_distance_command as command
        _seconds["imports"] = time.perf_counter() - t0
        return command(args)
    finally:
        if job is not None:
            job.join()
            _jobs.remove(job)
        with _lock:
            _prefetched.clear()
