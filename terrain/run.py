"""Command line: ``python -m terrain.run COMMAND ...``.

This module only parses arguments and dispatches to the pipeline that runs the command.
Every handler takes the parsed ``argparse.Namespace`` and returns an exit status. Bad input
anywhere (:class:`terrain.errors.InputError`) becomes one line on stderr and status 2.
"""

import argparse
import contextlib
import errno
import functools
import logging
import os
import re
import resource
import sys
import types
import warnings

# No command multiplies matrices, yet OpenBLAS, loaded with NumPy (below), starts a thread a
# core that spins awhile for work: with one, a 1024² cost distance takes 1.23 CPU s against
# 1.31 (mean of 8; min 0.99 against 1.24; 2-core VM). Before NumPy's import; worker
# processes inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .backend import BACKEND_CHOICES  # noqa: E402 (after the thread count above)
from .errors import InputError, TerrainWarning, cannot_read, interruption  # noqa: E402
from .grid.costs import ARC_CONNECTIVITIES, COST_MODELS  # noqa: E402
from .grid.edges import CONNECTIVITIES, WEIGHT_MODELS  # noqa: E402
from .startup import (Terminated, bound_malloc_arenas, numba_cache_for_run,  # noqa: E402
                      printable_streams, quick_exit, terminate_raises)

_python_show_warning = warnings.showwarning

# the graph loaders' FORMATS with auto and store (tests/cli/test_startup.py pins it):
# importing the loaders would cost every command's start-up 80 ms
GRAPH_FORMATS = ("auto", "snap", "mtx", "dimacs", "metis", "store")
BATCH_COMMANDS = ("ingest", "mst", "cost-distance", "fill", "flow")  # pipelines.batch.RUNNERS
#: cost-distance's routes: fill's and flow's (auto, in-core, tiled) and its blocked SSSP
#: (pipelines.cost_distance.ROUTES, spelled out as GRAPH_FORMATS is)
COST_DISTANCE_ROUTES = ("auto", "in-core", "tiled", "blocked")
COST_DISTANCE_ROUTE_HELP = (
    "in-core SSSP, the tiled (out-of-core) algorithm, the blocked (out-of-core, CPU) one, or "
    "auto (default): in-core when the grid fits in memory, else blocked on the CPU and tiled "
    "on the GPU (tiled on the CPU is slow to build; its index serves --reuse queries)")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit status 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


class _Once(argparse.Action):
    """An option that names a list or a file of many, refused when given twice: argparse
    kept the last, so ``--source 0 --source 4`` ran from 4 alone (several are one list,
    ``--source 0,4``, or one file)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(self, "_given_to", None) is namespace:
            several = (f": several as one list, {option_string} A,B" if "," in str(self.metavar)
                       else ": several go in one file")
            parser.error(f"{option_string} given twice{several}")
        self._given_to = namespace
        setattr(namespace, self.dest, values)


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
    p.add_argument("--scheduler", default=None, metavar="ADDRESS|local|threads|synchronous",
                   help="attach to a running Dask scheduler, start a LocalCluster with its dashboard "
                        "(local), or run without one (default: a LocalCluster, its dashboard "
                        "address printed, for grids of more than 8192² cells; threads for smaller; "
                        "the graph commands: in this process, no Dask)")
    p.add_argument("--dashboard-address", default=None, metavar="HOST:PORT",
                   help="where the LocalCluster's dashboard listens (default 127.0.0.1:8787, "
                        "localhost only; e.g. 0.0.0.0:8787 opens it to the network)")


def _add_storage_options(p):
    # object stores: URL inputs and outputs go through pipelines.staging.stage
    p.add_argument("--storage-options", default=None, metavar="JSON",
                   help="fsspec options for s3://, gs://, ... stores (endpoint, anon, ...); "
                        "credentials come from the client library's own environment")


def _add_run_control(p, reused="its finished tasks"):
    _add_resume(p, reused)
    _add_dry_run(p)


def _add_resume(p, reused="its finished tasks"):
    p.add_argument("--resume", action="store_true",
                   help="finish the partial output a killed run with the same input and "
                        f"options left, without redoing {reused} (at a URL too: the "
                        "checkpoints lie under the output's prefix)")


def _add_dry_run(p):
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (tiles, levels, tasks or the algorithm, memory, disk) and "
                        "stop; exit 2 when the output's file system has too little free space")


def _add_tile(p, raster_input=False):
    p.add_argument("--tile", type=_tile, default=512,
                   help="tile side for a raster input, a power of two (default 512; a store "
                        "keeps its own)" if raster_input else
                        "tile side, a power of two (default 512)")


def _add_weight(p, prefix=""):
    p.add_argument("--weight", choices=WEIGHT_MODELS, default="max",
                   help=prefix + "edge weight: max(z_u, z_v) (default), absdiff, slope, "
                        "length3d (slope and length3d need a projected CRS: cell sizes in "
                        "metres)")


class _Scoped:
    """Adds options to parser ``p`` on behalf of some of ``batch``'s commands, keeping each
    option's commands and default (:func:`_check_batch_scopes`)."""

    def __init__(self, p):
        self.p, self.scopes = p, {}

    def add(self, *commands):
        """What ``add_argument`` is called on for the options of ``commands``."""
        def add_argument(*names, **kwargs):
            action = self.p.add_argument(*names, **kwargs)
            self.scopes[action.dest] = (commands, action.option_strings[0], action.default)
            return action
        return types.SimpleNamespace(add_argument=add_argument)


