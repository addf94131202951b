"""Build hook: the wheel carries terrain's C kernels compiled, and its Numba kernels.

``pyproject.toml`` holds the metadata; this file adds two steps to ``build_py``, after the
sources are copied into the build tree (nothing is ever written into the source checkout):

1. compile ``terrain/native/kernels.c`` (loaded with ctypes) into the build tree with
   :func:`terrain.native.compile_library` -- the very call a checkout without a build makes
   on first use, with the same flags. Not a setuptools ``Extension``: the library has no
   Python API, and ``build_ext`` would compile it with the interpreter's own flags instead,
   so an installed library and a checkout's could differ. The distribution says it has
   extension modules, so the wheel gets a platform tag. Without a C compiler the build
   fails here, with a message.
2. compile the Numba kernels the commands use into their on-disk cache in the build tree,
   so that they go into the wheel and the first run after ``pip install .`` loads them.
   A failure only prints a warning: the kernels then compile on first use.
   ``TERRAIN_NO_PRECOMPILE=1`` skips it.
"""

import atexit
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py


class BinaryDistribution(Distribution):
    """The wheel holds a compiled library (the parser): a platform wheel, not ``py3-none-any``."""

    def has_ext_modules(self):
        return True


def _build_native(build_lib):
    """Compile terrain's C kernels (terrain/native/kernels.c) into the build tree."""
    path = os.path.join(build_lib, "terrain", "native", "__init__.py")
    spec = importlib.util.spec_from_file_location("_terrain_native_build", path)
    native = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(native)  # the module alone: no terrain import at build time
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    try:
        native.compile_library(native.SOURCE.with_name(native.BUILT_NAME + suffix),
                               native.source_tag())
    except RuntimeError as e:
        sys.exit(f"terrain: cannot build its C kernels: {e}")


class BuildPyWithKernels(build_py):
    def run(self):
        super().run()
        if self.dry_run:
            return
        build_lib = os.path.abspath(self.build_lib)
        _build_native(build_lib)
        if os.environ.get("TERRAIN_NO_PRECOMPILE"):
            return
        # prepend, never replace: pip's isolated build environment reaches its packages
        # (numpy, numba, ...) through PYTHONPATH
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [build_lib] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
        env.pop("NUMBA_CACHE_DIR", None)  # the cache must land beside the modules
        env.pop("NUMBA_DISABLE_JIT", None)
        try:
            proc = subprocess.run([sys.executable, "-m", "terrain._precompile"], cwd=build_lib,
                                  env=env, timeout=900)
            ok = proc.returncode == 0
        except (OSError, subprocess.SubprocessError) as e:
            print(f"terrain: warm-up did not run: {e}", file=sys.stderr)
            ok = False
        if not ok:
            print("terrain: some Numba kernels were not precompiled; they compile on first use",
                  file=sys.stderr)


# Build products go to a temporary folder, never into the source checkout (pip builds in
# the source tree: setuptools' defaults would leave build/ and terrain.egg-info/ there).
_SCRATCH = tempfile.mkdtemp(prefix="terrain-build-")
atexit.register(shutil.rmtree, _SCRATCH, True)
setup(cmdclass={"build_py": BuildPyWithKernels}, distclass=BinaryDistribution,
      options={"build": {"build_base": os.path.join(_SCRATCH, "build")},
               "egg_info": {"egg_base": _SCRATCH}})
