"""``python -m benchmarks startup``: what a user waits for before and around a small job.

It runs an installed ``terrain`` command, as a user after ``pip install .`` does (the one
beside ``--terrain-python``, else beside this python, else on the PATH; it refuses when there
is none), never this checkout's source, and prints which command and package it ran.
Whole processes, timed from the outside, ``--repeat`` times each, best and median:

* ``python -c pass`` and ``python -c "import numpy"`` with that installation's python: the
  interpreter's own floor;
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
from pathlib import Path

from .common import installed_terrain, timed_child, verdict

__all__ = ["bench_startup_command", "kernels_shipped"]

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample.asc"


def _interpreter(script):
    """The python a console script runs (its ``#!`` line)."""
    with open(script, "rb") as f:
        first = f.readline().decode(errors="replace")
    return first[2:].strip() if first.startswith("#!") else sys.executable


def kernels_shipped(package):
    """Number of Numba cache index files beside the modules of the package folder ``package``."""
    return sum(1 for _ in Path(package).rglob("__pycache__/*.nbi"))


def run_bench_startup(terrain, input_path=SAMPLE, repeat=3):
    """The figures of the installed command ``terrain`` as ``{label: {"wall": [...], "cpu":
    [...]}}``, and the folder of the package it imports."""
    py = _interpreter(terrain)
    # as a user runs it: no checkout on the path (the children run in an empty folder)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory(prefix="terrain-startup-") as d:
        package = Path(subprocess.run(
            [py, "-c", "import terrain, os; print(os.path.dirname(terrain.__file__))"],
            cwd=d, env=env, capture_output=True, text=True, check=True).stdout.strip())
        out = Path(d) / "out.mst.zarr"
        mst = [str(terrain), "mst", str(Path(input_path).resolve()), "-o", str(out),
               "--overwrite"]
        cases = [("python -c pass", [py, "-c", "pass"], env),
                 ("python -c 'import numpy'", [py, "-c", "import numpy"], env),
                 ("terrain mst, empty kernel cache (compiles)", mst, None),
                 ("terrain mst, kernels this install carries", mst, env),
                 ("terrain mst --scheduler local (dashboard)", mst + ["--scheduler", "local"],
                  env)]
        results = {}
        for label, argv, run_env in cases:
            runs = []
            for i in range(repeat):
                if run_env is None:  # a new empty cache each time: every run is a first run
                    runs.append(timed_child(argv, dict(
                        env, NUMBA_CACHE_DIR=str(Path(d) / f"numba-cache-{i}")), cwd=d))
                else:
                    runs.append(timed_child(argv, run_env, cwd=d))
            results[label] = {"wall": [r[0] for r in runs], "cpu": [r[2] for r in runs]}
    return results, package


def _format(results, terrain, package, input_path):
    lines = [f"start-up: whole processes of {terrain} (terrain from {package}) on "
             f"{Path(input_path).name}, {os.cpu_count()} cores, load average "
             f"{os.getloadavg()[0]:.1f}; {kernels_shipped(package)} compiled kernel indexes "
             "beside its modules",
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
    """``python -m benchmarks startup [--input FILE] [--repeat N] [--terrain-python PY]``."""
    terrain = installed_terrain(args.terrain_python)
    if terrain is None:
        where = (f"beside {args.terrain_python}" if args.terrain_python
                 else f"beside {sys.executable} nor on the PATH")
        print(f"python -m benchmarks startup: no installed terrain command {where}; "
              "pip install . into a venv and give --terrain-python VENV/bin/python",
              file=sys.stderr)
        return 2
    path = Path(args.input) if args.input else SAMPLE
    results, package = run_bench_startup(terrain, path, args.repeat)
    print(_format(results, terrain, package, path))
    first = results["terrain mst, kernels this install carries"]["wall"][0]
    return verdict([], [("first mst of data/sample.asc <= 2 s", first <= 2)]
                   if path.resolve() == SAMPLE else [], unchecked="start-up alone, no contender")
