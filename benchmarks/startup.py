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
import sys
import tempfile
from pathlib import Path

from .common import child_env, timed_child

__all__ = ["bench_startup_command", "kernels_shipped"]

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample.asc"


def kernels_shipped():
    """Number of Numba cache index files beside terrain's modules."""
    import terrain
    return sum(1 for _ in Path(terrain.__file__).parent.rglob("__pycache__/*.nbi"))


def run_bench_startup(input_path=SAMPLE, repeat=3):
    """The figures as ``{label: {"wall": [...], "cpu": [...]}}``."""
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="terrain-startup-") as d:
        out = Path(d) / "out.mst.zarr"
        mst = [py, "-m", "terrain.run", "mst", str(input_path), "-o", str(out), "--overwrite"]
        cases = [("python -c pass", [py, "-c", "pass"], child_env()),
                 ("python -c 'import numpy'", [py, "-c", "import numpy"], child_env()),
                 ("terrain mst, empty kernel cache (compiles)", mst, None),
                 ("terrain mst, kernels this install carries", mst, child_env()),
                 ("terrain mst --scheduler local (dashboard)", mst + ["--scheduler", "local"],
                  child_env())]
        results = {}
        for label, argv, env in cases:
            runs = []
            for i in range(repeat):
                if env is None:  # a new empty cache each time: every run is a first run
                    run_env = child_env(NUMBA_CACHE_DIR=str(Path(d) / f"numba-cache-{i}"))
                else:
                    run_env = env
                runs.append(timed_child(argv, run_env))
            results[label] = {"wall": [r[0] for r in runs], "cpu": [r[2] for r in runs]}
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
