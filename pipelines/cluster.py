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

The LocalCluster's dashboard listens on localhost only (``127.0.0.1:8787``, another port
when that one is taken): on a shared machine the neighbours cannot watch the job.
``--dashboard-address`` (``$TERRAIN_DASHBOARD``) opens it elsewhere on purpose. An address
that is not one, or a scheduler that does not answer within ``CONNECT_TIMEOUT`` seconds,
is an :class:`~terrain.errors.InputError` before any work. A nested :func:`open_scheduler`
without a spec reuses the active client (a batch runs every file on one cluster).

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
import re
import sys
import warnings

import dask

from terrain.errors import InputError

__all__ = ["open_scheduler", "compute", "LOCAL_SCHEDULERS", "LOCAL_CLUSTER",
           "DASHBOARD_MIN_CELLS", "IN_PROCESS_CONFIG"]

LOCAL_SCHEDULERS = ("threads", "synchronous", "sync", "single-threaded")
LOCAL_CLUSTER = "local"
DEFAULT_DASHBOARD = "127.0.0.1:8787"
CONNECT_TIMEOUT = 5  # seconds to reach an existing scheduler

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
    if spec is None and _active_client is not None:
        yield _active_client
        return
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
        client = _connect(Client, spec)
        cluster = None
    else:
        # port 8787 taken (another dashboard): distributed picks a free one, and the line
        # printed below gives the address used (a filter for the whole process: the warning
        # may come from the cluster's thread after an interrupt left this block)
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        dashboard = os.environ.get("TERRAIN_DASHBOARD", DEFAULT_DASHBOARD)
        with dask.config.set(IN_PROCESS_CONFIG):
            cluster = LocalCluster(n_workers=n_workers, processes=False,
                                   threads_per_worker=threads_per_worker or os.cpu_count() or 1,
                                   dashboard_address=dashboard,
                                   # the worker's own HTTP server too (else on every interface)
                                   worker_dashboard_address=_local_twin(dashboard),
                                   silence_logs=logging.CRITICAL)
        client = Client(cluster)
    if not quiet:
        link = (_dashboard_link(cluster, dashboard) if cluster is not None
                else f"{spec} ({client.dashboard_link})")
        print(f"terrain: Dask dashboard at {link}", file=sys.stderr, flush=True)
    _active_client = client
    try:
        yield client
    finally:
        _active_client = previous
        client.close()
        if cluster is not None:
            cluster.close()


def _local_twin(address):
    """``127.0.0.1:0`` when ``address`` is on localhost, else ``HOST:0``."""
    return f"{address.rsplit(':', 1)[0] if ':' in address else address}:0"


def _dashboard_link(cluster, address):
    """The dashboard's URL with the host it really listens on (distributed prints the
    machine's network address even when the dashboard listens on localhost only)."""
    host = address.rsplit(":", 1)[0].strip("[]") if ":" in address else address
    port = cluster.scheduler_info.get("services", {}).get("dashboard")
    if host in ("", "0.0.0.0", "::") or port is None:
        return cluster.dashboard_link
    return f"http://{host}:{port}/status"


def _connect(client_class, spec):
    """A client of the scheduler at ``spec``, or one line saying why not (within seconds)."""
    if not re.fullmatch(r"[a-z]+://\S+|[\w.\-\[\]:]+:\d+", spec):
        raise InputError(f"scheduler {spec!r}: not an address (tcp://HOST:PORT) nor one of "
                         "local, threads, synchronous")
    hostport = re.fullmatch(r"(?:tcp://)?([\w.\-]+):(\d+)", spec)
    if hostport:  # refused or unroutable: say so now, not after distributed's retries
        import socket
        try:
            socket.create_connection((hostport[1], int(hostport[2])), CONNECT_TIMEOUT).close()
        except OSError as e:
            reason = e.strerror or type(e).__name__
            raise InputError(f"cannot reach the Dask scheduler at {spec}: {reason}") from None
    # distributed logs every failed connection attempt: the one line below says it all
    with _quiet_logs():
        try:
            return client_class(spec, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as e:
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise InputError(f"cannot reach the Dask scheduler at {spec}: {reason}") from None


@contextlib.contextmanager
def _quiet_logs(*names):
    loggers = [logging.getLogger(n) for n in names or ("distributed", "asyncio", "tornado")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


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
    try:
        if progress:
            _StderrProgressBar(futures, scheduler=client.scheduler.address, complete=True)
            sys.stderr.write("\n")
        return tuple(client.gather(futures))
    except BaseException:
        _cancel(client, futures)
        raise


def _cancel(client, futures):
    """After an error or a signal: cancel what is queued, wait (bounded) for what is running.

    Tasks of the in-process LocalCluster are threads that cannot be killed; waiting for them
    lets the caller remove the partial output without a task writing into it afterwards.
    Their late failures are of no interest (no "Task exception was never retrieved").
    """
    import time
    logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
    logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)
    with contextlib.suppress(Exception):
        client.cancel(futures, force=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(client.run(_executing).values()):
            time.sleep(0.05)


def _executing(dask_worker):
    """Tasks still running on a worker (cancelled ones included, until their thread ends)."""
    return len(dask_worker.state.executing)


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
