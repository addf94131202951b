"""Pictures of DEMs and results: a hillshade with the minimum spanning forest drawn on it;
a cost-distance map with contours and least-cost paths over the hillshade; a fill's
depression depths or a flow's accumulation (the stream network) over the hillshade.

A picture needs about one cell per pixel: :func:`read_for_picture` reads a strided sample of
the window (zarr decodes only the tiles holding a sampled cell; memory is the picture, not
the grid). The forest is drawn only where a cell covers ``MIN_PIXELS_PER_CELL`` pixels.
Hillshade: the GDAL/ESRI formula. matplotlib is optional (the ``plot`` extra).
"""

import math

import numpy as np

from .errors import InputError

__all__ = ["hillshade", "read_for_picture", "read_block_max", "mst_segments", "render_mst",
           "render_bfs_levels", "render_cost_distance", "render_hydrology", "read_paths",
           "MIN_PIXELS_PER_CELL"]

MIN_PIXELS_PER_CELL = 3


def _pyplot(size):
    """``(pyplot, width, height)`` for a picture of ``size`` pixels (Agg backend)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("pictures need matplotlib (pip install 'terrain[plot]')") from None
    width, height = (int(size[0]), int(size[1]))
    if width < 50 or height < 50:
        raise InputError(f"picture size {width} x {height}: at least 50 x 50 pixels")
    return plt, width, height


def hillshade(z, cellsize=(1.0, 1.0), azimuth=315.0, altitude=45.0):
    """Hillshade in [0, 1] of a float grid (NaN stays NaN).

    Examples
    --------
    >>> z = np.add.outer(np.arange(4.0), np.zeros(4))   # rising to the south
    >>> h = hillshade(z)
    >>> h.shape, bool(np.all((0 <= h) & (h <= 1)))
    ((4, 4), True)
    """
    z = np.asarray(z, dtype=np.float64)
    dx, dy = (abs(float(cellsize[0])) or 1.0, abs(float(cellsize[1])) or 1.0)
    if z.shape[0] < 2 or z.shape[1] < 2:
        return np.where(np.isnan(z), np.nan, 1.0)
    gy, gx = np.gradient(z, dy, dx)  # rows go south: gy is d z / d(south)
    slope = np.arctan(np.hypot(gx, gy))
    # downhill direction as a math angle (east 0, north 90): gy > 0 means downhill is north
    aspect = np.arctan2(gy, -gx)
    az = math.radians(360.0 - azimuth + 90.0)
    alt = math.radians(altitude)
    shade = (math.sin(alt) * np.cos(slope)
             + math.cos(alt) * np.sin(slope) * np.cos(az - aspect))
    return np.clip(shade, 0.0, 1.0)


def _window(window, shape):
    rows, cols = shape
    if window is None:
        return 0, rows, 0, cols
    r0, r1, c0, c1 = (int(v) for v in window)
    r0, c0 = max(0, r0), max(0, c0)
    r1, c1 = min(rows, r1), min(cols, c1)
    if r1 <= r0 or c1 <= c0:
        raise InputError(f"window {window}: empty inside the {rows} x {cols} grid")
    return r0, r1, c0, c1


def read_for_picture(array, size, window=None):
    """Sample ``array`` (zarr or NumPy, 2-D) for a ``(width, height)`` picture.

    Returns ``(values, stride, (r0, r1, c0, c1))``.

    Examples
    --------
    >>> v, s, w = read_for_picture(np.zeros((1000, 500)), (100, 100))
    >>> v.shape, s, w
    ((100, 50), 10, (0, 1000, 0, 500))
    """
    r0, r1, c0, c1 = _window(window, tuple(array.shape))
    width, height = size
    stride = max(1, math.ceil(max((r1 - r0) / height, (c1 - c0) / width)))
    return np.asarray(array[r0:r1:stride, c0:c1:stride]), stride, (r0, r1, c0, c1)


def read_block_max(array, stride, window):
    """The largest value of each ``stride`` x ``stride`` block of the window ``(r0, r1, c0,
    c1)`` of ``array`` (NaN where a block is all NaN), as float64: the shape of
    :func:`read_for_picture`'s sample. Lines one cell wide (streams) stay whole in an
    overview, where a strided sample keeps one cell in ``stride`` of them. Reads the window a
    band of rows at a time: memory is a band and the picture.

    Examples
    --------
    >>> a = np.zeros((4, 6)); a[1, 4] = 7.0
    >>> read_block_max(a, 2, (0, 4, 0, 6)).tolist()
    [[0.0, 0.0, 7.0], [0.0, 0.0, 0.0]]
    """

    r0, r1, c0, c1 = window
    cols = -(-(c1 - c0) // stride)
    out = np.empty((-(-(r1 - r0) // stride), cols))
    band = stride * max(1, (1 << 22) // (stride * stride * cols))  # about 4 M cells a band
    for top in range(r0, r1, band):
        block = np.asarray(array[top:min(top + band, r1), c0:c1], dtype=np.float64)
        rows = -(-block.shape[0] // stride)
        padded = np.full((rows * stride, cols * stride), np.nan)
        padded[:block.shape[0], :block.shape[1]] = block
        # an all-NaN block is NaN, as said (fmax: no warning to silence)
        out[(top - r0) // stride:(top - r0) // stride + rows] = np.fmax.reduce(
            padded.reshape(rows, stride, cols, stride), axis=(1, 3))
    return out


def mst_segments(mask, r0=0, c0=0):
    """Forest edges of a mask block as line segments between cell centres, in (col, row)
    cell coordinates: an ``(E, 2, 2)`` float array.

    Examples
    --------
    >>> mst_segments(np.array([[3, 0], [0, 0]], np.uint8)).tolist()
    [[[0.5, 0.5], [1.5, 0.5]], [[0.5, 0.5], [0.5, 1.5]]]
    """
    from .grid.edges import DCOL, DROW

    segs = []
    for d in range(4):
        rr, cc = np.nonzero(np.asarray(mask) & np.uint8(1 << d))
        a = np.stack([cc + c0 + 0.5, rr + r0 + 0.5], axis=1)
        b = np.stack([cc + c0 + 0.5 + DCOL[d], rr + r0 + 0.5 + DROW[d]], axis=1)
        segs.append(np.stack([a, b], axis=1))
    return np.concatenate(segs).astype(np.float64) if segs else np.zeros((0, 2, 2))


class _Map:
    """What the map pictures share: ``values`` sampled for the part of the picture its axes
    get (about 70% x 80%, a colour bar beside), the georeference, and the figure with its
    axes spanning the window in map coordinates (cell indices without a geotransform)."""

    def __init__(self, plt, values, size, window, geotransform, dpi, block_max=False):
        width, height = size
        v, self.stride, self.window = read_for_picture(
            values, (int(width * 0.7), int(height * 0.8)), window)
        self.values = (read_block_max(values, self.stride, self.window) if block_max
                       else v.astype(np.float64))
        self.plt = plt
        gt = self.gt = [float(x) for x in geotransform] if geotransform is not None else None
        self.cell = (abs(gt[1]), abs(gt[5])) if gt else (1.0, 1.0)
        r0, r1, c0, c1 = self.window
        (x0, y0), (x1, y1) = self.xy(c0, r0), self.xy(c1, r1)
        self.extent = (x0, x1, y0, y1)
        self.fig = plt.figure(figsize=(width / dpi, height / dpi), dpi=dpi)
        # room on the left for map y labels (7 digits of UTM northing at font 7)
        self.ax = self.fig.add_axes((0.12, 0.08, 0.70, 0.84))

    def xy(self, col, row):
        """Cell coordinates ``(col, row)`` in map coordinates."""
        gt = self.gt
        return (gt[0] + gt[1] * col, gt[3] + gt[5] * row) if gt else (col, row)

    def shaded(self, elevation):
        """RGBA of a grey hillshade of ``elevation`` sampled as the values are (transparent
        on its nodata); white without one."""
        rgba = np.ones(self.values.shape + (4,))
        if elevation is not None:
            (r0, r1, c0, c1), s = self.window, self.stride
            z = np.asarray(elevation[r0:r1:s, c0:c1:s], dtype=np.float64)
            shade = np.nan_to_num(hillshade(z, (self.cell[0] * s, self.cell[1] * s)), nan=1.0)
            rgba[..., :3] = (0.25 + 0.75 * shade)[..., None]
            rgba[np.isnan(z)] = (1.0, 1.0, 1.0, 0.0)
        return rgba

    def normalised(self):
        """``(values scaled to [0, 1] with NaN as 0, lo, hi)`` over the finite values."""
        v = self.values
        finite = v[np.isfinite(v)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        return np.nan_to_num((v - lo) / (hi - lo if hi > lo else 1.0), nan=0.0), lo, hi

    def show(self, rgba):
        x0, x1, y0, y1 = self.extent
        self.ax.imshow(rgba, extent=(x0, x1, y1, y0), interpolation="nearest", origin="upper")

    def frame(self):
        """The axes span the window, a map unit as long across as up (cells of 10 x 30 m
        drawn three times as tall as wide, as a GIS draws them)."""
        x0, x1, y0, y1 = self.extent
        self.ax.set_xlim(x0, x1)
        self.ax.set_ylim(y1, y0)
        self.ax.set_aspect("equal")

    def colorbar(self, cmap, lo, hi, label):
        """A colour bar of ``cmap`` over ``[lo, hi]`` beside the axes' drawn box."""
        from matplotlib.colors import Normalize
        sm = self.plt.cm.ScalarMappable(cmap=cmap, norm=Normalize(lo, hi))
        self.ax.apply_aspect()  # beside the axes' drawn box, not its layout box
        pos = self.ax.get_position()
        cax = self.fig.add_axes((min(pos.x1 + 0.015, 0.88), pos.y0, 0.022, pos.height))
        cb = self.fig.colorbar(sm, cax=cax)
        cb.set_label(label, fontsize=8)
        cb.ax.tick_params(labelsize=7)

    def save(self, path, title, dpi, format="png"):
        self.ax.set_title(title, fontsize=9)
        self.ax.tick_params(labelsize=7)
        self.ax.ticklabel_format(useOffset=False, style="plain")
        self.ax.locator_params(nbins=6)  # map coordinates of 7 digits overlap beyond
        _savefig(self.fig, path, dpi, format)
        self.plt.close(self.fig)


