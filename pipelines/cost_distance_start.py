"""Start-up of ``terrain cost-distance``: the device gets ready during the imports.

``terrain.run`` dispatches ``cost-distance`` here. When the run will take the in-process
path (:func:`pipelines.cost_distance.in_process_applies`: no ``--scheduler`` or
``--dry-run``; not ``--algorithm tiled``) on the GPU backend, CuPy is imported here and a
thread starts before :mod:`pipelines.cost_distance` and what it needs (zarr: 0.4-0.6 s with
Numba on the GPU hosts; the GPU path no longer imports Numba, whose kernels are in
:mod:`terrain.grid._sssp_cpu` and whose cost functions :mod:`terrain.grid.costs` makes on
first use) are imported, and

1. creates the CUDA context (CuPy's first call: 0.1 s);
2. loads every kernel the solve launches, CuPy's reductions included, by solving a 64 x 64
   grid (:func:`terrain.grid.sssp.grid_sssp`): a process loads each from CuPy's disk cache
   on first use, and a fresh device compiles them;
3. pins the host staging buffers of the solve's uploads and downloads
   (:mod:`terrain.grid._sssp_gpu`; CuPy's pinned pool keeps them for the solve).

The solve waits for the thread (:func:`wait_for_start_up`) once it has read the grid, before
it touches the device; the thread changes no result. Its own failures are ignored: the
command then meets the same problem itself and reports it. The command waits for the
thread before returning, whether the run took its work or not.

Measured on the H100 host (docs/benchmarks.md): without the thread the solve of a
Neuse-size ``--reuse`` query took 0.16-0.27 s longer (its upload 0.10-0.23 s instead of
0.03: pinning and the module load; its first reductions 0.05-0.12 s instead of 0.004),
while the thread's own cost to the main thread (the GIL during its Python parts, the wait
for it) is 0.1-0.2 s: one run without it returned at a process age of 3.09 s, two with it
at 2.75 and 3.11 s. Reading the DEM in the
thread as well was tried and dropped: the reader needs zarr and :mod:`terrain.grid`, whose
imports are the main thread's, so the read could only start when they were done, and the
solve then waited 0.4-0.5 s for the thread's read and kernels one after the other; read in
the main thread, it runs beside the kernels' loading.

:func:`startup_seconds` gives the wall seconds of these steps and of the start-up before
them (process start to this command, the imports), for the summary's ``wall_seconds``.

The DEM read at start-up
------------------------
When INPUT is a tile store (or ``--reuse`` names one holding the DEM), a second thread
reads its ``elevation`` while the main thread imports (:func:`take_early_read`): the shards
are read and decoded by :func:`terrain.tiles._shards.read_array` (when the grid is one the
in-core algorithm takes: :func:`pipelines.cost_distance.choose_algorithm`'s rule) from a
layout built out of the array's ``zarr.json`` alone (:func:`terrain.tiles._shards.read_layout`: no zarr, whose
import the main thread is doing), the reads and the decompression without the GIL. The
solve takes that array only when the layer it would read is the same bytes: its
``zarr.json`` equal and every shard file the same (device, inode, size, modification time)
-- a ``--reuse`` query's hard-linked DEM is; otherwise, or after any failure, it reads the
layer itself. The array is what :func:`terrain.grid.cost_outputs.read_layer` returns.

The solve at start-up
---------------------
Without a friction raster or a sources file, the same thread then solves: it guesses the
command's ``grid_sssp`` call from the command line and the stores' ``zarr.json`` (source
cells, map points through the input's geotransform, start cost, cost model,
connectivity, cell size, maximum cost, and a ``--reuse`` store's bucket width;
:func:`_early_call`), waits for the device thread above (kernels loaded, rings pinned)
and runs it while the main thread imports zarr and checks the command. The command takes
the result (:func:`take_early_solve`) only when its own call is that one on the array it
took from the read, argument for argument; any other call -- a check that fails, an
argument guessed otherwise -- solves again as before. Its distances go to the writer as
soon as they are known, as the command's own solve hands them. An error of the early solve
before its distances (a source on nodata) is left for the command's own call to report.

``TERRAIN_COST_START`` (comma-separated, for measurements): ``noread`` leaves the DEM to
the solve, ``nowarm`` starts no device thread, ``pin=N`` pins N transfer rings (default
:data:`PIN_RINGS`), ``readers=N`` reads with N threads, ``age`` prints the process's age
when the command returns (on stderr), ``nosolve`` leaves the solve to the command,
``warm=pin`` only pins the rings in the device thread (no kernels loaded ahead),
``imports=late`` makes the main thread wait for the device thread's kernels before it
imports (no two threads running Python at once), ``pinpar`` pins in a thread of its own
beside the kernels' loading, ``free`` frees CuPy's device and pinned pools once the
start-up solve is done (not at the process's exit), ``hostout`` downloads the solve's
outputs whole to the host before they are written (as before issue 11;
:func:`outputs_on_device`), ``rss`` samples the resident set every 5 ms from the command's
start and prints its peak and a timeline on stderr when the command returns (with the
moments the start-up steps ended; :class:`_RssSampler`).
"""

