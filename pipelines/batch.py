"""``terrain batch ingest|mst|cost-distance|fill|flow INPUTS... -o OUTDIR``: one command over many
rasters in one process.

Inputs are globs (expanded here: quote them; a raster's companion files,
:data:`SIDECAR_SUFFIXES`, left out), directories (their raster files, links to missing ones
and tile stores: each gets a row, its run says what it makes of it) or manifest files
(``.lst``/``.list``, or a ``.txt`` that is not an ASCII grid: one path a line, ``#``
comments). The files run one after the other, each as its own graph on the scheduler
``--scheduler`` names, else on the one its grid would have alone (a cluster, once started,
kept for the rest: :func:`_file_schedulers`); every file gets a line in
``OUTDIR/manifest.json`` and ``.csv`` (``done``, ``failed`` or ``skipped``; ``pending``
before its run), written atomically before the first file and at the end; each file's row
is appended to :data:`JOURNAL` as it finishes. A rerun skips files whose output is there
and whose input and parameters (:func:`_file_params`) are unchanged (its summary says how
many an earlier run did). Exit status 1 when any file failed. New batch commands add one
entry to :data:`RUNNERS`; options that hold for every file are checked before any runs
(:data:`CHECKS`). Design: docs/scale.md, "Batches".
"""

import collections
import contextlib
import csv
import glob
import io
import json
import os
import sys
import time
from pathlib import Path

from terrain.io.outputs import (DISK_FULL, OutputExists, atomic_output, hold_lock, input_identity,
                                 json_text, real_path)
from terrain.io.remote import is_url
from terrain.errors import InputError, cannot_read
from terrain.grid.edges import check_connectivity
from terrain.tiles.store import check_tile_size, is_store

from .cluster import (LOCAL_SCHEDULERS, check_inputs_on_workers, one_cluster, open_scheduler,
                      remote_input)

__all__ = ["RUNNERS", "expand_inputs", "run_batch", "batch_command"]

RASTER_SUFFIXES = (".asc", ".grd", ".arx", ".grass", ".tif", ".tiff", ".img", ".vrt", ".bil",
                   ".dem", ".hgt", ".nc", ".txt")
MANIFEST_SUFFIXES = (".lst", ".list", ".txt")
#: a raster's companion files, which a glob such as ``dir/*`` matches beside it: GDAL's
#: mask, overviews and metadata, the world file, the projection, a BIL's header (each
#: raster would run on its mask as a DEM, each .prj fail)
SIDECAR_SUFFIXES = (".aux.xml", ".msk", ".ovr", ".prj", ".tfw", ".tifw", ".wld", ".hdr")
FIELDS = ("input", "status", "seconds", "output", "error")


def _run_ingest(inp, out, args, scheduler):
    from .ingest import ingest
    store = ingest(inp, out, tile=args.tile, overwrite=args.overwrite, scheduler=scheduler)
    return {"rows": store.shape[0], "cols": store.shape[1]}


def _run_mst(inp, out, args, scheduler):
    from .mst import run_mst
    s = run_mst(inp, out, tile=args.tile, connectivity=args.connectivity, weight=args.weight,
                backend=args.backend, scheduler=scheduler, overwrite=args.overwrite)
    return {k: s[k] for k in ("rows", "cols", "edges", "trees", "total_weight")}


def _per_file(template, inp):
    """A path option for one input: ``{stem}`` becomes the input's file stem, else the same
    file for every input (absolute on a cluster given by address)."""
    if template is None:
        return None
    return remote_input(str(template).replace("{stem}", Path(inp).stem))


def _geotiff_dir(args, inp):
    """A file's folder of GeoTIFFs: ``{stem}`` in ``--geotiff-dir`` becomes the input's stem,
    else a folder of that name under it (the files' layers share their names)."""
    folder = getattr(args, "geotiff_dir", None)
    if folder is None:
        return None
    stem = Path(inp).stem
    return folder.replace("{stem}", stem) if "{stem}" in folder else str(Path(folder) / stem)


