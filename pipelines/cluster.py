"""Where pipelines run: a LocalCluster with its dashboard for big jobs, any scheduler on request.

``--scheduler`` takes
  * nothing: for a job big enough to watch (a grid of more than :data:`DASHBOARD_MIN_CELLS`
    cells, or a job whose size the caller does not state) start a ``distributed.LocalCluster``
    in this process (threads, so Numba/CuPy kernels share one address space and peak RSS is
    this process's) and print its dashboard address; smaller jobs run on Dask's ``threads``
    scheduler, because the cluster's start-up (~1 s, mostly importing the dashboard) would
    be most of their run time;
  * ``local``: the LocalCluster and its dashboard whatever the job's size;
  * ``threads`` or ``synchronous``: Dask's local schedulers, no dashboard;
  * ``tcp://host:port`` (or any address ``distributed.Client`` takes): attach to that cluster.

The in-process LocalCluster runs its scheduler, its worker and the dashboard on one event
loop thread of this process, so every millisecond that loop holds the GIL is taken from the
task threads. Its defaults are made for a worker process of its own; here three of them are
costly (docs/architecture.md, "The default scheduler"): the worker's statistical profiler
walks the stack of every task thread every 10 ms, the event-loop health tick runs every
20 ms and the system monitor every 500 ms. :data:`IN_PROCESS_CONFIG` samples 10× less often
(the dashboard keeps its profile page, coarser) and makes the loop's own work cost a few
per cent of a core.

:func:`compute` runs Dask collections on the active scheduler with a progress bar on
stderr (stdout stays clean for ``--json``).
"""

import contextlib
import logging
import os
import sys
import warnings

import dask

__all__ = ["open_scheduler", "compute", "LOCAL_SCHEDULERS", "LOCAL_CLUSTER",
           "DASHBOARD_MIN_CELLS", "IN_PROCESS_CONFIG"]

LOCAL_SCHEDULERS = ("threads", "synchronous", "sync", "single-threaded")
LOCAL_CLUSTER = "local"

#: Grids with more cells than this get the LocalCluster and its dashboard by default
#: (8192² ingests in ~2 s and its MST takes ~10 s on 2 cores: not worth a dashboard's start-up).
DASHBOARD_MIN_CELLS = 1 << 26

#: dask config for the in-process LocalCluster (module docstring): the profiler samples every
#: 100 ms instead of 10, the loop tick every 500 ms instead of 20, the system monitor every 2 s.
IN_PROCESS_CONFIG = {
    "distributed.worker.profile.interval": "100ms",
    "distributed.worker.profile.cycle": "2s",
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
}

_active_client = None


@contextlib.contextmanager
def open_scheduler(spec=None, *, n_workers=1, threads_per_worker=None, quiet=False, cells=None):
    """Context manager that makes ``spec`` the scheduler for :func:`compute`.

    ``cells``: the size of the job's grid, when known; with ``spec=None`` a job of at most
    :data:`DASHBOARD_MIN_CELLS` cells runs on the ``threads`` scheduler (module docstring).
    Yields the ``distributed.Client`` or None for a local scheduler.
    """
    global _active_client
    if spec is None and cells is not None and cells <= DASHBOARD_MIN_CELLS:
        spec = "threads"
    if spec == LOCAL_CLUSTER:
        spec = None
    if spec in LOCAL_SCHEDULERS:
        # the functions, not their names: dask resolves a name by importing distributed
        # first (to look for a Client), ~0.5 s that a small job should not pay
        from dask import local, threaded
        with dask.config.set(scheduler=threaded.get if spec == "threads" else local.get_sync):
            yield None
        return
    from distributed import Client, LocalCluster
    previous = _active_client
    if spec:
        client = Client(spec)
        cluster = None
    else:
        with warnings.catch_warnings(), dask.config.set(IN_PROCESS_CONFIG):
            # port 8787 taken (another dashboard): distributed picks a free one, and the
            # line printed below gives the address actually used
            warnings.filterwarnings("ignore", message="Port .* is already in use")
            cluster = LocalCluster(n_workers=n_workers, processes=False,
                                   threads_per_worker=threads_per_worker or os.cpu_count() or 1,
                                   dashboard_address=os.environ.get("TERRAIN_DASHBOARD", ":8787"),
                                   silence_logs=logging.CRITICAL)
        client = Client(cluster)
    if not quiet:
        link = client.dashboard_link if cluster is not None else f"{spec} ({client.dashboard_link})"
        print(f"terrain: Dask dashboard at {link}", file=sys.stderr, flush=True)
    _active_client = client
    try:
        yield client
    finally:
        _active_client = previous
        client.close()
        if cluster is not None:
            cluster.close()


def compute(*collections, label="terrain", progress=None):
    """Compute Dask collections on the active scheduler and return their results (a tuple).

    A progress bar goes to stderr when it is a terminal (or ``progress=True``).
    """
    if progress is None:
        progress = sys.stderr.isatty()
    client = _active_client
    if client is None:
        if progress:
            from dask.diagnostics import ProgressBar
            with ProgressBar(out=sys.stderr):
                return dask.compute(*collections)
        return dask.compute(*collections)
    futures = client.compute(list(collections))
    if progress:
        _StderrProgressBar(futures, scheduler=client.scheduler.address, complete=True)
        sys.stderr.write("\n")
    return tuple(client.gather(futures))


def _stderr_progress_bar_class():
    from distributed.diagnostics.progressbar import TextProgressBar

    class StderrProgressBar(TextProgressBar):
        """distributed's text bar (it counts tasks), drawn on stderr instead of stdout."""

        def _draw_bar(self, remaining, all, **kwargs):
            frac = (1 - remaining / all) if all else 1.0
            sys.stderr.write(f"\r[{'#' * int(self.width * frac):<{self.width}}] "
                             f"{int(100 * frac):3d}% | {self.elapsed:6.1f}s")
            sys.stderr.flush()

    return StderrProgressBar


def _StderrProgressBar(*args, **kwargs):
    return _stderr_progress_bar_class()(*args, **kwargs)
