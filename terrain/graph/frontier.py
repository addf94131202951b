"""The frontier core: a traversal's state on one backend and the operators that build levels.

BFS, the diameter's searches and the SSSP's predecessors all run on a :class:`FrontierCore`.
Its operators (``levels``, ``parents``, ``bitwise_bfs``, ``sssp_parents``) pair a CPU kernel
with its GPU twin in one table per backend (``_CpuOps`` / ``_GpuOps``), picked once by
:meth:`terrain.backend.Backend.select`, with identical bits on both. Labels: ``dist`` (int32,
-1 unreached). Design and figures: docs/graphs.md ("The frontier core", "BFS: the planner").
"""

from pathlib import Path

import numpy as np

from ..backend import get_backend
from . import _native
from ._native import _p
from .csr import Graph, _kernel_index_dtype

__all__ = ["FrontierCore", "BLOCK", "SLOTS", "BETA", "HUB_MIN", "ROUTES"]

BLOCK = 256          # threads per block (as _frontier.cu's BS)
SLOTS = 64           # ring of per-level counter slots (as _frontier.cu's SLOTS)
#: Beamer's direction switch: a level goes bottom-up once the frontier's arcs exceed the
#: unexplored arcs / ``alpha`` (each backend's ``_*Ops.alpha``), top-down again below n / BETA
#: frontier vertices
BETA = 24
HUB_MIN = 128        # device loop: lists of this many edges or more are spread over the grid
ROUTES = ("device", "batched")  # the GPU's level loops (:meth:`_GpuOps.route`)
BATCH_LEVELS = 8     # batched route: top-down launches per host read
BITWISE_HUB_MIN = 4096  # bit-parallel BFS on the GPU: rows this long are pulled by the grid
ROAD_DEGREE = 8      # average degree up to which a graph without hubs is road-like
FIRST_STEPS, MAX_FIRST_STEPS, MORE_STEPS = 8, 32, 8  # device loop: levels per launch
HINT_TRAVERSALS = 8  # ... the first launch covers the most levels of this many traversals
_C_LEVEL, _C_ACTIVE, _C_WORDS = 0, 1, 16  # control words of the device loop (_frontier.cu)
_CAPTURED_SOURCES = 64  # sources copied inside the device loop's CUDA graph
_RESIDENT_BLOCKS_PER_SM = 8


