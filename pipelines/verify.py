"""``terrain verify STORE|RESULT``: check a result with a certificate (:mod:`terrain.verify`).

It checks an ``mst``, ``cost-distance``, ``fill`` or ``flow`` output store against its DEM
(the store's ``elevation``, else the tile store named in its ``source`` attribute) with the
model its summary records (the cost-distance certificate window by window with a 2-cell
halo: out of core; the others in memory), or a BFS distances file (``bfs --out dist.npy``)
with ``--graph GRAPH --source S[,S...]``. The checks run in one process (a certificate is a
single pass). Exit status: 0 all checks pass, 1 a check fails (the first violation is
printed), 2 bad input.
"""

import sys
import time
from pathlib import Path

import numpy as np

from terrain.errors import InputError
from terrain.io.outputs import check_input_file, json_text
from terrain.io.remote import check_unchanged, input_fingerprints, inputs_unchanged
from terrain.io.zarr_meta import open_group
from terrain.tiles import is_store
from terrain.tiles.store import result_dem

__all__ = ["verify_path", "verify_command"]


def _whole(arr):
    """A layer read whole: a local store's by the shard reader (on threads, no zarr import;
    a damaged shard is an InputError), else through zarr."""
    from terrain.io.zarr_meta import Array
    if isinstance(arr, Array):
        from terrain.tiles.store import read_layer
        return read_layer(arr.folder.parent, arr.name)
    return arr[:]


class _WholeLater:
    """A layer read whole by :func:`_whole` when NumPy asks for it (``np.asarray``), not
    before: a check that reads it last does not hold it beside the others."""

    def __init__(self, arr):
        self.arr = arr

    def __array__(self, dtype=None, copy=None):
        a = _whole(self.arr)
        return a if dtype is None else a.astype(dtype, copy=False)


class _Windows:
    """A local store's layer read a window at a time by the shard reader
    (``layer[r0:r1, c0:c1]``, or one cell), as the windowed certificates read it."""

    def __init__(self, arr):
        self.arr, self.shape = arr, tuple(arr.shape)

    def __getitem__(self, key):
        from terrain.tiles.store import read_block
        bounds = [(k.start, k.stop) if isinstance(k, slice) else (int(k), int(k) + 1)
                  for k in key]
        block = read_block(self.arr.folder.parent, self.arr.name, (*bounds[0], *bounds[1]))
        return block[tuple(slice(None) if isinstance(k, slice) else 0 for k in key)]


def _windowed(arr):
    """``arr`` for a windowed certificate: :class:`_Windows` of a local store's layer."""
    from terrain.io.zarr_meta import Array
    return _Windows(arr) if isinstance(arr, Array) else arr


def _verify_mst_store(path, group):
    from terrain.verify import verify_grid_mst
    summary = dict(group.attrs.get("mst") or {})
    dem = result_dem(path, group, group.attrs.get("source"))
    a = dict(group.attrs)
    gt = a.get("geotransform") or [0.0, 1.0, 0.0, 0.0, 0.0, -1.0]
    cellsize = a.get("cellsize") or [abs(gt[1]), abs(gt[5])]
    return verify_grid_mst(_whole(dem), _whole(group["mst"]),
                           int(summary.get("connectivity", 8)), summary.get("weight", "max"),
                           tuple(cellsize))


