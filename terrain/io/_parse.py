"""Kernels of the ASCII grid parser: the newline index and row parsing (C, via ctypes).

Numbers are parsed the way GDAL's ASCII readers do it (``strtod`` to a double, then a cast
to float32), bit for bit, with Clinger's exact fast path: a decimal significand ``m`` with
``m <= 2**53`` (an exact double) and a power of ten ``|e| <= 22`` (an exact double too)
gives ``m * 10**e`` or ``m / 10**-e``, one IEEE operation and therefore the correctly
rounded double that ``strtod`` returns. That covers every token with at most 15
significant digits. Other tokens (more digits, huge exponents) are marked in the output
with a NaN payload (:data:`SLOW_BITS`) and counted; the caller re-parses those with
Python's ``float`` (also correctly rounded). ``_parse.cu`` is the GPU twin (per token).

Why C through ctypes, written by hand: NumPy has no bytes-to-float parser that works on a
buffer in place, and a Numba kernel costs every process ~0.5 CPU s before its first call
(importing Numba and loading its cache), more than the whole parse of a 100 MB grid on two
cores. ``_parse.c`` is plain C99 with no Python API: ``pip install .`` compiles it into the
package (``setup.py``), and a checkout without that build compiles it on first use with the
system C compiler into a cache (:func:`load_library`). ctypes releases the GIL around each
call, so the row blocks of one file parse in parallel threads.

>>> import numpy as np
>>> text = np.frombuffer(b"1.5 -2 -9999\\n3e2 * 7\\n", dtype=np.uint8)
>>> out = np.empty((2, 3), dtype=np.float32)
>>> status, row, count, t0, t1, n_slow, stats = parse_rows(
...     text, np.array([0, 13, 21]), 3, out, np.float32(-9999), True, True)
>>> status == PARSE_OK, out.tolist()
(True, [[1.5, -2.0, nan], [300.0, nan, 7.0]])
>>> stats, nan_min_max(out)
((2, -2.0, 300.0), (2, -2.0, 300.0))
"""

import ctypes
import hashlib
import importlib.machinery
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

__all__ = ["newline_offsets", "parse_rows", "nan_min_max", "load_kernels", "load_library",
           "PARSE_OK", "PARSE_BAD_TOKEN", "PARSE_ROW_LENGTH", "SLOW_BITS", "SOURCE", "CFLAGS"]

PARSE_OK = 0
PARSE_BAD_TOKEN = 1
PARSE_ROW_LENGTH = 2

#: float32 bit pattern (a quiet NaN with a payload) marking cells for the slow path; nodata is
#: the canonical NaN 0x7FC00000, so the two never mix up.
SLOW_BITS = np.uint32(0x7FC0DEAD)

#: the C source, and the flags it is compiled with (here and by setup.py): IEEE doubles kept
#: (no fused multiply-add, no fast-math), no Python headers needed. ``-O3`` rather than
#: ``-O2``: the byte loops parse 17-22 % faster on the AMD EPYC VM (700 -> 850 MB/s a core),
#: the same on the H100 hosts' Xeon (~510; docs/benchmarks.md); it changes no floating-point
#: semantics.
SOURCE = Path(__file__).with_name("_parse.c")
CFLAGS = ("-std=c99", "-O3", "-ffp-contract=off", "-fno-fast-math", "-fPIC", "-shared")
#: module name of the library setup.py builds into the package (loaded by path, not imported)
BUILT_NAME = "_parse_c"

_i64, _vp = ctypes.c_int64, ctypes.c_void_p
_lib = None
_lib_lock = threading.Lock()


