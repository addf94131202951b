"""``python -m benchmarks WHAT``: ours and each peer's figure from one run.

Run from a checkout (the benchmarks are not installed with the package); every benchmark
prints its own table. ``python -m benchmarks --help`` lists them; docs/performance.md gives
the command that reproduces each published figure.
"""

import argparse
import importlib
import sys

#: benchmark -> "module:function" (imported only when that benchmark runs)
BENCHMARKS = {
    "ingest": "benchmarks.ingest:bench_ingest_command",
    "mst": "benchmarks.mst:bench_mst_command",
    "bfs": "benchmarks.graph:bench_bfs_command",
    "diameter": "benchmarks.graph:bench_diameter_command",
    "sssp": "benchmarks.graph:bench_sssp_command",
    "mst-graph": "benchmarks.graph:bench_mst_graph_command",
    "graph-load": "benchmarks.graph_load:bench_graph_load_command",
    "cost-distance": "benchmarks.cost_distance:bench_cost_distance_command",
    "startup": "benchmarks.startup:bench_startup_command",
    "flow": "benchmarks.flow:bench_flow_command",
    "fill": "benchmarks.fill:bench_fill_command",
    "scale": "benchmarks.scale:bench_scale_command",
}


def _positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def _power_of_two(text):
    value = int(text)
    if value < 2 or value & (value - 1):
        raise argparse.ArgumentTypeError(f"{text} is not a power of two >= 2")
    return value


def _grid_size(b, side, what="synthetic grid"):
    b.add_argument("--rows", type=_positive_int, default=side, help=f"{what} rows (default {side})")
    b.add_argument("--cols", type=_positive_int, default=side,
                   help=f"{what} columns (default {side})")


def _terrain_python(b, when="", default="this checkout's source with this python"):
    b.add_argument("--terrain-python", default=None, help=f"{when}the python of a venv where "
                   f"terrain is installed as a user installs it (pip install .); default: "
                   f"{default}")


def _backend(b):
    b.add_argument("--backend", choices=("cpu", "gpu", "auto"), default=None,
                   help="cpu, gpu or auto (default: the GPU when present)")


def _scheduler(b):
    b.add_argument("--scheduler", default=None, metavar="ADDRESS|local|threads|synchronous",
                   help="the Dask scheduler of terrain's runs (default: terrain's own choice)")


