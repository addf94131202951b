"""Start-up of ``terrain mst``: a text grid starts for the GPU before the heavy imports.

``terrain.run`` dispatches ``mst`` here. When the run will take the text in-core path
(:func:`pipelines.mst._text_in_core`: an ESRI/GRASS ASCII grid, the GPU backend, no
``--scheduler``, ``--resume`` or ``--dry-run``; with ``--gpus N`` it runs on GPU 0), a thread reads the header and
copies the data section to the device (:func:`terrain.io._parse_gpu.copy_text_to_device`)
while this thread imports :mod:`pipelines.mst` and what it needs (Dask, zarr, Numba: about
a second); the path then parses the text where it lies. The copy uses no import of its
own beyond CuPy (imported here first, so the two threads never import the same modules at
once), and the command waits for it before returning, whether the path took it or not.
"""

import os
import threading

__all__ = ["mst_command", "take_prefetched_text"]

#: :data:`terrain.grid.mst_device.MAX_CELLS` (not imported: this thread imports nothing the
#: main thread may be importing; tests/test_startup.py checks that the two agree)
IN_CORE_MAX_CELLS = 1 << 30

_lock = threading.Lock()
_prefetched = {}  # file identity -> CuPy text array
_jobs = []        # the copying thread, while there is one


def _identity(path):
    st = os.stat(path)
    return (os.path.realpath(path), st.st_size, st.st_mtime_ns)


def take_prefetched_text(path):
    """The device copy of ``path``'s data section made at start-up, once, or None (waits
    for the copy to finish: the caller would otherwise copy the text a second time)."""
    for job in list(_jobs):
        job.join()
    try:
        key = _identity(path)
    except OSError:
        return None
    with _lock:
        return _prefetched.pop(key, None)


def _wanted(args):
    if (getattr(args, "scheduler", None) is not None
            or getattr(args, "resume", False) or getattr(args, "dry_run", False)
            or getattr(args, "backend", None) == "cpu"):
        return False
    from terrain.io.ascii_grid import looks_like_ascii_grid
    return looks_like_ascii_grid(args.input)


def _copy(path, backend):
    try:
        from terrain.io._parse_gpu import copy_text_to_device
        from terrain.io.ascii_grid import open_ascii_grid
        grid = open_ascii_grid(path)
        if grid.shape[0] * grid.shape[1] > IN_CORE_MAX_CELLS:
            return  # not the in-core path's: the text would only take the device's memory
        key = _identity(path)
        text = copy_text_to_device(grid, backend, max_fraction=0.3)
    except Exception:  # any problem: the command reads the file itself and reports it
        return
    if text is not None:
        with _lock:
            _prefetched[key] = text


def mst_command(args):
    """``terrain mst``: :func:`pipelines.mst.mst_command`, the text on its way meanwhile."""
    job = None
    try:
        if _wanted(args):
            from terrain.backend import get_backend
            backend = get_backend(getattr(args, "backend", None))
            if backend.is_gpu:
                job = threading.Thread(target=_copy, args=(args.input, backend), daemon=True)
                _jobs.append(job)
                job.start()
    except Exception:  # a bad backend name or input: the command says so
        job = None
    try:
        from .mst import mst_command as command
        return command(args)
    finally:
        if job is not None:
            job.join()
            _jobs.remove(job)
        with _lock:
            _prefetched.clear()