def _check_batch_scopes(args):
    """``batch COMMAND`` refuses an option of the other commands (it would be ignored)."""
    for dest, (commands, flag, default) in args.batch_scopes.items():
        if args.what not in commands and getattr(args, dest) != default:
            others = ", ".join(commands[:-1]) + (" and " if len(commands) > 1 else "") \
                + commands[-1]
            raise InputError(f"batch {args.what}: {flag} is an option of batch {others}")


def _add_fill_options(p, batch=False):
    """The options ``fill`` and ``batch fill`` share."""
    pre = "fill: " if batch else ""
    p.add_argument("--epsilon", action="store_true",
                   help=f"{pre}raise flats and filled depressions by the smallest float32 "
                        "steps so every cell drains (RichDEM's epsilon fill)")
    p.add_argument("--min-depth", type=float, default=None, metavar="D",
                   help=f"{pre}keep depressions at least D deep (their pits drain); fill the "
                        "others")
    p.add_argument("--min-area", type=_positive_int, default=None, metavar="A",
                   help=f"{pre}keep depressions of at least A cells (their pits drain); fill "
                        "the others")
    p.add_argument("--hierarchy", action="store_true",
                   help=f"{pre}also write the depression hierarchy (pits, spill levels, which "
                        "depressions merge at which level) as the table OUT.zarr/hierarchy")


def _add_cost_options(p, batch=False):
    """The options ``cost-distance`` and ``batch cost-distance`` share."""
    pre = "cost-distance: " if batch else ""
    every = ", for every raster" if batch else ""
    stem = "; {stem} = the input's stem" if batch else ""
    p.add_argument("--source", action="append", metavar="X,Y",
                   help=f"{pre}a source in map coordinates{every} (repeatable)")
    p.add_argument("--source-cell", action="append", metavar="ROW,COL",
                   help=f"{pre}a source cell{every} (repeatable)")
    p.add_argument("--sources", action=_Once, default=None, metavar="FILE",
                   help=f"{pre}sources: a raster (non-zero, non-nodata cells), CSV of x,y "
                        f"(or lon,lat columns), GeoJSON points (lon/lat unless a crs "
                        f"member says otherwise) or a GeoPackage, Shapefile, FlatGeobuf or "
                        f"KML of points (reprojected){stem}")
    p.add_argument("--stop", action="append", metavar="X,Y",
                   help=f"{pre}a stop point in map coordinates (repeatable; as r.cost's): "
                        "once every stop is reached, cells farther than the farthest stay "
                        "unreached and the solve ends (in-core algorithm)")
    p.add_argument("--stop-cell", action="append", metavar="ROW,COL",
                   help=f"{pre}a stop cell (repeatable)")
    p.add_argument("--stops", action=_Once, default=None, metavar="FILE",
                   help=f"{pre}stop points: a raster or points, as --sources{stem}")
    p.add_argument("--start-cost", type=float, default=None, metavar="C",
                   help=f"{pre}cost already spent at every source (default 0)")
    p.add_argument("--start-values", action="store_true",
                   help=f"{pre}every cell of the raster --sources that is not nodata is a "
                        "source, its value the cost already spent there (as r.cost -r; "
                        "other sources start at --start-cost)")
    p.add_argument("--cost", choices=COST_MODELS, default=None,
                   help=f"{pre}arc cost: |dz|, length x mean friction, or Tobler walking "
                        "time (default: friction with --friction, else absdiff)")
    p.add_argument("--friction", default=None, metavar="RASTER",
                   help=f"{pre}friction per cell (same grid as INPUT); NaN/nodata = barrier"
                   + ("; {stem} = the input's stem ('friction/{stem}.tif'), else the same "
                      "raster for every input" if batch else ""))
    p.add_argument("--max-cost", type=float, default=None, metavar="C",
                   help=f"{pre}cells farther than C stay unreached")
    if not batch:  # batch's --route serves fill and flow too
        p.add_argument("--route", choices=COST_DISTANCE_ROUTES, default="auto",
                       help=COST_DISTANCE_ROUTE_HELP)
    p.add_argument("--memory", default=None, metavar="SIZE",
                   help=f"{pre}memory budget (e.g. 1.5GB) that picks the algorithm and "
                        "bounds what the blocked algorithm holds beside the process: its "
                        "blocks, block cache and GeoTIFF writers (default: the available RAM)")


