"""Where pipelines run: a LocalCluster with its dashboard for big jobs, any scheduler on request.

``--scheduler`` takes nothing (the in-process LocalCluster and its dashboard for a grid of
more than :data:`DASHBOARD_MIN_CELLS` cells or of unknown size, else Dask's ``threads``),
``local`` (the LocalCluster), ``threads``/``synchronous``, or an address to attach to. A
scheduler given by address that goes away mid-run is one line (:class:`SchedulerLost`) and
the partial output stays for ``--resume``. Design notes: docs/scale.md, "Clusters".
"""

import contextlib
import dataclasses
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import warnings

from terrain import native
from terrain.errors import InputError

__all__ = ["open_scheduler", "one_cluster", "compute", "call", "run_as_completed",
           "LOCAL_SCHEDULERS",
           "LOCAL_CLUSTER",
           "SchedulerLost", "WorkersLost", "runs_in_process",
           "dashboard_address", "check_inputs_on_workers", "remote_input", "is_address",
           "shares_nothing", "SHARE_NOTHING_COMMANDS",
           "DASHBOARD_MIN_CELLS", "IN_PROCESS_CONFIG", "STOP_WAIT", "IN_PROCESS_STOP_WAIT",
           "cluster_active", "worker_client",
           "here_and_on_every_worker"]

LOCAL_SCHEDULERS = ("threads", "synchronous", "sync", "single-threaded")
LOCAL_CLUSTER = "local"
DEFAULT_DASHBOARD = "127.0.0.1:8787"
LOCALHOST = "127.0.0.1"
CONNECT_TIMEOUT = 5  # seconds to reach an existing scheduler

#: seconds a failed or stopped run waits for its tasks still running on a cluster given by
#: address before it goes on (removing its partial output, exiting 143 on SIGTERM): their
#: threads in the workers' processes cannot be stopped from here, and a batch system's
#: SIGTERM is followed by a SIGKILL within seconds (Slurm's KillWait: 30 s by default)
STOP_WAIT = 5
#: seconds the same waits for the in-process cluster's tasks, which are told to stop
#: (:class:`terrain.native.TaskStop`) and end soon after; they write into this process's
#: partial output, which goes only once they have ended
IN_PROCESS_STOP_WAIT = 60

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



@dataclasses.dataclass(frozen=True)
class _Active:
    """The cluster :func:`open_scheduler` made active."""
    client: object  # its distributed.Client
    thread: int  # the thread that made it active
    external: bool  # given by address (its workers see paths as absolute ones)
    #: the in-process cluster's task threads' stop flag (native.TaskStop), else None
    task_stop: object


_active = None
#: ``local``: the local scheduler this thread's run asked for (``threads``,
#: ``synchronous``), which the cluster another thread made active (a service's other run)
#: does not replace
_here = threading.local()


def _active_cluster():
    """The active cluster (:class:`_Active`), or None: none is active, or another thread
    made it active and this thread asked for a local scheduler (:func:`open_scheduler`)."""
    if _active is None or (getattr(_here, "local", None)
                           and _active.thread != threading.get_ident()):
        return None
    return _active


def _client():
    """The active cluster's client, or None (:func:`_active_cluster`)."""
    active = _active_cluster()
    return active.client if active else None


def cluster_active():
    """Whether :func:`open_scheduler` made a cluster active in this process (a batch's)."""
    return _client() is not None


class SchedulerLost(InputError):
    """The scheduler of a cluster given by address went away during the run.

    ``keep_partial``: :func:`terrain.io.outputs.atomic_output` keeps the partial output (and
    its checkpoints) for a resumed run instead of removing it."""

    keep_partial = True


class WorkersLost(SchedulerLost):
    """Every worker that ran one task died running it (distributed's ``KilledWorker``: past
    a memory limit, its nanny restarts it): the partial output is kept, as for
    :class:`SchedulerLost`, for a resumed run on workers that can hold the task."""


def runs_in_process(scheduler=None):
    """True unless the in-core run is on a cluster: ``scheduler`` ``local`` or an address, or
    a cluster active in this process (a batch's).

    >>> runs_in_process(), runs_in_process("threads"), runs_in_process("tcp://h:8786")
    (True, True, False)
    """
    return not cluster_active() and scheduler in (None, "threads", "synchronous", "sync",
                                                  "single-threaded")


