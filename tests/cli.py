"""Run ``python -m terrain.run`` as a user would, for the tests."""

import subprocess
import sys

__all__ = ["run_cli", "run_main"]


def run_cli(*argv, scheduler="synchronous", timeout=120):
    """Run the command line; ``scheduler=None`` starts the default LocalCluster.

    Returns ``(exit status, stdout, stderr)``.
    """
    extra = ["--scheduler", scheduler] if scheduler else []
    proc = subprocess.run([sys.executable, "-m", "terrain.run", *map(str, argv), *extra],
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def run_main(capsys, *argv, scheduler="synchronous"):
    """``terrain.run.main`` in this process (fast: no interpreter start, kernels loaded once);
    ``capsys`` is pytest's fixture. Returns ``(exit status, stdout, stderr)``."""
    from terrain.run import main

    capsys.readouterr()
    extra = ["--scheduler", scheduler] if scheduler else []
    rc = main([*map(str, argv), *extra])
    out, err = capsys.readouterr()
    return rc, out, err
