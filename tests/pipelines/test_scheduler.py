"""Pipelines run on any scheduler: an existing cluster reached by address, or local ones."""

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from cli import (child_env, dask_cluster, dask_worker, stop_processes,
                 wait_for_workers)

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample.asc"


def _mst(tmp_path, name, scheduler):
    out = tmp_path / name
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "mst", str(SAMPLE), "-o", str(out),
                           "--tile", "64", "--backend", "cpu", "--scheduler", scheduler, "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), np.asarray(zarr.open_group(str(out), mode="r")["mst"][:])


def test_mst_on_an_existing_cluster_equals_local_run(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  protocol="tcp", dashboard_address=None) as cluster:
        remote, remote_mask = _mst(tmp_path, "remote.zarr", cluster.scheduler_address)
        # the work really ran on that cluster
        ran = cluster.scheduler.task_prefixes
        assert {"ingest-band", "mst-finish"} <= set(ran), list(ran)
    local, local_mask = _mst(tmp_path, "local.zarr", "synchronous")
    assert remote["levels"] > 1  # merges above the tiles ran
    assert np.array_equal(remote_mask, local_mask)
    for key in ("total_weight", "edges", "trees", "vertices"):
        assert remote[key] == local[key]


def test_default_cluster_takes_another_port_quietly_when_8787_is_busy(tmp_path):
    import socket
    holder = socket.socket()
    try:
        holder.bind(("", 8787))
        holder.listen()
    except OSError:
        pass  # already taken by someone else: the same situation
    try:
        proc = subprocess.run([sys.executable, "-m", "terrain.run", "mst", str(SAMPLE), "-o",
                               str(tmp_path / "m.zarr"), "--backend", "cpu", "--json",
                               "--scheduler", "local"],
                              capture_output=True, text=True, timeout=300)
    finally:
        holder.close()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("terrain: Dask dashboard at http"), proc.stderr
    assert ":8787/" not in lines[0]
    assert json.loads(proc.stdout)["edges"] > 0


#: runs on ``--scheduler local`` that start the LocalCluster (flow's tiled route: its fill,
#: then its directions and accumulation; batch: one cluster for its files)
ON_LOCAL = {
    "flow-tiled": ["flow", str(SAMPLE), "-o", "o.zarr", "--route", "tiled", "--tile", "64"],
    "fill-tiled": ["fill", str(SAMPLE), "-o", "o.zarr", "--route", "tiled", "--tile", "64"],
    "mst": ["mst", str(SAMPLE), "-o", "o.zarr", "--tile", "64", "--backend", "cpu"],
    "cost-distance": ["cost-distance", str(SAMPLE), "-o", "o.zarr", "--source-cell", "5,5",
                      "--route", "tiled", "--tile", "64"],
    "batch-flow": ["batch", "flow", str(SAMPLE), "-o", "out"],
}