class FrontierCore:
    """Traversal state of one graph on one backend, and its operators (``ops``).

    Reuse one core for many traversals of one graph: the buffers, and on the GPU the
    captured CUDA graphs of the level loop, are made once.

    Examples
    --------
    >>> from terrain.graph.csr import build_csr
    >>> core = FrontierCore(build_csr(3, [0, 1], [1, 2]), "cpu")
    >>> core.levels([0])
    ([1, 1, 1], [1, 2, 1], ['bottom-up', 'bottom-up'])
    >>> core.dist.tolist(), core.parents().tolist()
    ([0, 1, 2], [-1, 0, 1])
    """

    def __init__(self, graph, backend=None):
        if not isinstance(graph, Graph):
            raise TypeError(f"FrontierCore: expected a Graph, got {type(graph).__name__}")
        self.backend = get_backend(backend)
        self.graph = graph
        self.n = graph.n
        self.nnz = graph.nnz
        self.ops = self.backend.select(_CpuOps, _GpuOps)(self)

    def levels(self, sources):
        """One BFS from ``sources`` (internal ids), labels in ``dist``; returns the fields of
        :class:`~terrain.graph.traversal.TraversalStats`."""
        return self.ops.levels(np.unique(np.asarray(sources, dtype=np.int64).reshape(-1)))

    def parents(self, dist=None):
        """Predecessors from the current labels (or ``dist``): the smallest-numbered
        neighbour one level closer; -1 at sources and unreached vertices."""
        return self.ops.parents(self.dist if dist is None else dist)

    def bitwise_bfs(self, sources, ecc=None, lower=None, upper=None, pairs=None):
        """Up to 64 BFS at once (a bit per source); returns their eccentricities (host int32).
        With ``ecc`` (from an earlier call), tightens ``lower[w] = max(lower[w], d, ecc[i] -
        d)`` and ``upper[w] = min(upper[w], ecc[i] + d)``; with a list ``pairs``, appends the
        (source, vertex) pairs at distance 0, 1, ... Leaves ``dist`` alone."""
        src = np.asarray(sources, dtype=np.int64)
        if not 1 <= src.size <= 64 or np.unique(src).size != src.size:
            raise ValueError("bitwise_bfs: 1 to 64 distinct sources")
        return self.ops.bitwise_bfs(src, ecc, lower, upper, pairs)

    def sssp_parents(self, dist, weights, inf, sources):
        """Canonical predecessors of final SSSP distances: the smallest tight tail ``u`` with
        ``dist[u] < dist[v]``; behind zero-length arcs, the smallest such tail one hop level
        closer (docs/graphs.md, "SSSP"), so they form a forest rooted at the sources."""
        pred = self.backend.xp.full(self.n, np.iinfo(np.int64).max, np.int64)
        self.ops.sssp_parents(dist, weights, inf, pred)
        return self.zero_length_parents(dist, weights, inf, sources, pred)

    def zero_length_parents(self, dist, weights, inf, sources, pred):
        """Completes ``pred`` of the first pass (the smallest strictly closer tight tail,
        INT64_MAX where none) and returns it, -1 at sources and unreached vertices. A reached
        vertex without such a tail lies behind zero-length arcs: tight arcs ``u -> v`` with
        ``dist[u] == dist[v]``, whose weight is zero or absorbed in the sum (``dist[u] + w ==
        dist[u]`` for a small ``w > 0``); it takes the smallest zero-length tail one hop
        level closer, levels counted from the sources and the first pass's vertices."""
        xp = self.backend.xp
        big = np.iinfo(np.int64).max
        sources = xp.asarray(sources)
        reached = dist != inf
        unsettled = reached & (pred == big)
        unsettled[sources] = False
        if bool(unsettled.any()):
            hops = xp.where(reached & ~unsettled, 0, -1).astype(np.int32)
            ops = self.ops
            level = 0
            while ops.zero_hop_level(dist, weights, hops, level):
                level += 1
            ops.zero_parents(dist, weights, hops, pred)
        pred[pred == big] = -1
        return pred