def _run_cost_distance(inp, out, args, scheduler):
    from .cost_distance import run_cost_distance
    s = run_cost_distance(
        inp, out, points=args.source or (), cells=args.source_cell or (),
        sources_file=_per_file(args.sources, inp), start_cost=args.start_cost,
        start_values=args.start_values, cost=args.cost, friction=_per_file(args.friction, inp),
        connectivity=args.connectivity, max_cost=args.max_cost, tile=args.tile,
        backend=args.backend, scheduler=scheduler, overwrite=args.overwrite,
        route=args.route, memory=getattr(args, "memory", None),
        stop_points=args.stop or (), stop_cells=args.stop_cell or (),
        stops_file=_per_file(args.stops, inp), geotiff_dir=_geotiff_dir(args, inp))
    summary = {k: s.get(k) for k in ("route", "reached_cells", "max_distance")}
    summary["sources"] = len(s.get("sources", ()))
    return summary


def _check_cost_distance(args):
    """The options every file shares, checked before any file runs (one line, exit 2)."""
    from terrain.grid.sources import parse_pair

    from .cost_distance import check_cost_options
    if not (args.source or args.source_cell or args.sources):
        raise InputError("batch cost-distance: no sources given (map coordinates, cells or "
                         "a sources file)")
    for text in args.source or ():
        parse_pair(text, "source")
    for text in args.source_cell or ():
        parse_pair(text, "source cell", int)
    for text in args.stop or ():
        parse_pair(text, "stop")
    for text in args.stop_cell or ():
        parse_pair(text, "stop cell", int)
    check_cost_options(args.cost, args.friction, args.connectivity, args.max_cost,
                       args.start_cost)
    if args.start_values and not args.sources:
        raise InputError("batch cost-distance: start costs from values need a raster of "
                         "sources")
    if getattr(args, "memory", None) is not None and args.route == "in-core":
        raise InputError("batch cost-distance: a memory budget picks the algorithm or bounds "
                         "the blocked one; these runs are in-core")
    if (args.stop or args.stop_cell or args.stops) and args.route in ("blocked", "tiled"):
        raise InputError(f"batch cost-distance: stop cells need the in-core algorithm, not "
                         f"the {args.route} one")


def _check_connectivity(command):
    """The check of ``batch COMMAND``'s shared ``--connectivity``."""
    def check(args):
        try:
            check_connectivity(args.connectivity)
        except InputError as e:
            raise InputError(f"batch {command}: {e}") from None
    return check


def _file_params(command, args, inp):
    """What a file's result depends on besides the input: a rerun skips a file only when these
    are unchanged."""
    if command == "ingest":
        return {"tile": args.tile}
    if command == "mst":
        return {"tile": args.tile, "connectivity": args.connectivity, "weight": args.weight}
    # files named by options added later: in the parameters only when given, so that a
    # rerun of an older batch without them still finds its files done
    named = {name: list(input_identity(_per_file(getattr(args, name, None), inp)))
             for name in ("outlets", "weights") if getattr(args, name, None) is not None}
    if getattr(args, "geotiff_dir", None) is not None:  # a rerun that asks for them runs
        named["geotiff_dir"] = _geotiff_dir(args, inp)
    if command == "fill":
        # the route changes no result: not a parameter
        return {"tile": args.tile, "connectivity": args.connectivity, **named,
                **{name: getattr(args, name) for name in FILL_OPTIONS if getattr(args, name)}}
    if command == "flow":
        return {"tile": args.tile, "connectivity": args.connectivity,
                "filled": getattr(args, "filled", False), **named}
    files = {name: _per_file(getattr(args, name), inp)
             for name in ("friction", "sources", "stops")}
    return {"source": list(args.source or ()), "source_cell": list(args.source_cell or ()),
            "start_cost": args.start_cost, "cost": args.cost,
            "connectivity": args.connectivity, "max_cost": args.max_cost,
            **{name: None if path is None else list(input_identity(path))
               for name, path in files.items() if name != "stops" or path is not None},
            # options added later: in the parameters only when given, so that a rerun of an
            # older batch without them still finds its files done
            **({"start_values": True} if args.start_values else {}),
            **({"stop": list(args.stop)} if args.stop else {}),
            **({"stop_cell": list(args.stop_cell)} if args.stop_cell else {}),
            **({"geotiff_dir": named["geotiff_dir"]} if "geotiff_dir" in named else {})}


