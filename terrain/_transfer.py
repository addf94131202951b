"""Host <-> device copies through pinned memory: the one transfer helper of the GPU modules.

Pageable arrays cross PCIe several times slower than pinned ones (``cupy.asarray`` and
``.get()`` stage them through the driver on one thread, and fresh output pages fault on
that thread; figures in docs/graphs.md). :func:`to_device` and :func:`to_host` therefore
copy through a *ring* of pinned slots (from CuPy's pinned pool): persistent worker threads
(:func:`workers`) move slot-sized pieces between the caller's arrays and the slots, without
the GIL, while the calling thread issues the asynchronous slot <-> device copies in order on
one stream; a slot is reused once an event (up) or the worker that emptied it (down) says it
is free. Up, a device array may have a narrower integer dtype than its host array: the
workers narrow each piece on its way into its slot and report whether every value fitted.
Down, ``pinned=True`` returns arrays in pinned memory (one direct copy each), and
:class:`DeviceBlocks` reads a device array block by block into small pinned tiles, so a
writer never makes a host copy of the whole array.
"""

import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["to_device", "to_host", "workers", "pinned_empty", "DeviceBlocks",
           "rows_contiguous"]

SLOT_BYTES = 16 << 20
MAX_WORKERS = 16
SPARE_SLOTS = 4         # slots beyond one per worker: copies in flight while all workers copy
SMALL_BYTES = 1 << 20   # below this, equal dtypes: plain copies (no ring, no threads)


@functools.lru_cache(maxsize=None)
def workers():
    """``(pool, workers)``: the persistent copying threads, one per core up to
    :data:`MAX_WORKERS`."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = max(1, min(MAX_WORKERS, cpus or 1))
    return ThreadPoolExecutor(n, thread_name_prefix="terrain-transfer"), n


def _narrow_cpu(src, dst, lo, hi):
    """``dst[:] = src`` into a narrower integer dtype; True when every value lies in
    ``[lo, hi]``, else ``dst`` holds wrapped values. Compiled by :func:`_narrow_kernel`."""
    if src.shape[0] == 0:
        return True
    low = high = src[0]
    for i in range(src.shape[0]):
        x = src[i]
        low = min(low, x)
        high = max(high, x)
        dst[i] = x
    return low >= lo and high <= hi


@functools.lru_cache(maxsize=None)
def _narrow_kernel():
    """:func:`_narrow_cpu` compiled by Numba on first use: transfers that never narrow do
    not pay Numba's import."""
    import numba
    return numba.njit(nogil=True, cache=True)(_narrow_cpu)


def _copy_piece(host, start, dst):
    """Elements ``start...`` of ``host`` into ``dst`` (narrowed if need be); whether every
    value fitted."""
    src = host[start:start + dst.shape[0]]
    if src.dtype == dst.dtype:
        np.copyto(dst, src)
        return True
    info = np.iinfo(dst.dtype)
    return bool(_narrow_kernel()(src, dst, info.min, info.max))