@pytest.mark.parametrize("name", sorted(ON_LOCAL))
def test_one_cluster_a_run_says_its_dashboard_once(tmp_path, name):
    proc = subprocess.run([sys.executable, "-m", "terrain.run", *ON_LOCAL[name], "--scheduler",
                           "local"], cwd=tmp_path, env=child_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("terrain: Dask dashboard at http") == 1, proc.stderr


def test_small_grid_by_default_runs_without_a_cluster_and_equals_one(tmp_path):
    """No dashboard for a grid far below DASHBOARD_MIN_CELLS; the same forest as on the
    LocalCluster that ``--scheduler local`` starts."""
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "mst", str(SAMPLE), "-o",
                           str(tmp_path / "d.zarr"), "--tile", "64", "--backend", "cpu", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "dashboard" not in proc.stderr
    default = json.loads(proc.stdout)
    local, local_mask = _mst(tmp_path, "l.zarr", "local")
    assert np.array_equal(np.asarray(zarr.open_group(str(tmp_path / "d.zarr"), mode="r")["mst"][:]),
                          local_mask)
    assert default["total_weight"] == local["total_weight"]


def test_in_process_cluster_samples_and_ticks_less_often():
    """The LocalCluster that ``open_scheduler`` starts takes IN_PROCESS_CONFIG (docs/architecture.md)."""
    pytest.importorskip("distributed")
    from pipelines.cluster import open_scheduler

    with open_scheduler("local", quiet=True) as client:
        worker = next(iter(client.cluster.workers.values()))
        profile = worker.periodic_callbacks["profile"].callback_time
    assert profile == 100  # ms; distributed's default is 10


@pytest.mark.parametrize("scheduler", ["threads", "local"])
def test_shared_value_is_sent_once_not_with_every_task(scheduler):
    """A value every task reads goes to a cluster once: the graph of 64 tasks that read 16 MB
    stays small (Dask warns of a large graph past 10 MB) and each task sees the value."""
    pytest.importorskip("distributed")
    import warnings

    import dask

    from pipelines.cluster import compute, open_scheduler, share

    big = np.arange(2 << 20, dtype=np.float64)  # 16 MB
    with open_scheduler(scheduler, quiet=True), warnings.catch_warnings():
        warnings.simplefilter("error")  # distributed's "Sending large graph" is a UserWarning
        value = share(big)
        assert (value is big) == (scheduler == "threads")
        sums = compute(*[dask.delayed(lambda i, v: float(v[i::64].sum()), pure=False)(i, value)
                         for i in range(64)])
    assert sum(sums) == float(big.sum())


@pytest.mark.parametrize("scheduler", ["threads", "local"])
def test_a_progress_bar_is_headed_by_its_step(scheduler, capsys):
    """The bar of each step on stderr says which step it counts (a tiled fill draws one for
    its ingest, then one for the fill), on the threads' scheduler and a cluster alike."""
    pytest.importorskip("distributed")
    import dask

    from pipelines.cluster import compute, open_scheduler
    with open_scheduler(scheduler, quiet=True):
        assert compute(dask.delayed(sum)([1, 2]), label="fill-ingest", progress=True) == (3,)
    err = capsys.readouterr().err
    assert "fill-ingest [" + "#" * 40 + "] 100% |" in err, err


@pytest.mark.parametrize("scheduler", ["threads", "local"])
def test_run_as_completed_runs_the_work_results_find_once_each(scheduler):
    """Items found by ``after`` start without waiting for the others; one already waiting is
    not queued twice; ``prepare`` sees each start, ``after`` each result, in this thread."""
    pytest.importorskip("distributed")
    import threading

    from pipelines.cluster import open_scheduler, run_as_completed

    started, seen, here = [], {}, threading.get_ident()

    def prepare(x):
        assert threading.get_ident() == here
        started.append(x)
        return x

    def after(x, result):
        assert threading.get_ident() == here
        seen[x] = result
        return [y for y in (2 * x, 2 * x + 1, 2 * x) if y < 40]  # a tree, each found twice

    with open_scheduler(scheduler, quiet=True):
        run_as_completed(lambda x: x * x, prepare, [1, 1], after, label="test")
    assert sorted(started) == list(range(1, 40))
    assert seen == {x: x * x for x in range(1, 40)}


def test_run_as_completed_raises_a_task_error():
    from pipelines.cluster import open_scheduler, run_as_completed

    def fail(x):
        raise ValueError(f"bad {x}")

    with open_scheduler("threads"), pytest.raises(ValueError, match="bad 3"):
        run_as_completed(fail, lambda x: x, [3], lambda x, r: [])


def test_a_failed_run_on_a_cluster_gives_the_process_its_logging_back(tmp_path):
    """A run failing on the in-process cluster quiets distributed's and asyncio's loggers
    while its cancelled tasks end; they stayed silent for the rest of the process (a
    notebook's own client's warnings, its asyncio errors, printed nothing)."""
    import logging

    pytest.importorskip("distributed")  # its import sets its loggers' levels
    from pipelines.mst import run_mst
    names = ("asyncio", "tornado", "distributed", "distributed.client", "distributed.core")
    rows = SAMPLE.read_text().splitlines()
    cells = rows[200].split()
    cells[7] = "oops"  # a data row in the grid's middle: its band's task fails
    rows[200] = " ".join(cells)
    bad = tmp_path / "bad.asc"
    bad.write_text("\n".join(rows) + "\n")
    logging.getLogger("asyncio").setLevel(logging.WARNING)
    before = {n: logging.getLogger(n).level for n in names}
    from terrain.errors import InputError
    with pytest.raises(InputError, match="non-numeric"):
        run_mst(bad, tmp_path / "o.zarr", tile=64, in_core=False, scheduler="local",
                backend="cpu")
    assert {n: logging.getLogger(n).level for n in names} == before


def test_a_closed_clusters_leftover_future_errors_are_not_logged(caplog):
    """A wait inside distributed's close that timed out (a loaded machine) left a future
    holding tornado's TimeoutError; asyncio logged 'Future exception was never retrieved'
    with it when the future was collected, after the run's one error line."""
    pytest.importorskip("distributed")
    import gc
    import logging

    from pipelines.cluster import open_scheduler
    with open_scheduler("local", quiet=True) as client:
        loops = {client.loop.asyncio_loop, client.cluster.loop.asyncio_loop}
    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        for loop in loops:  # what the closed loops' timed-out waits leave
            loop.create_future().set_exception(TimeoutError("Timeout"))
        gc.collect()
    assert not [r for r in caplog.records if r.name == "asyncio"]


def test_a_cluster_that_cannot_start_is_one_error(tmp_path):
    """Dask's scratch folder unusable (``DASK_TEMPORARY_DIRECTORY`` under a file): a
    56-line traceback from distributed's start; one error naming the folder."""
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    from pipelines.cluster import cluster_active, open_scheduler
    from terrain.errors import InputError
    (tmp_path / "file").write_text("")
    scratch = str(tmp_path / "file" / "scratch")
    with dask.config.set({"temporary-directory": scratch}):
        with pytest.raises(InputError, match=f"the in-process Dask cluster did not start: "
                                             f".*Dask's temporary directory: {scratch}"):
            with open_scheduler("local", quiet=True):
                pytest.fail("the block ran")
    assert not cluster_active()


def test_a_stop_while_the_cluster_starts_closes_it(monkeypatch):
    """Ctrl-C inside LocalCluster's start left its scheduler listening for the rest of the
    process; the stop now waits for the start, closes the cluster and is raised."""
    distributed = pytest.importorskip("distributed")
    import signal

    from pipelines import cluster as cl
    made = []

    class Interrupted(distributed.LocalCluster):  # Ctrl-C as the start ends
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(distributed, "LocalCluster", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        with cl.open_scheduler("local", quiet=True):
            pytest.fail("the block ran after the stop")
    assert made and made[0].status.name == "closed"
    assert not cl.cluster_active()


@pytest.mark.parametrize("module", ["dask.delayed", "distributed.worker"])
def test_a_stop_inside_dasks_import_leaves_it_whole(tmp_path, module):
    """Ctrl-C 0.5 s into a notebook's run on the in-process cluster landed in dask's
    import, which it left half done: every later run failed ("module 'dask' has no
    attribute 'utils'"). The stop waits for the import (dask's, distributed's), then is
    raised."""
    pytest.importorskip("distributed")
    code = """
import importlib.abc, signal, sys
class StopWhileImporting(importlib.abc.MetaPathFinder):
    fired = False
    def find_spec(self, name, path, target=None):
        if name == sys.argv[1] and not StopWhileImporting.fired:
            StopWhileImporting.fired = True
            signal.raise_signal(signal.SIGINT)
        return None
sys.meta_path.insert(0, StopWhileImporting())
from pipelines.cluster import open_scheduler
try:
    with open_scheduler("local", quiet=True):
        print("ran")
except KeyboardInterrupt:
    print("interrupted")
with open_scheduler("local", quiet=True) as client:
    print("then", client is not None)
"""
    proc = subprocess.run([sys.executable, "-c", code, module], cwd=tmp_path,
                          env=child_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["interrupted", "then", "True"]


def test_a_thread_asking_for_threads_does_not_run_on_another_threadsdask_cluster():
    """Two runs of a service on two threads: one on the in-process cluster, the other asking
    for ``threads``, whose tasks went to the first's cluster (and failed when it closed:
    "lost the Dask scheduler"); the thread that made the cluster keeps it for its steps."""
    import threading

    import dask
    pytest.importorskip("distributed")
    from pipelines import cluster as cl
    where = {}
    opened, done = threading.Event(), threading.Event()

    def other_run():
        opened.wait(60)
        with cl.open_scheduler("threads"):
            where["other"] = cl.cluster_active()
            (where["other_result"],) = cl.compute(dask.delayed(threading.get_ident)())
            with cl.open_scheduler(None):  # a step of that run: still its threads
                where["other_step"] = cl.cluster_active()
        done.set()

    t = threading.Thread(target=other_run)
    t.start()
    with cl.open_scheduler("local", quiet=True) as client:
        opened.set()
        assert done.wait(60)
        with cl.open_scheduler("threads"):  # this thread's own nested step: its cluster
            where["own"] = cl.cluster_active()
        workers = set(client.run(lambda: threading.get_ident()).values())
    t.join(60)
    assert where["own"] and not where["other"] and not where["other_step"]
    assert where["other_result"] not in workers


# ----------------------------------------------------------------------------- what users hit

# loaded by the worker (``dask worker --preload``): when the write phase begins (the first
# rewrite of an mst shard), the scheduler is killed -- once
KILL_THE_SCHEDULER = """
import builtins, os, re, signal, time
import terrain.tiles._shards as shards
SCHEDULER, MARKER = {pid}, {marker!r}
real_open = builtins.open

def open_(path, mode="r", *args, **kwargs):
    p = str(path)
    shard = re.sub(r"\\.[0-9a-f]{{32}}\\.partial$", "", p)
    if "w" in mode and "/mst/c/" in p and os.path.exists(shard):
        try:
            os.close(os.open(MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            os.kill(SCHEDULER, signal.SIGKILL)
        except FileExistsError:
            pass
    return real_open(path, mode, *args, **kwargs)

shards.open = open_
"""

#: a worker's preload that kills the scheduler as the worker starts a task ``module.task``
#: (the graph names its functions by module: the worker runs the one set here)
KILL_IN_A_TASK = """
import os, signal
import {module} as m
SCHEDULER, MARKER = {pid}, {marker!r}
real = m.{task}

def task(*a, **k):
    try:
        os.close(os.open(MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        os.kill(SCHEDULER, signal.SIGKILL)
    except FileExistsError:
        pass
    return real(*a, **k)

m.{task} = task
"""



def test_a_scheduler_without_workers_is_said(tmp_path, capsys):
    """A cluster given by address with no worker (an adaptive one starts with none): the run
    says its tasks wait for one instead of waiting without a word."""
    import time

    import distributed

    from pipelines.cluster import open_scheduler
    address, procs = dask_cluster(tmp_path, "idle")
    try:
        stop_processes(procs[1:])
        with distributed.Client(address, timeout=60) as client:
            t0 = time.monotonic()
            while client.scheduler_info()["workers"]:
                assert time.monotonic() - t0 < 60, "the worker stays"
                time.sleep(0.1)
        with open_scheduler(address):
            pass
    finally:
        stop_processes(procs[:1])
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"terrain: the Dask scheduler at {address} has no workers yet; the "
                      "tasks wait for one to join"), err
    assert len(err) == 2 and err[1].startswith(f"terrain: Dask dashboard at {address}"), err


#: the commands a lost scheduler is tested with: arguments, what kills it (mst: a shard
#: its write phase rewrites; cost-distance: its first fill task, its index whole by then),
#: the layers compared with a one-process run
KILLED_RUNS = {
    "mst": (["--tile", "256"], KILL_THE_SCHEDULER, {}, ("elevation", "mst")),
    "cost-distance": (["--tile", "256", "--route", "tiled", "--source-cell", "1100,500"],
                      KILL_IN_A_TASK,
                      {"module": "pipelines.cost_distance_tiled", "task": "_fill_task"},
                      ("elevation", "distance", "allocation", "backlink")),
}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(KILLED_RUNS))
def test_scheduler_killed_mid_run_is_one_line_and_resume_finishes_elsewhere(tmp_path, command):
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 2200, 1000, seed=5, nodata=0.02)  # 2 shards at tile 256, tiled
    extra, kill, where, compared = KILLED_RUNS[command]
    argv = [sys.executable, "-m", "terrain.run", command, str(tmp_path / "g.asc"), *extra,
            "--backend", "cpu", "--json"]
    out = str(tmp_path / "m.zarr")
    marker = tmp_path / "killed"
    preload = tmp_path / "kill_the_scheduler.py"
    preload.write_text("")  # the scheduler's pid is known once it runs
    address, procs = None, []
    try:
        address, procs = dask_cluster(tmp_path, "first")
        stop_processes(procs[1:])  # a worker that kills this scheduler
        preload.write_text(kill.format(pid=procs[0].pid, marker=str(marker), **where))
        sched_file = tmp_path / "first.json"
        procs[1:] = [dask_worker(sched_file, preload=preload)]
        wait_for_workers(sched_file)  # joined before the run
        proc = subprocess.run(argv + ["-o", out, "--scheduler", address], cwd=tmp_path,
                              env=child_env(), capture_output=True, text=True, timeout=300)
    finally:
        stop_processes(procs)
    assert marker.exists(), "the scheduler was not killed mid-run"
    lines = [x for x in proc.stderr.strip().splitlines() if "Dask dashboard at" not in x]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"terrain: lost the Dask scheduler at {address} during the run")
    assert lines[0].endswith("the partial output is kept for a resumed run")
    partial, = tmp_path.glob(".m.zarr.partial-*")
    assert list(partial.glob(".terrain-checkpoints/*.npz"))

    address, procs = dask_cluster(tmp_path, "second")
    try:
        resumed = subprocess.run(argv + ["-o", out, "--scheduler", address, "--resume"],
                                 cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                                 timeout=300)
    finally:
        stop_processes(procs)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["reused_tasks"] > 0
    assert command != "cost-distance" or summary["resumed_index"]  # the CPU's index kept
    ref = subprocess.run(argv + ["-o", str(tmp_path / "ref.zarr"), "--scheduler", "synchronous"],
                         cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr
    a = zarr.open_group(out, mode="r")
    b = zarr.open_group(str(tmp_path / "ref.zarr"), mode="r")
    for k in compared:
        assert np.asarray(a[k][:]).tobytes() == np.asarray(b[k][:]).tobytes(), k
    assert not list(tmp_path.glob(".m.zarr.partial-*"))


@pytest.mark.slow
def test_a_stop_does_not_wait_for_another_runs_tasks(tmp_path):
    """SIGTERM on a run sharing its cluster with another client's long task: the run waits
    for its own running tasks only, not the other's (it waited its whole 60 s bound)."""
    import os
    import signal
    import time

    import distributed
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 2200, 1000, seed=5, nodata=0.02)  # tiled at tile 256
    address, procs = dask_cluster(tmp_path, "shared")
    try:
        with distributed.Client(address, timeout=60) as other:
            busy = other.submit(time.sleep, 600, pure=False)  # another user's long task
            t0 = time.monotonic()
            while not any(other.run(lambda dask_worker: len(dask_worker.state.executing))
                          .values()):
                assert time.monotonic() - t0 < 60, "the other task did not start"
                time.sleep(0.1)
            proc = subprocess.Popen(
                [sys.executable, "-m", "terrain.run", "mst", str(tmp_path / "g.asc"), "--tile",
                 "256", "--backend", "cpu", "-o", str(tmp_path / "m.zarr"), "--scheduler",
                 address], cwd=tmp_path, env=child_env(), stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            t0 = time.monotonic()
            while not list(tmp_path.glob(".m.zarr.partial-*/.terrain-checkpoints/ingest-band-*")):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() - t0 < 120, "the run did not start"
                time.sleep(0.01)
            os.kill(proc.pid, signal.SIGTERM)
            signalled = time.monotonic()
            out, err = proc.communicate(timeout=120)
            waited = time.monotonic() - signalled
            assert not busy.done()  # the other run's task ran all along
            busy.cancel()
    finally:
        stop_processes(procs)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "terrain: terminated"
    assert waited < 30, waited
    assert not list(tmp_path.glob(".m.zarr.partial-*")) and not (tmp_path / "m.zarr").exists()


#: a worker's preload whose process dies (SIGKILL) whenever it starts ``module.task``: what a
#: worker past its memory limit does, its nanny restarting it each time
DIE_IN_A_TASK = """
import os, signal
import {module} as m

def task(*a, **k):
    os.kill(os.getpid(), signal.SIGKILL)

m.{task} = task
"""


@pytest.mark.slow
def test_workers_dying_in_one_task_are_one_line(tmp_path):
    """A task every worker dies running (distributed's KilledWorker: a memory limit too small
    for it) is one line naming the step, the tries and the last worker's memory limit, exit 2,
    the partial kept for ``--resume`` (a 24-line traceback, exit 1, the partial removed)."""
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 2200, 1000, seed=5, nodata=0.02)  # tiled at tile 256
    preload = tmp_path / "die.py"
    preload.write_text(DIE_IN_A_TASK.format(module="pipelines.mst", task="_read_group"))
    env = child_env(DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="1")
    # with a nanny, which restarts a worker that died
    address, procs = dask_cluster(tmp_path, "dying", "--nthreads", "1", "--memory-limit",
                                  "2GiB", preload=preload, env=env)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "terrain.run", "mst", str(tmp_path / "g.asc"), "--tile", "256",
             "--backend", "cpu", "-o", str(tmp_path / "m.zarr"), "--scheduler", address],
            cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300)
    finally:
        stop_processes(procs)
    lines = [x for x in proc.stderr.strip().splitlines() if "Dask dashboard at" not in x]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("terrain: Dask workers died running the task mst-group 2 "
                               "times (the last tcp://127.0.0.1:"), lines[0]
    assert lines[0].endswith("; its memory limit is 2.00 GiB, and its nanny restarts a worker "
                             "that outgrows it); the partial output is kept for a resumed "
                             "run"), lines[0]
    partial, = tmp_path.glob(".m.zarr.partial-*")
    assert list(partial.glob(".terrain-checkpoints/*.npz"))  # the ingest's bands
    assert not (tmp_path / "m.zarr").exists()