CONNECTIVITIES = (4, 8)


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    bsub = parser.add_subparsers(dest="bench", metavar="WHAT")
    bsub.required = True
    b = bsub.add_parser("ingest", help="terrain ingest vs rasterio reading the same ASCII grid")
    _grid_size(b, 8192)
    b.add_argument("--tile", type=_power_of_two, default=512, help="tile side, a power of two (default 512)")
    b.add_argument("--workdir", default=None, help="where to keep the generated input (reused)")
    b.add_argument("--repeat", type=_positive_int, default=3, help="whole-process runs of each side")
    _scheduler(b)
    b = bsub.add_parser("mst", help="terrain grid MST vs scipy minimum_spanning_tree")
    _grid_size(b, 4096)
    b.add_argument("--tile", type=_power_of_two, default=512, help="tile side, a power of two (default 512)")
    b.add_argument("--connectivity", type=int, choices=CONNECTIVITIES, default=8,
                   help="4 or 8 neighbours (default 8)")
    b.add_argument("--no-scipy", action="store_true", help="skip the scipy figure (grids too big for it)")
    b.add_argument("--workdir", default=None, help="where to keep the generated input (reused)")
    b.add_argument("--peer", choices=("scipy", "ecl"), default="scipy",
                   help="scipy (default) or ecl: the in-core GPU MST against ECL-MST")
    b.add_argument("--ecl-source", default=None, help="with --peer ecl: ECL-MST's source folder")
    b.add_argument("--sides", default="4096,8192", help="with --peer ecl: square grid sides")
    _backend(b)
    _scheduler(b)
    b = bsub.add_parser("cost-distance", help="terrain cost distance vs skimage MCP_Geometric, "
                        "scipy dijkstra and xarray-spatial")
    _grid_size(b, 4096)
    b.add_argument("--seed", type=int, default=0, help="random seed of the friction raster")
    b.add_argument("--whole-process", action="store_true",
                   help="time the cost-distance command on a synthesised store (give --rows "
                   "12555 --cols 17630 for the Neuse 40-ft size)")
    b.add_argument("--cost", choices=("absdiff", "tobler"), default="absdiff",
                   help="with --whole-process: the cost model (default absdiff)")
    b.add_argument("--workdir", default=None,
                   help="with --whole-process: where the store is kept (reused)")
    b.add_argument("--repeat", type=_positive_int, default=None,
                   help="with --whole-process: run every command this many times (default "
                   "1); with --peers: interleaved runs of each process (default 3)")
    b.add_argument("--peers", action="store_true",
                   help="GeoTIFF in, GeoTIFF out: terrain cost-distance --geotiff-dir against "
                   "GRASS r.cost and a scikit-image script, whole processes, at --sides")
    b.add_argument("--sides", default="1024,2048,4096", help="with --peers: square grid sides")
    b.add_argument("--grass", default=None, help="with --peers: the grass command (default: "
                   "grass on the PATH; none: GRASS not run)")
    b.add_argument("--skimage-python", default=None, help="with --peers: the python of a venv "
                   "with scikit-image and rasterio (none: not run)")
    _terrain_python(b, "with --peers: ")
    _backend(b)
    b = bsub.add_parser("fill", help="terrain fill vs RichDEM FillDepressions, whole "
                        "processes, CPU seconds")
    _grid_size(b, 4096)
    b.add_argument("--seed", type=int, default=7, help="synthetic DEM seed (default 7)")
    b.add_argument("--connectivity", type=int, choices=CONNECTIVITIES, default=8,
                   help="4 or 8 neighbours (default 8)")
    b.add_argument("--richdem-python", default=None,
                   help="the python of a venv with richdem2 and rasterio (none: terrain only)")
    b.add_argument("--repeat", type=_positive_int, default=3, help="interleaved runs of each side")
    b.add_argument("--workdir", default=None, help="where to keep the generated input (reused)")
    b.add_argument("--backend", choices=("cpu", "gpu"), default="cpu", help="terrain's backend")
    b.add_argument("--gpu-commands", action="store_true",
                   help="print the Neuse-size GPU commands instead")
    _terrain_python(b)
    b = bsub.add_parser("scale", help="tiled MST of a store on 1, 2, ... dask worker processes "
                        "(docs/scale.md's measured points)")
    from .scale import add_arguments
    add_arguments(b)
    b = bsub.add_parser("startup", help="whole-process start-up of a small mst, first and warm runs")
    b.add_argument("--input", default=None, help="the grid (default: data/sample.asc)")
    b.add_argument("--repeat", type=_positive_int, default=3, help="whole-process runs (default 3)")
    _terrain_python(b, default="the terrain command beside this python, else on the PATH")
    for name in ("bfs", "diameter"):
        b = bsub.add_parser(name, help=f"terrain {name} vs "
                            + ("scipy breadth_first_order" if name == "bfs" else "networkx"))
        b.add_argument("--graph", choices=("rmat", "grid", "file"), default="rmat",
                       help="RMAT generator, a rows x cols grid graph, or --file (default rmat)")
        b.add_argument("--scale", type=_positive_int, default=16, help="RMAT: 2**scale vertices")
        b.add_argument("--edge-factor", type=_positive_int, default=16, help="RMAT: edges per vertex")
        _grid_size(b, 1024, "grid graph")
        b.add_argument("--file", default=None, help="with --graph file: the graph to load")
        b.add_argument("--sources", type=_positive_int, default=16, help="BFS sources to average over")
        b.add_argument("--seed", type=int, default=1, help="generator and source seed (default 1)")
        _backend(b)
    for name in ("sssp", "mst-graph"):
        b = bsub.add_parser(name, help="terrain " + ("SSSP vs scipy dijkstra" if name == "sssp"
                                                     else "graph MST vs scipy minimum_spanning_tree"))
        b.add_argument("--graph", choices=("rmat", "grid", "file", "geometric"), default="grid",
                       help="a 2-D grid with random integer weights (default), RMAT, or a file")
        b.add_argument("--degree", type=float, default=6.0,
                       help="geometric: rows*cols random points, this many expected neighbours")
        if name == "sssp":
            b.add_argument("--delta", default=None,
                           help="GPU delta-stepping bucket widths to time, comma-separated")
            b.add_argument("--float-weights", action="store_true",
                           help="the weights divided by 7 as float64 (the CPU's heap, not "
                                "Dial's buckets)")
        b.add_argument("--scale", type=_positive_int, default=16, help="RMAT: 2**scale vertices")
        b.add_argument("--edge-factor", type=_positive_int, default=16, help="RMAT: edges per vertex")
        _grid_size(b, 1024, "grid")
        b.add_argument("--file", default=None, help="with --graph file: the graph to load")
        b.add_argument("--sources", type=_positive_int, default=4, help="sources to average over")
        b.add_argument("--load-limit", type=_positive_int, default=4_000_000,
                       help="sssp: time the load-included run up to this many vertices")
        b.add_argument("--workdir", default=None, help="where to write the load-included file")
        b.add_argument("--no-scipy", action="store_true", help="skip scipy (graphs too big for it)")
        b.add_argument("--seed", type=int, default=1, help="generator and source seed (default 1)")
        _backend(b)
    b = bsub.add_parser("flow", help="terrain flow vs RichDEM FlowAccumulation and GRASS "
                        "r.terraflow, whole processes")
    _grid_size(b, 4096)
    b.add_argument("--seed", type=int, default=0, help="terrain synth seed (default 0)")
    b.add_argument("--repeat", type=_positive_int, default=3, help="interleaved runs of each")
    b.add_argument("--workdir", default=None, help="where to keep the inputs (reused)")
    b.add_argument("--richdem-python", default="/work/peers/hydro/bin/python",
                   help="a Python with richdem2 installed")
    b.add_argument("--agreement", action="store_true",
                   help="also compare directions and accumulation with the peers'")
    _backend(b)
    b = bsub.add_parser("graph-load", help="terrain bfs on a SNAP edge list vs numpy loadtxt + "
                        "scipy, whole processes")
    b.add_argument("--scale", type=_positive_int, default=20, help="RMAT: 2**scale vertices (default 20)")
    b.add_argument("--edge-factor", type=_positive_int, default=8, help="RMAT: edges per vertex (default 8)")
    b.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    b.add_argument("--workdir", default=None, help="where to keep the generated input (reused)")
    b.add_argument("--repeat", type=_positive_int, default=3, help="whole-process runs of each side")
    _scheduler(b)
    return parser


def main(argv=None):
    """Run one benchmark; its exit status: 0, 1 when a result DIFFERs from a peer's (its
    verdict), 2 for bad input (a missing file, a module it needs): one line, no traceback."""
    from terrain.errors import InputError
    args = build_parser().parse_args(argv)
    module, func = BENCHMARKS[args.bench].split(":")
    try:
        return int(getattr(importlib.import_module(module), func)(args) or 0)
    except ModuleNotFoundError as e:
        print(f"python -m benchmarks {args.bench}: needs the module {e.name} (pip install it)",
              file=sys.stderr)
    except (InputError, OSError) as e:
        print(f"python -m benchmarks {args.bench}: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
