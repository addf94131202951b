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
``run_levels`` (GPU)
    a whole traversal driven by the device: per level a decide kernel (Beamer's rule on
    the counters), fused top-down with hub lists spread over the grid, bottom-up over the
    visited bitmask (the bitmask is the frontier for an unvisited vertex; it writes the
    other of two bitmasks); captured once into a CUDA graph and replayed (``step_*`` in
    ``_frontier.cu``).
``bitwise_bfs``
    up to 64 BFS in one pass, a uint64 per vertex (bit i: source i): eccentricities, and
    with them the Takes-Kosters bounds of every vertex (``bitwise_*``).

Weighted operators (SSSP, :mod:`terrain.graph.shortest_paths`; distances are int64 or float64 arrays
the caller owns):

(the relaxation loops themselves, near-far and Crauser, live on the device in
``terrain/graph/_sssp.cu``; the distance arithmetic both files use is ``_dist.cuh``)

``sssp_parents``
    canonical predecessors from final distances (the smallest tight tail one step closer;
    a hop-level pass inside zero-weight classes) - identical on every backend.

Each operator is a CUDA kernel in ``_frontier.cu`` (gpu backend) or its CPU twin with the
same contract: the BFS operators ``seed``, ``fused`` (top-down), ``bottomup`` and ``parents``
are C functions (``terrain_bfs_*`` in ``terrain/native/kernels.c``, through
:mod:`terrain.graph._native`: a ``bfs`` process then imports no Numba), the bit-parallel and
SSSP-predecessor ones Numba functions ``_<name>_cpu`` in :mod:`terrain.graph._frontier_cpu`
(imported on first use), with the same ``dist`` labels and
the same set of vertices in the next queue (queue *order* is free; nothing depends on it).
The sequential CPU twins need no bitmask and no culling — a label check is exact when one
thread discovers — and return ``(count, degree_sum)`` of the new frontier directly; the GPU
writes them to a ring of per-level counter slots that the host reads back at most once per
level (or once per batch of levels on sparse, long-diameter graphs).
"""

from pathlib import Path

import numpy as np

from ..backend import get_backend
from . import _native
from .csr import Graph

__all__ = ["FrontierCore", "BLOCK", "SLOTS"]

BLOCK = 256          # threads per block; CTA-gathering threshold (must match _frontier.cu)
SLOTS = 64           # ring of per-level counter slots (must match _frontier.cu)
HUB_MIN = 128        # device level loop: lists from this length are spread over the grid
BOTTOMUP_LANES = 1   # device level loop: lanes per unvisited vertex in bottom-up (1, 4, 8, 32)
BITWISE_HUB_MIN = 4096  # bit-parallel BFS: rows from this length are pulled by the whole grid
BITWISE_PARALLEL_NNZ = 1 << 22  # CPU bit-parallel BFS: threads from this many stored edges
_C_LEVEL, _C_ACTIVE, _C_WORDS = 0, 1, 16  # control words of the level loop (_frontier.cu)
FUSED_STEPS = False  # device level loop: two launches per level (see step_advance)
STEP_LAUNCHES = 3  # device level loop without fused steps: 4 or 3 launches per level
#                   (H100, RMAT-21: 3 gave 252.4 GTEPS against 239.0 for 4)
HUB_GRID = 0  # device level loop: blocks per SM of step_hubs (0: as the other kernels)
BOTTOMUP_UNROLL = 1  # device level loop, one lane per vertex: neighbours tested per load round
BOTTOMUP_ILP = 0  # device level loop: K > 0 (2, 4, 8) runs step_bottomup_ilp<K>
BOTTOMUP_ROWS = "id"  # device level loop: "degree" scans rows hubs first (a sorted copy)
OCCUPANCY_GRIDS = False  # device level loop: grids sized by the occupancy calculator
_CAPTURED_SOURCES = 64  # sources copied inside the level loop's CUDA graph
_RESIDENT_BLOCKS_PER_SM = 8


# --------------------------------------------------------------------------- CPU twins

def _degree_ordered_rows(xp, indptr, indices):
    """``indices`` with every row reordered by decreasing neighbour degree (ties in any
    order): one sort of (row, -degree) keys over all arcs."""
    nnz = int(indices.shape[0])
    if nnz == 0:
        return indices.copy()
    deg = indptr[1:] - indptr[:-1]
    top = int(deg.max())
    rows = xp.searchsorted(indptr, xp.arange(nnz, dtype=np.int64), side="right") - 1
    key = rows * (top + 1) + (top - deg[indices])
    del rows
    order = xp.argsort(key)
    del key
    return indices[order]


def _p(a):
    return a.ctypes.data


_SM_COUNT = {}


def _multiprocessors(cp):
    """SM count of the current device (the properties query is slow: once per device)."""
    dev = cp.cuda.Device().id
    if dev not in _SM_COUNT:
        _SM_COUNT[dev] = cp.cuda.runtime.getDeviceProperties(dev)["multiProcessorCount"]
    return _SM_COUNT[dev]


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
    many traversals of the same graph (diameter, benchmarks): only ``seed`` resets state,
    and the device level loop's CUDA graphs are captured once per core.

    GPU tunables of the device level loop (:meth:`run_levels`): ``hub_min`` (lists of this
    many edges or more are spread over the grid), ``bottomup_lanes`` (1, 4, 8 or 32 lanes
    per unvisited vertex), ``bottomup_ilp`` (with one lane: 0, or K = 2, 4, 8 vertices in
    flight per lane, ``step_bottomup_ilp``), ``bottomup_unroll`` (with one lane and no ILP:
    neighbours tested per round of loads), ``bottomup_rows`` ('id', or 'degree': rows
    scanned hubs first, a sorted copy built once per core), ``occupancy_grids`` (grids from
    the occupancy calculator instead of 8 blocks per SM), ``fused_steps`` (two launches per
    level instead of four), ``step_launches`` (3: advance, hubs, decide) and ``hub_grid``
    (blocks per SM of the hub kernel; 0: as the others); ``profile`` (a
    list) collects an event after every kernel of direct launches, ``device_seconds`` (a
    list) the device time of every :meth:`run_levels`.

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
        if not self.backend.is_gpu:
            # the C operators (terrain/native/kernels.c: seed, top-down, bottom-up, parents) take
            # contiguous int64 offsets and int32 or int64 indices
            self.indptr = np.ascontiguousarray(self.indptr, np.int64)
            if self.index_dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
                self.index_dtype = np.dtype(np.int64)
            self.indices = np.ascontiguousarray(self.indices, self.index_dtype)
            self._cpu_ops = _native.bfs_kernels(self.index_dtype)
        self.dist = xp.full(self.n, -1, np.int32)
        self.queues = (xp.empty(max(self.n, 1), self.index_dtype),
                       xp.empty(max(self.n, 1), self.index_dtype))
        self.edge_queue = None
        self._host_indptr = graph.indptr if isinstance(graph.indptr, np.ndarray) else None
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
            "step_decide": "step_decide",
            "step_topdown": f"step_topdown<{it}>",
            "step_hubs": f"step_hubs<{it}>",
            "step_bottomup": f"step_bottomup<{it}, 1>",
            "step_bottomup:u2": f"step_bottomup<{it}, 2>",
            "step_bottomup:u4": f"step_bottomup<{it}, 4>",
            "step_bottomup_ilp:2": f"step_bottomup_ilp<{it}, 2>",
            "step_bottomup_ilp:4": f"step_bottomup_ilp<{it}, 4>",
            "step_bottomup_ilp:8": f"step_bottomup_ilp<{it}, 8>",
            "step_advance_ilp:2": f"step_advance_ilp<{it}, 2>",
            "step_advance_ilp:4": f"step_advance_ilp<{it}, 4>",
            "step_advance_ilp:8": f"step_advance_ilp<{it}, 8>",
            "step_advance": f"step_advance<{it}>",
            "step_hubs_decide": f"step_hubs_decide<{it}>",
            "step_bottomup:4": f"step_bottomup_group<{it}, 4>",
            "step_bottomup:8": f"step_bottomup_group<{it}, 8>",
            "step_bottomup:32": f"step_bottomup_group<{it}, 32>",
            "step_seed": f"step_seed<{it}>",
            "step_seed_decide": f"step_seed_decide<{it}>",
            "bitwise_pull": f"bitwise_pull<{it}>",
            "bitwise_pull_hubs": f"bitwise_pull_hubs<{it}>",
            "bitwise_seed": "bitwise_seed",
            "bitwise_finish": "bitwise_finish",
        }
        for wt in ("long long", "double"):
            for op in ("sssp_parents", "zero_hop_level", "zero_parents"):
                names[f"{op}:{wt}"] = f"{op}<{it}, {wt}>"
        module = self.backend.cuda_module(Path(__file__).with_name("_frontier.cu"),
                                          name_expressions=tuple(names.values()))
        self._k = {key: module.get_function(name) for key, name in names.items()}
        # the counter ring, the level loop's control words and the visited bitmask in one
        # buffer: the loop resets them with one memset and reads the first two back with
        # one copy (into pinned memory, captured in the CUDA graph)
        words = 4 * SLOTS + _C_WORDS
        visited_words = (self.n + 31) // 32 + 1
        self._state_visited = cp.zeros(words + (visited_words + 1) // 2, np.uint64)
        self._state = self._state_visited[:words]
        self.visited = self._state_visited[words:].view(np.uint32)[:visited_words]
        self.counters = self._state[:4 * SLOTS]
        self._pinned = cp.cuda.alloc_pinned_memory(self._state.nbytes)
        self._host_state = np.frombuffer(self._pinned, np.uint64, self._state.size)
        self._host_counters = self._host_state[:4 * SLOTS]
        self.multiprocessors = _multiprocessors(cp)
        self.resident_blocks = self.multiprocessors * _RESIDENT_BLOCKS_PER_SM
        self.resident_threads = self.resident_blocks * BLOCK
        self._grids = {}  # level-loop kernel -> blocks (occupancy_grids)
        self._bottomup_indices = None  # degree-ordered rows (bottomup_rows == "degree")
        self._loop = None
        self.graph_error = None  # why CUDA-graph capture failed, if it did
        # device level loop tunables (part of the captured graphs' keys)
        self.hub_min = HUB_MIN
        self.bottomup_lanes = BOTTOMUP_LANES
        self.fused_steps = FUSED_STEPS
        self.step_launches = STEP_LAUNCHES
        self.hub_grid = HUB_GRID
        self.bottomup_rows = BOTTOMUP_ROWS
        self.bottomup_unroll = BOTTOMUP_UNROLL
        self.bottomup_ilp = BOTTOMUP_ILP
        self.occupancy_grids = OCCUPANCY_GRIDS
        self.profile = None  # a list: (kernel name, event) recorded after every launch
        self.device_seconds = None  # a list: device time of each run_levels (CUDA events)

    # ------------------------------------------------------------------ device level loop
    def _init_loop(self):
        cp = self.backend.xp
        n = max(self.n, 1)
        pinned_src = cp.cuda.alloc_pinned_memory(8 * (_CAPTURED_SOURCES + 1))
        self._loop = {
            "ctrl": self._state[4 * SLOTS:],
            "visited_next": cp.zeros_like(self.visited),
            "hub_q": cp.empty(n, self.index_dtype),
            "src": cp.zeros(max(n, _CAPTURED_SOURCES) + 1, np.int64),  # the graph copies 65
            "pinned": [pinned_src],
            "host_src": np.frombuffer(pinned_src, np.int64, _CAPTURED_SOURCES + 1),
            "host_ctrl": self._host_state[4 * SLOTS:],
            "stream": cp.cuda.Stream(non_blocking=True),
            "after": cp.cuda.Event(disable_timing=True),
            "graphs": {},
        }

    def _enqueue_seed(self, seed_blocks, captured_src, decide=None):
        """Reset (memsets: -1 is all ones) and seed; with ``captured_src`` the sources come
        from the fixed pinned buffer, copied inside the graph. ``decide`` (``(mode, alpha,
        beta)``): the first decide too, in the seeding kernel when the sources fit in one
        block's loop (``captured_src``)."""
        cp = self.backend.xp
        lp = self._loop
        ptr = lp["stream"].ptr
        rt = cp.cuda.runtime
        if captured_src:
            rt.memcpyAsync(lp["src"].data.ptr, lp["host_src"].ctypes.data, lp["host_src"].nbytes,
                           rt.memcpyHostToDevice, ptr)
        rt.memsetAsync(self.dist.data.ptr, 0xFF, self.dist.nbytes, ptr)
        rt.memsetAsync(self._state_visited.data.ptr, 0, self._state_visited.nbytes, ptr)
        if decide is not None and captured_src:
            mode, alpha, beta = decide
            self._k["step_seed_decide"]((1,), (64,), (
                self.indptr, lp["src"], self.queues[0], self.dist, self.visited, self.counters,
                lp["ctrl"], np.int64(self.n), np.int64(self.nnz), np.int32(mode),
                np.int32(alpha), np.int32(beta)))
            self._mark("seed_decide")
            return
        self._k["step_seed"]((seed_blocks,), (BLOCK,),
                             (self.indptr, lp["src"], self.queues[0], self.dist, self.visited,
                              self.counters))
        self._mark("seed")
        if decide is not None:
            self._enqueue_decide(*decide)

    def _enqueue_readback(self):
        """Counter ring and control words to pinned host memory (one copy)."""
        cp = self.backend.xp
        rt = cp.cuda.runtime
        rt.memcpyAsync(self._host_state.ctypes.data, self._state.data.ptr, self._state.nbytes,
                       rt.memcpyDeviceToHost, self._loop["stream"].ptr)
        self._mark("readback")

    def _grid(self, key):
        """Blocks of a level-loop kernel: resident_blocks, or with ``occupancy_grids`` the
        SM count times what the occupancy calculator says fits per SM (grid-stride kernels:
        one wave, no tail of blocks that wait for a free SM). ``step_hubs``: ``hub_grid``
        blocks per SM (it has work on a few top-down levels and is an idle launch on the
        others: fewer blocks launch and retire sooner)."""
        if key == "step_hubs" and self.hub_grid:
            return self.multiprocessors * self.hub_grid
        ilp = "_ilp:" in key  # registers limit these kernels' blocks per SM
        if not (self.occupancy_grids or ilp):
            return self.resident_blocks
        blocks = self._grids.get(key)
        if blocks is None:
            # (without the query: what ptxas gives the ILP kernels for sm_90, int32 ids)
            per_sm = ({"2": 6, "4": 4, "8": 2}[key.rsplit(":", 1)[1]] if ilp
                      else _RESIDENT_BLOCKS_PER_SM)
            try:
                from cupy.cuda import driver
                per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(
                    self._k[key].ptr, BLOCK, 0)
            except Exception:  # no occupancy query in this CuPy: keep the fixed figure
                pass
            blocks = self._grids[key] = self.multiprocessors * max(1, min(int(per_sm), 8))
        return blocks

    def _indices_bottomup(self):
        """The adjacency the bottom-up step scans: ``indices``, or with ``bottomup_rows ==
        "degree"`` a copy whose rows list neighbours by decreasing degree (built once per
        core, on the device, like Graph500's untimed kernel 1). An unvisited vertex stops at
        its first visited neighbour; hubs are visited first, so listing them first ends most
        scans at the first read. Rows keep their extents, so ``indptr`` serves both."""
        if self.bottomup_rows == "id":
            return self.indices
        if self.bottomup_rows != "degree":
            raise ValueError(f"bottomup_rows must be 'id' or 'degree', got {self.bottomup_rows!r}")
        if self._bottomup_indices is None:
            self._bottomup_indices = _degree_ordered_rows(self.backend.xp, self.indptr,
                                                          self.indices)
        return self._bottomup_indices

    def _launches(self):
        """Launches per level of the device loop: 4 (decide, top-down, hubs, bottom-up),
        3 (advance in the chosen direction, hubs, decide) or 2 (advance, hubs + decide in
        the last block: ``fused_steps``); 3 and 2 need one lane per vertex."""
        if self.bottomup_lanes != 1:
            return 4
        return 2 if self.fused_steps else self.step_launches

    def _fused(self):
        """Whether each level's decide runs at the end of the level before."""
        return self._launches() < 4

    def _enqueue_decide(self, mode, alpha, beta):
        self._k["step_decide"]((1,), (32,), (self.counters, self._loop["ctrl"], np.int64(self.n),
                                             np.int64(self.nnz), np.int32(mode),
                                             np.int32(alpha), np.int32(beta)))
        self._mark("decide")

    def _enqueue_steps(self, steps, mode, alpha, beta):
        lp = self._loop
        grid = self._grid
        q0, q1 = self.queues
        mark = self._mark
        lanes = self.bottomup_lanes
        if self._fused():  # the decide of each level runs at the end of the one before
            vis = (self.visited, lp["visited_next"])
            for _ in range(steps):
                # bottom-up and top-down share the kernel: the plain rows for both
                advance = "step_advance" + (f"_ilp:{self.bottomup_ilp}" if self.bottomup_ilp
                                            else "")
                self._k[advance]((grid(advance),), (BLOCK,), (
                    self.indptr, self.indices, q0, q1, self.dist, *vis, self.counters,
                    lp["ctrl"], lp["hub_q"], np.int64(self.hub_min), np.int64(self.n)))
                mark("advance")
                if self._launches() == 3:
                    self._k["step_hubs"]((grid("step_hubs"),), (BLOCK,), (
                        self.indptr, self.indices, q0, q1, self.dist, *vis, self.counters,
                        lp["ctrl"], lp["hub_q"]))
                    mark("hubs")
                    self._enqueue_decide(mode, alpha, beta)
                    continue
                self._k["step_hubs_decide"]((grid("step_hubs_decide"),), (BLOCK,), (
                    self.indptr, self.indices, q0, q1, self.dist, *vis, self.counters,
                    lp["ctrl"], lp["hub_q"], np.int64(self.n), np.int64(self.nnz),
                    np.int32(mode), np.int32(alpha), np.int32(beta)))
                mark("hubs_decide")
            return
        bu_indices = self._indices_bottomup()
        for _ in range(steps):
            self._enqueue_decide(mode, alpha, beta)
            vis = (self.visited, lp["visited_next"])
            self._k["step_topdown"]((grid("step_topdown"),), (BLOCK,), (
                self.indptr, self.indices, q0, q1, self.dist, *vis, self.counters, lp["ctrl"],
                lp["hub_q"], np.int64(self.hub_min)))
            mark("topdown")
            self._k["step_hubs"]((grid("step_hubs"),), (BLOCK,), (
                self.indptr, self.indices, q0, q1, self.dist, *vis, self.counters, lp["ctrl"],
                lp["hub_q"]))
            mark("hubs")
            if lanes != 1:
                bottomup = f"step_bottomup:{lanes}"
            elif self.bottomup_ilp:
                bottomup = f"step_bottomup_ilp:{self.bottomup_ilp}"
            else:
                bottomup = "step_bottomup" + ("" if self.bottomup_unroll == 1
                                              else f":u{self.bottomup_unroll}")
            self._k[bottomup]((grid(bottomup),), (BLOCK,), (
                self.indptr, bu_indices, q0, q1, self.dist, *vis, self.counters, lp["ctrl"],
                np.int64(self.n)))
            mark("bottomup")

    def _mark(self, name):
        """Profiling (direct launches only): an event after the kernel just launched."""
        if self.profile is not None:
            self.profile.append((name, self._loop["stream"].record()))

    def _launch(self, key, enqueue, use_graph):
        """Run ``enqueue`` on the loop's stream: replayed from a captured CUDA graph (captured
        on first use per ``key``), or launched directly."""
        lp = self._loop
        stream = lp["stream"]
        if use_graph and self.graph_error is None:
            graph = lp["graphs"].get(key)
            if graph is None:
                try:
                    with stream:
                        stream.begin_capture()
                        try:
                            enqueue()
                        finally:
                            graph = stream.end_capture()
                except Exception as exc:  # no capture here: launch directly from now on
                    self.graph_error = f"{type(exc).__name__}: {exc}"
                    graph = None
                lp["graphs"][key] = graph
            if graph is not None:
                graph.launch(stream)
                return
        with stream:
            enqueue()

    def _read_loop(self):
        """Wait for the loop's stream; the counter ring and control words its last launch
        copied to pinned memory."""
        self._loop["stream"].synchronize()
        return self._host_counters.reshape(SLOTS, 4), self._loop["host_ctrl"]

    def run_levels(self, sources, mode, alpha, beta, first_steps, more_steps=8, use_graph=True):
        """GPU: a whole traversal by the device-driven level loop (``step_*`` kernels of
        ``_frontier.cu``): seed and ``first_steps`` levels in one launch (a CUDA graph when
        ``use_graph``), then ``more_steps`` at a time until a level comes out empty; the
        host reads the counters once per launch (launches double in length up to
        ``SLOTS - 8`` levels on long traversals). ``mode``: 0 auto (Beamer's rule with
        ``alpha``, ``beta``), 1 top-down, 2 bottom-up.

        Per launch the host does one graph launch and one wait: the copy of up to
        ``_CAPTURED_SOURCES`` sources from pinned memory, the resets and the copy of the
        counters back to pinned memory are nodes of the graph.

        Returns ``(sizes, degree_sums, operators)`` per level (operator 1 top-down,
        2 bottom-up, for the levels after the first).
        """
        cp = self.backend.xp
        if self._loop is None:
            self._init_loop()
        lp = self._loop
        fused = self._fused()
        if not fused:  # built (once) on the current stream, before the wait and any capture
            self._indices_bottomup()
        src = np.asarray(sources, dtype=np.int64).reshape(-1)
        if src.size > 1:
            src = np.unique(src)
        k = int(src.size)
        stream = lp["stream"]
        captured_src = k <= _CAPTURED_SOURCES
        if captured_src:
            lp["host_src"][0] = k
            lp["host_src"][1:k + 1] = src
        stream.wait_event(cp.cuda.get_current_stream().record(lp["after"]))
        if not captured_src:  # many sources: a pinned staging buffer of their own
            buf = cp.cuda.alloc_pinned_memory(8 * (k + 1))
            host = np.frombuffer(buf, np.int64, k + 1)
            host[0] = k
            host[1:] = src
            lp["pinned"].append(buf)  # kept until the copy is done (the wait below)
            cp.cuda.runtime.memcpyAsync(lp["src"].data.ptr, host.ctypes.data, host.nbytes,
                                        cp.cuda.runtime.memcpyHostToDevice, stream.ptr)
        first_steps = max(1, min(int(first_steps), SLOTS - 8))
        more_steps = max(1, min(int(more_steps), SLOTS - 8))
        seed_blocks = self._blocks(k)

        timing = self.device_seconds is not None
        if timing:
            t0 = cp.cuda.Event()
            t0.record(stream)

        def first():
            self._enqueue_seed(seed_blocks, captured_src, (mode, alpha, beta) if fused else None)
            self._enqueue_steps(first_steps, mode, alpha, beta)
            self._enqueue_readback()

        tune = (self.hub_min, self.bottomup_lanes, self._launches(), self.bottomup_rows,
                self.occupancy_grids, self.bottomup_unroll, self.bottomup_ilp, self.hub_grid)
        self._launch(("first", first_steps, seed_blocks, captured_src, mode, alpha, beta) + tune,
                     first, use_graph)
        sizes, degs, ops = [], [], []
        try:
            while True:
                ring, ctrl = self._read_loop()
                level, active = int(ctrl[_C_LEVEL]), int(ctrl[_C_ACTIVE])
                # the last level whose slot is final: fused steps end with the next level's
                # decide (level is the one to build from), the others with a step's launches
                last = (level if fused else level + 1) if active else level - 1
                lo = len(sizes)
                if last >= lo:
                    rows = (ring[lo:last + 1] if last < SLOTS
                            else ring[np.arange(lo, last + 1) % SLOTS]).tolist()
                    for lv, (count, degsum, _, op) in enumerate(rows, lo):
                        if count == 0:
                            return sizes, degs, ops
                        sizes.append(count)
                        degs.append(degsum)
                        if lv:
                            ops.append(op)
                if not active:
                    return sizes, degs, ops
                if len(sizes) > self.n + 1:
                    raise RuntimeError("run_levels: more levels than vertices (corrupt counters)")
                steps = more_steps

                def more():
                    self._enqueue_steps(steps, mode, alpha, beta)
                    self._enqueue_readback()

                self._launch(("more", steps, mode, alpha, beta) + tune, more, use_graph)
                more_steps = min(2 * more_steps, SLOTS - 8)  # long traversals: fewer read-backs
        finally:
            if len(lp["pinned"]) > 1:
                del lp["pinned"][1:]
            if timing:
                t1 = cp.cuda.Event()
                t1.record(stream)
                t1.synchronize()
                self.device_seconds.append(cp.cuda.get_elapsed_time(t0, t1) / 1e3)

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

    @property
    def host_indptr(self):
        """``indptr`` on the host (downloaded once when the graph came on the device)."""
        if self._host_indptr is None:
            self._host_indptr = self.backend.to_numpy(self.indptr)
        return self._host_indptr

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
            ip = self.host_indptr
            s64 = src.astype(np.int64)
            return int(src.size), int((ip[s64 + 1] - ip[s64]).sum())
        self.dist.fill(-1)
        out = np.zeros(2, np.int64)
        self._cpu_ops[0](_p(self.indptr), _p(src), src.size, _p(self.queues[0]), _p(self.dist),
                         _p(out))
        return int(out[0]), int(out[1])

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
        out = np.zeros(2, np.int64)
        self._cpu_ops[1](_p(self.indptr), _p(self.indices), _p(self.queue(level)),
                         int(frontier_size), _p(self.queue(level + 1)), _p(self.dist),
                         int(level), _p(out))
        return int(out[0]), int(out[1])

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
        out = np.zeros(2, np.int64)
        self._cpu_ops[2](_p(self.indptr), _p(self.indices), self.n, _p(self.queue(level + 1)),
                         _p(self.dist), int(level), _p(out))
        return int(out[0]), int(out[1])

    # ------------------------------------------------------------------ bit-parallel BFS
    def bitwise_bfs(self, sources, ecc=None, lower=None, upper=None, pairs=None):
        """Up to 64 BFS at once, one bit per source (see ``bitwise_pull`` in
        ``_frontier.cu``). Returns the sources' eccentricities (host int32 array) in their
        given order.

        With ``ecc`` (their eccentricities, from an earlier call) and int32 bound arrays
        ``lower`` / ``upper`` on the backend, every vertex ``w`` reached at distance ``d``
        from source ``i`` gets ``lower[w] = max(lower[w], d, ecc[i] - d)`` and
        ``upper[w] = min(upper[w], ecc[i] + d)`` — the bounds 64 single BFS would leave.
        With a list ``pairs``, appends the number of (source, vertex) pairs at distance
        0, 1, 2, ... (the sum of the sources' level sizes). Leaves ``self.dist`` alone.
        """
        from . import _frontier_cpu as kc  # Numba, loaded on first use
        src = np.asarray(sources, dtype=np.int64)
        k = int(src.size)
        if not 1 <= k <= 64 or np.unique(src).size != k:
            raise ValueError("bitwise_bfs: 1 to 64 distinct sources")
        xp = self.backend.xp
        gpu = self.backend.is_gpu
        n = self.n
        if getattr(self, "_bitwise", None) is None:
            hubs = None
            if gpu:
                deg = self.indptr[1:] - self.indptr[:-1]
                hubs = xp.flatnonzero(deg >= BITWISE_HUB_MIN).astype(self.index_dtype)
            self._bitwise = {"seen": xp.zeros(n, np.uint64), "frontier": xp.zeros(n, np.uint64),
                             "next": xp.zeros(n, np.uint64), "bits": xp.zeros(2, np.uint64),
                             "hubs": hubs}
        st = self._bitwise
        seen, frontier, nxt = st["seen"], st["frontier"], st["next"]
        for a in (seen, frontier, nxt):
            a.fill(0)
        full = np.uint64((1 << k) - 1) if k < 64 else np.uint64(2**64 - 1)
        with_bounds = ecc is not None
        d_ecc = xp.asarray(np.asarray(ecc if with_bounds else np.zeros(k), np.int32))
        if not with_bounds:
            lower = upper = xp.zeros(1, np.int32)
        out = np.zeros(k, np.int32)
        level = 0
        if pairs is not None:
            pairs.append(k)
        if gpu:
            d_src = xp.asarray(src)
            self._k["bitwise_seed"]((1,), (64,), (d_src, np.int32(k), seen, frontier, d_ecc,
                                                  lower, upper, np.int32(with_bounds)))
            hubs = st["hubs"]
            rb = (self.resident_blocks,)
        else:
            kc._bitwise_seed_cpu(src, seen, frontier, d_ecc, lower, upper, with_bounds)
        while True:
            level += 1
            if gpu:
                self._k["bitwise_pull"](rb, (BLOCK,), (self.indptr, self.indices, frontier, seen,
                                                       nxt, full, np.int64(BITWISE_HUB_MIN),
                                                       np.int64(n)))
                if hubs.size:
                    self._k["bitwise_pull_hubs"](rb, (BLOCK,), (
                        self.indptr, self.indices, frontier, seen, nxt, hubs,
                        np.int64(hubs.size), full))
                st["bits"].fill(0)
                self._k["bitwise_finish"](rb, (BLOCK,), (seen, frontier, nxt, np.int64(n),
                                                         np.int32(level), d_ecc, lower, upper,
                                                         np.int32(with_bounds), st["bits"]))
                bits, count = (int(x) for x in st["bits"].get())
            else:
                pull = (kc._bitwise_pull_parallel_cpu if self.nnz >= BITWISE_PARALLEL_NNZ
                        else kc._bitwise_pull_cpu)
                pull(self.indptr, self.indices, frontier, seen, nxt, full)
                bits, count = kc._bitwise_finish_cpu(seen, frontier, nxt, level, d_ecc, lower,
                                                  upper, with_bounds)
                bits, count = int(bits), int(count)
            if bits == 0:
                return out
            if pairs is not None:
                pairs.append(count)
            for i in range(k):
                if bits >> i & 1:
                    out[i] = level

    # ------------------------------------------------------------------ weighted operators
    def _wt(self, dist):
        return "double" if dist.dtype == np.float64 else "long long"

    def sssp_parents(self, dist, weights, inf, sources):
        """Canonical predecessors of final distances ``dist`` (int64, -1 for sources and
        unreached vertices): the smallest ``u`` with ``dist[u] < dist[v]`` and
        ``dist[u] + w(u, v) == dist[v]``; a vertex whose tight tails all lie at its own
        distance (zero-weight arcs) takes the smallest zero-weight tail one hop level
        closer, the levels counted by a BFS inside each class of equal distance from the
        vertices that have a strictly closer tail. Hop levels fall along every chain, so
        predecessors form a forest rooted at the sources."""
        from . import _frontier_cpu as kc  # Numba, loaded on first use
        xp = self.backend.xp
        big = np.iinfo(np.int64).max
        pred = xp.full(self.n, big, np.int64)
        dt = dist.dtype.type
        gpu = self.backend.is_gpu
        grid = (self._blocks(self.n),) if gpu else None
        wt = self._wt(dist)
        if gpu:
            self._k[f"sssp_parents:{wt}"](grid, (BLOCK,), (self.indptr, self.indices, weights,
                                                          dist, dt(inf), pred,
                                                          np.int64(self.n)))
        elif self.graph.directed:
            kc._sssp_parents_cpu(self.indptr, self.indices, weights, dist, dt(inf), pred)
        else:
            kc._sssp_parents_pull_cpu(self.indptr, self.indices, weights, dist, dt(inf), pred)
        if self.nnz and bool((weights == 0).any()):
            hops = xp.where((dist != inf) & (pred != big), 0, -1).astype(np.int32)
            hops[xp.asarray(sources)] = 0
            level = 0
            changed = xp.zeros(1, np.uint64) if gpu else None
            while True:
                if gpu:
                    changed.fill(0)
                    self._k[f"zero_hop_level:{wt}"](grid, (BLOCK,), (
                        self.indptr, self.indices, weights, dist, hops, np.int32(level),
                        np.int64(self.n), changed))
                    more = int(changed.get()[0])
                else:
                    more = kc._zero_hop_level_cpu(self.indptr, self.indices, weights, dist, hops,
                                               level)
                if not more:
                    break
                level += 1
            if gpu:
                self._k[f"zero_parents:{wt}"](grid, (BLOCK,), (self.indptr, self.indices,
                                                              weights, dist, hops, pred,
                                                              np.int64(self.n)))
            else:
                kc._zero_parents_cpu(self.indptr, self.indices, weights, dist, hops, pred)
        pred[pred == big] = -1
        return pred

    def parents(self, dist=None):
        """Predecessors from the current labels (or from ``dist``, hop labels of an earlier
        traversal): smallest-id neighbour one level closer, -1 for sources and unreached
        vertices (same dtype as ``indices``)."""
        xp = self.backend.xp
        dist = self.dist if dist is None else dist
        pred = xp.empty(self.n, self.index_dtype)
        if self.backend.is_gpu:
            self._k["parents"]((self._blocks(self.n),), (BLOCK,),
                               (self.indptr, self.indices, dist, pred, np.int64(self.n)))
        else:
            dist = np.ascontiguousarray(dist, np.int32)
            self._cpu_ops[3](_p(self.indptr), _p(self.indices), self.n, _p(dist), _p(pred))
        return pred