import os
import threading
import time

import numpy as np  # (imported with terrain.run's backend module already)

__all__ = ["cost_distance_command", "wait_for_start_up", "startup_seconds",
           "take_early_read", "layer_signature", "PIN_RINGS", "outputs_on_device"]

_jobs = []     # the start-up thread, while there is one
_seconds = {}  # step -> wall seconds (startup_seconds)
_early = {}    # the DEM read at start-up: thread, signature, array or error
_kernels_loaded = threading.Event()  # the device thread is past its Python-heavy part
#: transfer rings pinned by the start-up thread (:func:`terrain._transfer.pin_ring`): the
#: solve's upload and its two downloads (the distances' in a thread beside the others').
#: With one ring the allocation and backlink download of a Neuse-size query took 0.20-0.24 s
#: instead of 0.09-0.10 (it pinned a second ring itself); the second ring's 0.13-0.16 s of
#: pinning mostly overlaps the DEM read (docs/benchmarks.md, wave 6, round 3). With the
#: outputs written off the device (:func:`outputs_on_device`, the default since issue 11)
#: nothing is downloaded whole: one ring, the upload's (:func:`_rings`)
PIN_RINGS = 2


def _options():
    """``TERRAIN_COST_START``'s switches (module docstring) as a dict."""
    out = {}
    for item in os.environ.get("TERRAIN_COST_START", "").split(","):
        key, _, value = item.strip().partition("=")
        if key:
            out[key] = value
    return out


class _RssSampler:
    """``TERRAIN_COST_START=rss`` (measurements, issue 11): a thread reading ``VmRSS`` of
    ``/proc/self/status`` every 5 ms (pinned and CUDA mappings count there, which
    ``tracemalloc`` does not see); :meth:`report` gives the peak, the resident set every
    0.1 s, and when each step of :func:`startup_seconds` ended."""

    def __init__(self):
        self.t0, self.samples, self.marks = time.perf_counter(), [], []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="terrain-rss")
        self.thread.start()

    @staticmethod
    def rss_mb():
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def _run(self):
        seen = set()
        while not self.stop.is_set():
            t = time.perf_counter() - self.t0
            self.samples.append((t, self.rss_mb()))
            for key in list(_seconds):
                if key not in seen:
                    seen.add(key)
                    self.marks.append((t, key))
            self.stop.wait(0.005)

    def report(self):
        self.stop.set()
        self.thread.join()
        self.samples.append((time.perf_counter() - self.t0, self.rss_mb()))
        t_peak, peak = max(self.samples, key=lambda s: s[1])
        line = " ".join(f"{t:.1f}:{mb:.0f}" for t, mb in self.samples[::20])
        marks = "; ".join(f"{t:.2f} {k}" for t, k in self.marks)
        return (f"terrain: RSS peak {peak:.0f} MB at {t_peak:.2f} s (from the command's start)"
                f"\nterrain: RSS MB every 0.1 s: {line}\nterrain: steps ended: {marks}")


def outputs_on_device():
    """Whether the in-process GPU run keeps the solve's outputs on the device and writes
    them off it shard by shard (default), rather than downloading them whole first
    (``TERRAIN_COST_START=hostout``, for measurements: 2.9 GB more host memory at the
    Neuse 40-ft size, docs/benchmarks.md)."""
    return "hostout" not in _options()


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


def wait_for_start_up():
    """Wait for the start-up thread, when there is one (its wait goes to the summary)."""
    t0 = time.perf_counter()
    jobs = list(_jobs)
    for job in jobs:
        job.join()
    if jobs:
        _seconds["waited for the start-up thread"] = time.perf_counter() - t0


def _wanted(args):
    return not (getattr(args, "scheduler", None) is not None
                or getattr(args, "dry_run", False)
                or getattr(args, "backend", None) == "cpu"
                or getattr(args, "algorithm", "auto") in ("tiled", "blocked"))


