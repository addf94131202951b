"""Per-tile minimum spanning forests by Borůvka supervertex merging (thesis §3.1), the CPU's
tiled path (Numba).

Each round: every active vertex's lightest edge to another supervertex (``(weight, id)``
order), hooking (of a mutual pair the smaller root stays), pointer jumping, relabelling; a
vertex with no neighbour in another supervertex is inactive for good. The tile-local index
``4·(row·T + col) + d`` orders like the global id, so each tile's forest is the unique one
(docs/mst.md).
"""

import numba
import numpy as np

from .. import native
from ..backend import get_backend
from ..errors import InputError
from ..native.flag import stopped

from .edges import DCOL, DROW, MAX_TILE, NB_DCOL, NB_DROW
from .kernels import edge_weight

__all__ = ["boruvka_tiles"]


@numba.njit(cache=True, nogil=True, inline="always")
def _offer_edge(best_w, best_i, x, w, idx):
    """Keep edge ``(w, idx)`` as ``x``'s best if it is lighter in the ``(weight, index)`` order."""
    bi = best_i[x]
    if bi < 0 or w < best_w[x] or (w == best_w[x] and idx < bi):
        best_w[x] = w
        best_i[x] = idx


@numba.njit(cache=True, nogil=True)
def _boruvka_min_edge_cpu(z, comp, active, n_active, best_w, best_i, roots_touched, conn8,
                          model, hlen):
    """Lightest edge from each active vertex to another supervertex; compacts ``active``:
    ``(new n_active, roots touched)``."""
    T = z.shape[0]
    zf = z.ravel()
    n_keep = 0
    n_roots = 0
    for a in range(n_active):
        v = active[a]
        r, c = v // T, v % T
        cv = comp[v]
        bw = np.float32(np.inf)
        bi = -1
        for k in range(8):
            if conn8 == 0 and (k & 3) >= 2:
                continue
            rr, cc = r + NB_DROW[k], c + NB_DCOL[k]
            if rr < 0 or rr >= T or cc < 0 or cc >= T:
                continue
            u = rr * T + cc
            cu = comp[u]
            if cu < 0 or cu == cv:
                continue
            d = k & 3
            owner, other = (v, u) if k < 4 else (u, v)
            idx = 4 * owner + d
            w = edge_weight(zf[owner], zf[other], d, model, hlen)
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
        other = owner + DROW[d] * T + DCOL[d]
        c_owner = comp[owner]
        target = comp[other] if c_owner == v else c_owner
        if best_i[target] == idx and v < target:
            parent[v] = v
        else:
            parent[v] = target
        mflat[owner] |= np.uint8(1 << d)


@numba.njit(cache=True, nogil=True)
def _boruvka_jump_cpu(parent, roots, n_roots):
    """Point every hooked root at its final root, compressing each path as it walks."""
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
def _boruvka_tile_cpu(z, conn8, model, hlen, mask):
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
    best_w = np.empty(n, np.float32)
    best_i = np.full(n, -1, np.int64)
    roots = np.empty(n, np.int64)
    while n_active > 0:
        n_active, n_roots = _boruvka_min_edge_cpu(z, comp, active, n_active, best_w, best_i,
                                                  roots, conn8, model, hlen)
        if n_roots == 0:
            break
        _boruvka_hook_cpu(comp, best_w, best_i, parent, mask, roots, n_roots, T)
        _boruvka_jump_cpu(parent, roots, n_roots)
        _boruvka_relabel_cpu(comp, parent, roots, n_roots, best_i)


@numba.njit(cache=True, nogil=True)
def _boruvka_batch_cpu(elev, conn8, model, hlen, mask, stop):
    for b in range(elev.shape[0]):
        if stopped(stop):  # the run is stopping (terrain.native.interruptible)
            return
        _boruvka_tile_cpu(elev[b], conn8, model, hlen, mask[b])



def boruvka_tiles(elev, connectivity, model, hlen, backend=None):
    """Minimum spanning forest of each tile of a batch, as a direction-bit mask.

    Parameters
    ----------
    elev : (B, T, T) float32 array, NaN = no vertex
        T a power of two <= 32768; only edges with both ends inside a tile are considered.
    connectivity : {4, 8}
    model : int
        Weight model code (:func:`terrain.grid.edges.weight_model_code`).
    hlen : (4,) float64
        Horizontal lengths (:func:`terrain.grid.edges.horizontal_lengths`).
    backend : str or Backend, optional
        A device array is brought to the host first: tile batches run on the CPU.

    Returns
    -------
    (B, T, T) uint8 NumPy array; bit d of a cell is set when its edge in direction d is in
    the tile's forest.

    Examples
    --------
    >>> m = boruvka_tiles(np.array([[[1, 2], [3, 4]]], np.float32), 8, 0, np.ones(4), "cpu")
    >>> m[0].tolist()
    [[7, 0], [0, 0]]
    """
    elev = get_backend(backend).to_numpy(elev)
    if elev.ndim != 3 or elev.shape[1] != elev.shape[2]:
        raise InputError(f"boruvka_tiles: elev must be (B, T, T), got {elev.shape}")
    T = int(elev.shape[1])
    if T < 1 or T & (T - 1) or T > MAX_TILE:
        raise InputError(f"boruvka_tiles: tile side {T} is not a power of two <= {MAX_TILE}")
    z = np.ascontiguousarray(elev, dtype=np.float32)
    mask = np.zeros(z.shape, np.uint8)
    native.interruptible(_boruvka_batch_cpu, z, 1 if int(connectivity) == 8 else 0, int(model),
                         np.asarray(hlen, np.float64), mask)
    return mask
