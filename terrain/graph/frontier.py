"""The frontier core: traversal state on a backend and the operators that advance it.

A traversal (BFS here; diameter and, later, SSSP on top of it) is a small loop over a few
operators that each turn the frontier of one level into the next, in the spirit of Gunrock:

``seed``
    put the sources in level 0.
``advance_topdown`` (expand-contract)
    gather the adjacency lists of the frontier and claim the unvisited neighbours into the
    next vertex queue, in one kernel. Lists of >= 256 edges are strip-mined by a whole
    block, lists of >= 32 by a warp, the rest by scan-based gathering (a block-wide prefix
    sum packs them); enqueue offsets come from block-wide prefix sums with one atomicAdd
    per block (Merrill, Garland & Grimshaw 2012, sec. 4.1 and 5.1).
``advance_balanced`` (edge-balanced expand-contract)
    one thread per frontier *edge*, its vertex found by binary search in the prefix sum of
    the frontier's degrees (Gunrock's load-balanced advance): a hub's list is spread over
    the whole GPU instead of one block — what scale-free graphs need.
``expand`` + ``contract`` (two-phase)
    the same gathering into an edge queue, then a separate filter of that queue: visited
    bitmask, label check, warp-local duplicate culling, exact atomic claim (sec. 4.2, 5.3).
``advance_bottomup``
    every unvisited vertex scans its list for a frontier vertex and stops at the first
    (direction-optimising BFS, Beamer, Asanović & Patterson 2012; beyond the paper).
``parents``
    the smallest-id neighbour one level closer: deterministic predecessors, identical on
    every backend however the levels were built.

Each operator is a CUDA kernel in ``_frontier.cu`` (gpu backend) or a Numba function
``_<name>_cpu`` here (cpu backend) with the same contract: the same ``dist`` labels and
the same set of vertices in the next queue (queue *order* is free; nothing depends on it).
The sequential CPU twins need no bitmask and no culling — a label check is exact when one
thread discovers — and return ``(count, degree_sum)`` of the new frontier directly; the GPU
writes them to a ring of per-level counter slots that the host reads back at most once per
level (or once per batch of levels on sparse, long-diameter graphs).
"""

from pathlib import Path

import numba
import numpy as np

from ..backend import get_backend
from .csr import Graph

__all__ = ["FrontierCore", "BLOCK", "SLOTS"]

BLOCK = 256          # threads per block; CTA-gathering threshold (must match _frontier.cu)
SLOTS = 64           # ring of per-level counter slots (must match _frontier.cu)
_RESIDENT_BLOCKS_PER_SM = 8


# --------------------------------------------------------------------------- CPU twins

@numba.njit(nogil=True, cache=True)
def _seed_sources_cpu(indptr, sources, q, dist):
    degsum = 0
    for i in range(sources.shape[0]):
        s = sources[i]
        dist[s] = 0
        q[i] = s
        degsum += indptr[s + 1] - indptr[s]
    return sources.shape[0], degsum


@numba.njit(nogil=True, cache=True)
def _advance_topdown_cpu(indptr, indices, in_q, n_in, out_q, dist, level):
    count = 0
    degsum = 0
    nxt = level + 1
    for i in range(n_in):
        u = in_q[i]
        for e in range(indptr[u], indptr[u + 1]):
            w = indices[e]
            if dist[w] < 0:
                dist[w] = nxt
                out_q[count] = w
                count += 1
                degsum += indptr[w + 1] - indptr[w]
    return count, degsum


@numba.njit(nogil=True, cache=True)
def _advance_bottomup_cpu(indptr, indices, out_q, dist, level):
    count = 0
    degsum = 0
    n = indptr.shape[0] - 1
    for v in range(n):
        if dist[v] >= 0:
            continue
        for e in range(indptr[v], indptr[v + 1]):
            if dist[indices[e]] == level:
                dist[v] = level + 1
                out_q[count] = v
                count += 1
                degsum += indptr[v + 1] - indptr[v]
                break
    return count, degsum


@numba.njit(nogil=True, cache=True)
def _bfs_parents_cpu(indptr, indices, dist, pred):
    for v in range(dist.shape[0]):
        d = dist[v]
        p = -1
        if d > 0:
            for e in range(indptr[v], indptr[v + 1]):
                u = indices[e]
                if dist[u] == d - 1:
                    p = u
                    break
        pred[v] = p


