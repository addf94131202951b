"""Command line: ``python -m terrain.run COMMAND ...``.

This module only parses arguments and dispatches to the pipeline that runs the command.
Every handler takes the parsed ``argparse.Namespace`` and returns an exit status. Bad input
anywhere (:class:`terrain.errors.InputError`) becomes one line on stderr and status 2.
"""

import argparse
import importlib
import os
import sys

from .backend import BACKEND_CHOICES
from .errors import InputError

# command -> "module:function"; imported only when that command runs (fast --help, light deps)
HANDLERS = {
    "ingest": "pipelines.ingest:ingest_command",
    "info": "pipelines.ingest:info_command",
    "synth": "pipelines.ingest:synth_command",
    "mst": "pipelines.mst:mst_command",
    "graph-ingest": "pipelines.graph:graph_ingest_command",
    "bfs": "pipelines.graph:bfs_command",
    "diameter": "pipelines.graph:diameter_command",
    "sssp": "pipelines.graph:sssp_command",
    "bench ingest": "pipelines.bench_ingest:bench_ingest_command",
    "bench mst": "pipelines.bench_mst:bench_mst_command",
    "bench bfs": "pipelines.bench_graph:bench_bfs_command",
    "bench diameter": "pipelines.bench_graph:bench_diameter_command",
    "bench sssp": "pipelines.bench_graph:bench_sssp_command",
    "bench mst-graph": "pipelines.bench_graph:bench_mst_graph_command",
}

CONNECTIVITIES = (4, 8)
WEIGHTS = ("max", "absdiff", "slope", "length3d")
GRAPH_FORMATS = ("auto", "snap", "mtx", "dimacs", "metis", "store")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit status 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _backend(value):
    v = value.strip().lower()
    if v not in BACKEND_CHOICES:
        raise argparse.ArgumentTypeError(f"unknown backend {value!r} (choose from cpu, gpu, auto)")
    return v