def _add_vertex_results(p):
    """Where ``bfs`` and ``sssp`` put their per-vertex results."""
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write id, distance, predecessor: .parquet, .csv or .npz (.npy: "
                        "distances only, for ids 0..n-1)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


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
    from . import __version__
    parser.add_argument("--version", action="version", version=f"terrain {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("ingest", help="ingest an elevation grid into a z-ordered Zarr tile store")
    p.add_argument("input", metavar="INPUT", help="ESRI ASCII, GRASS ASCII or any raster rasterio reads")
    p.add_argument("-o", "--output", required=True, metavar="OUT.zarr",
                   help="the tile store to write (Zarr v3; georeferenced for xarray/rioxarray)")
    _add_tile(p)
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    p.add_argument("--band", type=_positive_int, default=None, metavar="N",
                   help="raster band to read, from 1 (default 1; a multi-band input warns)")
    p.add_argument("--nodata", type=float, default=None, metavar="VALUE",
                   help="cells equal to VALUE are nodata (replaces the file's own nodata value)")
    p.add_argument("--crs", default=None, metavar="EPSG:XXXX|WKT",
                   help="assign this coordinate reference system (replaces the file's own)")
    _add_scheduler(p)
    _add_run_control(p)
    _add_storage_options(p)

    p = sub.add_parser("info", help="describe a tile store or a result store (mst, ...)")
    p.add_argument("store", metavar="STORE", help="a store written by ingest, mst or another command")
    p.add_argument("--json", action="store_true", help="print JSON")
    _add_storage_options(p)

    p = sub.add_parser("synth", help="write fractal terrain as an ESRI ASCII grid, streaming")
    p.add_argument("--rows", type=_positive_int, required=True, help="grid rows")
    p.add_argument("--cols", type=_positive_int, required=True, help="grid columns")
    p.add_argument("--seed", type=int, default=0, help="random seed (same seed, same terrain)")
    p.add_argument("--nodata", type=_fraction, default=0.0, metavar="FRACTION",
                   help="fraction of cells (in blobs) written as nodata (default 0)")
    p.add_argument("--integer", action="store_true", help="write integer elevations (many ties)")
    p.add_argument("-o", "--output", required=True, metavar="FILE.asc", help="the ESRI ASCII grid to write")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")

    p = sub.add_parser("mst", help="minimum spanning forest of the grid graph of a DEM, or of "
                       "a graph file",
                       description="Exact minimum spanning forest of the grid graph of a DEM "
                       "(vertices: cells that are not nodata; edges: 4 or 8 neighbours). The "
                       "output store holds the DEM's elevation (raster input) and 'mst', a uint8 "
                       "raster: bit d of a cell set = the forest holds the edge from that cell in "
                       "direction d (bit 0 E, 1 S, 2 SE, 3 SW); each edge is stored once, at its "
                       "first cell in row-major order. The summary (total weight, edges, "
                       "trees) is printed and kept in the store's attributes. Given a graph "
                       "(as bfs reads them), the forest of its undirected view: the edges u, v, "
                       "weight in the file's ids, written to OUT (.csv, .parquet or .npz); the "
                       "grid's options do not apply.")
    p.add_argument("input", metavar="INPUT", help="ASCII grid, any rasterio raster, a tile store, "
                   "or a graph: edge list (SNAP), Matrix Market, DIMACS .gr, METIS .graph "
                   "(optionally .gz), or a cache written by graph-ingest")
    p.add_argument("-o", "--output", default=None, metavar="OUT.zarr",
                   help="result store (default: INPUT's name with .mst.zarr); for a graph, "
                        "the edge table (default: INPUT's name with .mst.csv)")
    _add_tile(p, raster_input=True)
    p.add_argument("--connectivity", type=int, choices=CONNECTIVITIES, default=8,
                   help="4: E/W/N/S neighbours; 8: also the diagonals (default 8)")
    _add_weight(p)
    _add_backend(p)
    _add_scheduler(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--geotiff", default=None, metavar="FILE.tif",
                   help="also write the mask as a Cloud-Optimized GeoTIFF (uint8, 255 = nodata, "
                        "overviews, band description)")
    p.add_argument("--no-cog", action="store_true",
                   help="with --geotiff: a plain tiled GeoTIFF (no overviews) instead of a COG, "
                        "in about two thirds of the time")
    p.add_argument("--overwrite", action="store_true", help="replace OUT (and FILE.tif) if they exist")
    _add_run_control(p)
    _add_storage_options(p)

    p = sub.add_parser("fill", help="fill the depressions of a DEM to their spill elevations",
                       description="Exact depression filling (priority-flood's result, "
                       "RichDEM's FillDepressions) from the grid's minimum spanning forest. "
                       "The store holds 'filled' (float32, NaN nodata), 'depth' (filled - "
                       "elevation) and 'depression' (int32 lake ids in the row-major order of "
                       "their first cells, 0 outside any); docs/hydrology.md.")
    p.add_argument("input", metavar="DEM", help="ASCII grid, any rasterio raster, or a tile store")
    p.add_argument("-o", "--output", default=None, metavar="OUT.zarr",
                   help="result store (default: DEM's name with .fill.zarr)")
    _add_tile(p, raster_input=True)
    p.add_argument("--connectivity", type=int, choices=CONNECTIVITIES, default=8,
                   help="how water moves: 4 (D4) or 8 (D8, default)")
    p.add_argument("--outlets", action=_Once, default=None, metavar="RASTER|POINTS",
                   help="where water leaves the grid: the non-zero cells of a raster or tile "
                        "store, or points (CSV x,y in the DEM's CRS or lon,lat; GeoJSON, "
                        "GeoPackage, Shapefile, FlatGeobuf, KML: reprojected) (default: "
                        "cells on the grid's edge or beside nodata)")
    _add_fill_options(p)
    p.add_argument("--route", choices=("auto", "in-core", "tiled"), default="auto",
                   help="in core (the grid in memory) or tiled (out of core, the quadtree "
                        "walk); default: in core when 24 bytes a cell fit 80%% of the "
                        "available memory (the options that build the forest: 96 in half)")
    _add_backend(p)
    _add_scheduler(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--geotiff-dir", default=None, metavar="DIR",
                   help="also write filled, depth and depression as Cloud-Optimized GeoTIFFs")
    p.add_argument("--no-cog", action="store_true",
                   help="with --geotiff-dir: plain tiled GeoTIFFs (no overviews) instead of COGs, "
                        "in about two thirds of the time")
    p.add_argument("--overwrite", action="store_true", help="replace OUT (and the GeoTIFFs)")
    _add_resume(p)
    _add_storage_options(p)

    p = sub.add_parser("graph-ingest", help="parse a sparse graph once and cache its CSR")
    _add_graph_input(p)
    p.add_argument("-o", "--output", required=True, metavar="G.zarr", help="the graph cache to write")
    p.add_argument("--directed", action="store_true",
                   help="keep the arcs as listed, for sssp --directed (DIMACS .gr always; "
                   "default: undirected)")
    p.add_argument("--overwrite", action="store_true", help="replace G.zarr if it exists")
    _add_scheduler(p)

    p = sub.add_parser("bfs", help="hop distances and predecessors from one or many sources")
    _add_graph_input(p)
    p.add_argument("--source", action=_Once, required=True, metavar="S[,S...]",
                   help="source vertex id(s) in the file's own ids; several = multi-source BFS")
    _add_vertex_results(p)
    _add_backend(p)
    _add_scheduler(p)

    p = sub.add_parser("sssp", help="weighted shortest paths (and predecessors) from one or "
                                    "many sources")
    _add_graph_input(p)
    p.add_argument("--source", action=_Once, required=True, metavar="S[,S...]",
                   help="source vertex id(s) in the file's own ids; several = multi-source")
    p.add_argument("--algorithm", choices=("auto", "crauser", "delta", "dijkstra"),
                   default="auto", help="auto (default): dijkstra on the CPU, delta-stepping "
                   "or Crauser on the GPU by graph shape")
    p.add_argument("--delta", type=_positive_float, default=None, metavar="D",
                   help="bucket width of delta-stepping (default: from the weights)")
    p.add_argument("--directed", action="store_true",
                   help="arcs as listed (DIMACS .gr and caches ingested --directed always; "
                   "default: undirected)")
    _add_vertex_results(p)
    _add_backend(p)
    _add_scheduler(p)

    p = sub.add_parser("diameter", help="exact diameter by eccentricity bounding")
    _add_graph_input(p)
    p.add_argument("--all", action="store_true", help="also radius, center and periphery")
    p.add_argument("--effective", type=_positive_int, default=None, metavar="K",
                   help="also the sampled effective diameter (90th percentile of hop counts) over K "
                   "sources; not with --weighted")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled sources (with --effective)")
    p.add_argument("--weighted", action="store_true",
                   help="weighted distances (Dijkstra in place of BFS; the file's weights)")
    p.add_argument("--json", action="store_true",
                   help="print the result as JSON, with the whole diameter path")
    p.add_argument("--path-out", default=None, metavar="FILE",
                   help="write the diameter path (one vertex id a line) to FILE")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    _add_backend(p)
    _add_scheduler(p)

    p = sub.add_parser("cost-distance", help="accumulated cost, allocation and backlinks from "
                       "sources (exact grid SSSP)")
    p.add_argument("input", metavar="INPUT", help="DEM: ASCII grid, any rasterio raster, or a tile store")
    _add_cost_options(p)
    p.add_argument("-o", "--output", default=None, metavar="OUT.zarr",
                   help="result store (default: INPUT's name with .cost.zarr)")
    p.add_argument("--connectivity", type=int, choices=ARC_CONNECTIVITIES, default=8,
                   help="4 (rook), 8 (queen, default) or 16 (adds knight moves, costed as GRASS "
                        "r.cost -k: with the mean friction of the four cells a move touches, "
                        "its ends and the two it passes between, and only where none of them "
                        "is nodata)")
    _add_tile(p, raster_input=True)
    p.add_argument("--tile-sssp", type=_tile, default=None, metavar="N",
                   help="tiled: SSSP tile side, a power of two (default 16, or the --reuse store's)")
    p.add_argument("--max-height", type=int, default=None, metavar="H",
                   help="tiled: highest quadtree level with boundary matrices (default: auto)")
    p.add_argument("--reuse", default=None, metavar="STORE",
                   help="tiled: reuse phase 1 and the upward hierarchy of an earlier tiled "
                   "cost-distance store on the same raster and cost; in-core: its ingested "
                   "DEM, checked friction and GPU bucket width")
    _add_backend(p)
    _add_scheduler(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--geotiff-dir", default=None, metavar="DIR",
                   help="also write distance.tif, allocation.tif and backlink.tif there")
    p.add_argument("--overwrite", action="store_true", help="replace OUT.zarr (and the GeoTIFFs) if they exist")
    _add_storage_options(p)
    _add_run_control(p, "its ingest or, on the tiled algorithm on the CPU, its index once "
                        "whole; the query runs again")

    p = sub.add_parser("path", help="least-cost paths along the backlinks of a cost-distance store")
    p.add_argument("store", metavar="COSTSTORE", help="a cost-distance output store")
    p.add_argument("--to", action="append", metavar="X,Y",
                   help="end of a path in map coordinates (repeatable)")
    p.add_argument("--to-cell", action="append", metavar="ROW,COL",
                   help="end of a path as a cell (repeatable; after the --to ends)")
    p.add_argument("--targets", action=_Once, default=None, metavar="FILE",
                   help="ends of paths from a file, after the others: a CSV of x,y (or lon,lat "
                        "columns), GeoJSON points (lon/lat unless a crs member says otherwise), "
                        "a GeoPackage, Shapefile, FlatGeobuf or KML of points (reprojected), "
                        "or a raster (its non-zero, non-nodata cells)")
    p.add_argument("-o", "--output", required=True, metavar="PATH.geojson|.gpkg|.fgb",
                   help="LineStrings (source to target): GeoJSON (RFC 7946: longitude/"
                        "latitude, WGS 84; a store with a CRS only), or GeoPackage or "
                        "FlatGeobuf (the store's own CRS, or none)")
    p.add_argument("--overwrite", action="store_true", help="replace the output if it exists")
    _add_storage_options(p)

    p = sub.add_parser("batch", help="run ingest, mst, cost-distance, fill or flow over many "
                       "rasters on one scheduler, with a manifest (OUTDIR/manifest.json, .csv); "
                       "exit 1 if any file failed")
    p.add_argument("what", choices=BATCH_COMMANDS, metavar="|".join(BATCH_COMMANDS),
                   help="the command to run on every input")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="quoted globs ('rasters/*.tif'), directories, or manifest files "
                        "(.lst/.txt: one path a line)")
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="directory for the outputs")
    _add_tile(p)
    scoped = _Scoped(p)  # the options of some commands only: refused with the others
    scoped.add("mst", "cost-distance", "fill", "flow").add_argument(
        "--connectivity", type=int, choices=ARC_CONNECTIVITIES, default=8,
        help="mst, fill, flow (4 or 8), cost-distance (4, 8 or 16)")
    _add_weight(scoped.add("mst"), "mst: ")
    _add_cost_options(scoped.add("cost-distance"), batch=True)
    scoped.add("flow").add_argument("--filled", action="store_true",
                                    help="flow: the DEMs are already depression-filled")
    _add_fill_options(scoped.add("fill"), batch=True)
    scoped.add("cost-distance", "fill", "flow").add_argument(
        "--route", choices=COST_DISTANCE_ROUTES, default="auto",
        help=f"cost-distance: {COST_DISTANCE_ROUTE_HELP}; fill, flow: in core (the grid in "
             "memory) or tiled (out of core), the same result (default: by each file's size "
             "and the available memory)")
    stem = "{stem} = the input's stem, else the same file for every input"
    scoped.add("fill", "flow").add_argument(
        "--outlets", action=_Once, default=None, metavar="RASTER|POINTS",
        help=f"fill, flow: the cells water leaves by, a raster or points as fill --outlets; {stem}")
    scoped.add("flow").add_argument(
        "--weights", default=None, metavar="RASTER",
        help=f"flow: per-cell weights (e.g. rainfall) on the input's grid; {stem}")
    scoped.add("cost-distance", "fill", "flow").add_argument(
        "--geotiff-dir", default=None, metavar="DIR",
        help="cost-distance, fill, flow: each file's layers also as Cloud-Optimized "
             "GeoTIFFs, in DIR/<stem>/ (or a path with {stem})")
    p.set_defaults(batch_scopes=scoped.scopes)
    _add_backend(p)
    _add_scheduler(p)
    p.add_argument("--overwrite", action="store_true",
                   help="redo every file and replace its output (default: skip files done)")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")

    p = sub.add_parser("verify", help="check a result with a certificate (exit 0 ok, 1 a violation)",
                       description="MST store: the mask is a spanning forest of each component "
                       "and every non-tree edge satisfies the cycle property. BFS distances "
                       "(.npy, with --graph and --source): d(source) = 0, d(v) <= d(u) + 1 for "
                       "every arc, a tight arc into every reached vertex. Cost-distance store: "
                       "the same SSSP certificate on the grid, window by window, with the cost "
                       "model recorded in the store, plus tight backlinks and allocation. Fill "
                       "store: every cell drains to an outlet on the filled DEM and none is "
                       "raised above its spill level. Flow store: no step climbs on the filled "
                       "DEM, every path ends at an outlet, accumulation = 1 + inflow.")
    p.add_argument("result", metavar="STORE|RESULT",
                   help="an mst, cost-distance, fill or flow output store, or a bfs --out .npy "
                        "file")
    p.add_argument("--graph", default=None, metavar="GRAPH", help="the graph a distances file came from")
    p.add_argument("--source", action=_Once, default=None, metavar="S[,S...]",
                   help="the BFS source id(s)")
    p.add_argument("--format", choices=GRAPH_FORMATS, default="auto", help="format of --graph")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    _add_storage_options(p)

    p = sub.add_parser("plot", help="PNG: hillshade of the DEM with the minimum spanning forest "
                       "drawn; a cost-distance map with contours and paths; or a graph's BFS "
                       "frontier size per level (with --source)")
    p.add_argument("store", metavar="STORE|GRAPH",
                   help="a tile store, or an mst, cost-distance, fill or flow output store; "
                        "with --source: a graph")
    p.add_argument("--source", action=_Once, default=None, metavar="S[,S...]",
                   help="plot the frontier size per level of a BFS from these vertex ids of GRAPH")
    p.add_argument("--format", choices=GRAPH_FORMATS, default="auto", help="format of GRAPH")
    _add_backend(p)
    p.add_argument("-o", "--output", required=True, metavar="PIC.png",
                   help="the picture to write, its format by its name: .png, .jpg, .pdf, .svg "
                        "or .webp")
    p.add_argument("--size", default="1200x900", metavar="WxH", help="picture size in pixels (default 1200x900)")
    p.add_argument("--window", default=None, metavar="r0:r1,c0:c1",
                   help="draw only these rows and columns (the forest is drawn when a cell covers "
                        "at least 3 pixels)")
    p.add_argument("--paths", default=None, metavar="FILE.geojson|.gpkg|.fgb",
                   help="cost-distance store: draw these least-cost paths (from terrain path)")
    p.add_argument("--overwrite", action="store_true", help="replace PIC.png if it exists")
    _add_storage_options(p)

    _add_hydrology(sub)
    return parser