class _CpuOps:
    """The operators on the CPU: C (``terrain/native/kernels.c``)."""

    NAMES = {1: "top-down", 2: "bottom-up"}
    #: not Beamer's 14: a bottom-up level on the CPU scans every arc of a part the frontier has
    #: not reached (a community tied on by a few edges), so it pays later. BFS from 5 sources
    #: (2-core box, ms): facebook stand-in 2.36 (14) / 1.34 (4), CA-HepPh 1.33 / 0.96,
    #: RMAT-20 236 / 208, grid 1000^2 231 / 215; 3 was slower on RMAT-20 (268)
    alpha = 4

    def __init__(self, core):
        g = core.graph
        it = _kernel_index_dtype(g)
        self.core = core
        core.index_dtype = it
        core.indptr = np.ascontiguousarray(g.indptr, np.int64)
        core.indices = np.ascontiguousarray(g.indices, it)
        core.dist = np.full(core.n, -1, np.int32)
        self.k = _native.traversal_kernels(it)
        self.queues = None
        self.record = np.empty(3 * 64, np.int64)

    def buffers(self):
        if self.queues is None:
            n = max(self.core.n, 1)
            self.queues = (np.empty(n, self.core.index_dtype), np.empty(n, self.core.index_dtype))
        return self.queues

    def levels(self, src):
        c = self.core
        q0, q1 = self.buffers()
        src = src.astype(c.index_dtype)
        reached = np.zeros(1, np.int64)
        while True:
            cap = self.record.size // 3
            nl = self.k["levels"](_p(c.indptr), _p(c.indices), c.n, _p(src), src.size, _p(q0),
                                  _p(q1), _p(c.dist), self.alpha, BETA, _p(self.record), cap,
                                  _p(reached))
            if nl <= cap:
                break
            self.record = np.empty(3 * nl, np.int64)  # more levels than recorded: again
        rows = self.record[:3 * nl].reshape(nl, 3).tolist()
        return ([r[0] for r in rows], [r[1] for r in rows],
                [self.NAMES[r[2]] for r in rows[1:]])

    def parents(self, dist):
        c = self.core
        dist = np.ascontiguousarray(dist, np.int32)
        pred = np.empty(c.n, c.index_dtype)
        self.k["parents"](_p(c.indptr), _p(c.indices), c.n, _p(dist), _p(pred))
        return pred

    def bitwise_bfs(self, src, ecc, lower, upper, pairs):
        c = self.core
        n = c.n
        words = [np.empty(max(n, 1), np.uint64) for _ in range(3)]
        out = np.zeros(src.size, np.int32)
        counts = np.zeros(n + 2, np.int64) if pairs is not None else None
        e = np.ascontiguousarray(ecc, np.int32) if ecc is not None else None
        levels = self.k["bitwise"](_p(c.indptr), _p(c.indices), n, _p(src), src.size,
                                   *map(_p, words), e.ctypes.data if e is not None else None,
                                   lower.ctypes.data if e is not None else None,
                                   upper.ctypes.data if e is not None else None, _p(out),
                                   counts.ctypes.data if counts is not None else None, None)
        if pairs is not None:
            pairs.extend(counts[:levels].tolist())
        return out

    def sssp_parents(self, dist, weights, inf, pred):
        c = self.core
        _native.sssp_parents(c.indptr, c.indices, weights, dist, dist.dtype.type(inf), pred,
                             pull=not c.graph.directed)

    def zero_hop_level(self, dist, weights, hops, level):
        c = self.core
        return _native.zero_hop_level(c.indptr, c.indices, weights, dist, hops, level)

    def zero_parents(self, dist, weights, hops, pred):
        c = self.core
        _native.zero_parents(c.indptr, c.indices, weights, dist, hops, pred)


class CapturedLaunches:
    """Work enqueued on ``stream``, replayed from a CUDA graph captured on first use per key;
    launched directly once capture fails (``error`` says why) or while ``enabled`` is False."""

    def __init__(self, stream):
        self.stream = stream
        self.graphs = {}
        self.enabled = True
        self.error = None

    def __call__(self, key, enqueue):
        stream = self.stream
        if self.enabled and key not in self.graphs:
            try:
                with stream:
                    stream.begin_capture()
                    try:
                        enqueue()
                    finally:
                        self.graphs[key] = stream.end_capture()
            except Exception as exc:  # no capture here: launch directly from now on
                self.enabled, self.error = False, f"{type(exc).__name__}: {exc}"
        if self.enabled:
            self.graphs[key].launch(stream)
            return
        with stream:
            enqueue()


_SM_COUNT = {}


def _multiprocessors(cp):
    """SM count of the current device (the query is slow: once per device)."""
    dev = cp.cuda.Device().id
    if dev not in _SM_COUNT:
        _SM_COUNT[dev] = cp.cuda.runtime.getDeviceProperties(dev)["multiProcessorCount"]
    return _SM_COUNT[dev]