#: fill's options of its result beside the connectivity and outlets (given, they are the
#: file's parameters)
FILL_OPTIONS = ("epsilon", "min_depth", "min_area", "hierarchy")


def _run_fill(inp, out, args, scheduler):
    from .fill import run_fill
    s = run_fill(inp, out, tile=args.tile, connectivity=args.connectivity,
                 outlets=_per_file(args.outlets, inp), backend=args.backend,
                 scheduler=scheduler, overwrite=args.overwrite,
                 geotiff_dir=_geotiff_dir(args, inp), route=args.route,
                 **{name: getattr(args, name) for name in FILL_OPTIONS})
    return {k: s[k] for k in ("rows", "cols", "path", "flooded", "depressions")}


def _run_flow(inp, out, args, scheduler):
    from .flow import run_flow
    s = run_flow(inp, out, tile=args.tile, connectivity=args.connectivity,
                 outlets=_per_file(args.outlets, inp), weights=_per_file(args.weights, inp),
                 filled=getattr(args, "filled", False), backend=args.backend,
                 scheduler=scheduler, overwrite=args.overwrite,
                 geotiff_dir=_geotiff_dir(args, inp), route=args.route)
    return {k: s[k] for k in ("rows", "cols", "cells", "outlet_cells", "max_accumulation")}


# command -> (runner(input, output, args, scheduler) -> summary dict, output suffix)
RUNNERS = {
    "ingest": (_run_ingest, ".zarr"),
    "mst": (_run_mst, ".mst.zarr"),
    "cost-distance": (_run_cost_distance, ".cost.zarr"),
    "fill": (_run_fill, ".fill.zarr"),
    "flow": (_run_flow, ".flow.zarr"),
}


def _check_hydrology(command):
    """The check of ``batch fill`` and ``batch flow``'s route (cost-distance's blocked one is
    not theirs) and ``--connectivity``."""
    def check(args):
        if args.route == "blocked":
            raise InputError(f"batch {command}: the blocked route is cost-distance's; "
                             f"{command} runs in core or tiled")
        _check_connectivity(command)(args)
    return check


def _check_fill(args):
    """Options of the in-core fill with the tiled route asked: refused before any file."""
    _check_hydrology("fill")(args)
    asked = [f"--{name.replace('_', '-')}" for name in FILL_OPTIONS if getattr(args, name)]
    if asked and args.route == "tiled":
        raise InputError(f"batch fill: the tiled fill supports --connectivity and --outlets "
                         f"only: {', '.join(asked)} "
                         f"{'need' if len(asked) > 1 else 'needs'} the in-core route")


# command -> check(args), run before any file: options shared by every file
CHECKS = {"cost-distance": _check_cost_distance, "fill": _check_fill,
          "flow": _check_hydrology("flow"), "mst": _check_connectivity("mst")}


def _is_manifest(path):
    from terrain.io.ascii_grid import looks_like_ascii_grid
    return path.suffix.lower() in MANIFEST_SUFFIXES and not looks_like_ascii_grid(path)


def _read_manifest(path):
    out = []
    for line in path.read_text(errors="surrogateescape").splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            p = Path(text)
            out.append(p if p.is_absolute() else path.parent / p)
    return out


def expand_inputs(specs):
    """Files named by globs, directories and manifest files, in order, without repeats.

    Raises :class:`InputError` for a spec that names nothing.
    """
    files, seen = [], set()
    for spec in specs:
        p = Path(spec)
        if p.is_dir() and not is_store(p):
            # a link to nowhere and a tile store are inputs too: the run of each says what
            # it makes of them (its reader's line, or the command's result), none is dropped
            try:
                found = sorted(q for q in p.iterdir() if not q.name.startswith(".") and (
                    is_store(q) or (q.is_file() or q.is_symlink() and not q.exists())
                    and q.suffix.lower() in RASTER_SUFFIXES))
            except OSError as e:  # a folder that may not be listed
                raise cannot_read(spec, e) from None
        elif p.is_file() or is_store(p):
            found = _read_manifest(p) if p.is_file() and _is_manifest(p) else [p]
        else:
            found = [Path(q) for q in sorted(glob.glob(str(spec)))]
            found = [q for q in found if (not q.is_dir() or is_store(q))
                     and not q.name.lower().endswith(SIDECAR_SUFFIXES)]
        if not found:
            raise InputError(f"{spec}: no such file, directory or matching files")
        for q in found:
            key = real_path(q)
            if key not in seen:
                seen.add(key)
                files.append(q)
    return files