# ---- hydrology: the flow, watershed and streams commands (pipelines/flow.py, watershed.py) ----

def _add_hydrology(sub):
    p = sub.add_parser("flow", help="D8 flow directions (ESRI codes, flats resolved) and flow "
                       "accumulation of a DEM, after depression filling",
                       description="Fill the DEM's depressions, then compute D8 (or D4) flow "
                       "directions by steepest distance-weighted descent, flats routed by "
                       "Garbrecht-Martz / Barnes (2014) flat resolution, and the flow "
                       "accumulation. The store holds 'filled' (float32), 'direction' (uint8 "
                       "ESRI codes: 1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE; 0 outlet; "
                       "255 nodata) and 'accumulation' (float64, the cell itself included).")
    p.add_argument("input", metavar="DEM", help="ASCII grid, any rasterio raster, a tile "
                   "store, or a store written by terrain fill (its 'filled' layer, not filled "
                   "again)")
    p.add_argument("-o", "--output", default=None, metavar="OUT.zarr",
                   help="result store (default: DEM's name with .flow.zarr)")
    p.add_argument("--filled", action="store_true",
                   help="the DEM is already depression-filled: use it as it is")
    p.add_argument("--connectivity", type=int, choices=CONNECTIVITIES, default=8,
                   help="8: D8 (default); 4: D4")
    p.add_argument("--outlets", action=_Once, default=None, metavar="RASTER|POINTS",
                   help="the cells water leaves by: a raster (non-zero cells) or points "
                        "(CSV, GeoJSON, GeoPackage, Shapefile, FlatGeobuf, KML) (default: the "
                        "grid's edge and nodata)")
    p.add_argument("--weights", default=None, metavar="RASTER",
                   help="accumulate these per-cell weights (e.g. rainfall) instead of 1 per cell")
    p.add_argument("--route", choices=("auto", "in-core", "tiled"), default="auto",
                   help="in core when the grid fits half the memory (auto, default), or tiled "
                        "(out of core); the same result")
    _add_tile(p, raster_input=True)
    _add_backend(p)
    _add_scheduler(p)
    p.add_argument("--geotiff-dir", default=None, metavar="DIR",
                   help="also write filled.tif, direction.tif and accumulation.tif there (COGs)")
    p.add_argument("--no-cog", action="store_true",
                   help="with --geotiff-dir: plain tiled GeoTIFFs (no overviews) instead of COGs, "
                        "in about two thirds of the time")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--overwrite", action="store_true", help="replace OUT (and the GeoTIFFs)")
    _add_resume(p)
    _add_storage_options(p)

    p = sub.add_parser("watershed", help="label the cells draining to outlet points (from a "
                       "flow store)")
    p.add_argument("flow", metavar="FLOW", help="a store written by terrain flow")
    p.add_argument("--outlet", action="append", default=None, metavar="X,Y",
                   help="an outlet in map coordinates (repeatable); labels 1, 2, ... in order")
    p.add_argument("--outlet-cell", action="append", default=None, metavar="ROW,COL",
                   help="an outlet as a cell (repeatable; labelled after the --outlet points)")
    p.add_argument("--outlets", action=_Once, default=None, metavar="FILE",
                   help="outlets: points (CSV of x,y, GeoJSON, GeoPackage, Shapefile, "
                        "FlatGeobuf, KML), or a raster whose cells that are not nodata or 0 "
                        "are outlets (labelled after the others)")
    p.add_argument("--snap", type=float, default=0.0, metavar="DIST",
                   help="move each outlet to the cell of largest accumulation within DIST map "
                        "units of the centre of its cell (ArcGIS's Snap Pour Point; default 0: "
                        "as given)")
    p.add_argument("-o", "--output", required=True, metavar="LABELS.tif|LABELS.zarr",
                   help="int32 labels (0: drains elsewhere; -1 nodata): a GeoTIFF or a store")
    p.add_argument("--overwrite", action="store_true", help="replace the output")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    _add_storage_options(p)

    p = sub.add_parser("streams", help="the stream network (cells of accumulation >= N) as "
                       "lines with their Strahler order (from a flow store)")
    p.add_argument("flow", metavar="FLOW", help="a store written by terrain flow")
    p.add_argument("--threshold", type=_positive_float, required=True, metavar="N",
                   help="a cell is on a stream when its accumulation is at least N")
    p.add_argument("-o", "--output", required=True, metavar="STREAMS.geojson|.gpkg|.fgb",
                   help="GeoJSON (RFC 7946: longitude/latitude, WGS 84; a DEM with a CRS "
                        "only), or GeoPackage or FlatGeobuf (the DEM's own CRS, or none) of "
                        "LineStrings, one per link between confluences")
    p.add_argument("--overwrite", action="store_true", help="replace the output")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    _add_storage_options(p)