class _GpuOps:
    """The operators on the GPU (``_frontier.cu``); kernels read their input size from a
    device counter ring of ``SLOTS`` levels, so the host launches levels without reading."""

    NAMES = {1: "top-down", 2: "bottom-up"}
    alpha = 14  # Beamer's

    def __init__(self, core):
        b = core.backend
        cp = self.xp = b.xp
        g = core.graph
        self.core = core
        core.index_dtype = g.indices.dtype
        core.indptr = b.asarray(g.indptr)
        core.indices = b.asarray(g.indices)
        n = max(core.n, 1)
        core.dist = cp.full(core.n, -1, np.int32)
        it = "int" if core.index_dtype == np.int32 else "long long"
        names = {"topdown": f"advance_topdown<{it}>", "bottomup": f"advance_bottomup<{it}>",
                 "seed": f"seed_sources<{it}>", "parents": f"bfs_parents<{it}>",
                 "step_decide": "step_decide", "step_advance": f"step_advance<{it}>",
                 "step_hubs": f"step_hubs<{it}>", "step_seed": f"step_seed<{it}>",
                 "step_seed_decide": f"step_seed_decide<{it}>",
                 "bitwise_pull": f"bitwise_pull<{it}>",
                 "bitwise_pull_hubs": f"bitwise_pull_hubs<{it}>",
                 "bitwise_seed": "bitwise_seed", "bitwise_finish": "bitwise_finish"}
        for wt in ("long long", "double"):
            for op in ("sssp_parents", "zero_hop_level", "zero_parents"):
                names[f"{op}:{wt}"] = f"{op}<{it}, {wt}>"
        module = b.cuda_module(Path(__file__).with_name("_frontier.cu"),
                               name_expressions=tuple(names.values()))
        self.k = {key: module.get_function(name) for key, name in names.items()}
        self.queues = (cp.empty(n, core.index_dtype), cp.empty(n, core.index_dtype))
        # the counter ring, the device loop's control words and the visited bitmask in one
        # buffer: one memset resets them, one copy (into pinned memory) reads the first two
        words = 4 * SLOTS + _C_WORDS
        visited_words = (core.n + 31) // 32 + 1
        self.state_visited = cp.zeros(words + (visited_words + 1) // 2, np.uint64)
        self.state = self.state_visited[:words]
        self.visited = self.state_visited[words:].view(np.uint32)[:visited_words]
        self.counters = self.state[:4 * SLOTS]
        self.pinned = cp.cuda.alloc_pinned_memory(self.state.nbytes)
        self.host_state = np.frombuffer(self.pinned, np.uint64, self.state.size)
        self.host_counters = self.host_state[:4 * SLOTS]
        self.resident_blocks = _multiprocessors(cp) * _RESIDENT_BLOCKS_PER_SM
        self.loop = None           # the device loop's buffers
        self.launches = None       # the device loop's captured CUDA graphs
        self.recent = []           # levels of the last traversals (the first launch's length)
        self.bitwise = None
        self._route = None

    def blocks(self, work):
        return max(1, min(self.resident_blocks, -(-int(work) // BLOCK)))

    def route(self):
        """The level loop for this graph, BFS's one planner (docs/graphs.md, "BFS: the
        planner"): ``'batched'`` (host loop, ``BATCH_LEVELS`` top-down launches a read) wins
        on road-like graphs without hubs (average degree <= ``ROAD_DEGREE``, no list of
        ``HUB_MIN`` edges); ``'device'`` (the captured device loop) on every other graph."""
        if self._route is None:
            c = self.core
            deg = c.indptr[1:] - c.indptr[:-1]
            hubs = c.n > 0 and int(deg.max()) >= HUB_MIN
            self._route = ("batched" if c.nnz <= ROAD_DEGREE * max(c.n, 1) and not hubs
                           else "device")
        return self._route

    def levels(self, src, route=None):
        route = route or self.route()
        if route not in ROUTES:
            raise ValueError(f"levels: route must be one of {ROUTES}, got {route!r}")
        if route == "batched":
            return self._batched(src)
        return self._device(src)

    def seed(self, src):
        """Reset the labels, bitmask and counters; the sources in level 0. Returns
        ``(count, degree sum)`` of level 0 (from the host's row offsets)."""
        cp = self.xp
        c = self.core
        c.dist.fill(-1)
        self.visited.fill(0)
        self.counters.fill(0)
        self.k["seed"]((self.blocks(src.size),), (BLOCK,),
                       (c.indptr, cp.asarray(src.astype(c.index_dtype)), np.int64(src.size),
                        self.queues[0], c.dist, self.visited, self.counters))
        deg = c.indptr[cp.asarray(src) + 1] - c.indptr[cp.asarray(src)]
        return int(src.size), int(deg.sum())

    def _batched(self, src):
        """The host loop: Beamer's rule on the counters it reads back; a top-down step is
        ``BATCH_LEVELS`` launches of the fused expand-contract kernel (each strides over
        whatever frontier the one before left, so no level waits for the host)."""
        cp = self.xp
        c = self.core
        q = self.queues
        nf, mf = self.seed(src)
        sizes, degs, ops = [nf], [mf], []
        explored, level, bottom = mf, 0, False
        while nf > 0:
            growing = len(sizes) < 2 or nf > sizes[-2]
            if not bottom and growing and mf * self.alpha > c.nnz - explored and 4 * mf > c.n:
                bottom = True
            elif bottom and not growing and nf * BETA < c.n:
                bottom = False
            if bottom:
                batch = 1
                self.k["bottomup"]((self.blocks(c.n),), (BLOCK,), (
                    c.indptr, c.indices, q[(level + 1) & 1], c.dist, self.visited,
                    self.counters, np.int32(level), np.int64(c.n)))
            else:
                batch = BATCH_LEVELS
                grid = (self.blocks(4 * nf + BLOCK),)
                for j in range(batch):
                    self.k["topdown"](grid, (BLOCK,), (
                        c.indptr, c.indices, q[(level + j) & 1], q[(level + j + 1) & 1],
                        c.dist, self.visited, self.counters, np.int32(level + j)))
            # the counter ring to the host (one copy)
            stream = cp.cuda.get_current_stream()
            cp.cuda.runtime.memcpyAsync(self.host_counters.ctypes.data, self.counters.data.ptr,
                                        self.host_counters.nbytes,
                                        cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
            stream.synchronize()
            ring = self.host_counters.reshape(SLOTS, 4)
            for j in range(1, batch + 1):
                count, degsum = (int(x) for x in ring[(level + j) % SLOTS, :2])
                if count == 0:
                    nf = 0
                    break
                sizes.append(count)
                degs.append(degsum)
                ops.append("bottom-up" if bottom else "top-down")
                explored += degsum
                nf, mf = count, degsum
            level = len(sizes) - 1
        return sizes, degs, ops

    def _init_loop(self):
        cp = self.xp
        n = max(self.core.n, 1)
        pinned_src = cp.cuda.alloc_pinned_memory(8 * (_CAPTURED_SOURCES + 1))
        self.loop = {
            "ctrl": self.state[4 * SLOTS:],
            "visited_next": cp.zeros_like(self.visited),
            "hub_q": cp.empty(n, self.core.index_dtype),
            "src": cp.zeros(max(n, _CAPTURED_SOURCES) + 1, np.int64),
            "pinned": [pinned_src],
            "host_src": np.frombuffer(pinned_src, np.int64, _CAPTURED_SOURCES + 1),
            "host_ctrl": self.host_state[4 * SLOTS:],
            "stream": cp.cuda.Stream(non_blocking=True),
            "after": cp.cuda.Event(disable_timing=True),
        }
        self.launches = CapturedLaunches(self.loop["stream"])

    def _enqueue_decide(self):
        c = self.core
        self.k["step_decide"]((1,), (32,), (self.counters, self.loop["ctrl"], np.int64(c.n),
                                            np.int64(c.nnz), np.int32(self.alpha),
                                            np.int32(BETA)))

    def _enqueue_seed(self, seed_blocks, captured_src):
        """Resets (memsets: -1 is all ones), the sources in level 0 and the first decide; the
        sources come from the pinned buffer by a copy inside the graph when they fit
        (``captured_src``), decided in the seeding kernel's one block."""
        cp = self.xp
        c = self.core
        lp = self.loop
        ptr = lp["stream"].ptr
        rt = cp.cuda.runtime
        if captured_src:
            rt.memcpyAsync(lp["src"].data.ptr, lp["host_src"].ctypes.data,
                           lp["host_src"].nbytes, rt.memcpyHostToDevice, ptr)
        rt.memsetAsync(c.dist.data.ptr, 0xFF, c.dist.nbytes, ptr)
        rt.memsetAsync(self.state_visited.data.ptr, 0, self.state_visited.nbytes, ptr)
        if captured_src:
            self.k["step_seed_decide"]((1,), (64,), (
                c.indptr, lp["src"], self.queues[0], c.dist, self.visited, self.counters,
                lp["ctrl"], np.int64(c.n), np.int64(c.nnz), np.int32(self.alpha), np.int32(BETA)))
            return
        self.k["step_seed"]((seed_blocks,), (BLOCK,), (c.indptr, lp["src"], self.queues[0],
                                                       c.dist, self.visited, self.counters))
        self._enqueue_decide()

    def _enqueue_readback(self):
        """Counter ring and control words to pinned host memory (one copy)."""
        rt = self.xp.cuda.runtime
        rt.memcpyAsync(self.host_state.ctypes.data, self.state.data.ptr, self.state.nbytes,
                       rt.memcpyDeviceToHost, self.loop["stream"].ptr)

    def _enqueue_steps(self, steps):
        """Per level three launches: the chosen direction's step, the hub lists, the next
        level's decide."""
        c = self.core
        lp = self.loop
        q0, q1 = self.queues
        grid = (self.resident_blocks,)
        vis = (self.visited, lp["visited_next"])
        for _ in range(steps):
            self.k["step_advance"](grid, (BLOCK,), (
                c.indptr, c.indices, q0, q1, c.dist, *vis, self.counters, lp["ctrl"],
                lp["hub_q"], np.int64(HUB_MIN), np.int64(c.n)))
            self.k["step_hubs"](grid, (BLOCK,), (
                c.indptr, c.indices, q0, q1, c.dist, *vis, self.counters, lp["ctrl"],
                lp["hub_q"]))
            self._enqueue_decide()

    def _device(self, src):
        """The device loop: seed and the first levels (as many as recent traversals needed)
        in one launch, then ``MORE_STEPS``, doubling, until a level comes out empty."""
        cp = self.xp
        if self.loop is None:
            self._init_loop()
        lp = self.loop
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
        first = min(max(self.recent) if self.recent else FIRST_STEPS, MAX_FIRST_STEPS)
        seed_blocks = self.blocks(k)

        def enqueue_first():
            self._enqueue_seed(seed_blocks, captured_src)
            self._enqueue_steps(first)
            self._enqueue_readback()

        self.launches(("first", first, seed_blocks, captured_src), enqueue_first)
        sizes, degs, ops = [], [], []
        more = MORE_STEPS
        try:
            while True:
                stream.synchronize()
                ring = self.host_counters.reshape(SLOTS, 4)
                ctrl = lp["host_ctrl"]
                level, active = int(ctrl[_C_LEVEL]), int(ctrl[_C_ACTIVE])
                # the last level whose slot is final: each step ends with the next decide
                last = level if active else level - 1
                lo = len(sizes)
                if last >= lo:
                    rows = (ring[lo:last + 1] if last < SLOTS
                            else ring[np.arange(lo, last + 1) % SLOTS]).tolist()
                    for lv, (count, degsum, _, op) in enumerate(rows, lo):
                        if count == 0:
                            return self._done(sizes, degs, ops)
                        sizes.append(count)
                        degs.append(degsum)
                        if lv:
                            ops.append(self.NAMES[op])
                if not active:
                    return self._done(sizes, degs, ops)
                if len(sizes) > self.core.n + 1:
                    raise RuntimeError("levels: more levels than vertices (corrupt counters)")
                steps = more

                def enqueue_more():
                    self._enqueue_steps(steps)
                    self._enqueue_readback()

                self.launches(("more", steps), enqueue_more)
                more = min(2 * more, SLOTS - 8)  # long traversals: fewer read-backs
        finally:
            del lp["pinned"][1:]

    def _done(self, sizes, degs, ops):
        self.recent.append(len(sizes))
        del self.recent[:-HINT_TRAVERSALS]
        return sizes, degs, ops

    def parents(self, dist):
        c = self.core
        pred = self.xp.empty(c.n, c.index_dtype)
        self.k["parents"]((self.blocks(c.n),), (BLOCK,),
                          (c.indptr, c.indices, dist, pred, np.int64(c.n)))
        return pred

    def bitwise_bfs(self, src, ecc, lower, upper, pairs):
        xp = self.xp
        c = self.core
        n, k = c.n, int(src.size)
        if self.bitwise is None:
            deg = c.indptr[1:] - c.indptr[:-1]
            self.bitwise = {"seen": xp.zeros(n, np.uint64), "frontier": xp.zeros(n, np.uint64),
                            "next": xp.zeros(n, np.uint64), "bits": xp.zeros(2, np.uint64),
                            "hubs": xp.flatnonzero(deg >= BITWISE_HUB_MIN).astype(
                                c.index_dtype)}
        st = self.bitwise
        seen, frontier, nxt, hubs = st["seen"], st["frontier"], st["next"], st["hubs"]
        for a in (seen, frontier, nxt):
            a.fill(0)
        full = np.uint64((1 << k) - 1) if k < 64 else np.uint64(2**64 - 1)
        with_bounds = ecc is not None
        d_ecc = xp.asarray(np.asarray(ecc if with_bounds else np.zeros(k), np.int32))
        if not with_bounds:
            lower = upper = xp.zeros(1, np.int32)
        out = np.zeros(k, np.int32)
        if pairs is not None:
            pairs.append(k)
        self.k["bitwise_seed"]((1,), (64,), (xp.asarray(src), np.int32(k), seen, frontier,
                                             d_ecc, lower, upper, np.int32(with_bounds)))
        grid = (self.resident_blocks,)
        level = 0
        while True:
            level += 1
            self.k["bitwise_pull"](grid, (BLOCK,), (c.indptr, c.indices, frontier, seen, nxt,
                                                    full, np.int64(BITWISE_HUB_MIN),
                                                    np.int64(n)))
            if hubs.size:
                self.k["bitwise_pull_hubs"](grid, (BLOCK,), (
                    c.indptr, c.indices, frontier, seen, nxt, hubs, np.int64(hubs.size), full))
            st["bits"].fill(0)
            self.k["bitwise_finish"](grid, (BLOCK,), (seen, frontier, nxt, np.int64(n),
                                                      np.int32(level), d_ecc, lower, upper,
                                                      np.int32(with_bounds), st["bits"]))
            bits, count = (int(x) for x in st["bits"].get())
            if bits == 0:
                return out
            if pairs is not None:
                pairs.append(count)
            for i in range(k):
                if bits >> i & 1:
                    out[i] = level

    def _weighted(self, op, dist, *args):
        c = self.core
        wt = "double" if dist.dtype == np.float64 else "long long"
        self.k[f"{op}:{wt}"]((self.blocks(c.n),), (BLOCK,),
                             (c.indptr, c.indices) + args + (np.int64(c.n),))

    def sssp_parents(self, dist, weights, inf, pred):
        self._weighted("sssp_parents", dist, weights, dist, dist.dtype.type(inf), pred)

    def zero_hop_level(self, dist, weights, hops, level):
        changed = self.xp.zeros(1, np.uint64)
        c = self.core
        wt = "double" if dist.dtype == np.float64 else "long long"
        self.k[f"zero_hop_level:{wt}"]((self.blocks(c.n),), (BLOCK,), (
            c.indptr, c.indices, weights, dist, hops, np.int32(level), np.int64(c.n), changed))
        return int(changed.get()[0])

    def zero_parents(self, dist, weights, hops, pred):
        self._weighted("zero_parents", dist, weights, dist, hops, pred)