# --------------------------------------------------------------------------- the core

class FrontierCore:
    """Traversal state of one graph on one backend, and its frontier operators.

    Parameters
    ----------
    graph : Graph
    backend : str or Backend, optional

    Notes
    -----
    Allocates ``dist`` (int32), two vertex queues, and on the GPU a bitmask, a counter ring
    and (lazily, for two-phase levels) an edge queue of ``2m`` entries. Reuse one core for
    many traversals of the same graph (diameter, benchmarks): only ``seed`` resets state.

    Examples
    --------
    >>> from terrain.graph.csr import build_csr
    >>> core = FrontierCore(build_csr(3, [0, 1], [1, 2]), "cpu")
    >>> core.seed([0])
    (1, 1)
    >>> core.advance_topdown(0, 1)
    (1, 2)
    >>> core.dist.tolist()
    [0, 1, -1]
    """

    def __init__(self, graph, backend=None):
        if not isinstance(graph, Graph):
            raise TypeError(f"FrontierCore: expected a Graph, got {type(graph).__name__}")
        self.backend = get_backend(backend)
        xp = self.backend.xp
        self.graph = graph
        self.n = graph.n
        self.nnz = graph.nnz
        self.index_dtype = graph.indices.dtype
        self.indptr = self.backend.asarray(graph.indptr)
        self.indices = self.backend.asarray(graph.indices)
        self.dist = xp.full(self.n, -1, np.int32)
        self.queues = (xp.empty(max(self.n, 1), self.index_dtype),
                       xp.empty(max(self.n, 1), self.index_dtype))
        self.edge_queue = None
        if self.backend.is_gpu:
            self._init_gpu()

    # ------------------------------------------------------------------ GPU plumbing
    def _init_gpu(self):
        cp = self.backend.xp
        it = "int" if self.index_dtype == np.int32 else "long long"
        names = {
            "fused": f"advance_topdown<{it}, true>",
            "expand": f"advance_topdown<{it}, false>",
            "contract": f"contract_frontier<{it}>",
            "balanced": f"advance_balanced<{it}>",
            "bottomup": f"advance_bottomup<{it}>",
            "seed": f"seed_sources<{it}>",
            "parents": f"bfs_parents<{it}>",
        }
        module = self.backend.cuda_module(Path(__file__).with_name("_frontier.cu"),
                                          name_expressions=tuple(names.values()))
        self._k = {key: module.get_function(name) for key, name in names.items()}
        self.visited = cp.zeros((self.n + 31) // 32 + 1, np.uint32)
        self.counters = cp.zeros(4 * SLOTS, np.uint64)
        self._pinned = cp.cuda.alloc_pinned_memory(4 * SLOTS * 8)
        self._host_counters = np.frombuffer(self._pinned, np.uint64, 4 * SLOTS)
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        self.resident_blocks = props["multiProcessorCount"] * _RESIDENT_BLOCKS_PER_SM
        self.resident_threads = self.resident_blocks * BLOCK

    def _blocks(self, work):
        return max(1, min(self.resident_blocks, -(-int(work) // BLOCK)))

    def read_counts(self):
        """GPU: copy the counter ring to the host (one transfer); returns ``(SLOTS, 4)``."""
        cp = self.backend.xp
        stream = cp.cuda.get_current_stream()
        cp.cuda.runtime.memcpyAsync(self._host_counters.ctypes.data, self.counters.data.ptr,
                                    self._host_counters.nbytes,
                                    cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        stream.synchronize()
        return self._host_counters.reshape(SLOTS, 4)

    def queue(self, level):
        """The vertex queue holding the frontier of ``level``."""
        return self.queues[level & 1]

    # ------------------------------------------------------------------ operators
    def seed(self, sources):
        """Reset the state and put ``sources`` (unique internal ids) in level 0.

        Returns ``(count, degree_sum)`` of level 0.
        """
        src = np.unique(np.asarray(sources, dtype=np.int64)).astype(self.index_dtype)
        if self.backend.is_gpu:
            cp = self.backend.xp
            self.dist.fill(-1)
            self.visited.fill(0)
            self.counters.fill(0)
            d_src = cp.asarray(src)
            self._k["seed"]((self._blocks(src.size),), (BLOCK,),
                            (self.indptr, d_src, np.int64(src.size), self.queues[0], self.dist,
                             self.visited, self.counters))
            ip = self.graph.indptr
            s64 = src.astype(np.int64)
            return int(src.size), int((ip[s64 + 1] - ip[s64]).sum())
        self.dist.fill(-1)
        return _seed_sources_cpu(self.indptr, src, self.queues[0], self.dist)

    def advance_topdown(self, level, frontier_size, *, blocks=None):
        """Expand-contract the frontier of ``level`` (``frontier_size`` vertices) into the
        next queue.

        CPU: returns ``(count, degree_sum)`` of level + 1. GPU: launches only (the counts
        land in the counter ring); the grid has ``blocks`` blocks (default: enough for
        ``frontier_size``), and the kernel strides over whatever the frontier holds, so a
        launch made before the size is known is still correct.
        """
        if self.backend.is_gpu:
            self._k["fused"]((blocks or self._blocks(frontier_size),), (BLOCK,),
                             (self.indptr, self.indices, self.queue(level),
                              self.queue(level + 1), self.dist, self.visited, self.counters,
                              np.int32(level)))
            return None
        return _advance_topdown_cpu(self.indptr, self.indices, self.queue(level),
                                    int(frontier_size), self.queue(level + 1), self.dist, level)

    def expand_contract_two_phase(self, level, frontier_size, edge_count):
        """GPU two-phase level: expand into the edge queue, then contract it."""
        if not self.backend.is_gpu:
            return self.advance_topdown(level, frontier_size)
        if self.edge_queue is None:
            self.edge_queue = self.backend.xp.empty(max(self.nnz, 1), self.index_dtype)
        self._k["expand"]((self._blocks(frontier_size),), (BLOCK,),
                          (self.indptr, self.indices, self.queue(level), self.edge_queue,
                           self.dist, self.visited, self.counters, np.int32(level)))
        self._k["contract"]((self._blocks(edge_count),), (BLOCK,),
                            (self.indptr, self.edge_queue, self.queue(level + 1), self.dist,
                             self.visited, self.counters, np.int32(level)))
        return None

    def advance_balanced(self, level, frontier_size, edge_count):
        """GPU edge-balanced expand-contract: one thread per frontier edge (hub lists are
        spread over the whole grid). On the CPU the same as :meth:`advance_topdown`."""
        if not self.backend.is_gpu:
            return self.advance_topdown(level, frontier_size)
        cp = self.backend.xp
        q = self.queue(level)[:frontier_size]
        offsets = cp.cumsum(self.indptr[q + 1] - self.indptr[q])
        self._k["balanced"]((self._blocks(edge_count),), (BLOCK,),
                            (self.indptr, self.indices, q, offsets, np.int64(frontier_size),
                             np.int64(edge_count), self.queue(level + 1), self.dist,
                             self.visited, self.counters, np.int32(level)))
        return None

    def advance_bottomup(self, level):
        """Bottom-up step from the frontier of ``level`` (labels ``dist == level``)."""
        if self.backend.is_gpu:
            self._k["bottomup"]((self._blocks(self.n),), (BLOCK,),
                                (self.indptr, self.indices, self.queue(level + 1), self.dist,
                                 self.visited, self.counters, np.int32(level),
                                 np.int64(self.n)))
            return None
        return _advance_bottomup_cpu(self.indptr, self.indices, self.queue(level + 1),
                                     self.dist, level)

    def parents(self):
        """Predecessors from the current labels: smallest-id neighbour one level closer,
        -1 for sources and unreached vertices (same dtype as ``indices``)."""
        xp = self.backend.xp
        pred = xp.empty(self.n, self.index_dtype)
        if self.backend.is_gpu:
            self._k["parents"]((self._blocks(self.n),), (BLOCK,),
                               (self.indptr, self.indices, self.dist, pred, np.int64(self.n)))
        else:
            _bfs_parents_cpu(self.indptr, self.indices, self.dist, pred)
        return pred