def dashboard_address(text=None):
    """``(host, port)`` where the dashboard listens, from ``--dashboard-address`` /
    ``$TERRAIN_DASHBOARD`` (default :data:`DEFAULT_DASHBOARD`). A port alone (``8793``,
    ``:8792``) stays on 127.0.0.1: an address open to the network must be typed
    (``0.0.0.0:8787``, ``[::]:8795``).

    >>> dashboard_address("8793"), dashboard_address(":8792"), dashboard_address("[::]:8795")
    (('127.0.0.1', 8793), ('127.0.0.1', 8792), ('::', 8795))
    >>> dashboard_address("0.0.0.0:8787"), dashboard_address(None)
    (('0.0.0.0', 8787), ('127.0.0.1', 8787))
    >>> dashboard_address("host:port")
    Traceback (most recent call last):
    terrain.errors.InputError: dashboard address 'host:port': not HOST:PORT, [IPv6]:PORT, :PORT or PORT (a port from 0 to 65535)
    """
    if text is None or not str(text).strip():
        text = os.environ.get("TERRAIN_DASHBOARD") or DEFAULT_DASHBOARD
    text = str(text).strip()
    if text.startswith("["):
        m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d{1,5})", text)
    elif text.isdigit():
        m = re.fullmatch(r"()(\d{1,5})", text)
    else:
        m = re.fullmatch(r"([\w.\-]*):(\d{1,5})", text)
    if m is None or int(m[2]) > 65535:
        raise InputError(f"dashboard address {text!r}: not HOST:PORT, [IPv6]:PORT, :PORT or "
                         "PORT (a port from 0 to 65535)")
    return m[1] or LOCALHOST, int(m[2])


def _url_host(host):
    return f"[{host}]" if ":" in host else host


@contextlib.contextmanager
def open_scheduler(spec=None, *, quiet=False, cells=None, inputs=()):
    """Context manager that makes ``spec`` the scheduler for :func:`compute`.

    ``cells``: the job's grid size (with ``spec=None`` at most :data:`DASHBOARD_MIN_CELLS`
    cells run on ``threads``); ``inputs``: files a cluster given by address must see as this
    process does. Yields the ``distributed.Client``, or None for a local scheduler."""
    global _active
    from terrain.startup import bound_malloc_arenas, raise_held, signals_held
    # a stop inside dask's or distributed's import left it half-imported for the rest of
    # the process (a notebook's next run: "module 'dask' has no attribute 'utils'"): the
    # stop waits for the import
    with signals_held() as came:
        import dask  # here, not at the top: a run in this process never imports it
    raise_held(came)
    bound_malloc_arenas()  # before the worker threads start (terrain.startup says why)
    if spec is None:
        if _client() is not None:
            yield _client()
            return
        spec = getattr(_here, "local", None)  # a step of this thread's local run
    if spec is None and cells is not None and cells <= DASHBOARD_MIN_CELLS:
        spec = "threads"
    if spec == LOCAL_CLUSTER:
        spec = None
    if spec in LOCAL_SCHEDULERS:
        # the functions, not their names: dask resolves a name by importing distributed
        # first (to look for a Client), ~0.5 s that a small job should not pay
        from dask import local, threaded
        was, _here.local = getattr(_here, "local", None), spec
        try:
            with dask.config.set(scheduler=threaded.get if spec == "threads"
                                 else local.get_sync):
                yield None
        finally:
            _here.local = was
        return
    from concurrent.futures import ThreadPoolExecutor

    with signals_held() as came:  # as dask's above
        from distributed import Client, LocalCluster
    raise_held(came)
    previous = _active
    task_stop = None
    if spec:
        client = _connect(Client, spec)
        cluster = None
        # an adaptive cluster may start with no worker: its tasks wait, but say so
        if not client.scheduler_info().get("workers"):
            print(f"terrain: the Dask scheduler at {spec} has no workers yet; the tasks wait "
                  "for one to join", file=sys.stderr, flush=True)
        try:
            check_inputs_on_workers(inputs, client, spec)
        except BaseException:
            client.close()
            raise
    else:
        # port 8787 taken (another dashboard): distributed picks a free one, and the line
        # printed below gives the address used (a filter for the whole process: the warning
        # may come from the cluster's thread after an interrupt left this block)
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        dashboard = dashboard_address()
        nthreads = os.cpu_count() or 1
        # the worker's task threads poll this cluster's stop flag (a caller's threads do not)
        task_stop = native.TaskStop()
        # a stop inside LocalCluster's start left its scheduler listening (on the dashboard's
        # port) for the rest of the process: the stop waits for the start, then closes it
        with signals_held() as came, _cluster_start_refused():
            scratch = _cluster_scratch(dask)
            try:
                with dask.config.set({**IN_PROCESS_CONFIG, "temporary-directory": scratch}):
                    cluster = LocalCluster(n_workers=1, processes=False,
                                           threads_per_worker=nthreads,
                                           executor=ThreadPoolExecutor(
                                               nthreads, thread_name_prefix="terrain-task",
                                               initializer=task_stop.mark),
                                           # (host, port) pairs: distributed splits text at ':'
                                           dashboard_address=[dashboard],
                                           # the worker's HTTP server too (else every interface)
                                           worker_dashboard_address=[(dashboard[0], 0)],
                                           silence_logs=logging.CRITICAL)
                try:
                    client = Client(cluster)
                except BaseException:
                    cluster.close()
                    raise
            except BaseException:
                shutil.rmtree(scratch, ignore_errors=True)
                raise
        if came:
            client.close()
            cluster.close()
            shutil.rmtree(scratch, ignore_errors=True)
            raise_held(came)
    if not quiet:
        link = (_dashboard_link(client, dashboard[0]) if cluster is not None
                else f"{spec} ({_dashboard_link(client, None)})")
        print(f"terrain: Dask dashboard at {link}", file=sys.stderr, flush=True)
    _active = _Active(client, threading.get_ident(), cluster is None, task_stop)
    levels = {name: logging.getLogger(name).level for name in _QUIETED_LOGGERS}
    try:
        yield client
    finally:
        _active = previous
        _drop_leftover_errors(client, cluster)
        client.close()
        if cluster is not None:
            cluster.close()
            shutil.rmtree(scratch, ignore_errors=True)
        # what a failed or stopped run's :func:`_cancel` quieted speaks again: the process
        # (a notebook's, a service's) goes on
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