#: a worker's preload that stops (SIGSTOP) the scheduler as the worker starts ``module.task``
STOP_IN_A_TASK = KILL_IN_A_TASK.replace("signal.SIGKILL", "signal.SIGSTOP")


@pytest.mark.slow
@pytest.mark.parametrize("command, extra, module, task", [
    ("mst", [], "pipelines.mst", "_read_group"),
    # the flats' passes wait through run_as_completed, not compute
    ("flow", ["--route", "tiled"], "terrain.hydrology.flow", "_group_step"),
])
def test_a_scheduler_that_stops_answering_is_one_line(tmp_path, command, extra, module, task):
    """A scheduler frozen mid-run (SIGSTOP: a stopped or thrashing process, whose kernel
    still acknowledges its connections) ends the run in one line within the TCP timeout
    (``distributed.comm.timeouts.tcp``, 12 s here) instead of waiting for ever; the partial
    and its checkpoints are kept for ``--resume``."""
    import os
    import signal
    import time
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 2200, 1000, seed=5, nodata=0.02)  # 2 shards at tile 256
    marker = tmp_path / "stopped"
    preload = tmp_path / "stop_the_scheduler.py"
    procs = []
    try:
        address, procs = dask_cluster(tmp_path, "frozen")
        stop_processes(procs[1:])  # a worker that stops this scheduler
        preload.write_text(STOP_IN_A_TASK.format(pid=procs[0].pid, marker=str(marker),
                                                 module=module, task=task))
        procs[1:] = [dask_worker(tmp_path / "frozen.json", preload=preload)]
        wait_for_workers(tmp_path / "frozen.json")  # joined before the run
        proc = subprocess.Popen(
            [sys.executable, "-m", "terrain.run", command, str(tmp_path / "g.asc"), "--tile",
             "256", *extra, "--backend", "cpu", "-o", str(tmp_path / "m.zarr"), "--scheduler",
             address], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=child_env(DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP="12"))
        try:
            out, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail("the run waits for ever on the frozen scheduler")
        stopped = time.time() - marker.stat().st_mtime
    finally:
        if procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(procs[0].pid, signal.SIGCONT)
        stop_processes(procs)
    lines = [x for x in err.strip().splitlines() if "Dask dashboard at" not in x]
    assert proc.returncode == 2 and len(lines) == 1, err
    assert lines[0] == (f"terrain: the Dask scheduler at {address} stopped answering during "
                        "the run (no reply within 12 s); the partial output is kept for a "
                        "resumed run")
    assert stopped < 60  # two limits at most: the wait's, then the reply's
    partial, = tmp_path.glob(".m.zarr.partial-*")
    assert list(partial.glob(".terrain-checkpoints/*.npz"))
    assert not (tmp_path / "m.zarr").exists()