def _output_names(files, outdir, suffix):
    """``OUTDIR/STEM+suffix``, unique and the same on every run: where stems clash the file
    name, where names clash too ``STEM-HASH`` (of the resolved path); compared without case.

    >>> [p.name for p in _output_names([Path("d1/a.asc"), Path("d2/a.asc"), Path("b.tif")],
    ...                                Path("out"), ".mst.zarr")]  # doctest: +ELLIPSIS
    ['a-....mst.zarr', 'a-....mst.zarr', 'b.mst.zarr']
    >>> [p.name for p in _output_names([Path("a.asc"), Path("a.tif"), Path("a.asc.asc")],
    ...                                Path("out"), ".fill.zarr")]  # doctest: +ELLIPSIS
    ['a-....fill.zarr', 'a.tif.fill.zarr', 'a.asc-....fill.zarr']"""
    import hashlib

    def count(names):
        folded = [n.casefold() for n in names]
        counts = collections.Counter(folded)
        return [counts[n] for n in folded]

    def hashed(f):
        return f"{f.stem}-{hashlib.sha256(os.fsencode(real_path(f))).hexdigest()[:8]}"

    stems, names = [f.stem for f in files], [f.name for f in files]
    bases = [f.stem if n_stem == 1 else f.name if n_name == 1 else hashed(f)
             for f, n_stem, n_name in zip(files, count(stems), count(names))]
    # a name taken for a clash of stems may be another file's stem (a.asc beside a.tif,
    # and a.asc.asc): both hashed, so no two files share an output
    bases = [hashed(f) if n > 1 else b for f, b, n in zip(files, bases, count(bases))]
    return [outdir / (base + suffix) for base in bases]


def _write_manifest(outdir, command, rows, earlier=()):
    """``manifest.json`` (this batch's rows and the ``earlier`` batches' whose outputs remain)
    and ``manifest.csv`` (this batch's). A name whose bytes are not UTF-8 is in the CSV as
    those bytes, in the JSON as its surrogate escapes (``"\\udce9"``, which JSON readers
    take back as Python does)."""
    doc = {"command": command, "files": rows}
    if earlier:
        doc["earlier"] = list(earlier)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    for name, body in (("manifest.json", json_text(doc, indent=2) + "\n"),
                       ("manifest.csv", text.getvalue())):
        with atomic_output(outdir / name, overwrite=True, notify=lambda message: None) as tmp:
            tmp.write_text(body, errors="surrogateescape")


#: beside the manifest, each finished file's row as a line of JSON, appended as the file
#: finishes: the record a rerun after a kill reads. The manifest is a whole document,
#: whose rewrite takes longer the more files the batch has.
JOURNAL = ".manifest.journal"
#: during a batch the manifest is rewritten once its files have taken this many times as
#: long as its last write took: a file of seconds gets its row there at once, thousands of
#: small files do not spend their time rewriting it (their rows are in the journal)
REWRITE_RATIO = 50