@contextlib.contextmanager
def one_cluster():
    """For many jobs run one after the other on the default scheduler (a batch's files):
    yields ``scheduler_for(cells)``, a context manager making active the scheduler a job of
    ``cells`` cells would have alone (:func:`open_scheduler`'s rule: ``threads`` up to
    :data:`DASHBOARD_MIN_CELLS`, else the in-process LocalCluster). The cluster is started by
    the first job that needs it and kept for the rest, its start paid once; a job on threads
    meanwhile runs beside it, not on it. A cluster already active in this process (a
    caller's) serves every job."""
    if _client() is not None:
        @contextlib.contextmanager
        def callers(cells):
            yield _client()
        yield callers
        return
    with contextlib.ExitStack() as kept:
        started = []

        @contextlib.contextmanager
        def scheduler_for(cells):
            global _active
            if cells is not None and cells <= DASHBOARD_MIN_CELLS:
                held, _active = _active, None  # the kept cluster steps aside for the job
                try:
                    with open_scheduler("threads"):
                        yield None
                finally:
                    _active = held
                return
            if not started:
                started.append(kept.enter_context(open_scheduler(LOCAL_CLUSTER)))
            yield started[0]
        yield scheduler_for


def _cluster_scratch(dask):
    """A folder of the in-process cluster's own for its scheduler's and worker's scratch,
    in Dask's temporary directory: removed with the cluster. Dask's own
    ``dask-scratch-space`` keeps its lock files after the run, and where no temporary
    folder is writable (a read-only /tmp, no TMPDIR) Python's last resort puts it in the
    working directory."""
    where = dask.config.get("temporary-directory", None)
    try:
        return tempfile.mkdtemp(prefix="terrain-dask-", dir=where)
    except OSError as e:
        raise InputError("the in-process Dask cluster did not start: cannot make its scratch "
                         f"folder ({e.strerror})"
                         + (f" (Dask's temporary directory: {where})" if where else "")) from None


