"""The one place that decides where terrain computes: NumPy + Numba (``cpu``) or CuPy (``gpu``).

``--backend cpu|gpu|auto`` on the command line and ``TERRAIN_BACKEND`` in the environment
choose; ``auto`` (the default) takes the GPU when CuPy imports and a CUDA device is present.
Every algorithm module asks :func:`get_backend` for its array module (``backend.xp``) and
loads its CUDA kernels through :meth:`Backend.cuda_module`; no other module imports CuPy.
Each CUDA kernel (a ``.cu`` file) has a CPU twin giving identical results
(``tests/backends.py``).
"""

import functools
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import InputError

__all__ = ["Backend", "get_backend", "array_backend", "gpu_available",
           "count_nonzero", "nanmax", "BACKEND_CHOICES", "GPU_MIN_WORK"]

BACKEND_CHOICES = ("auto", "cpu", "gpu")


@functools.lru_cache(maxsize=None)
def _cupy():
    """CuPy when it imports and sees a device, else None."""
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        return cupy
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU"
        return None


def gpu_available():
    """True when CuPy imports and a CUDA device is present."""
    return _cupy() is not None


@dataclass(frozen=True)
class Backend:
    """Where to compute.

    Attributes
    ----------
    name : {'cpu', 'gpu'}
    xp : module
        ``numpy`` or ``cupy``.
    """

    name: str
    xp: object

    @property
    def is_gpu(self):
        return self.name == "gpu"

    def select(self, cpu, gpu):
        """``gpu`` on the GPU backend, else ``cpu``: the one choice between a CPU kernel table
        and its GPU twin (as :mod:`terrain.graph.mst`'s ``_CpuOps``/``_GpuOps``).

        >>> get_backend("cpu").select("numba kernels", "cuda kernels")
        'numba kernels'
        """
        return gpu if self.is_gpu else cpu

    def kernel_table(self, cpu, gpu):
        """This backend's kernel table: the class ``cpu()`` returns, made with no arguments,
        or on the GPU the class ``gpu()`` returns, made with this backend. A loader may import
        its twin's module when called, so that a run loads its own backend's kernels alone.

        >>> get_backend("cpu").kernel_table(lambda: list, lambda: dict)
        []
        """
        return gpu()(self) if self.is_gpu else cpu()()

    @property
    def ndimage(self):
        """``scipy.ndimage`` or ``cupyx.scipy.ndimage``: the same functions, on this backend's
        arrays (CuPy's label numbers the regions as SciPy's, bit for bit)."""
        if self.is_gpu:
            from cupyx.scipy import ndimage
        else:
            from scipy import ndimage
        return ndimage

    def asarray(self, a, dtype=None):
        """``a`` on this backend's device (a device array comes to the host for the CPU; a
        NumPy array of more than a megabyte goes up through the pinned ring of
        :func:`terrain._transfer.to_device`: the 10-ft DEM's 14 GB at 19 GB/s on an H200
        host, where CuPy's pageable copy runs at about 7, docs/graphs.md)."""
        if not self.is_gpu:
            a = array_backend(a).to_numpy(a)
        elif isinstance(a, np.ndarray) and (dtype is None or np.dtype(dtype) == a.dtype):
            from ._transfer import SMALL_BYTES, to_device
            if a.nbytes > SMALL_BYTES:
                out = self.xp.empty(a.shape, a.dtype)
                to_device(self.xp, [a], [out]).wait()
                return out
        return self.xp.asarray(a, dtype=dtype)

    def to_numpy(self, a):
        """``a`` as a NumPy array on the host (no copy on the CPU backend; a contiguous
        device array of more than a megabyte comes down through the pinned ring of
        :func:`terrain._transfer.to_host`, as :meth:`asarray` sends one up)."""
        if self.is_gpu and not isinstance(a, np.ndarray):
            from ._transfer import SMALL_BYTES, to_host
            if (isinstance(a, self.xp.ndarray) and a.nbytes > SMALL_BYTES
                    and a.flags.c_contiguous):
                return to_host(self.xp, [a])[0]
            return self.xp.asnumpy(a)
        return np.asarray(a)

    def cuda_module(self, cu_file, options=("-std=c++17",), name_expressions=None):
        """The ``cupy.RawModule`` of ``cu_file``, compiled once per process from
        :func:`cuda_source` (so CuPy's compile cache, keyed by the text, sees header edits)."""
        if not self.is_gpu:
            raise RuntimeError("cuda_module() needs the gpu backend")
        return _raw_module(str(cu_file), tuple(options),
                           tuple(name_expressions) if name_expressions else None)

    def free_bytes(self):
        """Free memory of the device, in bytes: CUDA's free plus the free blocks of CuPy's pool
        (CUDA counts them as used; CuPy hands them out again). 0 on the CPU, which has no
        device: the routes compare it as a number."""
        if not self.is_gpu:
            return 0
        free, _ = self.xp.cuda.runtime.memGetInfo()
        return int(free) + int(self.xp.get_default_memory_pool().free_bytes())

    def fits(self, shape, bytes_per_cell, share=0.9, max_cells=None, free=None):
        """True when a device workload of ``bytes_per_cell`` bytes a cell (each workload
        measures its own) on a grid of ``shape`` takes at most ``share`` of the device's free
        memory (:meth:`free_bytes`, or ``free`` bytes) and the grid has at most ``max_cells``
        cells (the bound of the workload's indices). Always False on the CPU.

        >>> get_backend("cpu").fits((10, 10), 22)
        False
        >>> gpu = Backend("gpu", None)  # the device's free memory given, not asked
        >>> gpu.fits((100, 100), 22, free=250_000), gpu.fits((100, 100), 22, free=240_000)
        (True, False)
        """
        n = int(shape[0]) * int(shape[1])
        if not self.is_gpu or (max_cells is not None and n > max_cells):
            return False
        if free is None:
            free = self.free_bytes()
        return bytes_per_cell * n <= share * free

    def device_name(self):
        """A human name of the device, for benchmark records."""
        if self.is_gpu:
            props = self.xp.cuda.runtime.getDeviceProperties(self.xp.cuda.Device().id)
            name = props["name"]
            return name.decode() if isinstance(name, bytes) else str(name)
        import platform

        # the architecture (uname's machine): platform.processor() runs `uname -p` in a
        # child process on Linux, 8 ms of CPU in every CPU run's summary, for the same word
        try:  # the CPUs this process may use (taskset), as its kernels
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count()
        return f"CPU {platform.machine()} x{cpus}"


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[^\n]*$', re.M)
_PRAGMA_ONCE = re.compile(r'^[ \t]*#[ \t]*pragma[ \t]+once[^\n]*$', re.M)


