"""Where pipelines run: a LocalCluster with its dashboard by default, any existing scheduler on request.

``--scheduler`` takes
  * nothing: start a ``distributed.LocalCluster`` in this process (threads, so Numba/CuPy
    kernels share one address space and peak RSS is this process's) and print its
    dashboard address;
  * ``threads`` or ``synchronous``: Dask's local schedulers, no dashboard;
  * ``tcp://host:port`` (or any address ``distributed.Client`` takes): attach to that cluster.

:func:`compute` runs Dask collections on the active scheduler with a progress bar on
stderr (stdout stays clean for ``--json``).
"""

import contextlib
import logging
import os
import sys
import warnings

import dask

__all__ = ["open_scheduler", "compute", "LOCAL_SCHEDULERS"]

LOCAL_SCHEDULERS = ("threads", "synchronous", "sync", "single-threaded")

_active_client = None


@contextlib.contextmanager
def open_scheduler(spec=None, *, n_workers=1, threads_per_worker=None, quiet=False):
    """Context manager that makes ``spec`` the scheduler for :func:`compute`.

    Yields the ``distributed.Client`` or None for a local scheduler.
    """
    global _active_client
    if spec in LOCAL_SCHEDULERS:
        with dask.config.set(scheduler="synchronous" if spec != "threads" else "threads"):
            yield None
        return
    from distributed import Client, LocalCluster
    previous = _active_client
    if spec:
        client = Client(spec)
        cluster = None
    else:
        with warnings.catch_warnings():
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