@contextlib.contextmanager
def _cluster_start_refused():
    """The in-process cluster's start failing on this machine (its scratch folder, Dask's
    ``temporary-directory`` or ``DASK_TEMPORARY_DIRECTORY``, missing or not writable): one
    :class:`InputError` naming what failed, not distributed's traceback."""
    try:
        yield
    except RuntimeError as e:
        if not str(e).startswith("Cluster failed to start"):
            raise
        import dask
        scratch = dask.config.get("temporary-directory", None)
        where = f" (Dask's temporary directory: {scratch})" if scratch else ""
        raise InputError(f"the in-process Dask cluster did not start: "
                         f"{_first_line(e.__cause__ or e)}{where}") from None


def _drop_leftover_errors(*owners):
    """Make the event loops of a client and cluster about to close drop the errors nobody
    will read: a wait inside distributed's close that timed out leaves a future holding its
    TimeoutError, and asyncio logs it when the future is collected, perhaps at the process's
    exit, after the run's one error line. These loops are distributed's own (one per
    client or cluster), serving nothing once closed."""
    for owner in owners:
        loop = getattr(getattr(owner, "loop", None), "asyncio_loop", None)
        if loop is not None:
            loop.set_exception_handler(lambda loop, context: None)


def _dashboard_link(client, host=None):
    """The dashboard's URL with the host it really listens on (None: the scheduler's own).
    distributed's link drops an IPv6 host's brackets (``http://[:45805/status``)."""
    from distributed.comm import get_address_host
    port = client.scheduler_info().get("services", {}).get("dashboard")
    if port is None or host in ("", "0.0.0.0", "::"):
        return client.dashboard_link
    return f"http://{_url_host(host or get_address_host(client.scheduler.address))}:{port}/status"


def remote_input(path):
    """``path`` as a cluster given by address should carry it: absolute; local keeps it (and
    a store at a URL, :class:`terrain.io.remote.Location`, is as it is)."""
    from terrain.io.outputs import real_path
    from terrain.io.remote import is_remote
    if is_remote(path):
        return path
    active = _active_cluster()
    return str(real_path(path)) if active and active.external else path


#: the commands whose tasks open their stores at URLs themselves (docs/scale.md)
SHARE_NOTHING_COMMANDS = ("ingest", "mst", "cost-distance", "fill", "flow")


def is_address(spec):
    """True when ``--scheduler`` names a cluster by address.

    >>> is_address("tcp://10.0.0.5:8786"), is_address("local"), is_address(None)
    (True, False, False)
    """
    return bool(spec) and spec != LOCAL_CLUSTER and spec not in LOCAL_SCHEDULERS


def shares_nothing(args):
    """Whether the command ``args`` opens its stores at their URLs in its tasks, its output
    written directly under its prefix (:func:`terrain.io.remote.url_output`):
    :data:`SHARE_NOTHING_COMMANDS` on a cluster given by address, whose workers share nothing
    with this process but the object store, or with ``--resume`` on any scheduler (the
    checkpoints lie under the output's prefix); not with ``--geotiff``, ``--geotiff-dir``
    (GeoTIFFs are written from a local partial output) or ``--dry-run``: those stage
    (:func:`pipelines.staging.stage`). On the local schedulers staging is kept because it
    wins there: 4096² ``ingest`` 1.8 s staged against 3.2 s direct, ``mst`` 5.0 s against
    5.9-7.2 s (moto server, docs/scale.md).

    >>> from argparse import Namespace
    >>> shares_nothing(Namespace(command="mst", scheduler="tcp://h:8786"))
    True
    >>> shares_nothing(Namespace(command="mst", scheduler=None, resume=True))
    True
    >>> shares_nothing(Namespace(command="mst", scheduler="threads", resume=False))
    False
    """
    return (getattr(args, "command", None) in SHARE_NOTHING_COMMANDS
            and (is_address(getattr(args, "scheduler", None)) or getattr(args, "resume", False))
            and not any(getattr(args, name, None)
                        for name in ("geotiff", "geotiff_dir", "dry_run")))


