"""Per-vertex and per-edge result tables in the graph's own ids: Parquet, CSV, NPZ (NPY).

The suffix picks the format (docs/graphs.md, "Results with ids"); ``.npy`` holds only the
distances, and only when the ids are ``0..n-1``. Written atomically, never over an existing
file unless ``overwrite``.
"""

from pathlib import Path

import numpy as np

from ..io.outputs import atomic_output
from ..errors import InputError

__all__ = ["TABLE_SUFFIXES", "write_table", "vertex_table", "check_table_path"]

TABLE_SUFFIXES = (".parquet", ".csv", ".npz", ".npy")


def check_table_path(path, dense_ids=True):
    """Raise :class:`InputError` for a suffix :func:`write_table` cannot write."""
    suffix = Path(path).suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise InputError(f"{path}: unknown output format {suffix or '(no suffix)'!r} for a "
                         f"graph's table (choose from {', '.join(TABLE_SUFFIXES)})")
    if suffix == ".npy" and not dense_ids:
        raise InputError(f"{path}: .npy holds distances by row number only, and this graph's "
                         "ids are not 0..n-1: write .parquet, .csv or .npz (with the ids)")
    if suffix == ".parquet":
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise InputError(f"{path}: writing Parquet needs pyarrow (pip install "
                             "'terrain[parquet]'), or write .csv or .npz") from None
    return suffix


def dense_ids(graph):
    """True when the graph's ids are ``0..n-1`` (row i is vertex i)."""
    return graph.ids is None and graph.id_base == 0


def vertex_table(graph, dist, pred=None):
    """Columns ``id``, ``distance``, ``predecessor`` as a dict, from a search's ``dist`` (in
    internal order) and ``pred`` (the graph's ids, -1 for none)."""
    ids = graph.id_array()
    if ids.dtype.kind not in "iu":
        raise InputError(f"{graph.name}: only integer vertex ids can be written to a table")
    columns = {"id": ids.astype(np.int64), "distance": np.asarray(dist)}
    if pred is not None:
        columns["predecessor"] = np.asarray(pred, np.int64)
    return columns


def write_table(path, columns, overwrite=False):
    """Write ``columns`` (name -> 1-D array, equal lengths) to ``path`` by its suffix.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "d.csv")
    >>> write_table(p, {"id": np.array([10, 20]), "distance": np.array([0.0, 1.5])})
    >>> print(open(p).read().strip())
    id,distance
    10,0.0
    20,1.5
    """
    path = Path(path)
    suffix = check_table_path(path)
    with atomic_output(path, overwrite) as tmp:
        if suffix == ".npy":
            with open(tmp, "wb") as f:
                np.save(f, columns["distance"])
        elif suffix == ".npz":
            with open(tmp, "wb") as f:
                np.savez(f, **columns)
        elif suffix == ".parquet":
            _write_parquet(tmp, columns)
        else:
            _write_csv(tmp, columns)


def _write_parquet(path, columns):
    """One Parquet table: arrays handed to Arrow as buffers (no copy, no pandas import), no
    dictionary pages (slow to encode for distinct distances, little space saved)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    arrays = []
    for a in columns.values():
        a = np.ascontiguousarray(a)
        arrays.append(pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), a.size,
                                            [None, pa.py_buffer(a)]))
    pq.write_table(pa.Table.from_arrays(arrays, names=list(columns)), str(path),
                   use_dictionary=False)


def _write_csv(path, columns):
    """A header row, then the rows as C formats them (``%.17g`` for reals)."""
    from . import _native
    with open(path, "wb") as f:
        f.write((",".join(columns) + "\n").encode())
        for block in _native.format_rows([np.asarray(a) for a in columns.values()]):
            f.write(block)
