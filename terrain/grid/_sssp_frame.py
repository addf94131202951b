"""The padded frame every in-core SSSP kernel works on (CPU and GPU), and the result type.

The grid is copied into a flat row-major array framed by :data:`PAD` NaN cells on every
side, so a neighbour is ``cell + offset[k]`` without bounds checks (a knight arc reaches two
cells). A cell's label is the int64 ``allocation << 32 | hops``.
"""

from dataclasses import dataclass, field

import numpy as np

from .costs import ARC_DC, ARC_DR

__all__ = ["PAD", "HOPS_BITS", "HOPS_MASK", "NO_LABEL", "UNREACHED_BACKLINK", "GridSSSPResult",
           "offsets", "flat_seeds", "unpad"]

PAD = 2
HOPS_BITS = 32
HOPS_MASK = (1 << HOPS_BITS) - 1
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


def flat_seeds(rows, cols, costs, ncols, indices=None):
    """``(cells, distances, labels)`` of sources at ``(rows, cols)`` in the padded frame
    (labels: source index ``<< 32``, hops 0)."""
    width = ncols + 2 * PAD
    seeds = ((np.asarray(rows) + PAD) * width + np.asarray(cols) + PAD).astype(np.int64)
    idx = (np.arange(seeds.size, dtype=np.int64) if indices is None
           else np.asarray(indices, np.int64))
    return seeds, np.asarray(costs, np.float64), idx << HOPS_BITS


def unpad(a, shape):
    """The unpadded ``shape`` view of a flat padded array."""
    rows, cols = shape
    return a.reshape(rows + 2 * PAD, cols + 2 * PAD)[PAD:PAD + rows, PAD:PAD + cols]