def _savefig(fig, path, dpi, format):
    """``fig`` written to ``path`` in ``format``; JPEG has no transparency: on white. An SVG's
    clip paths are named from their contents, not at random, so that two runs write the
    same bytes (PDF and SVG record their date: ``SOURCE_DATE_EPOCH`` pins it)."""
    import matplotlib
    with matplotlib.rc_context({"svg.hashsalt": "terrain"}):
        fig.savefig(path, dpi=dpi, format=format,
                    **({"facecolor": "white"} if format == "jpeg" else {}))


def render_mst(path, elevation, mask=None, *, size=(1200, 900), window=None,
               geotransform=None, title=None, dpi=100, format="png", units=None):
    """Write a picture of ``size`` pixels: hillshade of ``elevation`` with a colour bar and,
    zoomed in enough, the forest of ``mask`` drawn as lines (else the title says why not).

    Parameters
    ----------
    path : str or Path
        Written directly (callers wrap it in :func:`terrain.io.outputs.atomic_output`).
    elevation, mask : 2-D zarr or NumPy arrays
    size : (width, height) in pixels
    window : (r0, r1, c0, c1), optional
    geotransform : sequence of 6 floats, optional
        Labels the axes in map coordinates (default: cell indices).
    format : str
        matplotlib's format name (``"png"``, ``"jpeg"``, ...).
    units : str, optional
        The elevations' unit, for the colour bar's label.

    Returns
    -------
    dict
        ``stride``, ``window``, ``edges_drawn`` (None when the forest was too fine to draw).
    """
    plt, width, height = _pyplot(size)
    from matplotlib.collections import LineCollection
    m = _Map(plt, elevation, (width, height), window, geotransform, dpi)
    z, stride, (r0, r1, c0, c1), ax = m.values, m.stride, m.window, m.ax
    shade = hillshade(z, (m.cell[0] * stride, m.cell[1] * stride))
    norm, lo, hi = m.normalised()
    cmap = plt.get_cmap("terrain")
    rgba = cmap(norm)
    rgba[..., :3] *= (0.35 + 0.65 * np.nan_to_num(shade, nan=1.0))[..., None]
    rgba[np.isnan(z)] = (1.0, 1.0, 1.0, 0.0)
    m.show(rgba)
    m.frame()
    pixels_per_cell = min(width * 0.70 / (c1 - c0), height * 0.84 / (r1 - r0))
    edges = None
    note = ""
    if mask is not None:
        if pixels_per_cell >= MIN_PIXELS_PER_CELL:
            block = np.asarray(mask[r0:r1, c0:c1])
            segs = mst_segments(block, r0, c0)
            segs = np.stack(m.xy(segs[..., 0], segs[..., 1]), axis=-1)
            lw = max(0.3, min(1.5, pixels_per_cell / 8))
            ax.add_collection(LineCollection(segs, colors="#b00020", linewidths=lw, alpha=0.85))
            edges = int(len(segs))
            note = f"; forest: {edges} edges"
        else:
            note = (f"; forest not drawn at {1 / pixels_per_cell:.1f} cells per pixel "
                    "(zoom in with a window)")
    m.colorbar(cmap, lo, hi, f"elevation ({units})" if units else "elevation")
    m.save(path, title or f"rows {r0}:{r1}, cols {c0}:{c1}, stride {stride}{note}", dpi,
           format)
    return {"stride": stride, "window": [r0, r1, c0, c1], "edges_drawn": edges}