@pytest.mark.parametrize("typed, host", [(":0", "127.0.0.1"), ("0", "127.0.0.1"),
                                         ("127.0.0.1:0", "127.0.0.1"), ("[::1]:0", "::1")])
def test_dashboard_address_binds_what_was_typed(monkeypatch, typed, host):
    """A port alone stays on localhost (``:8792`` once opened 0.0.0.0), and IPv6 works."""
    pytest.importorskip("distributed")
    from pipelines.cluster import open_scheduler
    monkeypatch.setenv("TERRAIN_DASHBOARD", typed)
    with open_scheduler("local", quiet=True) as client:
        cluster = client.cluster
        bound = {s.getsockname()[0] for s in cluster.scheduler.http_server._sockets.values()}
        worker = next(iter(cluster.workers.values()))
        wbound = {s.getsockname()[0] for s in worker.http_server._sockets.values()}
    assert bound == {host} and wbound == {host}, (bound, wbound)


@pytest.mark.parametrize("typed", ["host:port", "1:2:3", "70000", "[::1]", "::1:8795"])
def test_bad_dashboard_address_is_one_line(tmp_path, typed):
    from cli import SAMPLE, assert_one_line_error, run_terrain
    proc = run_terrain("ingest", str(SAMPLE), "-o", "o.zarr", "--scheduler", "local",
                       "--dashboard-address", typed, cwd=tmp_path)
    assert_one_line_error(proc, f"terrain: dashboard address {typed!r}: not HOST:PORT")
    assert list(tmp_path.iterdir()) == []