def _check_no_cog(args):
    """``--no-cog`` shapes the GeoTIFFs ``--geotiff`` (``--geotiff-dir``) asks for: without
    them it would change nothing, and is refused as every such option is."""
    if not getattr(args, "no_cog", False):
        return
    flag = "--geotiff-dir" if hasattr(args, "geotiff_dir") else "--geotiff"
    if not getattr(args, flag[2:].replace("-", "_"), None):
        raise InputError(f"{args.input}: --no-cog applies to the GeoTIFFs of {flag}, which is "
                         "not given")


def _handler(args):
    """The handler of the parsed command in :mod:`pipelines` (``cost-distance``:
    ``cost_distance_command``; ``mst`` of a graph file: ``mst_graph_command``); a command
    imports only its own pipeline (pipelines' names load on first use)."""
    import pipelines
    if args.command == "mst" and pipelines.is_graph_input(args.input):
        return pipelines.mst_graph_command
    if args.command == "batch":  # its files' errors, in its manifest, named as here
        return functools.partial(pipelines.batch_command, explain=lambda e: _explained(e, args))
    return getattr(pipelines, args.command.replace("-", "_") + "_command")


def _shares_nothing(args):
    """:func:`pipelines.cluster.shares_nothing`, imported only for a run given a scheduler
    or ``--resume``."""
    if not (getattr(args, "scheduler", None) or getattr(args, "resume", False)):
        return False
    from pipelines.cluster import shares_nothing
    return shares_nothing(args)