def check_inputs_on_workers(inputs, client=None, address=None):
    """:class:`InputError` unless every worker of a cluster given by address sees each of
    ``inputs`` at its absolute path with this process's size and modification time (else it
    would compute something else and exit 0)."""
    from terrain.io.outputs import input_identity
    active = _active_cluster()
    client = client or (active.client if active and active.external else None)
    from terrain.io.remote import is_remote
    paths = [p for p in inputs or () if p is not None and not is_remote(p)]
    if client is None or not paths:
        return
    mine = [input_identity(p) for p in paths]
    seen = client.run(_identities, [m[0] for m in mine])
    for worker, theirs in sorted(seen.items()):
        for given, here, there in zip(paths, mine, theirs):
            if tuple(there) == tuple(here):
                continue
            where = f"the Dask worker {worker} of {address or client.scheduler.address}"
            if there[1] is None:
                raise InputError(f"{given}: {where} cannot read {here[0]}: give a path its "
                                 "workers share")
            raise InputError(f"{given}: {where} sees another file at {here[0]} ({there[1]} "
                             f"bytes, modified {there[2]}; here {here[1]} bytes, modified "
                             f"{here[2]})")


def _identities(paths):
    """On a worker: :func:`terrain.io.outputs.input_identity` of each absolute path."""
    from terrain.io.outputs import input_identity
    return [list(input_identity(p)) for p in paths]


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
        except (OSError, UnicodeError) as e:  # UnicodeError: a name with an empty label
            reason = getattr(e, "strerror", None) or _first_line(e)
            raise InputError(f"cannot reach the Dask scheduler at {spec}: {reason}") from None
    # distributed logs every failed connection attempt: the one line below says it all
    with _quiet_logs():
        _check_scheduler(spec)
        try:
            return client_class(spec, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as e:
            raise InputError(f"cannot reach the Dask scheduler at {spec}: {_first_line(e)}"
                             ) from None
        except Exception:  # a peer that answers the identity check, then not as a scheduler
            raise InputError(f"no Dask scheduler at {spec}: what answers there did not "
                             "behave as a Dask scheduler") from None


def _check_scheduler(spec):
    """:class:`InputError` unless a Dask scheduler answers at ``spec`` within
    :data:`CONNECT_TIMEOUT` seconds. ``Client(spec, timeout=...)`` bounds only the TCP connect:
    its handshake waits for ever on a peer that accepts and never answers (an HTTP server
    waits for a request line), and it reads another protocol's reply as a frame length (an
    HTTP reply's ``HTTP/1.1``: 3.5e18 bytes, a MemoryError)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import CommClosedError, connect, get_address_host
    from distributed.security import Security

    try:  # before connecting: else its error reads as another protocol's bytes
        get_address_host(spec)
    except ValueError as e:  # "invalid address ...; maybe: ipv6 needs brackets like [::1]"
        raise InputError(f"scheduler {spec!r}: not an address Dask reads "
                         f"({_first_line(e).split('maybe: ')[-1]})") from None

    async def identity():
        comm = await connect(spec, timeout=CONNECT_TIMEOUT,
                             **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    try:
        # on a thread of its own: a caller's running event loop (a notebook's) refuses
        # asyncio.run
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(asyncio.run,
                                 asyncio.wait_for(identity(), CONNECT_TIMEOUT)).result()
    except asyncio.TimeoutError:
        raise InputError(f"no Dask scheduler answered at {spec} within {CONNECT_TIMEOUT} s "
                         "(is it a Dask scheduler's address?)") from None
    except CommClosedError:
        raise InputError(f"no Dask scheduler at {spec}: what answers there closed the "
                         "connection") from None
    except OSError as e:
        raise InputError(f"cannot reach the Dask scheduler at {spec}: {_first_line(e)}") from None
    except Exception:  # another protocol's bytes, read as Dask's
        raise InputError(f"no Dask scheduler at {spec}: what answers there does not speak "
                         "Dask's protocol") from None
    kind = answer.get("type") if isinstance(answer, dict) else None
    if not str(kind).endswith("Scheduler"):
        what = f"a Dask {kind}" if kind else "something else"
        raise InputError(f"no Dask scheduler at {spec}: {what} answers there")


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


def compute(*collections, label="terrain", progress=None, ready_order=None, on_failure=None):
    """Compute Dask collections on the active scheduler and return their results (a tuple).

    A progress bar goes to stderr when it is a terminal (or ``progress=True``), headed by
    ``label`` (the step: ``fill-ingest``, then ``fill``).
    ``ready_order``: a key function; in this process the tasks ready to run are taken in
    its order, smallest first (a cluster's scheduler keeps its own). ``on_failure``: called
    when the run fails or is interrupted, before the running tasks are waited for (what
    releases tasks that wait on this process).
    """
    if progress is None:
        progress = sys.stderr.isatty()
    from ._resume import drop_stale_checkpoints, graph_dict
    keys = set()  # this run's tasks: on a cluster it shares, the ones a stop waits for
    for c in collections:  # a resumed run's checkpoints that a rerun task would make stale
        graph = graph_dict(c)
        drop_stale_checkpoints(graph)
        keys.update(map(str, graph))  # as the workers name them (:func:`_executing`)
    client = _client()
    if client is None:
        return _compute_locally(collections, progress and label, ready_order, on_failure)
    address = client.scheduler.address
    futures = client.compute(list(collections))
    try:
        # a scheduler that goes away makes the client log each reconnection attempt with
        # its traceback: the one line below says it (the in-process cluster logs nothing)
        with _quiet_logs(*_CLIENT_LOGGERS, "tornado", "asyncio"):
            if progress:
                _stderr_progress_bar(label, futures, scheduler=address, complete=True)
                sys.stderr.write("\n")
            _wait_answered(client, futures)
            return tuple(client.gather(futures))
    except BaseException as e:
        if on_failure is not None:
            on_failure()
        _stop(client, futures, e, address, keys)
        raise


def call(fn, *args, label="terrain", **kwargs):
    """``fn(*args, **kwargs)``: in this process, or as one task on the active cluster (an
    in-core step that ``--scheduler`` asked to run there; its paths as the workers see
    them, :func:`remote_input`)."""
    if _client() is None:
        return fn(*args, **kwargs)
    import uuid

    import dask
    # the task named by ``label`` (the dashboard's task stream shows "fill", not the step's
    # function), a key of this run's own
    task = dask.delayed(fn, pure=False)(*args, dask_key_name=f"{label}-{uuid.uuid4().hex}",
                                        **kwargs)
    (result,) = compute(task, label=label)
    return result


def worker_client():
    """The client of the distributed worker this task runs on, or None."""
    try:
        from distributed import get_client, get_worker
        get_worker()
    except (ImportError, ValueError):
        return None
    return get_client()


def here_and_on_every_worker(fn, *args):
    """``fn(*args)`` here and in every distributed worker's process (a task's view: the
    process tables of a run); this process's result first."""
    results = [fn(*args)]
    client = worker_client()
    return results + ([] if client is None else list(client.run(fn, *args).values()))


def share(value):
    """``value`` for tasks that all read it: on a cluster, put in its memory once (a future
    the tasks take as an argument) instead of inside every task it is sent with, which
    Dask warns of past 10 MB (the 10-ft flow's flat heights and frames: 173 MB); in this
    process, ``value`` itself."""
    client = _client()
    if client is None:
        return value
    (future,) = client.scatter([value], hash=False)
    return future


def _stop(client, futures, error, address, keys):
    """After ``error`` while waiting for ``futures``: cancel them (:func:`_cancel`; ``keys``:
    the run's tasks); :class:`SchedulerLost` when the scheduler is gone, else return (the
    caller re-raises)."""
    lost = isinstance(error, SchedulerLost) or _scheduler_lost(client, error)
    _cancel(client, futures, keys, lost)
    from distributed import KilledWorker
    if isinstance(error, KilledWorker):
        raise WorkersLost(_killed_worker_line(error)) from None
    if lost and not isinstance(error, SchedulerLost):
        raise SchedulerLost(f"lost the Dask scheduler at {address} during the run "
                            f"({_first_line(error)}); the partial output is kept for a "
                            "resumed run") from None


def _wait_answered(client, futures, first=False):
    """Wait until ``futures`` (``first``: one of them) are done, cancelled or failed, asking
    the scheduler every ``distributed.comm.timeouts.tcp`` seconds (30) whether it still
    answers: :class:`SchedulerLost` when it does not within as long.

    A scheduler that dies closes its connections and the futures are cancelled at once; one
    that stops answering (a stopped or frozen process, its host thrashing) keeps them open,
    since its kernel still acknowledges every packet, and the client would wait for ever. The
    same limit distributed puts on a peer whose host does not acknowledge."""
    import asyncio

    import dask
    from dask.utils import parse_timedelta
    from distributed import wait
    from distributed.utils import CancelledError

    silence = parse_timedelta(dask.config.get("distributed.comm.timeouts.tcp"), default="s")
    address = client.scheduler.address

    async def identity():
        return await asyncio.wait_for(client.scheduler.identity(), silence)

    while True:
        try:
            wait(futures, timeout=silence,
                 return_when="FIRST_COMPLETED" if first else "ALL_COMPLETED")
            return
        except CancelledError:  # the scheduler gone: the caller's result() says so
            return
        except TimeoutError:
            pass
        try:
            client.sync(identity)
        except TimeoutError:
            raise SchedulerLost(f"the Dask scheduler at {address} stopped answering during "
                                f"the run (no reply within {silence:g} s); the partial output "
                                "is kept for a resumed run") from None


def run_as_completed(fn, prepare, first, after, label="terrain"):
    """Run ``fn(prepare(x))`` for each ``x`` of ``first`` and of the lists ``after(x,
    result)`` returns, on the active scheduler, as many at once as it has threads: ``prepare``
    is called as ``x`` starts and ``after`` as it completes, both in this thread, so work
    found as results arrive starts at once (no rounds); an ``x`` already waiting is not
    queued twice. Errors, signals and a lost scheduler end it as :func:`compute`."""
    import collections
    import uuid
    from concurrent import futures as cf

    client = _client()
    waiting = collections.deque(dict.fromkeys(first))
    queued, running = set(waiting), {}
    if client is None:
        task_stop = native.TaskStop()
        pool = cf.ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="terrain-task",
                                     initializer=task_stop.mark)
        width, submit = os.cpu_count() or 1, (lambda item: pool.submit(fn, item))
    else:
        width = max(1, sum(client.nthreads().values()))
        token = uuid.uuid4().hex  # keys unique per run: a scheduler may still hold old ones
        count = iter(range(1 << 62))
        submit = (lambda item: client.submit(fn, item, pure=False,
                                             key=f"{label}-{token}-{next(count)}"))

    def start():
        new = []
        while waiting and len(running) < width:
            x = waiting.popleft()
            queued.discard(x)
            future = submit(prepare(x))
            running[future] = x
            new.append(future)
        return new

    def finish(future):
        for n in after(running.pop(future), future.result()):
            if n not in queued:
                waiting.append(n)
                queued.add(n)

    try:
        if client is None:
            start()
            while running:
                done, _ = cf.wait(list(running), return_when=cf.FIRST_COMPLETED)
                for future in done:
                    finish(future)
                start()
        else:
            with _quiet_logs(*_CLIENT_LOGGERS, "tornado", "asyncio"):
                start()
                while running:
                    _wait_answered(client, list(running), first=True)
                    for future in [f for f in running if f.done()]:
                        finish(future)
                    start()
    except BaseException as e:
        if client is None:
            with task_stop.stopped():
                pool.shutdown(wait=True, cancel_futures=True)
        else:
            _stop(client, list(running), e, client.scheduler.address,
                  {str(f.key) for f in running})
        raise
    finally:
        if client is None:
            pool.shutdown(wait=False)