def _warm(be, kernels=True):
    try:
        t0 = time.perf_counter()
        cp = be.xp
        cp.cuda.Device().mem_info  # creates the context
        t1 = time.perf_counter()
        _seconds["CUDA context (thread)"] = t1 - t0
        _warm_kernels(be, kernels)
        _seconds["kernels and pinned buffers (thread)"] = time.perf_counter() - t1
    except Exception:  # noqa: BLE001 - the command meets the problem itself and says so
        return
    finally:
        _kernels_loaded.set()


def _rings(options):
    """Transfer rings the start-up thread pins (:data:`PIN_RINGS`)."""
    if "pin" in options:
        return int(options["pin"])
    return PIN_RINGS if not outputs_on_device() else 1


def _warm_kernels(be, kernels=True):
    """Loads the solve's kernels (a 64 x 64 grid solved as the command's grid will be;
    not with ``kernels=False``) and pins the rings of its uploads and downloads
    (:func:`terrain._transfer.pin_ring`)."""
    t0 = time.perf_counter()
    from terrain._transfer import pin_ring
    from terrain.grid.sssp import grid_sssp
    t1 = time.perf_counter()
    options = _options()
    rings = _rings(options)
    pinning = None
    if rings > 0 and "pinpar" in options:  # beside the kernels' loading
        pinning = threading.Thread(target=pin_ring, args=(be.xp, rings), daemon=True)
        pinning.start()
    if kernels:
        z = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) % 7
        z[3, 5] = np.nan
        grid_sssp(z, [(0, 0), (40, 50)], backend=be, hops=False, on_distance=lambda d: None)
    _kernels_loaded.set()
    t2 = time.perf_counter()
    if pinning is not None:
        pinning.join()
    elif rings > 0:
        pin_ring(be.xp, rings)  # the upload's and the downloads' rings, in CuPy's pool
    _seconds.update({"thread: imports": t1 - t0, "thread: 64 x 64 solve": t2 - t1,
                     "thread: pinning": time.perf_counter() - t2})