def _friction(path, seed):
    """A friction raster on the grid of :func:`terrain.io.write_synth`'s 60 x 80 ``g.asc``."""
    values = np.random.default_rng(seed).uniform(1, 5, (60, 80))
    header = ("ncols 80\nnrows 60\nxllcorner 500000.0\nyllcorner 4000000.0\ncellsize 10.0\n"
              "NODATA_value -9999\n")
    Path(path).write_text(header + "\n".join(" ".join(f"{v:.3f}" for v in row)
                                             for row in values) + "\n")


def _worker_elsewhere(tmp_path):
    """A cluster whose worker runs in ``tmp_path/elsewhere``, which holds a g.asc and an
    f.asc of its own (other data, the same names as the job's relative inputs)."""
    from terrain.io import write_synth
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_synth(elsewhere / "g.asc", 60, 80, seed=99)
    _friction(elsewhere / "f.asc", 99)
    return dask_cluster(elsewhere, "c")


@pytest.mark.slow
def test_batch_on_a_cluster_reads_the_clients_file_not_a_namesake(tmp_path):
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 60, 80, seed=1)
    address, procs = _worker_elsewhere(tmp_path)
    try:
        proc = subprocess.run([sys.executable, "-m", "terrain.run", "batch", "mst", "g.asc", "-o",
                               "out", "--tile", "16", "--backend", "cpu", "--scheduler", address],
                              cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                              timeout=300)
    finally:
        stop_processes(procs)
    assert proc.returncode == 0, proc.stderr
    ref = subprocess.run([sys.executable, "-m", "terrain.run", "mst", "g.asc", "-o", "ref.zarr",
                          "--tile", "16", "--backend", "cpu", "--scheduler", "synchronous"],
                         cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr
    assert _layers(tmp_path / "out" / "g.mst.zarr") == _layers(tmp_path / "ref.zarr")


#: per command: its runs (input, extra arguments), each on the cluster and on "synchronous"
ON_A_CLUSTER = {
    "mst": [("g.asc", ["--backend", "cpu"])],
    "ingest": [("g.asc", [])],
    # each route, a DEM given as a store, a friction raster ingested by the tasks
    "cost-distance": [(dem, [*a, "--source-cell", "30,40", "--friction", "f.asc",
                             "--backend", "cpu"])
                      for dem, a in (("g.asc", ["--route", "in-core"]),
                                     ("g.asc", ["--route", "tiled"]),
                                     ("g.asc", ["--route", "blocked", "--memory", "64KB"]),
                                     ("g.zarr", ["--route", "in-core"]))],
}


def _layers(path):
    g = zarr.open_group(str(path), mode="r")
    return {k: np.asarray(g[k][...]).tobytes() for k in sorted(g.array_keys())}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(ON_A_CLUSTER))