def _store_urls(args):
    """The command's inputs and outputs given as URLs (an object store's error names them)."""
    return [v for k, v in sorted(vars(args).items())
            if k not in ("storage_options", "scheduler", "dashboard_address")
            for v in (v if isinstance(v, list) else [v])
            if isinstance(v, str) and "://" in v and not v.startswith(("file://", "local://"))]


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """terrain's own warnings as one line ``terrain: warning: ...``; others as Python prints them."""
    if issubclass(category, TerrainWarning):
        print(f"terrain: warning: {message}", file=sys.stderr)
    else:
        _python_show_warning(message, category, filename, lineno, file, line)


#: the packages of the object stores' clients whose errors are the user's to fix (endpoint,
#: credentials): one line, exit 2
OBJECT_STORE_CLIENTS = ("botocore", "aiobotocore", "s3fs", "gcsfs", "google", "adlfs", "azure")

#: what the command line adds to a library error about one of these parameters whose message
#: does not name it (:func:`_explained`)
OPTION_HINTS = {"overwrite": " (use --overwrite to replace it)",
                "filled": " (without --filled, flow fills the DEM first)",
                "resume": "; rerun that run's options to finish it, or without --resume to "
                          "start over (which removes it)"}


def _explained(e, args):
    """The library's error ``e`` as the command line says it: each parameter it is about
    (``e.option``, a name or a tuple of them) named by its flag where the message names it,
    else by its hint (:data:`OPTION_HINTS`)."""
    option = getattr(e, "option", None)
    text, hints = str(e), ""
    start = text.find(": ") + 1  # past the path the message begins with, which may hold a name
    for name in (option,) if isinstance(option, str) else option or ():
        said = re.sub(rf"(?<![\w./-]){re.escape(name)}(?![\w./-])",
                      "--" + name.replace("_", "-"), text[start:])
        if said != text[start:]:
            text = text[:start] + said
        elif name == "overwrite" and getattr(args, "resume", False):  # no partial was left
            hints += " (a finished output: nothing to resume; --overwrite runs it again)"
        else:
            hints += OPTION_HINTS.get(name, "")
    return text + hints


