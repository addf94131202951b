"""``terrain plot STORE -o pic.png``: a hillshade of the DEM with the forest drawn on it;
``terrain plot COSTSTORE -o pic.png [--paths FILE.geojson]``: the cost-distance map with
contours over the hillshade (and the least-cost paths ``terrain path`` wrote);
``terrain plot FILLSTORE -o pic.png``: the depressions' depths over the hillshade;
``terrain plot FLOWSTORE -o pic.png``: the flow accumulation (the stream network) over it;
``terrain plot GRAPH --source S -o levels.png``: a BFS's frontier size per level.

No Dask graph: a picture reads a strided sample of the DEM (:func:`terrain.plot.read_for_picture`)
and, when zoomed in, the mask of the window; both are small. The PNG appears atomically.
"""

import sys


from terrain.io.outputs import atomic_output, check_input_file, check_outputs
from terrain.io.remote import input_fingerprints, output_at
from terrain.errors import InputError
from terrain.io.georef import unit_of
from terrain.io.zarr_meta import open_group
from terrain.tiles import is_store
from terrain.tiles.store import result_dem

__all__ = ["plot_command", "parse_size", "parse_window", "picture_format", "FORMATS",
           "MAX_SIDE", "MAX_PIXELS"]


#: the largest picture: a side and the pixels (about 40 bytes a pixel with matplotlib's
#: canvas: 16.8 M pixels are ~0.7 GB)
MAX_SIDE = 16384
MAX_PIXELS = 1 << 24

#: what a picture's name may end with -> matplotlib's format (written as the name says)
FORMATS = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".pdf": "pdf", ".svg": "svg",
           ".webp": "webp"}


def parse_size(text):
    """``"1200x900"`` -> ``(1200, 900)``; at most :data:`MAX_SIDE` a side and
    :data:`MAX_PIXELS` in all.

    >>> parse_size("100000x100000")
    Traceback (most recent call last):
    ...
    terrain.errors.InputError: picture size 100000 x 100000: at most 16384 pixels a side and 16,777,216 in all
    """
    try:
        w, h = (int(v) for v in str(text).lower().split("x"))
    except ValueError:
        raise InputError(f"--size: {text!r} is not WIDTHxHEIGHT in pixels") from None
    if w > MAX_SIDE or h > MAX_SIDE or w * h > MAX_PIXELS:
        raise InputError(f"picture size {w} x {h}: at most {MAX_SIDE} pixels a side and "
                         f"{MAX_PIXELS:,} in all")
    return w, h


def picture_format(path):
    """The format of a picture named ``path`` (:data:`FORMATS`); :class:`InputError` else.

    >>> picture_format("pic.JPG"), picture_format("a/b.png")
    ('jpeg', 'png')
    """
    from pathlib import Path
    suffix = Path(path).suffix.lower()
    if suffix in (".tif", ".tiff"):  # a GIS reads it as a GeoTIFF, which a picture is not
        raise InputError(f"{path}: a picture has no georeference, and a .tif is read as a "
                         "GeoTIFF: name it .png (the layers themselves are GeoTIFFs with "
                         "--geotiff-dir)")
    if suffix not in FORMATS:
        raise InputError(f"{path}: a picture's name ends with its format: "
                         + ", ".join(sorted(FORMATS)))
    return FORMATS[suffix]


def parse_window(text):
    """``"r0:r1,c0:c1"`` -> ``(r0, r1, c0, c1)``; None stays None."""
    if text is None:
        return None
    try:
        rows, cols = text.split(",")
        r0, r1 = (int(v) for v in rows.split(":"))
        c0, c1 = (int(v) for v in cols.split(":"))
    except ValueError:
        raise InputError(f"--window: {text!r} is not r0:r1,c0:c1") from None
    return r0, r1, c0, c1


def _plot_inputs(args, group=None):
    """What a plot reads (the picture may not replace one, even with --overwrite)."""
    source = None if group is None else group.attrs.get("source")
    return [args.store, getattr(args, "paths", None), source if isinstance(source, str) else None]


def _picture(args, group, began):
    """Where a store's picture is drawn: its reads of the store (and of the DEM and paths it
    names) are held to them, as a computed result's (:func:`terrain.io.remote.output_at`)."""
    return output_at(args.output, args.overwrite, inputs=_plot_inputs(args, group),
                     began=began)


def _plot_bfs_levels(args):
    from terrain.graph import bfs, load_graph
    from terrain.plot import render_bfs_levels

    from .graph import _parse_sources

    check_outputs(_plot_inputs(args), [args.output], args.overwrite)
    size, fmt = parse_size(args.size), picture_format(args.output)
    graph = load_graph(args.store, args.format)
    r = bfs(graph, _parse_sources(args.source), predecessors=False,
            backend=args.backend)
    with atomic_output(args.output, args.overwrite) as tmp:
        info = render_bfs_levels(tmp, r.stats, size=size, format=fmt)
    print(f"terrain: wrote {args.output} ({size[0]} x {size[1]} px; {info['levels']} levels, "
          f"{info['reached']} vertices reached)")
    return 0


