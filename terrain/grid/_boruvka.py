"""Per-tile minimum spanning forests by Borůvka supervertex merging (thesis §3.1).

Each round (1) every active vertex finds its lightest edge, in the total order (weight, id),
to another supervertex and the supervertex keeps the minimum (``boruvka_min_edge``: an
atomic min on a packed integer key on the GPU); (2) every supervertex with an edge hooks onto
the supervertex at its other end, and of a mutual pair -- both chose the same edge, the only
possible cycle under a total order -- the smaller root stays a root (``boruvka_hook``, which
also sets the edge's bit in the mask); (3) pointer jumping makes every hooked root point at
its final root (``boruvka_jump``) and (4) every vertex takes its root's new label
(``boruvka_relabel``). A vertex none of whose neighbours lies in another supervertex is
inactive for good. Rounds stop when no supervertex hooks.

Key packing (never a lossy weight). An edge's tile-local index ``4·(row·T + col) + d`` takes
``idx_bits = 2·log2(T) + 2`` bits and orders like the global id inside a tile.

* 32 bits, ``rank << idx_bits | index``, where ``rank`` is the weight's dense rank among the
  distinct weights of its tile (:func:`weight_ranks`; for ``max`` the cells' elevations are
  ranked, an edge's rank being the larger of its two cells' ranks). Used whenever
  ``rank_bits + idx_bits <= 32`` for every tile of the batch (:func:`key_layout`), e.g. integer
  DEMs with tile 512 (20 index bits, up to 4096 distinct weights a tile).
* 64 bits, ``order_bits(float32 weight) << 32 | index``, otherwise.

``key_bits="auto"`` on the GPU ranks the first tile of the batch, and the whole batch only when
that tile fits (a batch fits only if each of its tiles does), so float DEMs pay one small sort.
The ranking is NumPy/CuPy sorting (argsort of ``tile << 32 | order_bits``): a library sort
beats a hand-written one. The CPU has no atomics: its twins compare ``(weight, index)`` pairs
directly, so ``auto`` means 64 there; ``key_bits=32`` on the CPU runs the same ranked keys
(for the tests).

The CUDA kernels (``_boruvka.cu``) process a batch of tiles per launch; the Numba twins
(``_boruvka_*_cpu``) do the same steps tile by tile over compact lists of active vertices and
roots. Both give the unique minimum spanning forest of each tile, so the masks are identical.
There is no tile size limit up to 32768² (the 64-bit key's index half is 32 bits).
"""

from pathlib import Path

import numba
import numpy as np

from ..backend import get_backend
from ..errors import InputError

__all__ = ["boruvka_tiles", "MAX_TILE", "KEY_BITS", "key_layout", "weight_ranks", "tile_weights"]

MAX_TILE = 1 << 15  # 4 * tile² local edge indices must fit 32 bits
KEY_BITS = ("auto", 32, 64)

_NB_DR = np.array([0, 1, 1, 1, 0, -1, -1, -1], np.int64)
_NB_DC = np.array([1, 0, 1, -1, -1, 0, -1, 1], np.int64)
_DR = np.array([0, 1, 1, 1], np.int64)
_DC = np.array([1, 0, 1, -1], np.int64)

from .edges import edge_weight  # noqa: E402  (after the tables: numba reads globals at compile)

# where an edge's weight comes from in the min-edge step
_FROM_Z, _CELL_RANKS, _EDGE_RANKS = 0, 1, 2


def key_layout(tile, max_distinct):
    """Bit budget of the 32-bit key: ``(rank_bits, idx_bits, fits)``.

    ``max_distinct`` is the largest number of distinct weights in one tile of the batch;
    ranks ``0 .. max_distinct - 1`` take ``rank_bits`` bits, the local edge index
    ``idx_bits = 2·log2(tile) + 2``; the 32-bit key is lossless when they sum to at most 32.

    Examples
    --------
    >>> key_layout(512, 4096), key_layout(512, 4097)
    ((12, 20, True), (13, 20, False))
    """
    tile, max_distinct = int(tile), int(max_distinct)
    if tile < 1 or tile & (tile - 1):
        raise InputError(f"key_layout: tile {tile} is not a power of two")
    idx_bits = 2 * (tile.bit_length() - 1) + 2
    rank_bits = max(max_distinct - 1, 0).bit_length()
    return rank_bits, idx_bits, rank_bits + idx_bits <= 32