def _ready_order(rank):
    """A Dask callback keeping the local scheduler's ready tasks sorted by ``rank``, the
    smallest taken first (the scheduler pops the list's end)."""
    from dask.callbacks import Callback

    class ReadyOrder(Callback):
        def _posttask(self, key, result, dsk, state, worker_id):
            state["ready"].sort(key=rank, reverse=True)

    return ReadyOrder()


def _compute_locally(collections, progress, ready_order=None, on_failure=None):
    """``dask.compute`` on a thread pool of our own: after an error or a signal the running
    tasks end before the caller removes the partial output (dask's pool would go on writing).
    ``progress``: the label of a progress bar on stderr, or False."""
    import dask
    from concurrent.futures import ThreadPoolExecutor

    task_stop = native.TaskStop()
    pool = ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="terrain-task",
                              initializer=task_stop.mark)
    order = contextlib.nullcontext() if ready_order is None else _ready_order(ready_order)
    try:
        with dask.config.set(pool=pool), order:
            if progress:
                from dask.diagnostics import ProgressBar

                class StderrProgressBar(ProgressBar):
                    def _draw_bar(self, frac, elapsed):
                        _draw_bar(progress, frac, elapsed)

                with StderrProgressBar(out=sys.stderr):
                    return dask.compute(*collections)
            return dask.compute(*collections)
    except BaseException:
        if on_failure is not None:
            on_failure()
        with task_stop.stopped():  # the running tasks' kernels return early
            pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=False)