class _Manifest:
    """OUTDIR's manifest during a batch: ``rows`` (one per file, ``pending`` until it
    finishes) written before the first file, each finished row appended to the
    :data:`JOURNAL` at once, the manifest rewritten as :data:`REWRITE_RATIO` says and at the
    end (a stop by a signal too), when the journal goes."""

    def __init__(self, outdir, command, rows, earlier):
        self.outdir, self.command, self.rows, self.earlier = outdir, command, rows, earlier
        self.write()  # the journal a killed batch left is in it now (:func:`_previous`)
        try:
            self.journal = os.open(outdir / JOURNAL,
                                   os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        except OSError as e:
            raise InputError(f"{outdir / JOURNAL}: cannot write it ({e.strerror})") from None

    def write(self):
        start = time.perf_counter()
        _write_manifest(self.outdir, self.command, self.rows, self.earlier)
        self.written = time.perf_counter()
        self.write_seconds = self.written - start

    def record(self, n, row):
        """The ``n``-th file's row, as it finished."""
        self.rows[n] = row
        line = (json_text(row) + "\n").encode()  # ASCII: JSON escapes the rest
        try:
            os.write(self.journal, line)  # one write: a kill leaves the line whole or none
        except OSError as e:
            if e.errno in DISK_FULL:
                raise InputError(f"{self.outdir / JOURNAL}: {e.strerror} in {self.outdir}; "
                                 "its last file not recorded") from None
            raise
        if time.perf_counter() - self.written >= REWRITE_RATIO * self.write_seconds:
            self.write()

    def close(self):
        """The manifest with every row as it is now (a batch stopped by a signal's too);
        the journal, then in it, removed."""
        from terrain.startup import stop_set_aside
        try:
            with stop_set_aside():
                self.write()
            os.unlink(self.outdir / JOURNAL)
        finally:
            os.close(self.journal)


def _check_manifests(outdir, overwrite):
    """:class:`InputError` for a ``manifest.json`` or ``.csv`` in OUTDIR that is not a
    batch's (a user's own file of that name), which the batch would replace, unless
    ``overwrite``."""
    for name in ("manifest.json", "manifest.csv"):
        path = outdir / name
        if overwrite or not path.is_file():
            continue
        try:
            text = path.read_text(errors="surrogateescape")
            ours = (isinstance(doc := json.loads(text), dict) and "command" in doc
                    and isinstance(doc.get("files"), list)) if name.endswith(".json") else \
                text.splitlines()[:1] == [",".join(FIELDS)]
        except (OSError, ValueError):
            ours = False
        if not ours:
            raise InputError(f"{path}: not a batch's manifest, which this batch writes there: "
                             "another folder, or overwrite to replace it", option="overwrite")


def _previous(outdir):
    """resolved input path -> row of the last run's manifest (with the earlier rows it kept),
    or {}: an input spelt another way (absolute, from another folder) is the same file. The
    rows of the :data:`JOURNAL` a killed batch left are newer than its manifest's."""
    try:
        doc = json.loads((outdir / "manifest.json").read_text())
        rows = list(doc.get("earlier", [])) + list(doc.get("files", []))
    except (OSError, ValueError, TypeError, AttributeError):
        rows = []
    try:
        with open(outdir / JOURNAL, "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        with contextlib.suppress(ValueError):
            rows.append(json.loads(line))
    return {row.get("real_input") or row["input"]: row
            for row in rows if isinstance(row, dict) and "input" in row}


def _listed(outdir):
    """``exists(path)``, answering for the entries of OUTDIR from one listing of it made
    now (a stat a file and row made a batch of thousands of files list the folder's inode
    table as often), for other paths by a look-up."""
    with os.scandir(outdir) as entries:
        names = {entry.name for entry in entries}
    folders = {Path(outdir), real_path(outdir)}

    def exists(path):
        path = Path(path)
        return path.name in names if path.parent in folders else path.exists()
    return exists


def _owners(previous, exists):
    """output path -> the resolved input whose result it holds, by the earlier manifests."""
    out = {}
    for row in previous.values():
        output = row.get("real_output") or row.get("output")
        source = row.get("real_input") or row.get("input")
        if _made_output(row) and output and exists(output):
            out[str(real_path(output))] = source
    return out


def _other_owner(owners, inp, out):
    """The earlier input whose result ``out`` holds, when it is not ``inp``; else None."""
    source = owners.get(str(real_path(out)))
    if source is None or source == str(real_path(inp)):
        return None
    return source


def _folders_holding(files):
    """Resolved folder -> the first of ``files`` inside it, for :func:`_check_outdir` (one
    look-up an output folder, not one a file)."""
    holding = {}
    for f in files:
        for folder in real_path(f).parents:
            holding.setdefault(folder, f)
    return holding


def _check_outdir(outdir, holding):
    """Refuse an OUTDIR that is not a directory, whose parent is missing, or that is or holds
    an input (``holding``: :func:`_folders_holding` of the inputs): before the scheduler
    starts, so a refused batch leaves nothing behind."""
    if is_url(str(outdir)):  # a URL is no folder: Path() would make s3:/b/x of it
        raise InputError(f"{outdir}: a batch writes into a local folder (its outputs, "
                         "manifest and lock); run the command for each file to write at a URL")
    outdir = Path(outdir)
    if outdir.exists() and not outdir.is_dir():
        raise InputError(f"{outdir}: exists and is not a directory")
    inside = holding.get(real_path(outdir))
    if inside is not None:
        raise InputError(f"{outdir}: output folder would contain the input {inside}")
    if not outdir.exists():
        parent = real_path(outdir).parent
        if not parent.is_dir():
            raise InputError(f"{outdir}: cannot create it, directory {parent} does not exist")
    return outdir


def _prepare_outdir(outdir):
    """Make OUTDIR (checked by :func:`_check_outdir`) if it does not exist."""
    if not outdir.exists():
        try:
            outdir.mkdir()
        except OSError as e:
            raise InputError(f"{outdir}: cannot create it ({e.strerror})") from None
    return outdir


def _say(message):
    print(f"terrain: {message}", file=sys.stderr, flush=True)


def run_batch(command, specs, outdir, args, scheduler=None, progress=_say, explain=str):
    """Run ``command`` over every input; returns the manifest rows (one dict per file).
    ``explain``: the text of a file's :class:`InputError` in its row (the command line's
    names the flags of the parameters the error is about)."""
    runner, suffix = RUNNERS[command]
    if command in CHECKS:
        CHECKS[command](args)
    files = expand_inputs(specs)
    check_tile_size(args.tile)  # shared by every file: refused once, not once a file
    holding = _folders_holding(files)
    outdir = _check_outdir(outdir, holding)
    _check_manifests(outdir, args.overwrite)
    # the files' GeoTIFF folders DIR/<stem> lie in DIR, checked and made as OUTDIR is; a
    # template's folders (made by each file's run) are checked here, so a missing parent is
    # refused once for the batch, not once a file
    tifs = getattr(args, "geotiff_dir", None)
    if tifs is not None and "{stem}" in tifs:
        for f in files:
            _check_outdir(_geotiff_dir(args, f), holding)
        tifs = None
    tifs = None if tifs is None else _check_outdir(tifs, holding)
    outputs = _output_names(files, outdir, suffix)
    # a local scheduler is passed on; a cluster opened here is reused by each file (spec None)
    inner = scheduler if scheduler in LOCAL_SCHEDULERS else None
    t_batch = time.perf_counter()
    made = [d for d in (outdir, tifs) if d is not None and not d.exists()]
    try:
        for d in made:  # before the scheduler starts: a folder refused is one line, no more
            _prepare_outdir(d)
        # one batch at a time in a folder: two at once would clash output by output and
        # rewrite each other's manifest
        with hold_lock(outdir / "batch", "another terrain batch is writing into this "
                                         "folder", shown=outdir), \
                _file_schedulers(scheduler) as scheduler_for:
            return _run_files(command, runner, files, outputs, outdir, args,
                              (inner, scheduler_for), progress, explain, t_batch)
    except BaseException:
        for d in made:
            if d.is_dir() and not any(d.iterdir()):  # a folder of ours with nothing in it
                d.rmdir()  # (a bad scheduler's address leaves none)
        raise


@contextlib.contextmanager
def _file_schedulers(scheduler):
    """``scheduler_for(input)``, a context manager around a file's run. A ``scheduler``
    given is opened once for the batch; by default each file gets the scheduler its grid
    would have alone, as a command of one file would (:func:`_cells`): a small grid runs on
    threads, where a cluster's start and its per-task overhead cost 1000 grids of 20 x 20
    58 s against 31 (docs/performance.md, "batch of many small files"), a large one on the
    in-process cluster, started once for the batch (:func:`pipelines.cluster.one_cluster`)."""
    if scheduler is not None:
        with open_scheduler(scheduler):
            yield lambda inp: contextlib.nullcontext()
        return
    with one_cluster() as scheduler_for:
        yield lambda inp: scheduler_for(_cells(inp))


def _cells(inp):
    """The cells of the grid ``inp`` (its header read); 0 for a file its reader refuses,
    which does no work (its run says why)."""
    import warnings

    from terrain.errors import TerrainWarning

    from ._command import open_input
    with warnings.catch_warnings():  # the file's own run warns what its header holds
        warnings.simplefilter("ignore", TerrainWarning)
        try:
            rows, cols = open_input(inp, tile_count=False).shape
        except InputError:
            return 0
    return rows * cols


def _made_output(row):
    """Whether a manifest row's output is that file's result: done or skipped, or failed
    only because that output was there (``output_kept``: the row keeps what made it)."""
    return row.get("status") in ("done", "skipped") or bool(row.get("output_kept"))


def _why_again(before, ident, params):
    """Why a file an earlier batch did runs again (its output then exists): its input
    changed, or the parameters that differ, as ``"; ..."``; empty without such a batch."""
    if not _made_output(before):
        return ""
    if before.get("identity") != ident:
        return "; its input changed since the earlier batch made it"
    old = before.get("params") or {}
    def given(d, k):  # an option left out of the parameters was not given
        return repr(d[k]) if k in d else "not given"
    differ = [f"{k} {given(old, k)} then, {given(params, k)} now"
              for k in sorted(set(old) | set(params)) if old.get(k) != params.get(k)]
    return f"; the earlier batch made it with other options ({', '.join(differ)})" \
        if differ else ""


def _damage(out):
    """What is wrong with the output an earlier batch made (a shard gone, another's in its
    place: the stores list their shards), or ``""``."""
    from terrain.io.zarr_meta import open_group
    from terrain.tiles.store import check_shard_lists
    try:
        check_shard_lists(out, open_group(out, mode="r"))
    except InputError as e:
        return str(e)
    return ""


def _not_yet(previous, inp, out, exists):
    """The manifest's row of a file this batch has not reached yet: the earlier batch's, as
    long as the output it made is there (an interrupted batch leaves it, so that a rerun
    skips the file), else ``pending``."""
    before = previous.get(str(real_path(inp)), {})
    if _made_output(before) and exists(out) and \
            (before.get("real_output") or before.get("output")) == str(real_path(out)):
        return before
    return {"input": str(inp), "output": str(out), "status": "pending", "seconds": None,
            "error": ""}


def _run_files(command, runner, files, outputs, outdir, args, schedulers, progress, explain,
               t_batch):
    """:func:`run_batch`'s loop over the files, with the folder locked. ``schedulers``: the
    scheduler passed to each run, and ``scheduler_for(input)`` (:func:`_file_schedulers`)."""
    previous = _previous(outdir)
    exists = _listed(outdir)  # each file's output is its own: as it was before any ran
    owners = _owners(previous, exists)
    mine = {str(real_path(f)) for f in files}
    earlier = [row for row in previous.values()
               if (row.get("real_input") or row.get("input")) not in mine
               and _made_output(row)
               and exists(row.get("real_output") or row.get("output") or "")]
    # every file recorded before the first starts: a batch killed in it leaves its manifest
    manifest = _Manifest(outdir, command,
                         [_not_yet(previous, f, o, exists) for f, o in zip(files, outputs)],
                         earlier)
    try:
        rows = _run_each(command, runner, files, outputs, args, schedulers, progress,
                         explain, previous, owners, manifest, exists)
    finally:
        manifest.close()
    failed = sum(r["status"] == "failed" for r in rows)
    # a rerun's count of done files is mostly the earlier runs' work: said apart
    skipped = sum(r["status"] == "skipped" for r in rows)
    earlier_done = f" ({skipped} by an earlier run)" if skipped else ""
    progress(f"batch {command}: {len(rows) - failed} of {len(rows)} done{earlier_done}, "
             f"{failed} failed, in {time.perf_counter() - t_batch:.2f} s; manifest "
             f"{outdir / 'manifest.json'}")
    return rows


def _run_each(command, runner, files, outputs, args, schedulers, progress, explain, previous,
              owners, manifest, exists):
    """:func:`_run_files`'s files, one after the other, each row in ``manifest`` as it
    finishes; returns the rows. ``exists``: :func:`_listed` of OUTDIR."""
    inner, scheduler_for = schedulers
    rows = []
    for n, (inp, out) in enumerate(zip(files, outputs), 1):
        ident = list(input_identity(inp))
        params = _file_params(command, args, inp)
        row = {"input": str(inp), "real_input": str(real_path(inp)), "output": str(out),
               "real_output": str(real_path(out)), "identity": ident, "params": params}
        before = previous.get(row["real_input"], {})
        tag = f"[{n}/{len(files)}] {inp}"
        other = _other_owner(owners, inp, out)
        if other is not None:
            row.update(status="failed", seconds=0.0,
                       error=f"{out}: holds the result of {other} from an earlier batch "
                             "into this folder; not replacing it (another folder, or "
                             "remove it first)")
            progress(f"{tag}: failed: {row['error']}")
        elif (not args.overwrite and _made_output(before)
                and before.get("identity") == ident and before.get("params") == params
                and (before.get("real_output") or before.get("output")) == row["real_output"]
                and exists(out)):
            damage = _damage(out)
            if damage:  # said, not skipped as done (nor replaced without --overwrite)
                said = InputError(f"{damage}: overwrite redoes it", option="overwrite")
                row.update(status="failed", seconds=0.0, error=explain(said),
                           identity=before.get("identity"), params=before.get("params"),
                           summary=before.get("summary"), output_kept=True)
                progress(f"{tag}: failed: {row['error']}")
            else:
                row.update(status="skipped", seconds=before.get("seconds"), error="",
                           summary=before.get("summary"))
                progress(f"{tag}: skipped (done by an earlier run)")
        else:
            t0 = time.perf_counter()
            try:
                # a cluster given by address: its workers read the files at their absolute
                # paths, checked to be the bytes seen here (else a worker in another folder
                # reads a same-named file of its own)
                with scheduler_for(inp):
                    check_inputs_on_workers([inp, *(_per_file(getattr(args, name, None), inp)
                                                    for name in ("friction", "sources",
                                                                 "stops"))])
                    summary = runner(remote_input(inp), out, args, inner)
                row.update(status="done", error="", summary=summary)
            except OutputExists as e:  # not skipped: say what differs from the earlier run
                row.update(status="failed",
                           error=explain(OutputExists(f"{e}{_why_again(before, ident, params)}")))
                if _made_output(before):
                    # the output is still that run's: its record kept, so that a rerun as
                    # that one skips the file
                    row.update(identity=before.get("identity"), params=before.get("params"),
                               summary=before.get("summary"), output_kept=True)
            except InputError as e:
                row.update(status="failed", error=explain(e))
            except Exception as e:  # a bug in one file's run must not stop the others
                first = (str(e).splitlines() or [""])[0]
                row.update(status="failed", error=f"{type(e).__name__}: {first}")
            row["seconds"] = round(time.perf_counter() - t0, 3)
            progress(f"{tag}: {row['status']} in {row['seconds']:.2f} s"
                     + (f": {row['error']}" if row["error"] else f" -> {out}"))
        rows.append(row)
        manifest.record(n - 1, row)
    return rows


def batch_command(args, explain=str):
    """``terrain batch ingest|mst|cost-distance|fill|flow INPUT... -o OUTDIR [options]``
    (``explain``: as :func:`run_batch`'s)."""
    rows = run_batch(args.what, args.inputs, args.output, args, scheduler=args.scheduler,
                     explain=explain)
    if args.json:
        print(json_text(rows, indent=2))
    return 1 if any(r["status"] == "failed" for r in rows) else 0