def test_a_command_on_a_cluster_reads_the_clients_file_not_a_namesake(tmp_path, command):
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 60, 80, seed=1)
    _friction(tmp_path / "f.asc", 1)
    runs = ON_A_CLUSTER[command]

    def run(folder, *argv):
        proc = subprocess.run([sys.executable, "-m", "terrain.run", *argv], cwd=folder,
                              env=child_env(), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr

    address, procs = _worker_elsewhere(tmp_path)
    try:
        if any(dem == "g.zarr" for dem, _ in runs):  # a store input, and its namesake
            for folder in (tmp_path, tmp_path / "elsewhere"):
                run(folder, "ingest", "g.asc", "-o", "g.zarr", "--tile", "16")
        for i, (dem, extra) in enumerate(runs):
            run(tmp_path, command, dem, "-o", f"m{i}.zarr", "--tile", "16", *extra,
                "--scheduler", address)
    finally:
        stop_processes(procs)
    for i, (dem, extra) in enumerate(runs):
        run(tmp_path, command, dem, "-o", f"ref{i}.zarr", "--tile", "16", *extra,
            "--scheduler", "synchronous")
        got, ref = _layers(tmp_path / f"m{i}.zarr"), _layers(tmp_path / f"ref{i}.zarr")
        assert got.keys() == ref.keys()
        assert [k for k in ref if got[k] != ref[k]] == [], (dem, extra)


def test_workers_that_see_other_bytes_are_refused(tmp_path, monkeypatch):
    """Workers in processes of their own; this process's view of the file is made to
    differ (as a worker on another machine with its own copy would)."""
    distributed = pytest.importorskip("distributed")
    import logging
    from terrain.io import outputs
    from pipelines.cluster import check_inputs_on_workers
    from terrain.errors import InputError
    (tmp_path / "g.asc").write_text("ncols 1\nnrows 1\nxllcorner 0\nyllcorner 0\ncellsize 1\n1\n")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster) as client:
        check_inputs_on_workers([tmp_path / "g.asc"], client, "tcp://x")  # the same bytes
        real = outputs.input_identity
        monkeypatch.setattr(outputs, "input_identity",
                            lambda p: (real(p)[0], real(p)[1] + 1, real(p)[2]))
        with pytest.raises(InputError, match=r"g.asc: the Dask worker .* of tcp://x sees "
                                             r"another file at .*g.asc \(\d+ bytes"):
            check_inputs_on_workers([tmp_path / "g.asc"], client, "tcp://x")
        monkeypatch.setattr(outputs, "input_identity", lambda p: ("/nonexistent/g.asc", 5, 6))
        with pytest.raises(InputError, match="cannot read /nonexistent/g.asc: give a path its "
                                             "workers share"):
            check_inputs_on_workers([tmp_path / "g.asc"], client, "tcp://x")


def test_ready_order_takes_ready_tasks_smallest_first(monkeypatch):
    """compute's ready_order: tasks made ready together by one task are taken in its order
    (one thread, so the order they start in is the order they were taken)."""
    import dask
    from pipelines import cluster
    started = []

    def step(name, _):
        started.append(name)
        return name

    monkeypatch.setattr(cluster.os, "cpu_count", lambda: 1)
    names = [(i, j) for i in range(3) for j in range(4)]
    first = dask.delayed(lambda: 0)()
    tasks = [dask.delayed(step)(n, first) for n in names]
    column_major = {t.key: (j, i) for t, (i, j) in zip(tasks, names)}
    with cluster.open_scheduler("threads"):
        cluster.compute(*tasks, progress=False,
                        ready_order=lambda k: column_major.get(k, (-1, -1)))
    assert started == sorted(names, key=lambda n: (n[1], n[0]))


