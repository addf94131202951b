"""Build hook: the wheel carries terrain's compiled Numba kernels (pipelines/_warmup.py).

``pyproject.toml`` holds the metadata; this file only adds one step to ``build_py``: after
the sources are copied into the build tree, run every command once on tiny inputs there,
so that Numba writes its cache files (``__pycache__/*.nbi``, ``*.nbc``) beside the copied
modules and they go into the wheel. A failure only prints a warning: the kernels then
compile on first use, as without this step. ``TERRAIN_NO_PRECOMPILE=1`` skips it.

The same cache files are also copied beside the checkout's own sources (their
``__pycache__``, which git ignores): ``python -m terrain.run`` run from the checkout, as the
README's first command does, imports the checkout's modules rather than the installed ones,
and Numba keys its cache by the source's content, so the copies are valid there too.
"""

import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithKernels(build_py):
    def run(self):
        super().run()
        if os.environ.get("TERRAIN_NO_PRECOMPILE") or self.dry_run:
            return
        build_lib = os.path.abspath(self.build_lib)
        # prepend, never replace: pip's isolated build environment reaches its packages
        # (numpy, numba, ...) through PYTHONPATH
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [build_lib] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
        env.pop("NUMBA_CACHE_DIR", None)  # the cache must land beside the modules
        env.pop("NUMBA_DISABLE_JIT", None)
        try:
            proc = subprocess.run([sys.executable, "-m", "pipelines._warmup"], cwd=build_lib,
                                  env=env, timeout=900)
            ok = proc.returncode == 0
        except (OSError, subprocess.SubprocessError) as e:
            print(f"terrain: warm-up did not run: {e}", file=sys.stderr)
            ok = False
        if not ok:
            print("terrain: some Numba kernels were not precompiled; they compile on first use",
                  file=sys.stderr)
        _copy_caches(build_lib, os.path.dirname(os.path.abspath(__file__)))


def _copy_caches(build_lib, checkout):
    """Copy the Numba cache files of the build tree beside the checkout's sources."""
    for dirpath, _, files in os.walk(build_lib):
        rel = os.path.relpath(dirpath, build_lib)
        if os.path.basename(dirpath) != "__pycache__" or rel.split(os.sep)[0] not in (
                "terrain", "pipelines"):
            continue
        target = os.path.join(checkout, rel)
        if not os.path.isdir(os.path.dirname(target)):
            continue  # not a checkout of this source (an sdist build elsewhere)
        for name in files:
            if name.endswith((".nbi", ".nbc")):
                try:
                    os.makedirs(target, exist_ok=True)
                    shutil.copy2(os.path.join(dirpath, name), target)
                except OSError:  # a read-only checkout: the kernels compile on first use
                    return


setup(cmdclass={"build_py": BuildPyWithKernels})