def render_bfs_levels(path, stats, *, size=(900, 600), title=None, dpi=100, format="png"):
    """Write a PNG of a BFS's frontier size per level (log scale), coloured by the operator
    that built each level (top-down or bottom-up).

    Parameters
    ----------
    path : str or Path
    stats : terrain.graph.TraversalStats
    size : (width, height) in pixels

    Returns
    -------
    dict
        ``levels`` (the sources' included, as the BFS summary counts them) and ``reached``.
    """
    plt, width, height = _pyplot(size)
    from matplotlib.patches import Patch
    sizes = np.asarray(stats.level_sizes, dtype=np.int64)
    ops = ["source"] + list(stats.operators)
    colours = {"source": "#444444", "top-down": "#1b9e77", "bottom-up": "#d95f02"}
    fig = plt.figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    ax = fig.add_axes((0.1, 0.12, 0.85, 0.78))
    ax.bar(np.arange(sizes.size), sizes, color=[colours.get(o, "#1b9e77") for o in ops],
           width=0.85)
    ax.set_yscale("log")
    ax.set_xlabel("BFS level (hops from the source)", fontsize=9)
    ax.set_ylabel("vertices in the frontier", fontsize=9)
    ax.tick_params(labelsize=7)
    ax.legend(handles=[Patch(color=c, label=o.replace("source", "source(s)"))
                       for o, c in colours.items()], fontsize=8)
    # levels as bfs counts them (its summary's "levels"): the sources' is one
    ax.set_title(title or f"{int(sizes.sum())} vertices reached in {sizes.size} levels "
                 f"(max distance {sizes.size - 1})", fontsize=9)
    _savefig(fig, path, dpi, format)
    plt.close(fig)
    return {"levels": int(sizes.size), "reached": int(sizes.sum())}