_NEGATIVE_VALUE = re.compile(r"-\.?\d")


def join_negative_values(argv):
    """``--opt -1,5`` as ``--opt=-1,5``: argparse takes a value that starts with a negative
    number (a pair whose first is a western longitude, a size such as ``-5GB``) for an
    option ("expected one argument"); joined, the option's own check answers.

    >>> join_negative_values(["x", "--source", "-78.7,35.2", "--memory", "-5GB", "--tile", "8"])
    ['x', '--source=-78.7,35.2', '--memory=-5GB', '--tile', '8']
    """
    out = []
    for token in argv:
        if (out and _NEGATIVE_VALUE.match(token) and out[-1].startswith("--")
                and "=" not in out[-1]):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def _stopped(stop):
    """The one line and exit status (128 + the signal's number) of a run stopped by Ctrl-C,
    SIGTERM or SIGHUP."""
    import signal
    # late failures of cancelled tasks are not news ("Task exception was never retrieved")
    logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
    signum = signal.SIGINT if isinstance(stop, KeyboardInterrupt) else stop.signum
    said = {signal.SIGINT: "interrupted", signal.SIGHUP: "hung up"}.get(signum, "terminated")
    print(f"terrain: {said}", file=sys.stderr)
    return 128 + signum


def _out_of_open_files(error):
    """The one line for ``error`` when it, or one of its causes, is a process or system out
    of file descriptors (``EMFILE``, ``ENFILE``, or a library's message saying so), wherever
    it came up (a lock, a library's import, GDAL opening a file); else None."""
    seen, visited = error, set()
    while seen is not None and id(seen) not in visited:
        visited.add(id(seen))
        code = seen.errno if isinstance(seen, OSError) else None
        if code == errno.ENFILE or os.strerror(errno.ENFILE) in str(seen):
            return ("too many open files in the system: the kernel's table of open files "
                    "is full (fs.file-max)")
        if code == errno.EMFILE or os.strerror(errno.EMFILE) in str(seen):
            limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            return (f"too many open files: this process may open {limit} (ulimit -n); "
                    "raise the limit")
        seen = seen.__cause__ or seen.__context__
    return None


