"""Build hook: the wheel carries terrain's compiled Numba kernels (pipelines/_warmup.py).

``pyproject.toml`` holds the metadata; this file only adds one step to ``build_py``: after
the sources are copied into the build tree, run every command once on tiny inputs there,
so that Numba writes its cache files (``__pycache__/*.nbi``, ``*.nbc``) beside the copied
modules and they go into the wheel. A failure only prints a warning: the kernels then
compile on first use, as without this step. ``TERRAIN_NO_PRECOMPILE=1`` skips it.
"""

import os
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
        env = dict(os.environ, PYTHONPATH=build_lib)
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


setup(cmdclass={"build_py": BuildPyWithKernels})