def pinned_empty(cp, shape, dtype):
    """An uninitialised NumPy array in pinned memory (CuPy's pinned pool)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return np.ndarray(shape, dtype, buffer=cp.cuda.alloc_pinned_memory(max(1, nbytes)))


def _pieces(host, device):
    """``(array index, first element, elements)`` of every slot-sized piece."""
    out = []
    for i, (h, d) in enumerate(zip(host, device)):
        step = max(1, SLOT_BYTES // max(h.dtype.itemsize, d.dtype.itemsize))
        out += [(i, s, min(step, h.size - s)) for s in range(0, h.size, step)]
    return out


class Copies:
    """Copies to the device issued by :func:`to_device`: ``fits`` (per array, every host
    value fitted the device dtype; else it holds wrapped values) and ``done`` (an event
    recorded after the last copy)."""

    def __init__(self, fits, done, ring):
        self.fits, self.done, self._ring = fits, done, ring

    def wait(self):
        """Block until the copies are done (then the pinned ring may go)."""
        self.done.synchronize()
        self._ring = None


def _ring(cp, n_pieces):
    """``(pool, slots, ring, events)``: pinned slots all of one size, so CuPy's pinned pool
    hands the same blocks back to every transfer."""
    pool, n = workers()
    slots = min(n + SPARE_SLOTS, max(1, n_pieces))  # small transfers: a small ring
    ring = [np.ndarray(SLOT_BYTES, np.uint8, buffer=cp.cuda.alloc_pinned_memory(SLOT_BYTES))
            for _ in range(slots)]
    events = [cp.cuda.Event(block=True, disable_timing=True) for _ in range(slots)]
    return pool, slots, ring, events


def to_device(cp, host, device, stream=None):
    """Copy the host arrays ``host`` into the contiguous device arrays ``device`` (same
    sizes; a device dtype may be a narrower integer type), asynchronously on ``stream``
    (default: the current one). Keep the returned :class:`Copies` (it holds the pinned ring)
    until they are done: ``wait()`` or synchronise past ``done``."""
    host = [np.ascontiguousarray(a).reshape(-1) for a in host]
    stream = stream if stream is not None else cp.cuda.get_current_stream()
    pieces = _pieces(host, device)
    pool, slots, ring, events = _ring(cp, len(pieces))
    views = [np.dtype(d.dtype) for d in device]
    device_id = cp.cuda.Device().id
    h2d = cp.cuda.runtime.memcpyHostToDevice

    def fill(k):  # host piece k into its slot, once the slot's last copy is done
        i, s, c = pieces[k]
        if k >= slots:
            with cp.cuda.Device(device_id):
                events[k % slots].synchronize()
        return _copy_piece(host[i], s, ring[k % slots].view(views[i])[:c])

    fits = [True] * len(host)
    futures = {k: pool.submit(fill, k) for k in range(min(slots, len(pieces)))}
    try:
        for k, (i, s, c) in enumerate(pieces):
            fits[i] &= futures.pop(k).result()
            size = views[i].itemsize
            cp.cuda.runtime.memcpyAsync(device[i].data.ptr + s * size,
                                        ring[k % slots].ctypes.data, c * size, h2d, stream.ptr)
            events[k % slots].record(stream)
            if k + slots < len(pieces):
                futures[k + slots] = pool.submit(fill, k + slots)
    finally:
        for f in futures.values():
            f.result()
    done = cp.cuda.Event(disable_timing=True)
    done.record(stream)
    return Copies(fits, done, ring)


def to_host(cp, device, pinned=False, stream=None):
    """New NumPy arrays holding the contiguous device arrays ``device``, copied on ``stream``
    (default: the current one) and done on return: pageable arrays filled through the
    pinned ring (direct copies below :data:`SMALL_BYTES`), or with ``pinned=True`` arrays
    in pinned memory, one direct copy each."""
    stream = stream if stream is not None else cp.cuda.get_current_stream()
    d2h = cp.cuda.runtime.memcpyDeviceToHost
    small = sum(a.nbytes for a in device) <= SMALL_BYTES
    if pinned or small:  # one direct copy per array
        empty = pinned_empty if pinned else (lambda cp, shape, dtype: np.empty(shape, dtype))
        out = [empty(cp, a.shape, a.dtype) for a in device]
        for a, o in zip(device, out):
            if a.nbytes:
                cp.cuda.runtime.memcpyAsync(o.ctypes.data, a.data.ptr, a.nbytes, d2h,
                                            stream.ptr)
        stream.synchronize()
        return out
    out = [np.empty(a.shape, a.dtype) for a in device]
    flat = [o.reshape(-1) for o in out]
    pieces = _pieces(flat, flat)
    pool, slots, ring, events = _ring(cp, len(pieces))
    device_id = cp.cuda.Device().id

    def empty(k):  # slot into host piece k, once its copy from the device is done
        i, s, c = pieces[k]
        with cp.cuda.Device(device_id):
            events[k % slots].synchronize()
        np.copyto(flat[i][s:s + c], ring[k % slots].view(flat[i].dtype)[:c])

    futures = {}
    try:
        for k, (i, s, c) in enumerate(pieces):
            if k >= slots:
                futures.pop(k - slots).result()  # the slot's last piece is out
            size = flat[i].dtype.itemsize
            cp.cuda.runtime.memcpyAsync(ring[k % slots].ctypes.data,
                                        device[i].data.ptr + s * size, c * size, d2h,
                                        stream.ptr)
            events[k % slots].record(stream)
            futures[k] = pool.submit(empty, k)
    finally:
        for f in futures.values():
            f.result()
    return out


def rows_contiguous(array):
    """True when ``array`` is 2-D with each row's elements adjacent (rows a pitch apart)."""
    return array.ndim == 2 and (array.shape[1] <= 1 or array.strides[1] == array.itemsize) \
        and array.strides[0] >= array.shape[1] * array.itemsize


_streams = threading.local()  # per thread: {device id: the stream of its block copies}


class DeviceBlocks:
    """A 2-D device array whose rows are contiguous (a C-contiguous array or a window of
    one, such as a padded grid's interior) read block by block into host buffers: the
    *block reader* of :func:`terrain.tiles._shards.write_shard`.

    Each :meth:`read_block` is one strided copy on a non-blocking stream of the calling
    thread's own, so several writer threads' copies overlap their encoding and kernels on
    other streams are not waited for. The caller must have synchronised the device after the
    array was written.
    """

    buffer_kind = "pinned"

    def __init__(self, cp, array):
        if not rows_contiguous(array):
            raise ValueError("DeviceBlocks takes a 2-D device array whose rows are contiguous")
        self.cp, self.array = cp, array
        self.shape, self.dtype = tuple(array.shape), np.dtype(array.dtype)
        self.device_id = array.device.id

    def empty(self, nbytes):
        """A new uint8 buffer of ``nbytes`` bytes in pinned memory (CuPy's pinned pool)."""
        return pinned_empty(self.cp, (nbytes,), np.uint8)

    def read_block(self, out, r0, r1, c0, c1):
        """``out[...] = array[r0:r1, c0:c1]`` (``out``: a 2-D host view of the array's dtype
        whose rows are contiguous)."""
        cp = self.cp
        if np.dtype(out.dtype) != self.dtype or out.shape != (r1 - r0, c1 - c0) or (
                out.ndim != 2 or out.strides[1] != self.dtype.itemsize):
            raise ValueError("read_block: out does not match the block")
        if r1 <= r0 or c1 <= c0:
            return
        with cp.cuda.Device(self.device_id):
            streams = getattr(_streams, "by_device", None)
            if streams is None:
                streams = _streams.by_device = {}
            stream = streams.get(self.device_id)
            if stream is None:
                stream = streams[self.device_id] = cp.cuda.Stream(non_blocking=True)
            item, pitch = self.dtype.itemsize, self.array.strides[0]
            cp.cuda.runtime.memcpy2DAsync(
                out.ctypes.data, out.strides[0], self.array.data.ptr + r0 * pitch + c0 * item,
                pitch, (c1 - c0) * item, r1 - r0, cp.cuda.runtime.memcpyDeviceToHost,
                stream.ptr)
            stream.synchronize()

    def __getitem__(self, key):
        """A NumPy copy of ``array[key]`` (writers that cannot take blocks)."""
        return self.cp.asnumpy(self.array[key])