def test_on_failure_releases_tasks_that_wait_on_this_process():
    """compute's on_failure runs before the running tasks are waited for: a task blocked on
    this process (as a group waits for the rows of a text being parsed) is released, so the
    failure is raised at once rather than when the wait would have ended."""
    import threading
    import time

    import dask
    from pipelines import cluster
    release = threading.Event()

    def waits():
        release.wait(30)
        return "released" if release.is_set() else "timed out"

    def fails():
        time.sleep(0.2)
        raise ValueError("a task failed")

    with cluster.open_scheduler("threads"):
        t0 = time.perf_counter()
        with pytest.raises(ValueError, match="a task failed"):
            cluster.compute(dask.delayed(waits)(), dask.delayed(fails)(), progress=False,
                            on_failure=release.set)
    assert time.perf_counter() - t0 < 10


# ------------------------------------------------------- an address where no scheduler answers

def _listener(kind):
    """A server on 127.0.0.1 that is no Dask scheduler: its address and what stops it."""
    import http.server
    import socket
    import threading
    if kind == "http.server":  # waits for a request line that Dask's handshake never ends
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                 http.server.SimpleHTTPRequestHandler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"tcp://127.0.0.1:{server.server_address[1]}", server.shutdown
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    if kind == "refused":  # bound, not listening
        return address, listener.close
    listener.listen()
    held = []

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed: the test is over
                return
            if kind == "http reply":  # an HTTP server answering at once (a bad request)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                conn.close()
            elif kind == "hangs up":
                conn.close()
            else:  # "silent": accepts and never answers
                held.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    return address, lambda: [s.close() for s in [listener, *held]]


#: what answers at the address -> what the one line says after it
NOT_A_SCHEDULER = {
    "silent": "no Dask scheduler answered at {address} within 5 s",
    "http.server": "no Dask scheduler",
    "http reply": "no Dask scheduler at {address}: what answers there does not speak Dask's "
                  "protocol",
    "hangs up": "no Dask scheduler at {address}: what answers there closed the connection",
    "refused": "cannot reach the Dask scheduler at {address}: Connection refused",
}


@pytest.mark.parametrize("kind", sorted(NOT_A_SCHEDULER))
def test_an_address_where_no_scheduler_answers_is_one_line_within_seconds(kind):
    """Before: a peer that never answered held the run for ever (distributed bounds only the
    TCP connect) and an HTTP reply was read as a frame of 3.5e18 bytes (out of memory)."""
    pytest.importorskip("distributed")
    import time

    from pipelines.cluster import CONNECT_TIMEOUT, open_scheduler
    from terrain.errors import InputError
    address, stop = _listener(kind)
    t0 = time.monotonic()
    try:
        with pytest.raises(InputError) as e, open_scheduler(address):
            pass
    finally:
        stop()
    assert str(e.value).startswith(NOT_A_SCHEDULER[kind].format(address=address)), e.value
    if kind == "http.server":
        assert address in str(e.value)
    assert time.monotonic() - t0 < CONNECT_TIMEOUT + 5


def test_the_scheduler_check_runs_inside_a_callers_event_loop():
    """Before: from a coroutine (a notebook's running loop) the check's asyncio.run raised
    RuntimeError instead of saying what answers at the address."""
    pytest.importorskip("distributed")
    import asyncio

    from pipelines.cluster import open_scheduler
    from terrain.errors import InputError
    address, stop = _listener("hangs up")

    async def in_a_loop():
        with pytest.raises(InputError, match="closed the connection"), \
                open_scheduler(address):
            pass
    try:
        asyncio.run(in_a_loop())
    finally:
        stop()


@pytest.mark.parametrize("host, reason", [("no-such-host.invalid", "Name or service not known"),
                                          ("no..such", "label empty or too long")])
def test_a_bad_host_name_is_one_line(host, reason):
    from pipelines.cluster import open_scheduler
    from terrain.errors import InputError
    with pytest.raises(InputError, match=f"cannot reach the Dask scheduler at tcp://{host}:8786: "
                                         f".*{reason}"), open_scheduler(f"tcp://{host}:8786"):
        pass


def test_a_workers_address_is_not_taken_for_the_schedulers():
    distributed = pytest.importorskip("distributed")
    import logging

    from pipelines.cluster import open_scheduler
    from terrain.errors import InputError
    with distributed.LocalCluster(n_workers=1, processes=False, protocol="tcp",
                                  dashboard_address=None, silence_logs=logging.CRITICAL) as c:
        worker = next(iter(c.workers.values())).address
        with pytest.raises(InputError, match=f"^no Dask scheduler at {worker}: a Dask Worker "
                                             "answers there$"), open_scheduler(worker):
            pass


def _fake_scheduler():
    """A server on 127.0.0.1 speaking Dask's protocol that answers every message as Dask's
    ``identity`` op of a scheduler does: its address and what stops it."""
    import asyncio
    import threading

    from distributed.comm import listen

    async def answer(comm):
        with contextlib.suppress(Exception):
            while True:
                await comm.read()
                await comm.write({"type": "Scheduler", "id": "x"})

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    listener = listen("tcp://127.0.0.1:0", answer)
    asyncio.run_coroutine_threadsafe(listener.start(), loop).result(10)
    return listener.contact_address, lambda: loop.call_soon_threadsafe(listener.stop)


@pytest.mark.parametrize("peer, said", [
    ("http reply", "does not speak Dask's protocol"),
    # before: distributed's Client asserted on its handshake reply (a traceback, exit 1)
    ("identity only", "did not behave as a Dask scheduler"),
])
def test_a_peer_that_is_no_scheduler_is_one_line_and_writes_nothing(tmp_path, peer, said):
    pytest.importorskip("distributed")
    from cli import assert_one_line_error, run_terrain
    address, stop = _fake_scheduler() if peer == "identity only" else _listener(peer)
    try:
        proc = run_terrain("mst", str(SAMPLE), "-o", "m.zarr", "--scheduler", address,
                           cwd=tmp_path, timeout=120)
    finally:
        stop()
    assert_one_line_error(proc, f"no Dask scheduler at {address}: what answers there {said}")
    assert list(tmp_path.iterdir()) == []