_CLIENT_LOGGERS = ("distributed.client", "distributed.comm", "distributed.core",
                   "distributed.batched")
#: the loggers :func:`_cancel` quiets until the scheduler is closed (:func:`open_scheduler`)
_QUIETED_LOGGERS = ("asyncio", "tornado", "distributed", *_CLIENT_LOGGERS)


def _killed_worker_line(error):
    """One line for distributed's ``KilledWorker``: the task by its step's name, how many
    workers died running it, and the last one's memory limit (the usual cause)."""
    from dask.utils import format_bytes, key_split
    worker = error.last_worker
    limit = getattr(worker, "memory_limit", 0)
    why = (f"; its memory limit is {format_bytes(limit)}, and its nanny restarts a worker "
           "that outgrows it" if limit else "")
    return (f"Dask workers died running the task {key_split(error.task)} "
            f"{error.allowed_failures + 1} times (the last {worker.address}{why}); the "
            "partial output is kept for a resumed run")


def _scheduler_lost(client, error):
    """Whether ``error`` (raised while waiting for results) means the scheduler is gone."""
    from distributed.comm.core import CommClosedError
    if isinstance(error, (KeyboardInterrupt, SystemExit)) or type(error).__name__ in (
            "Terminated",):
        return False
    if isinstance(error, CommClosedError) or "scheduler-connection-lost" in str(error):
        return True
    return getattr(client, "status", "running") not in ("running", "newly-created")