def weight_ranks(values, xp=np):
    """Dense rank of each weight among the distinct weights of its row (tile).

    Parameters
    ----------
    values : (B, m) float32 array (NumPy or CuPy, as ``xp``)
        Row ``b`` holds tile ``b``'s weights (cell elevations or edge weights), NaN = none.
    xp : numpy or cupy

    Returns
    -------
    ranks : (B, m) uint32 array
        0 for the smallest distinct weight of the tile; 0 where NaN. ``-0.0`` ranks as ``+0.0``.
    max_distinct : int
        The largest number of distinct weights in one tile.

    Examples
    --------
    >>> r, k = weight_ranks(np.array([[2.5, -1, 2.5, np.nan], [7, 7, 7, 7]], np.float32))
    >>> r.tolist(), k
    ([[1, 0, 1, 0], [0, 0, 0, 0]], 2)
    """
    B, m = values.shape
    n = B * m
    if n == 0:
        return xp.zeros((B, m), xp.uint32), 0
    v = values.ravel()
    ok = ~xp.isnan(v)
    bits = xp.where(ok, v + xp.float32(0), xp.float32(0)).astype(xp.float32).view(xp.uint32)
    obits = xp.where((bits >> xp.uint32(31)) != 0, ~bits, bits | xp.uint32(0x80000000))
    none = xp.uint32(0xFFFFFFFF)  # above every order_bits of a number: sorts last in its tile
    obits = xp.where(ok, obits, none).astype(xp.uint64)
    tile = (xp.arange(n, dtype=xp.int64) // m).astype(xp.uint64)
    key = (tile << xp.uint64(32)) | obits
    perm = xp.argsort(key)
    sk = key[perm]
    sk_ok = (sk & xp.uint64(0xFFFFFFFF)) != xp.uint64(0xFFFFFFFF)
    distinct = xp.empty(n + 1, xp.bool_)  # distinct[1 + i]: sorted entry i starts a new weight
    distinct[:2] = True
    distinct[2:] = sk[1:] != sk[:-1]
    distinct[0] = False
    distinct[1:] &= sk_ok
    seen = xp.cumsum(distinct, dtype=xp.int64)  # seen[i]: distinct weights in sorted[:i]
    tile_sorted = (sk >> xp.uint64(32)).astype(xp.int64)
    starts = xp.searchsorted(tile_sorted, xp.arange(B + 1, dtype=xp.int64))
    before = seen[starts[:-1]]
    counts = seen[starts[1:]] - before
    rank_sorted = seen[1:] - 1 - before[tile_sorted]
    ranks = xp.empty(n, xp.uint32)
    ranks[perm] = xp.where(sk_ok, rank_sorted, 0).astype(xp.uint32)
    return ranks.reshape(B, m), int(counts.max())


@numba.njit(cache=True, nogil=True)
def _boruvka_edge_weights_cpu(elev, conn8, model, hlen, out):
    """``out[b, 4·v + d]`` = weight of edge ``(v, d)`` inside tile ``b``, NaN where none."""
    B, T = elev.shape[0], elev.shape[1]
    for b in range(B):
        z = elev[b]
        for r in range(T):
            for c in range(T):
                v = r * T + c
                for d in range(4):
                    w = np.float32(np.nan)
                    rr, cc = r + _DR[d], c + _DC[d]
                    if (conn8 or d < 2) and rr < T and cc >= 0 and cc < T:
                        if not (np.isnan(z[r, c]) or np.isnan(z[rr, cc])):
                            w = edge_weight(z[r, c], z[rr, cc], d, model, hlen)
                    out[b, 4 * v + d] = w


def tile_weights(elev, conn8, model, hlen, be):
    """What the 32-bit key ranks, per tile: ``(values (B, m), per_edge)``.

    ``max``: the cells' elevations (an edge's weight is one of them); other models: every
    edge's weight (``boruvka_edge_weights``, NaN where there is no edge).
    """
    B, T, _ = elev.shape
    xp = be.xp
    if model == 0:
        return elev.reshape(B, T * T), False

    def gpu():
        mod = be.cuda_module(Path(__file__).with_name("_boruvka.cu"))
        out = xp.empty((B, 4 * T * T), xp.float32)
        n = B * T * T
        mod.get_function("boruvka_edge_weights")(
            ((n + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
            (elev, out, np.int64(n), np.int32(T.bit_length() - 1), np.int32(conn8),
             np.int32(model), xp.asarray(hlen, xp.float64)))
        return out

    def cpu():
        out = np.empty((B, 4 * T * T), np.float32)
        _boruvka_edge_weights_cpu(elev, conn8, model, hlen, out)
        return out

    return be.select(cpu, gpu)(), True


@numba.njit(cache=True, nogil=True, inline="always")
def _edge_order_weight(zf, rank, rank_mode, owner, other, d, model, hlen):
    """What orders edge ``(owner, d)``: its weight (``rank_mode`` 0) or the rank the 32-bit
    GPU key uses (1: the larger cell rank, 2: the edge's rank), as float64 (exact either way)."""
    if rank_mode == _FROM_Z:
        return np.float64(edge_weight(zf[owner], zf[other], d, model, hlen))
    if rank_mode == _CELL_RANKS:
        return np.float64(max(rank[owner], rank[other]))
    return np.float64(rank[4 * owner + d])


@numba.njit(cache=True, nogil=True, inline="always")
def _offer_edge(best_w, best_i, x, w, idx):
    """Keep edge ``(w, idx)`` as ``x``'s best if it is lighter in the ``(weight, index)`` order."""
    bi = best_i[x]
    if bi < 0 or w < best_w[x] or (w == best_w[x] and idx < bi):
        best_w[x] = w
        best_i[x] = idx


@numba.njit(cache=True, nogil=True)
def _boruvka_min_edge_cpu(z, comp, active, n_active, best_w, best_i, roots_touched, conn8,
                          model, hlen, rank, rank_mode):
    """Lightest edge (weight, local index) from each active vertex to another supervertex.

    The weight is computed from ``z`` (``rank_mode`` 0) or is the rank the 32-bit GPU key
    uses (1: larger cell rank, 2: edge rank), held as float64 (exact either way).
    Compacts ``active[:n_active]`` in place; returns (new n_active, number of roots touched).
    """
    T = z.shape[0]
    zf = z.ravel()
    n_keep = 0
    n_roots = 0
    for a in range(n_active):
        v = active[a]
        r, c = v // T, v % T
        cv = comp[v]
        bw = np.inf
        bi = -1
        for k in range(8):
            if conn8 == 0 and (k & 3) >= 2:
                continue
            rr, cc = r + _NB_DR[k], c + _NB_DC[k]
            if rr < 0 or rr >= T or cc < 0 or cc >= T:
                continue
            u = rr * T + cc
            cu = comp[u]
            if cu < 0 or cu == cv:
                continue
            d = k & 3
            owner, other = (v, u) if k < 4 else (u, v)
            idx = 4 * owner + d
            w = _edge_order_weight(zf, rank, rank_mode, owner, other, d, model, hlen)
            if w < bw or (w == bw and idx < bi):
                bw, bi = w, idx
        if bi < 0:
            continue
        active[n_keep] = v
        n_keep += 1
        if best_i[cv] < 0:
            roots_touched[n_roots] = cv
            n_roots += 1
        _offer_edge(best_w, best_i, cv, bw, bi)
    return n_keep, n_roots


@numba.njit(cache=True, nogil=True)
def _boruvka_hook_cpu(comp, best_w, best_i, parent, mask, roots, n_roots, T):
    """Hook every root in ``roots[:n_roots]`` onto the root across its chosen edge; mark it."""
    mflat = mask.ravel()
    for a in range(n_roots):
        v = roots[a]
        idx = best_i[v]
        d = idx & 3
        owner = idx >> 2
        other = owner + _DR[d] * T + _DC[d]
        c_owner = comp[owner]
        target = comp[other] if c_owner == v else c_owner
        if best_i[target] == idx and v < target:
            parent[v] = v
        else:
            parent[v] = target
        mflat[owner] |= np.uint8(1 << d)


@numba.njit(cache=True, nogil=True)
def _boruvka_jump_cpu(parent, roots, n_roots):
    """Point every hooked root straight at its final root.

    Sequential, so each walk also compresses its path (the GPU's concurrent jumps cannot):
    the same final parents, without re-walking long chains of the first round."""
    for a in range(n_roots):
        v = roots[a]
        r = parent[v]
        while parent[r] != r:
            r = parent[r]
        x = v
        while parent[x] != r:
            nxt = parent[x]
            parent[x] = r
            x = nxt


@numba.njit(cache=True, nogil=True)
def _boruvka_relabel_cpu(comp, parent, touched, n_touched, best_i):
    """Every vertex takes its root's final label; reset the roots' best edges."""
    for v in range(comp.shape[0]):
        c = comp[v]
        if c >= 0:
            comp[v] = parent[c]
    for a in range(n_touched):
        best_i[touched[a]] = -1


@numba.njit(cache=True, nogil=True)
def _boruvka_tile_cpu(z, conn8, model, hlen, mask, rank, rank_mode):
    T = z.shape[0]
    n = T * T
    zf = z.ravel()
    comp = np.empty(n, np.int32)
    parent = np.empty(n, np.int32)
    active = np.empty(n, np.int64)
    n_active = 0
    for v in range(n):
        if np.isnan(zf[v]):
            comp[v] = -1
        else:
            comp[v] = v
            parent[v] = v
            active[n_active] = v
            n_active += 1
    best_w = np.empty(n, np.float64)
    best_i = np.full(n, -1, np.int64)
    roots = np.empty(n, np.int64)
    while n_active > 0:
        n_active, n_roots = _boruvka_min_edge_cpu(z, comp, active, n_active, best_w, best_i,
                                                  roots, conn8, model, hlen, rank, rank_mode)
        if n_roots == 0:
            break
        _boruvka_hook_cpu(comp, best_w, best_i, parent, mask, roots, n_roots, T)
        _boruvka_jump_cpu(parent, roots, n_roots)
        _boruvka_relabel_cpu(comp, parent, roots, n_roots, best_i)


@numba.njit(cache=True, nogil=True)
def _boruvka_batch_cpu(elev, conn8, model, hlen, mask, rank, rank_mode):
    for b in range(elev.shape[0]):
        _boruvka_tile_cpu(elev[b], conn8, model, hlen, mask[b], rank[b], rank_mode)


_BLOCK = 256


def _ranked_keys(be, elev, conn8, model, hlen, key_bits):
    """Ranks for the 32-bit key, or None where 64 bits are needed (``key_bits`` "auto").

    Returns ``(ranks (B, m) uint32, per_edge)`` or None. A forced 32 that would be lossy is
    an error.
    """
    B, T, _ = elev.shape
    if key_bits == 64 or B == 0:
        return None
    if key_bits == "auto":
        values, _ = tile_weights(elev[:1], conn8, model, hlen, be)
        _, k = weight_ranks(values, be.xp)
        if not key_layout(T, k)[2]:
            return None  # the first tile alone does not fit: the batch cannot
    values, per_edge = tile_weights(elev, conn8, model, hlen, be)
    ranks, k = weight_ranks(values, be.xp)
    rank_bits, idx_bits, fits = key_layout(T, k)
    if fits:
        return ranks, per_edge
    if key_bits == 32:
        raise InputError(f"boruvka_tiles: a 32-bit key is lossy here ({k} distinct weights in a "
                         f"tile need {rank_bits} bits beside {idx_bits} index bits)")
    return None


def _boruvka_batch_gpu(backend, elev, conn8, model, hlen, key_bits):
    cp = backend.xp
    mod = backend.cuda_module(Path(__file__).with_name("_boruvka.cu"))
    B, T, _ = elev.shape
    log2t = T.bit_length() - 1
    n = B * T * T
    z = cp.ascontiguousarray(cp.asarray(elev, dtype=cp.float32))
    ranked = _ranked_keys(backend, z, conn8, model, hlen, key_bits)
    z = z.ravel()
    valid = ~cp.isnan(z)
    comp = cp.where(valid, cp.arange(n, dtype=cp.int32), cp.int32(-1))
    active = valid.astype(cp.uint8)
    parent = cp.arange(n, dtype=cp.int32)
    mask32 = cp.zeros(n, dtype=cp.uint32)
    n_hooks = cp.zeros(1, dtype=cp.int32)
    grid = ((n + _BLOCK - 1) // _BLOCK,)
    nn = np.int64(n)
    if ranked is None:
        k_min, k_hook = mod.get_function("boruvka_min_edge"), mod.get_function("boruvka_hook")
        best = cp.empty(n, dtype=cp.uint64)
        none = np.uint64(0xFFFFFFFFFFFFFFFF)
        min_args = (z, comp, active, best, nn, np.int32(log2t), np.int32(conn8),
                    np.int32(model), cp.asarray(hlen, dtype=cp.float64))
    else:
        k_min, k_hook = mod.get_function("boruvka_min_edge32"), mod.get_function("boruvka_hook32")
        ranks, per_edge = ranked
        best = cp.empty(n, dtype=cp.uint32)
        none = np.uint32(0xFFFFFFFF)
        min_args = (ranks, np.int32(per_edge), comp, active, best, nn, np.int32(log2t),
                    np.int32(conn8))
    k_jump, k_relabel = mod.get_function("boruvka_jump"), mod.get_function("boruvka_relabel")
    while True:
        best.fill(none)
        n_hooks.fill(0)
        k_min(grid, (_BLOCK,), min_args)
        k_hook(grid, (_BLOCK,), (comp, best, parent, mask32, n_hooks, nn, np.int32(log2t)))
        if int(n_hooks.get()[0]) == 0:
            break
        k_jump(grid, (_BLOCK,), (comp, parent, nn))
        k_relabel(grid, (_BLOCK,), (comp, parent, nn))
    return mask32.astype(cp.uint8).reshape(B, T, T)


def boruvka_tiles(elev, connectivity, model, hlen, backend=None, key_bits="auto"):
    """Minimum spanning forest of each tile of a batch, as a direction-bit mask.

    Parameters
    ----------
    elev : (B, T, T) float32 array (NumPy, or CuPy on the GPU), NaN = no vertex
        T a power of two <= 32768; only edges with both ends inside a tile are considered.
    connectivity : {4, 8}
    model : int
        Weight model code (:func:`terrain.grid.edges.weight_model_code`).
    hlen : (4,) float64
        Horizontal lengths (:func:`terrain.grid.edges.horizontal_lengths`).
    backend : str or Backend, optional
    key_bits : {"auto", 32, 64}
        Width of the packed key (module docstring). "auto": 32 bits on the GPU whenever the
        tiles' weight ranks fit, else 64; on the CPU 64 (no atomics, no packing). 32 forces the
        ranked key on either backend and raises :class:`InputError` where it would be lossy.
        The forest is the same for every choice.

    Returns
    -------
    (B, T, T) uint8 array on the backend's device; bit d of a cell is set when its edge in
    direction d is in the tile's forest.

    Examples
    --------
    >>> m = boruvka_tiles(np.array([[[1, 2], [3, 4]]], np.float32), 8, 0, np.ones(4), "cpu")
    >>> m[0].tolist()
    [[7, 0], [0, 0]]
    """
    be = get_backend(backend)
    if elev.ndim != 3 or elev.shape[1] != elev.shape[2]:
        raise InputError(f"boruvka_tiles: elev must be (B, T, T), got {elev.shape}")
    T = int(elev.shape[1])
    if T < 1 or T & (T - 1) or T > MAX_TILE:
        raise InputError(f"boruvka_tiles: tile side {T} is not a power of two <= {MAX_TILE}")
    if key_bits not in KEY_BITS:
        raise InputError(f"boruvka_tiles: key_bits {key_bits!r} is not one of {KEY_BITS}")
    conn8 = 1 if int(connectivity) == 8 else 0
    hlen = np.asarray(hlen, np.float64)
    model = int(model)
    return be.select(_boruvka_batch_host, _boruvka_batch_gpu)(be, elev, conn8, model, hlen,
                                                               key_bits)


def _boruvka_batch_host(be, elev, conn8, model, hlen, key_bits):
    """:func:`boruvka_tiles` on the CPU (the Numba twins, tile by tile)."""
    z = np.ascontiguousarray(elev, dtype=np.float32)
    mask = np.zeros(z.shape, np.uint8)
    ranked = _ranked_keys(be, z, conn8, model, hlen, key_bits) if key_bits == 32 else None
    if ranked is None:
        rank, mode = np.zeros((z.shape[0], 0), np.uint32), _FROM_Z
    else:
        rank, mode = ranked[0], (_EDGE_RANKS if ranked[1] else _CELL_RANKS)
    _boruvka_batch_cpu(z, conn8, model, hlen, mask, rank, mode)
    return mask
