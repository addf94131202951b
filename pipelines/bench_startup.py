"""``terrain bench startup``: what a user waits for before and around a small job.

Whole processes, timed from the outside, ``--repeat`` times each, best and median:

* ``python -c pass`` and ``python -c "import numpy"``: the interpreter's own floor;
* ``terrain mst data/sample.asc`` with an empty Numba cache (``NUMBA_CACHE_DIR`` pointed at
  a new directory): the first run where no compiled kernels were shipped, or where they do
  not match this numba, Python or CPU;
* the same with the kernels this installation carries (``pip install .`` compiles them
  into the wheel, setup.py); run right after such an install, its "1st" column is the
  first run a user sees;
* the same on ``--scheduler local``: the LocalCluster and its dashboard, which the default
  skips for a grid this small (docs/architecture.md, "Start-up").

User CPU seconds are printed beside the wall seconds: on a shared machine the wall figure
carries other processes' load, the CPU figure much less.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["bench_startup_command", "kernels_shipped"]

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample.asc"


def kernels_shipped():
    """Number of Numba cache index files beside terrain's modules."""
    import terrain
    return sum(1 for _ in Path(terrain.__file__).parent.rglob("__pycache__/*.nbi"))


def _run(argv, env):
    """(wall seconds, user + system CPU seconds) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status):
        raise RuntimeError(f"{' '.join(map(str, argv))} failed: {err.strip()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def _env(**extra):
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([root] + paths)
    env.update(extra)
    return env


def run_bench_startup(input_path=SAMPLE, repeat=3):
    """The figures as ``{label: {"wall": [...], "cpu": [...]}}``."""
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="terrain-startup-") as d:
        out = Path(d) / "out.mst.zarr"
        mst = [py, "-m", "terrain.run", "mst", str(input_path), "-o", str(out), "--overwrite"]
        cases = [("python -c pass", [py, "-c", "pass"], _env()),
                 ("python -c 'import numpy'", [py, "-c", "import numpy"], _env()),
                 ("terrain mst, empty kernel cache (compiles)", mst, None),
                 ("terrain mst, kernels this install carries", mst, _env()),
                 ("terrain mst --scheduler local (dashboard)", mst + ["--scheduler", "local"], _env())]
        results = {}
        for label, argv, env in cases:
            runs = []
            for i in range(repeat):
                if env is None:  # a new empty cache each time: every run is a first run
                    run_env = _env(NUMBA_CACHE_DIR=str(Path(d) / f"numba-cache-{i}"))
                else:
                    run_env = env
                runs.append(_run(argv, run_env))
            results[label] = {"wall": [r[0] for r in runs], "cpu": [r[1] for r in runs]}
    return results


def _format(results, shipped, input_path):
    lines = [f"start-up: whole processes on {Path(input_path).name}, {os.cpu_count()} cores; "
             f"{shipped} compiled kernel indexes beside terrain's modules",
             f"{'':46}{'1st s':>8}{'best s':>8}{'median s':>10}{'CPU s: 1st':>12}{'best':>7}"]
    for label, r in results.items():
        wall = sorted(r["wall"])
        lines.append(f"  {label:44}{r['wall'][0]:8.2f}{wall[0]:8.2f}{wall[len(wall) // 2]:10.2f}"
                     f"{r['cpu'][0]:12.2f}{min(r['cpu']):7.2f}")
    cold = min(results["terrain mst, empty kernel cache (compiles)"]["wall"])
    warm = min(results["terrain mst, kernels this install carries"]["wall"])
    first = results["terrain mst, kernels this install carries"]["wall"][0]
    lines.append(f"  compiling costs {cold - warm:.2f} s; with the carried kernels the first run "
                 f"of this bench took {first:.2f} s, the best {warm:.2f} s")
    return "\n".join(lines)


def bench_startup_command(args):
    """``terrain bench startup [--input FILE] [--repeat N]``."""
    path = Path(args.input) if args.input else SAMPLE
    results = run_bench_startup(path, args.repeat)
    print(_format(results, kernels_shipped(), path))
    return 0