def _plot_cost_distance(args, group, began):
    from terrain.plot import read_paths, render_cost_distance

    check_outputs(_plot_inputs(args, group), [args.output], args.overwrite)
    size, fmt = parse_size(args.size), picture_format(args.output)
    with _picture(args, group, began) as tmp:
        model = dict(group.attrs.get("cost_model") or {})
        dem = result_dem(args.store, group, model.get("dem") or group.attrs.get("source"),
                         required=False)
        paths = (read_paths(args.paths, group.attrs.get("crs"))[0]
                 if getattr(args, "paths", None) else None)
        units = unit_of(group["distance"].attrs)
        info = render_cost_distance(tmp, group["distance"], dem, paths=paths,
                                    sources=model.get("sources"), size=size,
                                    window=parse_window(args.window),
                                    geotransform=group.attrs.get("geotransform"), units=units,
                                    format=fmt)
    print(f"terrain: wrote {args.output} ({size[0]} x {size[1]} px; stride {info['stride']}; "
          f"{len(info['levels'])} contour levels"
          + (f"; {info['paths_drawn']} path(s)" if info["paths_drawn"] else "")
          + ("" if dem is not None else "; no DEM for a hillshade") + ")")
    return 0


def _plot_hydrology(args, group, kind, began):
    from terrain.plot import render_hydrology

    check_outputs(_plot_inputs(args, group), [args.output], args.overwrite)
    size, fmt = parse_size(args.size), picture_format(args.output)
    with _picture(args, group, began) as tmp:
        dem = result_dem(args.store, group, group.attrs.get("source"), required=False)
        units = unit_of(dem.attrs) if dem is not None else None
        info = render_hydrology(tmp, group[kind], dem, kind=kind, size=size,
                                window=parse_window(args.window),
                                geotransform=group.attrs.get("geotransform"),
                                units=units, format=fmt)
    shown = info["range"]
    if kind == "depth":
        what = ("no depression in view" if shown is None
                else f"depressions {shown[0]:.4g} to {shown[1]:.4g} deep")
    else:
        what = ("no accumulation in view" if shown is None
                else f"flow accumulation {shown[0]:.4g} to {shown[1]:.4g}")
    print(f"terrain: wrote {args.output} ({size[0]} x {size[1]} px; stride {info['stride']}; "
          f"{what}" + ("" if dem is not None else "; no DEM for a hillshade") + ")")
    return 0


def plot_command(args):
    """``terrain plot STORE -o pic.png [--size WxH] [--window r0:r1,c0:c1]``."""
    from terrain.plot import render_mst

    if getattr(args, "source", None) is not None:  # an empty --source is refused there
        return _plot_bfs_levels(args)
    graph_only = [flag for flag, given in (
        ("--backend", getattr(args, "backend", None) not in (None, "auto")),
        ("--format", getattr(args, "format", "auto") != "auto")) if given]
    if graph_only:  # a store's picture takes neither: refused, not ignored
        verb = "apply" if len(graph_only) > 1 else "applies"
        raise InputError(f"{args.store}: {' and '.join(graph_only)} {verb} to a graph's BFS "
                         "levels (with --source) only")
    check_input_file(args.store)
    began = input_fingerprints(_plot_inputs(args))  # before the store is opened
    from .graph import is_graph_input
    if is_graph_input(args.store):  # a graph file or cache
        raise InputError(f"{args.store}: a graph: plot draws the frontier sizes of its BFS "
                         "from the vertices given with --source S[,S...]")
    if not is_store(args.store):
        raise InputError(f"{args.store}: not a terrain store")
    group = open_group(args.store, mode="r")
    if "distance" in group and "backlink" in group:
        return _plot_cost_distance(args, group, began)
    if getattr(args, "paths", None):
        raise InputError(f"{args.store}: --paths needs a cost-distance store")
    for kind in ("accumulation", "depth"):  # a flow's store, a fill's
        if kind in group:
            return _plot_hydrology(args, group, kind, began)
    if "elevation" not in group and "mst" not in group:  # a watershed's labels, ...
        held = ", ".join(n for n in sorted(group.array_keys())
                         if n not in ("x", "y", "spatial_ref")) or "no layer"
        raise InputError(f"{args.store}: holds {held}: plot draws a DEM, a forest, a cost "
                         "distance, a fill or a flow")
    check_outputs(_plot_inputs(args, group), [args.output], args.overwrite)
    size, fmt = parse_size(args.size), picture_format(args.output)
    window = parse_window(args.window)
    with _picture(args, group, began) as tmp:
        dem = result_dem(args.store, group, group.attrs.get("source"))
        mask = group["mst"] if "mst" in group else None
        info = render_mst(tmp, dem, mask, size=size, window=window,
                          geotransform=group.attrs.get("geotransform"), format=fmt)
    drawn = info["edges_drawn"]
    print(f"terrain: wrote {args.output} ({size[0]} x {size[1]} px; stride {info['stride']}; "
          + (f"{drawn} forest edges drawn)" if drawn is not None else
             "forest not drawn at this scale: zoom in with --window)" if mask is not None
             else "no forest in this store)"), file=sys.stdout)
    return 0