def _checked(convert, ok, wanted):
    """An argparse ``type``: ``convert`` the text, then require ``ok(value)`` (``wanted`` says what)."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{text} is not {wanted}")
        return value
    return parse


_tile = _checked(int, lambda t: t >= 2 and not t & (t - 1), "a power of two >= 2")
_positive_int = _checked(int, lambda v: v > 0, "a positive integer")
_fraction = _checked(float, lambda v: 0.0 <= v < 1.0, "a number in [0, 1)")
_positive_float = _checked(float, lambda v: v > 0 and v < float("inf"), "a positive number")


def _add_backend(p):
    p.add_argument("--backend", type=_backend, default=None,
                   help="cpu, gpu or auto (default: $TERRAIN_BACKEND, else auto: the GPU when present)")


def _add_scheduler(p):
    p.add_argument("--scheduler", default=None, metavar="ADDRESS|threads|synchronous",
                   help="attach to a running Dask scheduler, or run without one "
                        "(default: start a LocalCluster and print its dashboard address)")


def _add_graph_input(p):
    p.add_argument("graph", metavar="GRAPH",
                   help="edge list (SNAP), Matrix Market, DIMACS .gr, METIS .graph (optionally .gz), "
                        "or a cache written by graph-ingest")
    p.add_argument("--format", choices=GRAPH_FORMATS, default="auto",
                   help="input format (default: from the file name and contents)")
    p.add_argument("--lcc", action="store_true", help="keep only the largest connected component")


def build_parser():
    parser = _Parser(prog="terrain", description="Fast, exact, out-of-core graph algorithms on "
                     "elevation grids and sparse graphs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("ingest", help="ingest an elevation grid into a z-ordered Zarr tile store")
    p.add_argument("input", metavar="INPUT", help="ESRI ASCII, GRASS ASCII or any raster rasterio reads")
    p.add_argument("-o", "--output", required=True, metavar="OUT.zarr")
    p.add_argument("--tile", type=_tile, default=512, help="tile side, a power of two (default 512)")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    _add_scheduler(p)

    p = sub.add_parser("info", help="describe a tile store")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("synth", help="write fractal terrain as an ESRI ASCII grid, streaming")
    p.add_argument("--rows", type=_positive_int, required=True)
    p.add_argument("--cols", type=_positive_int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--nodata", type=_fraction, default=0.0, metavar="FRACTION",
                   help="fraction of cells (in blobs) written as nodata (default 0)")
    p.add_argument("--integer", action="store_true", help="write integer elevations (many ties)")
    p.add_argument("-o", "--output", required=True, metavar="FILE.asc")
    p.add_argument("--overwrite", action="store_true")

    p = sub.add_parser("mst", help="minimum spanning forest of the grid graph of a DEM")
    p.add_argument("input", metavar="INPUT", help="ASCII grid, any rasterio raster, or a tile store")
    p.add_argument("-o", "--output", default=None, metavar="OUT.zarr",
                   help="result store (default: INPUT's name with .mst.zarr)")
    p.add_argument("--tile", type=_tile, default=512)
    p.add_argument("--connectivity", type=int, choices=CONNECTIVITIES, default=8)
    p.add_argument("--weight", choices=WEIGHTS, default="max",
                   help="edge weight: max(z_u, z_v) (default), absdiff, slope, length3d")
    _add_backend(p)
    _add_scheduler(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--geotiff", default=None, metavar="FILE.tif", help="also write the mask as GeoTIFF")
    p.add_argument("--overwrite", action="store_true")

    p = sub.add_parser("graph-ingest", help="parse a sparse graph once and cache its CSR")
    _add_graph_input(p)
    p.add_argument("-o", "--output", required=True, metavar="G.zarr")
    p.add_argument("--overwrite", action="store_true")
    _add_scheduler(p)

    p = sub.add_parser("bfs", help="hop distances and predecessors from one or many sources")
    _add_graph_input(p)
    p.add_argument("--source", required=True, metavar="S[,S...]",
                   help="source vertex id(s) in the file's own ids; several = multi-source BFS")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write id, distance, predecessor: .parquet, .csv or .npz (.npy: "
                        "distances only, for ids 0..n-1)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--json", action="store_true")
    _add_backend(p)
    _add_scheduler(p)

    p = sub.add_parser("sssp", help="weighted shortest paths (and predecessors) from one or "
                                    "many sources")
    _add_graph_input(p)
    p.add_argument("--source", required=True, metavar="S[,S...]",
                   help="source vertex id(s) in the file's own ids; several = multi-source")
    p.add_argument("--algorithm", choices=("auto", "crauser", "delta", "dijkstra"),
                   default="auto", help="auto (default): dijkstra on the CPU, delta-stepping "
                   "or Crauser on the GPU by graph shape")
    p.add_argument("--delta", type=_positive_float, default=None, metavar="D",
                   help="bucket width of delta-stepping (default: from the weights)")
    p.add_argument("--directed", action="store_true",
                   help="arcs as listed (DIMACS .gr always; default: undirected)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write id, distance, predecessor: .parquet, .csv or .npz (.npy: "
                        "distances only, for ids 0..n-1)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--json", action="store_true")
    _add_backend(p)
    _add_scheduler(p)

    p = sub.add_parser("diameter", help="exact diameter by eccentricity bounding")
    _add_graph_input(p)
    p.add_argument("--all", action="store_true", help="also radius, center and periphery")
    p.add_argument("--effective", type=_positive_int, default=None, metavar="K",
                   help="also the sampled effective diameter (90th percentile) over K sources")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--weighted", action="store_true",
                   help="weighted distances (Dijkstra in place of BFS; the file's weights)")
    p.add_argument("--json", action="store_true")
    _add_backend(p)
    _add_scheduler(p)

    bench = sub.add_parser("bench", help="benchmarks: ours and a peer's figure from one run")
    bsub = bench.add_subparsers(dest="bench", metavar="WHAT", parser_class=_Parser)
    bsub.required = True
    b = bsub.add_parser("ingest", help="terrain ingest vs rasterio reading the same ASCII grid")
    b.add_argument("--rows", type=_positive_int, default=8192)
    b.add_argument("--cols", type=_positive_int, default=8192)
    b.add_argument("--tile", type=_tile, default=512)
    b.add_argument("--workdir", default=None, help="where to keep the generated input (reused)")
    _add_scheduler(b)
    b = bsub.add_parser("mst", help="terrain grid MST vs scipy minimum_spanning_tree")
    b.add_argument("--rows", type=_positive_int, default=4096)
    b.add_argument("--cols", type=_positive_int, default=4096)
    b.add_argument("--tile", type=_tile, default=512)
    b.add_argument("--connectivity", type=int, choices=CONNECTIVITIES, default=8)
    b.add_argument("--no-scipy", action="store_true", help="skip the scipy figure (grids too big for it)")
    b.add_argument("--workdir", default=None)
    _add_backend(b)
    _add_scheduler(b)
    for name in ("bfs", "diameter"):
        b = bsub.add_parser(name, help=f"terrain {name} vs "
                            + ("scipy breadth_first_order" if name == "bfs" else "networkx"))
        b.add_argument("--graph", choices=("rmat", "grid", "file"), default="rmat")
        b.add_argument("--scale", type=_positive_int, default=16, help="RMAT: 2**scale vertices")
        b.add_argument("--edge-factor", type=_positive_int, default=16, help="RMAT: edges per vertex")
        b.add_argument("--rows", type=_positive_int, default=1024)
        b.add_argument("--cols", type=_positive_int, default=1024)
        b.add_argument("--file", default=None, help="with --graph file: the graph to load")
        b.add_argument("--sources", type=_positive_int, default=16, help="BFS sources to average over")
        b.add_argument("--seed", type=int, default=1)
        _add_backend(b)
    for name in ("sssp", "mst-graph"):
        b = bsub.add_parser(name, help="terrain " + ("SSSP vs scipy dijkstra" if name == "sssp"
                                                     else "graph MST vs scipy minimum_spanning_tree"))
        b.add_argument("--graph", choices=("rmat", "grid", "file"), default="grid")
        b.add_argument("--scale", type=_positive_int, default=16, help="RMAT: 2**scale vertices")
        b.add_argument("--edge-factor", type=_positive_int, default=16, help="RMAT: edges per vertex")
        b.add_argument("--rows", type=_positive_int, default=1024)
        b.add_argument("--cols", type=_positive_int, default=1024)
        b.add_argument("--file", default=None, help="with --graph file: the graph to load")
        b.add_argument("--sources", type=_positive_int, default=4, help="sources to average over")
        b.add_argument("--load-limit", type=_positive_int, default=4_000_000,
                       help="sssp: time the load-included run up to this many vertices")
        b.add_argument("--workdir", default=None, help="where to write the load-included file")
        b.add_argument("--no-scipy", action="store_true", help="skip scipy (graphs too big for it)")
        b.add_argument("--seed", type=int, default=1)
        _add_backend(b)
    return parser


def _handler(args):
    key = args.command if args.command != "bench" else f"bench {args.bench}"
    module, func = HANDLERS[key].split(":")
    return getattr(importlib.import_module(module), func)


def main(argv=None):
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return int(_handler(args)(args) or 0)
    except InputError as e:
        print(f"terrain: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("terrain: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`terrain info STORE | head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