def newline_offsets(text, base=0, expected=None):
    """``base +`` offsets just after each ``\\n`` in ``text`` (a 1-D uint8 array), int64.

    ``memchr`` in C with the GIL released (long lines: a few calls per line; short ones:
    still memory speed). ``expected``, a guess of the count, sizes the output; a low guess
    costs a second pass.

    >>> import numpy as np
    >>> newline_offsets(np.frombuffer(b"ab\\ncd\\n\\ne", dtype=np.uint8), 100).tolist()
    [103, 106, 107]
    """
    lib = load_library()
    text = _bytes_array(text, "newline_offsets")
    cap = max(16, int(expected if expected is not None else text.size // 64 + 16))
    while True:
        out = np.empty(cap, dtype=np.int64)
        n = lib.terrain_newlines(_ptr(text), text.size, int(base), _ptr(out), cap)
        if n <= cap:
            return out[:n] if 2 * n >= cap else out[:n].copy()
        cap = n


def _bytes_array(buf, who):
    buf = np.asarray(buf)
    if buf.dtype != np.uint8 or buf.ndim != 1 or not buf.flags.c_contiguous:
        raise ValueError(f"{who}: the text must be a contiguous 1-D uint8 array")
    return buf


def source_tag():
    """A digest of ``_parse.c`` and :data:`CFLAGS`: a library built from anything else is
    stale. The library reports the tag it was built with (``terrain_parse_source``)."""
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(" ".join(CFLAGS).encode())
    return h.hexdigest()[:16]


def compile_library(target, tag, compiler=None):
    """Compile ``_parse.c`` into the shared library ``target``, atomically.

    The library is written beside ``target`` under a unique name and renamed into place, so
    a process that loads ``target`` never sees half a file, and two that compile at once both
    end with a whole one. ``compiler`` defaults to ``$CC``, else ``cc``, ``gcc`` or ``clang``.

    Raises
    ------
    RuntimeError
        No C compiler, or it failed (its message included).
    """
    target = Path(target)
    cc = compiler or os.environ.get("CC") or next(
        (c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if cc is None:
        raise RuntimeError(
            "terrain's ASCII grid parser is not built and no C compiler was found to build it "
            "(set CC, install gcc, or install terrain with pip, which builds it)")
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    argv = [*cc.split(), *CFLAGS, f'-DTERRAIN_PARSE_SOURCE="{tag}"', "-o", str(tmp),
            str(SOURCE)]
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        raise RuntimeError(f"compiling terrain's ASCII grid parser failed ({' '.join(argv)}): "
                           f"{e}") from None
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"compiling terrain's ASCII grid parser failed ({' '.join(argv)}):\n"
                           f"{proc.stdout.strip()[-2000:]}")
    os.replace(tmp, target)
    return target


def _cache_dirs():
    """Where a library compiled on first use goes: ``__pycache__`` beside the source (as
    Python's and Numba's caches), else ``$TERRAIN_CACHE_DIR``, ``$XDG_CACHE_HOME/terrain``,
    ``~/.cache/terrain``, a per-user temporary directory."""
    dirs = [SOURCE.parent / "__pycache__"]
    if os.environ.get("TERRAIN_CACHE_DIR"):
        dirs.append(Path(os.environ["TERRAIN_CACHE_DIR"]))
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    dirs += [Path(xdg) / "terrain", Path(tempfile.gettempdir()) / f"terrain-{os.getuid()}"]
    return dirs


def _built_library():
    """The library ``pip install .`` built into the package, if there is one."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = SOURCE.with_name(BUILT_NAME + suffix)
        if path.is_file():
            return path
    return None


def _load(path, tag):
    lib = ctypes.CDLL(str(path))
    lib.terrain_parse_source.restype = ctypes.c_char_p
    if tag is not None and lib.terrain_parse_source().decode() != tag:
        return None  # built from another _parse.c (a checkout edited after its install)
    lib.terrain_parse_rows.restype = ctypes.c_int
    lib.terrain_parse_rows.argtypes = [_vp, _vp, _i64, _i64, _vp, _i64, ctypes.c_float,
                                       ctypes.c_int, ctypes.c_int, _vp, _vp]
    lib.terrain_newlines.restype = _i64
    lib.terrain_newlines.argtypes = [_vp, _i64, _i64, _vp, _i64]
    lib.terrain_nan_min_max.restype = None
    lib.terrain_nan_min_max.argtypes = [_vp, _i64, _i64, _i64, _vp, _vp, _vp]
    return lib


def load_library():
    """The parser's shared library, loaded once per process (thread-safe).

    The one ``pip install .`` built, when it was built from this ``_parse.c``; else one
    compiled from it earlier into a cache directory (:func:`_cache_dirs`, keyed by
    :func:`source_tag`); else it is compiled now (about a second) into the first cache
    directory that is writable.

    Raises
    ------
    RuntimeError
        The library must be compiled and cannot be (no compiler, or no writable directory).
    """
    global _lib
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        tag = source_tag() if SOURCE.is_file() else None
        built = _built_library()
        lib = _load(built, tag) if built is not None else None
        if lib is None:
            if tag is None:
                raise RuntimeError(f"terrain's ASCII grid parser: neither a built library nor "
                                   f"its source {SOURCE} is there (a broken install?)")
            name = f"_parse-{tag}{importlib.machinery.EXTENSION_SUFFIXES[0]}"
            cached = next((d / name for d in _cache_dirs() if (d / name).is_file()), None)
            if cached is None:
                errors = []
                for d in _cache_dirs():
                    try:
                        d.mkdir(parents=True, exist_ok=True)
                        cached = compile_library(d / name, tag)
                        break
                    except PermissionError as e:
                        errors.append(f"{d}: {e.strerror}")
                    except OSError as e:
                        errors.append(f"{d}: {e}")
                if cached is None:
                    raise RuntimeError("terrain's ASCII grid parser: no writable directory to "
                                       "compile it into (" + "; ".join(errors) + ")")
            lib = _load(cached, tag)
        _lib = lib
    return _lib


def load_kernels():
    """Load (compiling on first use) the parser's library now, so that the first parse does
    not wait for it; callers run this in a background thread while other work starts."""
    load_library()


def _ptr(a):
    return a.ctypes.data


def parse_rows(buf, starts, ncols, out, nodata, has_nodata, star_is_nodata):
    """Parse rows of numbers into ``out`` (float32, ``len(starts) - 1`` rows × ``ncols``).

    Parameters
    ----------
    buf : uint8 array (1-D, contiguous; read-only is fine)
        Text of the rows; row ``i`` is ``buf[starts[i]:starts[i + 1]]`` (newline included).
        Nothing outside those spans is read.
    starts : int64 array
        Row boundaries in ``buf`` (non-decreasing).
    ncols : int
        Values a row must hold.
    out : float32 array (rows, ncols)
        Values (rows may be strided, cells contiguous); NaN for nodata (``== nodata`` after
        the float32 cast, or ``*``); cells that need the slow path hold the bits
        :data:`SLOW_BITS`.
    nodata : float32
    has_nodata, star_is_nodata : bool

    Returns
    -------
    (status, row, count, token_start, token_end, n_slow, stats)
        ``status`` is PARSE_OK, PARSE_BAD_TOKEN (row, its column in ``count``, the token's
        byte span in ``buf``) or PARSE_ROW_LENGTH (row and the number of values it holds).
        ``stats``: :func:`nan_min_max` of ``out``, counted during the parse (no second pass
        over it); meaningful when the parse is OK and ``n_slow`` is 0.
    """
    lib = load_library()
    buf = _bytes_array(buf, "parse_rows")
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    n_rows = starts.shape[0] - 1
    if (out.dtype != np.float32 or out.ndim != 2 or out.shape != (n_rows, ncols)
            or (ncols > 1 and out.strides[1] != 4) or out.strides[0] % 4):
        raise ValueError(f"parse_rows: out must be float32 {(n_rows, ncols)} with contiguous "
                         f"rows, got {out.dtype} {out.shape}")
    if not out.flags.writeable:
        raise ValueError("parse_rows: out is read-only")
    if n_rows <= 0:
        return PARSE_OK, 0, 0, 0, 0, 0, (0, np.inf, -np.inf)
    if starts[0] < 0 or starts[-1] > buf.size or (n_rows > 1 and (np.diff(starts) < 0).any()):
        raise ValueError("parse_rows: starts must be non-decreasing offsets inside buf")
    result = np.zeros(6, dtype=np.int64)
    minmax = np.zeros(2, dtype=np.float64)
    status = lib.terrain_parse_rows(_ptr(buf), _ptr(starts), n_rows, ncols, _ptr(out),
                                    out.strides[0] // 4, float(nodata), bool(has_nodata),
                                    bool(star_is_nodata), _ptr(result), _ptr(minmax))
    if status < 0:
        raise MemoryError("parse_rows: no memory for a copy of the last row")
    row, count, t0, t1, n_slow, n_nan = (int(v) for v in result)
    return status, row, count, t0, t1, n_slow, (n_nan, float(minmax[0]), float(minmax[1]))


def nan_min_max(z):
    """``(NaN count, min, max)`` of a 2-D float32 array in one pass (min/max ignore NaN;
    ``inf, -inf`` when every value is NaN)."""
    lib = load_library()
    z = np.asarray(z)
    if z.dtype != np.float32 or z.ndim != 2:
        raise ValueError(f"nan_min_max: z must be 2-D float32, got {z.dtype} {z.shape}")
    if z.shape[1] > 1 and z.strides[1] != 4 or z.strides[0] % 4:
        z = np.ascontiguousarray(z)
    n_nan, lo, hi = ctypes.c_int64(), ctypes.c_double(), ctypes.c_double()
    lib.terrain_nan_min_max(_ptr(z), z.shape[0], z.shape[1], z.strides[0] // 4,
                            ctypes.byref(n_nan), ctypes.byref(lo), ctypes.byref(hi))
    return n_nan.value, lo.value, hi.value