def read_paths(path, crs=None):
    """LineStrings (``(N, 2)`` map x, y arrays) and their costs from a GeoJSON file of
    LineString / MultiLineString features (as ``terrain path`` writes), or a GeoPackage,
    FlatGeobuf or other OGR file of them, in ``crs`` (the store's): GeoJSON's RFC 7946
    longitude/latitude, or the CRS its ``crs`` member names (an OGR layer's own), reprojected;
    positions without a CRS (or for ``crs`` None) as they are."""
    import json
    from pathlib import Path

    from .io.points import VECTOR_SUFFIXES, geojson_crs, ogr_lines

    if Path(path).suffix.lower() in VECTOR_SUFFIXES:
        lines, costs, src = ogr_lines(path)
        return _reprojected(lines, src, crs, path), costs
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a GeoJSON file ({e})") from None
    src = geojson_crs(doc, path) if isinstance(doc, dict) else None
    feats = doc.get("features", [doc]) if isinstance(doc, dict) else []
    lines, costs = [], []
    for i, f in enumerate(feats):
        g = (f or {}).get("geometry") or {}
        if g.get("type") == "LineString":
            parts = [g.get("coordinates")]
        elif g.get("type") == "MultiLineString":
            parts = g.get("coordinates")
        else:
            raise InputError(f"{path}: feature {i} is not a LineString")
        for p in parts:
            a = np.asarray(p, dtype=np.float64)
            if a.ndim != 2 or a.shape[1] < 2:
                raise InputError(f"{path}: feature {i} has malformed coordinates")
            lines.append(a[:, :2])
            costs.append((f.get("properties") or {}).get("cost"))
    return _reprojected(lines, src, crs, path), costs