def layer_signature(layer_dir):
    """What says that two layer directories hold the same bytes (module docstring): the
    content of ``zarr.json``, and ``(device, inode, size, mtime)`` of every other file."""
    layer_dir = os.fspath(layer_dir)
    entries = []
    for root, dirs, files in os.walk(layer_dir):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, layer_dir)
            if rel == "zarr.json":
                with open(path, "rb") as fh:
                    entries.append((rel, fh.read()))
            else:
                st = os.stat(path)
                entries.append((rel, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(entries)


def _early_target(args):
    """The ``elevation`` directory the solve will most likely read, or None."""
    for store in (getattr(args, "input", None), getattr(args, "reuse", None)):
        if store is not None and os.path.isfile(os.path.join(store, "elevation", "zarr.json")):
            return os.path.join(store, "elevation")
    return None


def _read_early(layer_dir, readers, be, args, solve):
    t0 = time.perf_counter()
    try:
        from terrain.grid.sssp import incore_bytes
        from terrain.tiles._shards import read_array, read_layout
        signature = layer_signature(layer_dir)
        layout = read_layout(layer_dir)
        if layout is None or layout.dtype != np.float32:
            return
        stop, rule = threading.Event(), None
        if getattr(args, "algorithm", "auto") != "in-core":  # choose_algorithm's rule,
            need = incore_bytes(layout.shape, getattr(args, "friction", None) is not None)

            def check():  # beside the read: it waits for the device thread's context
                try:
                    if need > be.xp.cuda.Device().mem_info[0] // 2:
                        stop.set()  # tiled: a grid of this size is not read whole
                except Exception:  # noqa: BLE001 - no answer: no read
                    stop.set()

            rule = threading.Thread(target=check, daemon=True)
            rule.start()
        z = read_array(layout, readers, stop)
        if rule is not None:
            rule.join()
        if z is None or stop.is_set():
            return
        _early.update(array=z, signature=signature)
        _seconds["DEM read (thread)"] = time.perf_counter() - t0
        call = None
        if solve:
            try:
                call = _early_call(args, layout.shape)
                if call is not None:  # the command keeps a GPU solve's outputs there
                    call["on_device"] = bool(be.is_gpu and call["on_device"])
            except Exception:  # noqa: BLE001 - a guess that fails: the command solves
                call = None
        if call is not None:  # (known to the command before it can ask for the read)
            _early.update(call=call, distance=None, got_distance=threading.Event(),
                          result=None, error=None)
    except Exception:  # noqa: BLE001 - the solve reads the layer itself and meets it
        _early.pop("array", None)
        _early.pop("call", None)
        return
    finally:
        _early["read"].set()
    if call is not None:
        _solve_early(z, be, call)


def _early_call(args, shape):
    """The arguments of the command's ``grid_sssp`` call as far as the command line and the
    stores' ``zarr.json`` tell them (a guess: :func:`take_early_solve` compares them with
    the command's own), or None."""
    import json

    from terrain.io.points import map_to_cell

    def attrs(store):
        with open(os.path.join(store, "zarr.json")) as fh:
            return json.load(fh).get("attributes", {})

    reuse = getattr(args, "reuse", None)
    if os.path.isfile(os.path.join(args.input, "elevation", "zarr.json")):
        gt = attrs(args.input)["geotransform"]
    else:  # a raster input's query: the geotransform the reused store was checked against
        gt = attrs(reuse)["cost_reuse"]["geotransform"]
    sources = [map_to_cell(*(float(v) for v in str(p).split(",")), gt, shape)
               for p in (getattr(args, "source", None) or ())]
    sources += [tuple(int(v) for v in str(c).split(",")) for c in
                (getattr(args, "source_cell", None) or ())]
    if not sources:
        return None
    sources = [(int(r), int(c)) for r, c in sources]
    start = getattr(args, "start_cost", None)
    max_cost = getattr(args, "max_cost", None)
    return {"sources": sources,
            "start_costs": None if start is None else np.broadcast_to(
                np.asarray(start, np.float64), (len(sources),)).copy(),
            "cost": getattr(args, "cost", "absdiff"),
            "connectivity": int(getattr(args, "connectivity", 8)),
            "cellsize": (abs(gt[1]), abs(gt[5])),
            "max_cost": None if max_cost is None else float(max_cost),
            "delta": attrs(reuse)["cost_reuse"].get("near_far_delta") if reuse else None,
            "on_device": outputs_on_device()}


def _solve_early(z, be, call):
    """The solve, in this thread, while the main thread imports and checks the command
    (:func:`take_early_solve`)."""
    t0 = time.perf_counter()
    got = _early["got_distance"]

    def on_distance(distance):
        _early["distance"] = distance
        got.set()

    try:
        from terrain.grid.sssp import grid_sssp
        t1 = time.perf_counter()
        for job in list(_jobs):  # the kernels loaded and the rings pinned meanwhile
            job.join()
        _seconds["solve waited for the start-up thread (thread)"] = time.perf_counter() - t1
        _early["result"] = grid_sssp(
            z, call["sources"], call["start_costs"], cost=call["cost"], friction=None,
            connectivity=call["connectivity"], cellsize=call["cellsize"],
            max_cost=call["max_cost"], backend=be, delta=call["delta"], hops=False,
            on_distance=on_distance, on_device=call["on_device"])
    except BaseException as e:  # noqa: BLE001 - handed to the command (take_early_solve)
        _early["error"] = e
    finally:
        got.set()
        _seconds["solve (thread)"] = time.perf_counter() - t0
    if "free" in _options():  # the device's pools freed now, not at the process's exit
        t1 = time.perf_counter()
        try:
            be.xp.get_default_memory_pool().free_all_blocks()
            be.xp.get_default_pinned_memory_pool().free_all_blocks()
        except Exception:  # noqa: BLE001 - the exit frees them anyway
            pass
        _seconds["pools freed (thread)"] = time.perf_counter() - t1


def _start_early_read(args, options, be):
    """Starts the DEM read (and, where it can, the solve) of the command ``args``; returns
    the thread, or None where there is nothing to read."""
    target = _early_target(args)
    if target is None or "noread" in options:
        return None
    readers = int(options["readers"]) if options.get("readers") else None
    solve = _may_solve_early(args, options)
    job = threading.Thread(target=_read_early, args=(target, readers, be, args, solve),
                           daemon=True, name="terrain-cost-read")
    _early.clear()
    _early.update(thread=job, read=threading.Event())
    job.start()
    return job


def _may_solve_early(args, options):
    """Whether the start-up thread solves too: no friction raster, no sources file, not
    switched off (``nosolve``)."""
    return ("nosolve" not in options and getattr(args, "friction", None) is None
            and getattr(args, "sources", None) is None)


class EarlySolve:
    """The start-up thread's solve, taken by the command (:func:`take_early_solve`)."""

    def __init__(self, job):
        self._job = job

    def distance(self):
        """The distances as soon as the solve has them (None when it failed before)."""
        t0 = time.perf_counter()
        _early["got_distance"].wait()
        _seconds["waited for the start-up solve's distances"] = time.perf_counter() - t0
        return _early["distance"]

    def result(self):
        """The solve's result (what ``grid_sssp`` returned); raises what it raised."""
        self._job.join()
        if _early["error"] is not None:
            raise _early["error"]
        return _early["result"]


def take_early_read(store_path, layer="elevation"):
    """The layer ``layer`` of the store ``store_path`` as read at start-up (float32), or
    None when none was read or it is not the same bytes (module docstring); waits for the
    read. The array is handed out once."""
    if _early.get("thread") is None:
        return None
    t0 = time.perf_counter()
    _early["read"].wait()
    waited = time.perf_counter() - t0
    array, signature = _early.pop("array", None), _early.pop("signature", None)
    if array is None:
        return None
    try:
        same = layer_signature(os.path.join(os.fspath(store_path), layer)) == signature
    except OSError:
        same = False
    if not same:  # a solve of that read is of no use: its device memory back first
        _early["thread"].join()
        return None
    _seconds["waited for the DEM read"] = waited  # (only when the read is taken)
    _early["taken"] = array
    return array


def take_early_solve(z, sources, start_costs, cost, connectivity, cellsize, max_cost, delta,
                     on_device=False):
    """The start-up thread's solve of ``z`` (the array :func:`take_early_read` gave) when it
    was called with these arguments of ``grid_sssp`` (no friction, ``hops=False``), else
    None (module docstring); an :class:`EarlySolve` to wait on. Handed out once."""
    call = _early.get("call")
    if call is None:
        return None
    if _early.get("taken") is not z:
        _early["thread"].join()  # its device memory back to the pool before the solve
        return None
    want = {"sources": [(int(r), int(c)) for r, c in sources],
            "start_costs": None if start_costs is None else np.asarray(start_costs, np.float64),
            "cost": cost, "connectivity": int(connectivity),
            "cellsize": tuple(float(v) for v in cellsize),
            "max_cost": None if max_cost is None else float(max_cost),
            "delta": None if delta is None else float(delta), "on_device": bool(on_device)}
    got = dict(call, cellsize=tuple(float(v) for v in call["cellsize"]),
               delta=None if call["delta"] is None else float(call["delta"]))
    same = all(
        (want[k] is None and got[k] is None) or (
            want[k] is not None and got[k] is not None and (
                np.array_equal(want[k], got[k]) if k == "start_costs" else want[k] == got[k]))
        for k in want)
    _early.pop("call")
    if not same:
        _early["thread"].join()  # its device memory back to the pool before the solve
        return None
    return EarlySolve(_early["thread"])


def cost_distance_command(args):
    """``terrain cost-distance``: :func:`pipelines.cost_distance.cost_distance_command`,
    the device made ready meanwhile (module docstring)."""
    age = _process_age()
    _seconds.clear()
    if age is not None:
        _seconds["process start to the command"] = age
    job = reader = None
    options = _options()
    sampler = _RssSampler() if "rss" in options else None
    try:
        if _wanted(args):
            from terrain.backend import get_backend
            t0 = time.perf_counter()
            be = get_backend(getattr(args, "backend", None))  # CuPy imported here, not in
            _seconds["backend"] = time.perf_counter() - t0    # both threads at once
            if be.is_gpu:
                _kernels_loaded.clear()
                if "nowarm" not in options:
                    kernels = options.get("warm", "full") != "pin"
                    job = threading.Thread(target=_warm, args=(be, kernels), daemon=True,
                                           name="terrain-cost-start")
                    _jobs.append(job)
                    job.start()
                reader = _start_early_read(args, options, be)
                if job is not None and options.get("imports") == "late":
                    t0 = time.perf_counter()  # the device thread first, not beside imports
                    _kernels_loaded.wait()
                    _seconds["waited for the kernels before the imports"] = (
                        time.perf_counter() - t0)
    except Exception:  # noqa: BLE001 - a bad backend name: the command says so
        job = None
    try:
        t0 = time.perf_counter()
        from .cost_distance import cost_distance_command as command
        _seconds["imports"] = time.perf_counter() - t0
        return command(args)
    finally:
        if "age" in options:  # measurements: the process's age when the command returns
            import sys
            print(f"terrain: process age at the command's return {_process_age():.3f} s",
                  file=sys.stderr)
        if sampler is not None:
            import sys
            print(sampler.report(), file=sys.stderr)
        if reader is not None:  # the run may have ended before its solve took the read
            reader.join()
            _early.clear()
        if job is not None:
            job.join()
            _jobs.remove(job)