def test_an_unbracketed_ipv6_address_says_it_needs_brackets():
    """Before: nothing was contacted, yet the line said what answers does not speak Dask."""
    pytest.importorskip("distributed")
    from pipelines.cluster import open_scheduler
    from terrain.errors import InputError
    with pytest.raises(InputError, match=r"^scheduler 'tcp://::1:18811': not an address Dask "
                                         r"reads \(ipv6 needs brackets"), \
            open_scheduler("tcp://::1:18811"):
        pass


def test_the_dashboard_link_of_an_ipv6_scheduler_is_a_url():
    """Before: distributed's link for a scheduler on [::1] read ``http://[:45805/status``."""
    from types import SimpleNamespace
    from urllib.parse import urlsplit

    from pipelines.cluster import _dashboard_link
    client = SimpleNamespace(scheduler=SimpleNamespace(address="tcp://[::1]:18790"),
                             scheduler_info=lambda: {"services": {"dashboard": 45805}},
                             dashboard_link="http://[:45805/status")
    url = urlsplit(_dashboard_link(client))
    assert (url.scheme, url.hostname, url.port, url.path) == ("http", "::1", 45805, "/status")


@pytest.mark.parametrize("command", ["fill", "flow"])
def test_fill_and_flow_in_core_take_the_scheduler_given(tmp_path, command):
    """Before: in core they ignored --scheduler (a bogus name, a closed port: exit 0, the
    store written); now as mst and cost-distance: refused in one line, else one task there."""
    distributed = pytest.importorskip("distributed")
    import logging

    from cli import assert_one_line_error, run_terrain
    for scheduler, line in [("bogus", "scheduler 'bogus': not an address"),
                            (_listener("refused"), "cannot reach the Dask scheduler at ")]:
        if isinstance(scheduler, tuple):
            (scheduler, stop), line = scheduler, line + scheduler[0]
            stop()  # closed: nothing listens there
        proc = run_terrain(command, str(SAMPLE), "-o", "x.zarr", "--route", "in-core",
                           "--scheduler", scheduler, cwd=tmp_path, timeout=120)
        assert_one_line_error(proc, line)
        assert list(tmp_path.iterdir()) == []
    local = run_terrain(command, str(SAMPLE), "-o", "here.zarr", "--route", "in-core",
                        "--json", cwd=tmp_path, timeout=300)
    assert local.returncode == 0, local.stderr
    with distributed.LocalCluster(n_workers=1, processes=False, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=None,
                                  silence_logs=logging.CRITICAL) as cluster:
        there = run_terrain(command, str(SAMPLE), "-o", "there.zarr", "--route", "in-core",
                            "--json", "--scheduler", cluster.scheduler_address,
                            cwd=tmp_path, timeout=300)
        ran = set(cluster.scheduler.task_prefixes)
    assert there.returncode == 0, there.stderr
    assert command in ran, ran  # the in-core step ran on that cluster, named by the step
    here, there = (zarr.open_group(str(tmp_path / n), mode="r") for n in ("here.zarr", "there.zarr"))
    assert sorted(here.array_keys()) == sorted(there.array_keys())
    for name in here.array_keys():
        assert np.array_equal(here[name][...], there[name][...], equal_nan=True), name


@pytest.mark.parametrize("command", ["fill", "flow"])
def test_fill_and_flow_tiled_reach_the_scheduler_before_the_ingest(tmp_path, capsys,
                                                                   monkeypatch, command):
    """Before: the tiled route ingested the DEM, then met the closed port (a long ingest
    lost); now the scheduler is reached first: one line, exit 2, nothing ingested or
    written."""
    pytest.importorskip("distributed")
    import pipelines.ingest as ingest
    from cli import run_main
    built = []
    real = ingest.build_ingest_graph
    monkeypatch.setattr(ingest, "build_ingest_graph", lambda *a, **k: built.append(a) or
                        real(*a, **k))
    monkeypatch.chdir(tmp_path)
    address, stop = _listener("refused")
    stop()  # closed: nothing listens there
    rc, out, err = run_main(capsys, command, SAMPLE, "-o", "x.zarr", "--route", "tiled",
                            scheduler=address)
    assert rc == 2 and not out, err
    assert err.splitlines() == [f"terrain: cannot reach the Dask scheduler at {address}: "
                                "Connection refused"], err
    assert built == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("how", ["ends", "fails"])
def test_the_in_process_cluster_leaves_no_scratch_behind(tmp_path, how):
    """Dask's scheduler and worker keep their scratch in ``TEMP/dask-scratch-space``, whose
    lock files outlive the run; where no temporary folder is writable (a read-only /tmp, no
    TMPDIR: Python's last resort is the working directory) that folder was left in the
    folder the command ran in. The cluster's scratch is now a folder of its own, removed
    with it whether the run ends or fails. The oracle: the temporary folder's listing, and
    the worker's own ``local_directory`` lying inside it while the cluster runs."""
    import os
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    from pipelines.cluster import open_scheduler
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with dask.config.set({"temporary-directory": str(scratch)}):
        with contextlib.suppress(RuntimeError):
            with open_scheduler("local", quiet=True) as client:
                workers = client.run(lambda dask_worker: dask_worker.local_directory)
                assert all(str(scratch) in d for d in workers.values())
                if how == "fails":
                    raise RuntimeError("a task failed")
    assert os.listdir(scratch) == []
