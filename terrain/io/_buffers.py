"""A process-wide pool of reusable byte buffers for the ingest's band tasks: first-touching
fresh pages of a large band costs about as much as parsing its text, so the tasks of one
ingest reuse them; the pool is emptied when the ingest finishes.
"""

import threading

import numpy as np

__all__ = ["BufferPool", "BUFFERS"]


class BufferPool:
    """Thread-safe free list of uint8 buffers.

    Examples
    --------
    >>> pool = BufferPool()
    >>> a = pool.take(1000, np.float32, (10, 25))
    >>> pool.give(a); pool.take(800, np.uint8).base is a.base
    True
    """

    def __init__(self):
        self._free = []
        self._lock = threading.Lock()

    def take(self, nbytes, dtype=np.uint8, shape=None):
        """A buffer of at least ``nbytes``, viewed as ``dtype`` (and ``shape``)."""
        with self._lock:
            fits = [i for i, b in enumerate(self._free) if b.size >= nbytes]
            raw = (self._free.pop(min(fits, key=lambda i: self._free[i].size)) if fits
                   else None)
        if raw is None:
            raw = np.empty(max(int(nbytes), 1), dtype=np.uint8)
        dtype = np.dtype(dtype)
        view = raw[: nbytes - nbytes % dtype.itemsize].view(dtype)
        return view if shape is None else view.reshape(shape)

    def give(self, array):
        """Return a buffer obtained from :meth:`take` (views of it are fine)."""
        raw = array
        while raw.base is not None and isinstance(raw.base, np.ndarray):
            raw = raw.base
        with self._lock:
            if not any(b is raw for b in self._free):
                self._free.append(raw)

    def clear(self):
        """Drop every pooled buffer (their memory goes back when unreferenced)."""
        with self._lock:
            self._free.clear()


BUFFERS = BufferPool()