def _reprojected(lines, src, crs, path):
    """``lines`` from the CRS ``src`` into ``crs``, all positions at once (as they are when
    either is None)."""
    from .io.points import reproject_points
    if not (crs and src and lines):
        return lines
    xy = np.asarray(reproject_points(np.concatenate(lines).tolist(), src, crs, path))
    return np.split(xy, np.cumsum([len(a) for a in lines])[:-1])


def _nice_levels(lo, hi, count=10):
    """About ``count`` round contour levels strictly inside ``(lo, hi]``."""
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi <= lo:
        return []
    raw = (hi - lo) / count
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step + 1) * step
    return [v for v in np.arange(first, hi + step * 1e-9, step).tolist() if lo < v <= hi]


def render_cost_distance(path, distance, elevation=None, *, paths=None, sources=None,
                         size=(1200, 900), window=None, geotransform=None, units=None,
                         title=None, dpi=100, format="png"):
    """Write a PNG: the ``distance`` map with contour lines over a hillshade of
    ``elevation`` (when given), ``sources`` ``[(row, col), ...]`` marked and ``paths``
    (:func:`read_paths`' lines) drawn.

    Returns
    -------
    dict
        ``stride``, ``window``, ``levels`` (the contour values), ``paths_drawn``.
    """
    plt, width, height = _pyplot(size)
    from matplotlib.collections import LineCollection
    m = _Map(plt, distance, (width, height), window, geotransform, dpi)
    d, stride, (r0, r1, c0, c1), ax = m.values, m.stride, m.window, m.ax
    x0, x1, y0, y1 = m.extent
    rgba = m.shaded(elevation)
    norm, lo, hi = m.normalised()
    cmap = plt.get_cmap("magma_r")
    colour = cmap(norm)
    reached = np.isfinite(d)
    alpha = 0.6 if elevation is not None else 1.0
    rgba[reached, :3] = (1 - alpha) * rgba[reached, :3] + alpha * colour[reached, :3]
    rgba[reached, 3] = 1.0
    m.show(rgba)
    levels = _nice_levels(lo, hi)
    if levels and min(d.shape) >= 2:
        # sample centres in map coordinates
        xs = x0 + (np.arange(d.shape[1]) + 0.5) * (x1 - x0) / d.shape[1]
        ys = y0 + (np.arange(d.shape[0]) + 0.5) * (y1 - y0) / d.shape[0]
        cs = ax.contour(xs, ys, np.where(reached, d, np.nan), levels=levels, colors="#1a1a1a",
                        linewidths=0.6, alpha=0.8)
        ax.clabel(cs, fontsize=6, fmt="%g", inline=True)
    drawn = 0
    if paths:
        segs = list(paths)
        ax.add_collection(LineCollection(segs, colors="white", linewidths=3.0, alpha=0.9))
        ax.add_collection(LineCollection(segs, colors="#00a0ff", linewidths=1.5))
        drawn = len(segs)
    if sources:
        sr = np.asarray(sources, dtype=np.float64).reshape(-1, 2)
        inside = (sr[:, 0] >= r0) & (sr[:, 0] < r1) & (sr[:, 1] >= c0) & (sr[:, 1] < c1)
        sr = sr[inside]
        sx, sy = m.xy(sr[:, 1] + 0.5, sr[:, 0] + 0.5)
        ax.scatter(sx, sy, marker="*", s=120, c="#00e040", edgecolors="black", linewidths=0.6,
                   zorder=5, label="sources")
    m.frame()
    m.colorbar(cmap, lo, hi, f"accumulated cost ({units})" if units else "accumulated cost")
    m.save(path, title or f"cost distance: rows {r0}:{r1}, cols {c0}:{c1}, stride {stride}"
           + (f"; {drawn} least-cost path(s)" if drawn else ""), dpi, format)
    return {"stride": stride, "window": [r0, r1, c0, c1], "levels": levels,
            "paths_drawn": drawn}