def _verify_cost_store(path, group):
    from terrain.verify import verify_grid_sssp
    m = group.attrs.get("cost_model")
    if not isinstance(m, dict):
        raise InputError(f"{path}: no 'cost_model' attribute (written by cost-distance): "
                         "cannot recompute the arc costs")
    dem = result_dem(path, group, m.get("dem"))  # "elevation": the store's own
    friction = _windowed(group[m["friction"]]) if m.get("friction") else None
    run = group.attrs.get("cost_distance") or {}
    route = run.get("route", run.get("algorithm", "in-core"))  # "algorithm": earlier stores
    # the in-core SSSP sums exactly what verify sums; the tiled one adds boundary-matrix
    # entries (other sums of the same arcs), which differ in the last bits (1e-16 per add);
    # the blocked one gives the in-core bits
    rtol = 0.0 if route in ("in-core", "blocked") else 1e-10
    side = int(group["distance"].chunks[0])
    return verify_grid_sssp(_windowed(dem), *(_windowed(group[k]) for k in
                                              ("distance", "backlink", "allocation")),
                            m["sources"], m.get("start_costs"), cost=m["cost"],
                            friction=friction, connectivity=int(m["connectivity"]),
                            cellsize=tuple(m["cellsize"]), max_cost=m.get("max_cost"),
                            rtol=rtol, window=side * max(1, 1024 // side))


def _verify_fill_store(path, group):
    from terrain.verify import verify_fill
    missing = [name for name in ("filled", "depth", "depression") if name not in group]
    if missing:
        raise InputError(f"{path}: a fill store without its {' and '.join(missing)} layer "
                         "(the store is damaged)")
    s = dict(group.attrs.get("fill") or {})
    dem = result_dem(path, group, group.attrs.get("source"))
    outlets = None
    if "outlets" in group:
        outlets = _whole(group["outlets"])
    z = _whole(dem)
    # pits a --min-depth/--min-area run kept: they drain
    sinks = _whole(group["sinks"]) if "sinks" in group else None
    # depth and depression stay in the store until their checks read them (then freed)
    return verify_fill(z, _whole(group["filled"]), int(s.get("connectivity", 8)), outlets,
                       _WholeLater(group["depth"]), _WholeLater(group["depression"]),
                       bool(s.get("epsilon")), sinks)


def _verify_flow_store(path, group):
    from terrain.verify import verify_flow
    s = dict(group.attrs.get("flow") or {})
    outlets = _whole(group["outlets"]) if "outlets" in group else None
    weights = None
    if s.get("weights"):
        wpath = Path(s["weights"])
        if not wpath.exists():
            raise InputError(f"{path}: its accumulation was weighted by {wpath}, which is gone")
        check_unchanged(path, "weights", wpath, s.get("weights_fingerprint"))
        if is_store(wpath):
            weights = _whole(open_group(wpath, mode="r")["elevation"])
        else:
            from terrain.io import read_grid
            weights, _ = read_grid(wpath, finite=False)  # as the flow read them
    # tiled weighted sums associate per quadtree node (terrain.hydrology.flow): rounding
    rtol = 1e-12 if weights is not None and s.get("route") == "tiled" else 0.0
    return verify_flow(_whole(group["filled"]), _whole(group["direction"]),
                       _whole(group["accumulation"]), weights,
                       connectivity=int(s.get("connectivity", 8)),
                       cellsize=tuple(s.get("cellsize", (1.0, 1.0))), outlets=outlets,
                       rtol=rtol)


def _verify_bfs_file(path, graph_path, sources, fmt="auto"):
    from terrain.graph import load_graph
    from terrain.verify import verify_sssp

    if not graph_path or not sources:
        raise InputError(f"{path}: a distances file needs the graph and the source(s) it was "
                         "computed from")
    try:
        dist = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise InputError(f"{path}: not a NumPy distances file ({e})") from None
    check_input_file(graph_path)
    graph = load_graph(graph_path, fmt)
    return verify_sssp(graph, dist, sources, unreached=-1)


def verify_path(path, graph=None, sources=None, fmt="auto"):
    """Certificate for a result path (see the module docstring); raises InputError."""
    p = Path(path)
    check_input_file(p)
    if not p.exists():
        raise InputError(f"{path}: no such file or directory")
    if is_store(p):
        began = input_fingerprints([p])  # before the store is opened
        group = open_group(p, mode="r")
        source = group.attrs.get("source")  # the DEM, when the store holds none
        # a store replaced or removed while it is checked is not a violation (exit 1): the
        # layers read are some of each
        with inputs_unchanged([p, source if isinstance(source, str) else None], began):
            return _verify_store(p, group)
    if p.suffix == ".npy":
        return _verify_bfs_file(p, graph, sources, fmt)
    raise InputError(f"{path}: not a result store or a .npy distances file")


def _verify_store(path, group):
    """The certificate of the result store at ``path`` (its kind told by its layers)."""
    if "mst" in group:
        return _verify_mst_store(path, group)
    if "distance" in group and "backlink" in group:
        return _verify_cost_store(path, group)
    if "direction" in group and "flow" in group.attrs:
        return _verify_flow_store(path, group)
    if "filled" in group and "depression" in group:
        return _verify_fill_store(path, group)
    raise InputError(f"{path}: no result verify knows in this store (an mst, "
                     "cost-distance, fill or flow output)")


def verify_command(args):
    """``terrain verify STORE|RESULT [--graph G --source S] [--json]``."""
    sources = None
    if getattr(args, "source", None):
        from .graph import _parse_sources
        sources = _parse_sources(args.source)
    if str(args.result).endswith(".npy") and not (args.graph and sources):
        raise InputError(f"{args.result}: a distances file needs --graph and --source")
    if not str(args.result).endswith(".npy") and (args.graph or sources):
        # a store is checked against its own inputs: the options were ignored
        raise InputError(f"{args.result}: --graph and --source name a distances file's "
                         "graph (a .npy); a store holds what it is checked against")
    t0 = time.perf_counter()
    cert = verify_path(args.result, args.graph, sources, args.format)
    seconds = time.perf_counter() - t0
    if args.json:
        print(json_text({"input": str(args.result), "what": cert.what, "ok": cert.ok,
                          "checks": cert.checks, "violation": cert.violation,
                          "facts": cert.facts, "seconds": round(seconds, 6)}, indent=2))
    else:
        print(f"verify    {args.result}: {cert.what}")
        for c in cert.checks:
            print(f"ok        {c}")
        if cert.ok:
            print(f"verified  in {seconds:.2f} s")
        else:
            print(f"FAIL      {cert.violation}")
    sys.stdout.flush()
    return 0 if cert.ok else 1
