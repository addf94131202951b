"""What the benchmarks share."""

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["peak_rss_bytes", "child_env", "timed_child", "friction_grid", "installed_terrain",
           "verdict", "MAX_REL_DIFF"]

#: cost distances differing more than this from ours (relative) are another result: the
#: peers solve the same model, so only float32 rounding may tell them apart
MAX_REL_DIFF = 1e-6


def peak_rss_bytes():
    """Peak resident set size of this process so far, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child_env(**extra):
    """This process's environment for a child process, with this checkout first on
    ``PYTHONPATH`` (so ``python -m terrain.run`` runs this code) and ``extra`` set."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([root] + paths)
    env.update(extra)
    return env


def terrain_command(terrain_python=None):
    """``(argv prefix, env)`` that run terrain's command line as a child: the installation
    beside ``terrain_python`` (its own console script: ``-m`` would import a checkout in the
    working directory), else this checkout's source with this python."""
    if terrain_python:
        return [str(Path(terrain_python).parent / "terrain")], None
    return [sys.executable, "-m", "terrain.run"], child_env()


def installed_terrain(terrain_python=None):
    """The ``terrain`` console script of an installation: the one beside ``terrain_python``
    when given, else beside this python, else on the PATH; None when there is none."""
    if terrain_python:
        found = [Path(terrain_python).parent / "terrain"]
    else:
        found = [Path(sys.executable).parent / "terrain", shutil.which("terrain")]
    return next((Path(p) for p in found if p and os.access(p, os.X_OK)), None)


def verdict(checks, goals=(), unchecked="no other contender's result was compared with ours"):
    """End a benchmark: one line per result compared with another contender's (``checks``:
    ``(what, agreed)``), or one saying that nothing was compared (``unchecked``: why); one
    line per goal of
    docs/performance.md this run measured (``goals``: ``(goal, met)``). Returns the exit
    status: 1 when a result differed. A missed goal does not fail the run: speed varies with
    the machine's load, results do not."""
    checks = list(checks)
    if not checks:
        print(f"check: nothing compared ({unchecked})")
    for what, agreed in checks:
        print(f"check: {what}: {'agree' if agreed else 'DIFFER'}")
    for goal, met in goals:
        print(f"goal {goal}: {'met' if met else 'NOT met'}")
    return 0 if all(agreed for _, agreed in checks) else 1


#: a small interpreter between the benchmark and the process it measures, which it starts
#: and waits for (``wait4``), writing ``exit status, wall s, peak RSS KiB, CPU s`` to the file
#: descriptor ``argv[1]``. Linux carries a process's memory high-water mark across ``exec``
#: into its children, so a child of the benchmark itself reported the benchmark's own peak
#: (``python -c pass`` beside a 600 MB array: 626 MiB); this interpreter's peak is ~10 MB
_LAUNCHER = """
import os, sys, time
t0 = time.perf_counter()
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - t0
os.write(int(sys.argv[1]), (f"{os.waitstatus_to_exitcode(status)} {wall!r} {usage.ru_maxrss} "
                            f"{usage.ru_utime + usage.ru_stime!r}").encode())
"""


def timed_child(argv, env=None, cwd=None):
    """``(wall seconds, peak RSS bytes, user + system CPU seconds)`` of one child process
    (``wait4``: its own figures, whatever else the machine runs; started by
    :data:`_LAUNCHER`, so neither this process's memory nor the launcher's start counts);
    RuntimeError with the end of its stderr when it fails."""
    read, write = os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _LAUNCHER, str(write),
                                 *map(str, argv)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=env, cwd=cwd, pass_fds=(write,))
    finally:
        os.close(write)
    err = proc.stderr.read().decode(errors="replace")
    proc.wait()
    with os.fdopen(read, "rb") as f:
        figures = f.read().split()
    if proc.returncode or len(figures) != 4 or int(figures[0]):
        raise RuntimeError(f"{' '.join(map(str, argv))} failed: {err.strip()[-500:]}")
    wall, rss, cpu = float(figures[1]), int(figures[2]), float(figures[3])
    return wall, rss * 1024, cpu


def friction_grid(rows, cols, seed=0):
    """The cost-distance benchmarks' friction: uniform in [1, 2], float32."""
    import numpy as np
    return np.random.default_rng(seed).uniform(1.0, 2.0, (rows, cols)).astype(np.float32)