def _first_line(error):
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _cancel(client, futures, keys, lost=False):
    """After an error or a signal: cancel what is queued, wait (:data:`STOP_WAIT`,
    :data:`IN_PROCESS_STOP_WAIT`) for what of the run's tasks (``keys``) is running (threads
    cannot be killed; another run's tasks on a shared cluster are not waited for); with the
    scheduler gone (``lost``) only close the client."""
    import time
    # distributed's config gives some of its loggers levels of their own; the cancelled
    # tasks' late complaints are not news (open_scheduler restores the levels)
    for name in _QUIETED_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    if lost:
        with contextlib.suppress(Exception):
            client.close(timeout=2)
        return
    # the in-process cluster's tasks stop early (one given by address: as their kernels end)
    active = _active_cluster()
    stopping = active.task_stop.stopped() if active and active.task_stop else \
        contextlib.nullcontext()
    with contextlib.suppress(Exception), stopping:
        client.cancel(futures, force=True)
        deadline = time.monotonic() + (STOP_WAIT if active is None or active.external
                                       else IN_PROCESS_STOP_WAIT)
        while time.monotonic() < deadline and any(
                keys.intersection(running) for running in client.run(_executing).values()):
            time.sleep(0.05)


def _executing(dask_worker):
    """The keys of the tasks still running on a worker (cancelled ones included, until
    their thread ends)."""
    return [str(ts.key) for ts in dask_worker.state.executing]  # a tuple's text survives


def _stderr_progress_bar(label, *args, **kwargs):
    """distributed's text bar (it counts tasks), drawn on stderr instead of stdout."""
    from distributed.diagnostics.progressbar import TextProgressBar

    class StderrProgressBar(TextProgressBar):
        def _draw_bar(self, remaining, all, **kwargs):
            _draw_bar(label, (1 - remaining / all) if all else 1.0, self.elapsed)

    return StderrProgressBar(*args, **kwargs)


def _draw_bar(label, frac, elapsed, width=40):
    """One state of a progress bar on stderr (dask's and distributed's alike): the step's
    label, the bar, the percent done and the seconds."""
    sys.stderr.write(f"\r{label} [{'#' * int(width * frac):<{width}}] {int(100 * frac):3d}% "
                     f"| {elapsed:6.1f}s")
    sys.stderr.flush()