@contextlib.contextmanager
def _open_files_said():
    """Running out of file descriptors as one line (an :class:`InputError`), whatever error
    it surfaced as: the outputs' partials are gone by then (atomic_output)."""
    try:
        yield
    except Exception as e:
        said = _out_of_open_files(e)
        if said is None:
            raise
        raise InputError(said) from None


class _ReaderMayLeave:
    """A command's ``sys.stdout``: a reader that goes away (``terrain info STORE | head -1``,
    ``terrain batch ... --json | head``) takes the rest of the output, not the command's exit
    status; a BrokenPipeError from a print ended a failed batch or check with status 0.
    What is left is written to /dev/null and the command ends as it would have."""

    def __init__(self, stream):
        self._stream = stream

    def __getattr__(self, name):
        return getattr(self._stream, name)

    def _reader_gone(self):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self._stream.fileno())
        os.close(null)

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()
            self._stream.flush()


def main(argv=None):
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(join_negative_values(sys.argv[1:] if argv is None
                                                         else list(argv)))
    if sys.stdout is None:  # started with fd 1 closed (`>&-`): every command prints to it
        print("terrain: standard output is closed: nothing was run (> /dev/null discards "
              "what it prints)", file=sys.stderr)
        return 2
    if getattr(args, "dashboard_address", None):
        os.environ["TERRAIN_DASHBOARD"] = args.dashboard_address
    shown, warnings.showwarning = warnings.showwarning, _show_warning
    printable_streams()
    numba_cache_for_run()  # before any kernel module imports Numba
    bound_malloc_arenas()  # before any pool starts: the RSS does not follow the threads
    urls = _store_urls(args)  # as given: staging replaces them
    stdout, sys.stdout = sys.stdout, _ReaderMayLeave(sys.stdout)
    try:
        with terminate_raises(), _open_files_said():
            # URL inputs/outputs (s3://, memory://, ...) staged here, published after
            # (on a cluster given by address, the commands of
            # pipelines.cluster.SHARE_NOTHING_COMMANDS open the stores there themselves)
            if args.command == "batch":
                _check_batch_scopes(args)
            _check_no_cog(args)
            from pipelines.staging import stage
            with stage(args, args.storage_options, _shares_nothing(args)) \
                    if hasattr(args, "storage_options") else contextlib.nullcontext():
                status = int(_handler(args)(args) or 0)
        if argv is None:  # the command line's own process: its outputs are complete
            quick_exit(status)
        return status
    except InputError as e:
        # the library names a parameter (e.option), the command line its flag
        print(f"terrain: {_explained(e, args)}", file=sys.stderr)
        return 2
    except MemoryError as e:
        # the host's, or the device's (CuPy's OutOfMemoryError is one): the outputs' partials
        # are gone (atomic_output), and a traceback would say no more than its message
        print(f"terrain: out of memory: {str(e) or 'an allocation failed'}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Terminated) as e:
        return _stopped(e)
    except SystemError as e:
        # a signal inside a Numba kernel (terrain.errors.interruption)
        cause = interruption(e)
        if not isinstance(cause, (KeyboardInterrupt, Terminated)):
            raise
        return _stopped(cause)
    except PermissionError as e:
        # a file or folder the kernel would not let this process read or enter, wherever
        # the first look at it is (is_dir of an input in an unenterable folder): one line
        if e.filename is None:
            raise
        print(f"terrain: {cannot_read(e.filename, e)}", file=sys.stderr)
        return 2
    except OSError as e:
        # the summary's file full (`> log` on a full disk or quota): an output's own writes
        # say their file (atomic_output), so a full disk without a name is the summary's
        from .io.outputs import DISK_FULL
        if e.filename is not None or e.errno not in DISK_FULL:
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print(f"terrain: writing standard output: {e.strerror}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        # a process limit (ulimit -u) or too little memory for another thread's stack
        if "can't start new thread" not in str(e):
            raise
        print("terrain: cannot start a thread (the process's limit of processes and threads, "
              "ulimit -u, or its memory)", file=sys.stderr)
        return 2
    except Exception as e:
        # an object store's client that cannot reach its endpoint or finds no credentials
        # (botocore's, on this machine or a worker): what to fix is in its message
        if type(e).__module__.split(".")[0] not in OBJECT_STORE_CLIENTS:
            raise
        said = str(e).splitlines()[0] if str(e) else type(e).__name__
        where = f" ({', '.join(urls)})" if urls else ""
        if str(getattr(args, "scheduler", None) or "").startswith(("tcp://", "tls://")):
            where += " from this machine or a worker of the cluster (each needs its access)"
        print(f"terrain: the object store{where}: {said}", file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = shown
        sys.stdout = stdout


if __name__ == "__main__":
    sys.exit(main())