def cuda_source(cu_file, _seen=None):
    """The text of ``cu_file`` with its quoted ``#include`` headers inlined (once each).

    >>> "order_bits" in cuda_source(Path(__file__).parent / "grid" / "_mst_device.cu")
    True
    """
    seen = set() if _seen is None else _seen
    path = Path(cu_file)

    def inline(m):
        header = (path.parent / m.group(1)).resolve()
        if header in seen:
            return f"// {m.group(1)}: already included"
        seen.add(header)
        return f"// begin {m.group(1)}\n{cuda_source(header, seen)}\n// end {m.group(1)}"

    return _INCLUDE.sub(inline, _PRAGMA_ONCE.sub("", path.read_text()))


@functools.lru_cache(maxsize=None)
def _raw_module(cu_file, options, name_expressions):
    cupy = _cupy()
    source = cuda_source(cu_file)
    module = cupy.RawModule(code=source, options=options, name_expressions=name_expressions)
    module.compile()
    return module


_CPU = Backend("cpu", np)


#: ``auto`` keeps a job below this much work (vertices + arcs of a graph) on the CPU without
#: importing CuPy: the device's start and compile cost more than the whole CPU job
#: (break-even: docs/graphs.md)
GPU_MIN_WORK = 1 << 20


def get_backend(name=None, work=None):
    """Resolve a backend name to a :class:`Backend`.

    Parameters
    ----------
    name : {'cpu', 'gpu', 'auto'} or Backend or None
        None reads ``TERRAIN_BACKEND`` (default ``auto``).
    work : int, optional
        The job's size; ``auto`` takes the CPU below :data:`GPU_MIN_WORK`.

    Examples
    --------
    >>> get_backend("cpu").xp.__name__
    'numpy'
    """
    if isinstance(name, Backend):
        return name
    source = "backend"
    if name is None:
        name = os.environ.get("TERRAIN_BACKEND", "auto")
        source = "TERRAIN_BACKEND"
    name = str(name).strip().lower()
    if name not in BACKEND_CHOICES:
        raise InputError(f"{source}: unknown backend {name!r} (choose from cpu, gpu, auto)")
    if name == "cpu" or (name == "auto" and work is not None and work < GPU_MIN_WORK):
        return _CPU
    cupy = _cupy()
    if cupy is None:
        if name == "gpu":
            raise InputError(f"{source}: the gpu backend was asked for, but CuPy or a CUDA device "
                             "is missing")
        return _CPU
    return Backend("gpu", cupy)


def count_nonzero(a):
    """The non-zero elements of array ``a`` (NumPy or CuPy), an int. A device grid is counted
    row by row first: CuPy reduces a whole array to one value in one thread block unless CUB
    takes the reduction (a contiguous array's sum, max, nanmax; not a count, nor any
    reduction of a view), which at the 10-ft size (3.5·10⁹ cells) took 3.6 s for a padded
    grid's interior where rows first take 0.01 s (an H200).

    >>> count_nonzero(np.eye(3))
    3
    """
    xp = array_backend(a).xp
    if xp is np or a.ndim != 2:
        return int(xp.count_nonzero(a))
    return int(xp.count_nonzero(a, axis=1).sum())


def nanmax(a):
    """The largest value of array ``a`` that is not NaN (NaN where there is none), a float;
    on the device row by row first, as :func:`count_nonzero`.

    >>> nanmax(np.array([[1.0, np.nan], [np.nan, np.nan]]))
    1.0
    """
    xp = array_backend(a).xp
    if not a.size:
        return float("nan")
    if xp is np:  # fmax skips NaN without nanmax's all-NaN warning (catch_warnings, which
        # silences it, is not thread-safe: a filter was left behind)
        return float(np.fmax.reduce(a, axis=None))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows, or all NaN
        if a.ndim != 2:
            return float(xp.nanmax(a))
        return float(xp.nanmax(xp.nanmax(a, axis=1)))


def array_backend(a):
    """The backend whose memory holds ``a``: ``gpu`` for a device array (one with the CUDA
    array interface, as CuPy's), else ``cpu``.

    >>> array_backend(np.zeros(3)).name
    'cpu'
    """
    return get_backend("gpu") if hasattr(a, "__cuda_array_interface__") else _CPU
