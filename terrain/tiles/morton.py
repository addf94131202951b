"""Morton (z-order) codes for tile coordinates.

Interleaving the bits of (row, col) puts the four children of every quadtree node next to
each other, so a level merge reads one contiguous run of tiles. The convention is zarr's
(the first axis takes the low bit), so :func:`morton_order` is exactly the order in which
zarr's sharding codec lays out the tiles of a shard on disk.
"""

import numpy as np

__all__ = ["morton_encode", "morton_order"]


def _spread(v):
    v = np.asarray(v, dtype=np.uint64) & np.uint64(0xFFFFFFFF)
    v = (v | (v << np.uint64(16))) & np.uint64(0x0000FFFF0000FFFF)
    v = (v | (v << np.uint64(8))) & np.uint64(0x00FF00FF00FF00FF)
    v = (v | (v << np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    v = (v | (v << np.uint64(2))) & np.uint64(0x3333333333333333)
    v = (v | (v << np.uint64(1))) & np.uint64(0x5555555555555555)
    return v


def morton_encode(row, col):
    """Z-order code of ``(row, col)``: row bits in even positions, col bits in odd ones.

    Examples
    --------
    >>> [int(morton_encode(r, c)) for r, c in [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0)]]
    [0, 1, 2, 3, 4]
    """
    return (_spread(col) << np.uint64(1)) | _spread(row)


def morton_order(n_rows, n_cols):
    """All ``(row, col)`` of an ``n_rows × n_cols`` grid, sorted by Morton code, as an (N, 2) array."""
    r, c = np.meshgrid(np.arange(n_rows), np.arange(n_cols), indexing="ij")
    r, c = r.ravel(), c.ravel()
    order = np.argsort(morton_encode(r, c), kind="stable")
    return np.stack([r[order], c[order]], axis=1)
