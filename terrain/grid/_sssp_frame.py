"""The padded frame every in-core SSSP kernel works on (CPU and GPU), and the result type.

The grid is copied into a flat row-major array framed by :data:`PAD` NaN cells on every
side, so a neighbour is ``cell + offset[k]`` without bounds checks (a knight arc reaches two
cells); a grid read into :func:`padded_grid` is that array already, and is not copied. A
cell's label is ``allocation << hop_bits | hops``: on the GPU an int64 with 32 bits of hops,
on the CPU an int32 where allocation and hops fit 30 bits (:func:`label_layout`).
"""

from dataclasses import dataclass, field

import numpy as np

from .costs import ARC_DC, ARC_DR

__all__ = ["PAD", "HOPS_BITS", "NO_LABEL", "UNREACHED_BACKLINK", "GridSSSPResult",
           "offsets", "flat_seeds", "unpad", "label_layout", "padded_grid", "framed"]

PAD = 2
HOPS_BITS = 32
NO_LABEL = np.iinfo(np.int64).max
UNREACHED_BACKLINK = 255


@dataclass
class GridSSSPResult:
    """Labels of every cell (as :mod:`terrain.grid.cost_outputs` defines them; ``hops`` -1
    unreached, None where not asked for) and run statistics; device arrays where asked to
    stay there (:meth:`to_host` downloads them)."""

    distance: np.ndarray
    allocation: np.ndarray
    backlink: np.ndarray
    hops: np.ndarray
    stats: dict = field(default_factory=dict)

    @property
    def reached(self):
        """Number of reached cells."""
        return int(np.count_nonzero(self.allocation >= 0))

    def to_host(self):
        """This result with NumPy arrays: itself, or a copy with its device arrays downloaded.

        >>> r = GridSSSPResult(np.zeros((1, 2)), np.zeros((1, 2), np.int32),
        ...                    np.zeros((1, 2), np.uint8), None)
        >>> r.to_host() is r
        True
        """
        arrays = (self.distance, self.allocation, self.backlink, self.hops)
        if all(a is None or isinstance(a, np.ndarray) for a in arrays):
            return self
        from ..backend import get_backend
        to_numpy = get_backend("gpu").to_numpy
        return GridSSSPResult(*(None if a is None else to_numpy(a) for a in arrays),
                              stats=self.stats)


def offsets(cols):
    """Flat offset of each of the 16 arcs in a padded grid of ``cols`` columns."""
    width = cols + 2 * PAD
    return (ARC_DR * width + ARC_DC).astype(np.int64)


def flat_seeds(rows, cols, costs, ncols, indices=None, hop_bits=HOPS_BITS):
    """``(cells, distances, labels)`` of sources at ``(rows, cols)`` in the padded frame
    (labels: source index ``<< hop_bits``, hops 0)."""
    width = ncols + 2 * PAD
    seeds = ((np.asarray(rows) + PAD) * width + np.asarray(cols) + PAD).astype(np.int64)
    idx = (np.arange(seeds.size, dtype=np.int64) if indices is None
           else np.asarray(indices, np.int64))
    return seeds, np.asarray(costs, np.float64), idx << hop_bits


def label_layout(allocations, hops):
    """``(dtype, hop_bits)`` of the CPU kernels' labels for allocations below
    ``allocations`` and hop counts below ``hops`` (a solve's hops stay below its cell count:
    a least label's path visits a cell once): int32 where both fit 30 bits, so that the
    labels take half the memory and a settled mark (``-1 - label``) and "none"
    (``INT32_MAX``) stay apart from every label; else int64 with :data:`HOPS_BITS`.

    >>> label_layout(1, 4096 * 4096), label_layout(1000, 4096 * 4096)
    ((<class 'numpy.int32'>, 24), (<class 'numpy.int64'>, 32))
    """
    hop_bits = max(1, (int(hops) - 1).bit_length())
    if hop_bits + max(0, (int(allocations) - 1).bit_length()) <= 30:
        return np.int32, hop_bits
    return np.int64, HOPS_BITS


def unpad(a, shape):
    """The unpadded ``shape`` view of a flat padded array."""
    rows, cols = shape
    return a.reshape(rows + 2 * PAD, cols + 2 * PAD)[PAD:PAD + rows, PAD:PAD + cols]


def padded_grid(shape):
    """An empty float32 grid of ``shape`` inside a NaN frame of :data:`PAD` cells: its
    unpadded view, which the in-core SSSP takes as its padded elevations or friction without
    a copy (:func:`framed`). A reader that fills it holds the grid once.

    >>> g = padded_grid((2, 3)); g[...] = 1; framed(g).size
    42
    """
    flat = np.empty((shape[0] + 2 * PAD) * (shape[1] + 2 * PAD), np.float32)
    frame = flat.reshape(shape[0] + 2 * PAD, shape[1] + 2 * PAD)
    frame[:PAD], frame[-PAD:], frame[:, :PAD], frame[:, -PAD:] = np.nan, np.nan, np.nan, np.nan
    return unpad(flat, shape)


def framed(a):
    """The flat padded float32 array whose unpadded view ``a`` is, its frame NaN
    (:func:`padded_grid`); None for any other array.

    >>> framed(np.zeros((2, 3), np.float32)) is None
    True
    """
    base = getattr(a, "base", None)
    if not (isinstance(a, np.ndarray) and isinstance(base, np.ndarray) and a.ndim == 2
            and a.dtype == np.float32 and base.dtype == np.float32 and base.ndim == 1
            and base.flags.c_contiguous):
        return None
    rows, cols = a.shape
    width = cols + 2 * PAD
    if base.size != (rows + 2 * PAD) * width or a.strides != (4 * width, 4) or (
            a.ctypes.data != base.ctypes.data + 4 * (PAD * width + PAD)):
        return None
    frame = base.reshape(rows + 2 * PAD, width)
    if not all(np.isnan(side).all() for side in (frame[:PAD], frame[-PAD:], frame[:, :PAD],
                                                 frame[:, -PAD:])):
        return None
    return base