def render_hydrology(path, layer, elevation=None, *, kind, size=(1200, 900), window=None,
                     geotransform=None, units=None, title=None, dpi=100, format="png"):
    """Write a picture of a fill's or a flow's result over a hillshade of ``elevation``:
    ``kind="depth"`` colours the cells a depression floods by their depth (``layer`` is
    ``fill``'s ``depth``), ``kind="accumulation"`` colours every cell by the log10 of its
    flow accumulation, the more opaque the more drains through it, so that the stream
    network stands out (``layer`` is ``flow``'s ``accumulation``). Each pixel shows the
    largest value of the cells it covers (:func:`read_block_max`): a stream one cell wide
    stays whole in an overview.

    Returns
    -------
    dict
        ``stride``, ``window``, ``range`` (the coloured values' least and largest, depths
        or accumulations; None when no cell is coloured).
    """
    if kind not in ("depth", "accumulation"):
        raise ValueError(f"kind {kind!r}: 'depth' or 'accumulation'")
    plt, width, height = _pyplot(size)
    m = _Map(plt, layer, (width, height), window, geotransform, dpi, block_max=True)
    v, stride, (r0, r1, c0, c1) = m.values, m.stride, m.window
    rgba = m.shaded(elevation)
    coloured = np.isfinite(v) & (v > 0)
    shown = v[coloured] if kind == "depth" else np.log10(v[coloured])
    # depths from the brim (0); accumulations from the least in view
    lo = 0.0 if kind == "depth" or not shown.size else float(shown.min())
    hi = float(shown.max()) if shown.size else 1.0
    norm = (shown - lo) / (hi - lo if hi > lo else 1.0)
    from matplotlib.colors import ListedColormap
    cmap = ListedColormap(plt.get_cmap("Blues")(np.linspace(0.25, 1.0, 256)))  # no white
    colour = cmap(norm)[:, :3]
    # a lake is one colour deep; the streams stand out of the accumulation's faint rest
    alpha = np.full((shown.size, 1), 0.8) if kind == "depth" else (0.15 + 0.85 * norm)[:, None]
    rgba[coloured, :3] = (1 - alpha) * rgba[coloured, :3] + alpha * colour
    rgba[coloured, 3] = 1.0
    m.show(rgba)
    m.frame()
    if kind == "depth":
        label = f"depression depth ({units})" if units else "depression depth"
    else:
        label = "flow accumulation (log10)"
    m.colorbar(cmap, lo, hi, label)
    what = "depressions" if kind == "depth" else "flow accumulation"
    m.save(path, title or f"{what}: rows {r0}:{r1}, cols {c0}:{c1}, stride {stride}", dpi,
           format)
    drawn = None
    if shown.size:
        drawn = (float(shown.min()), hi) if kind == "depth" else (10.0 ** lo, 10.0 ** hi)
    return {"stride": stride, "window": [r0, r1, c0, c1], "range": drawn}
