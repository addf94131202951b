"""Run ``python -m terrain.run`` as a user would, for the tests."""

import subprocess
import sys

__all__ = ["run_cli"]


def run_cli(*argv, scheduler="synchronous", timeout=120):
    """Run the command line; ``scheduler=None`` starts the default LocalCluster.

    Returns ``(exit status, stdout, stderr)``.
    """
    extra = ["--scheduler", scheduler] if scheduler else []
    proc = subprocess.run([sys.executable, "-m", "terrain.run", *map(str, argv), *extra],
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr
