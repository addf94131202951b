"""Build hook: the wheel carries terrain's ASCII grid parser compiled, and its Numba kernels.

``pyproject.toml`` holds the metadata; this file adds two steps to ``build_py``, after the
sources are copied into the build tree:

1. compile ``terrain/io/_parse.c`` (the ASCII grid parser, loaded with ctypes) into
   ``terrain/io/_parse_c<EXT_SUFFIX>`` there, with :func:`terrain.io._parse.compile_library`
   -- the very call a checkout without a build makes on first use, with the same flags
   (``CFLAGS`` there). Not a setuptools ``Extension``: the library has no Python API (no
   ``PyInit``, no ``Python.h``), and ``build_ext`` would compile it with the interpreter's
   own flags instead, so an installed parser and a checkout's could differ. The distribution
   says it has extension modules, so the wheel gets a platform tag. Without a C compiler the
   build fails here, with a message: the parser cannot work without it. The library is also copied into the checkout's
   ``terrain/io/__pycache__`` (under the name the first-use compile would give it), for
   ``python -m terrain.run`` run from the checkout.
2. run every command once on tiny inputs there, so that Numba writes its cache files
   (``__pycache__/*.nbi``, ``*.nbc``) beside the copied modules and they go into the wheel.
   A failure only prints a warning: the kernels then compile on first use, as without this
   step. ``TERRAIN_NO_PRECOMPILE=1`` skips it.

The same cache files are also copied beside the checkout's own sources (their
``__pycache__``, which git ignores): ``python -m terrain.run`` run from the checkout, as the
README's first command does, imports the checkout's modules rather than the installed ones,
and Numba keys its cache by the source's content, so the copies are valid there too.
"""

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py


class BinaryDistribution(Distribution):
    """The wheel holds a compiled library (the parser): a platform wheel, not ``py3-none-any``."""

    def has_ext_modules(self):
        return True


def _build_parser(build_lib, checkout):
    """Compile the ASCII grid parser into the build tree (and copy it into the checkout)."""
    path = os.path.join(build_lib, "terrain", "io", "_parse.py")
    spec = importlib.util.spec_from_file_location("_terrain_parse_build", path)
    parse = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(parse)  # the module alone (numpy is a build requirement)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    tag = parse.source_tag()
    try:
        built = parse.compile_library(parse.SOURCE.with_name(parse.BUILT_NAME + suffix), tag)
    except RuntimeError as e:
        sys.exit(f"terrain: cannot build the ASCII grid parser: {e}")
    cache = os.path.join(checkout, "terrain", "io", "__pycache__")
    if os.path.isfile(os.path.join(checkout, "terrain", "io", "_parse.c")):
        try:
            os.makedirs(cache, exist_ok=True)
            shutil.copy2(built, os.path.join(cache, f"_parse-{tag}{suffix}"))
        except OSError:  # a read-only checkout: it compiles on first use there
            pass


class BuildPyWithKernels(build_py):
    def run(self):
        super().run()
        if self.dry_run:
            return
        build_lib = os.path.abspath(self.build_lib)
        _build_parser(build_lib, os.path.dirname(os.path.abspath(__file__)))
        if os.environ.get("TERRAIN_NO_PRECOMPILE"):
            return
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


setup(cmdclass={"build_py": BuildPyWithKernels}, distclass=BinaryDistribution)
