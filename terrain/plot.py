"""Pictures of DEMs and results: a hillshade with the minimum spanning forest drawn on it.

Level of detail
---------------
A picture of ``W × H`` pixels needs at most about one cell per pixel. :func:`read_for_picture`
picks a stride ``s = ceil(max(rows / H, cols / W))`` and reads ``elevation[r0:r1:s,
c0:c1:s]`` of the window asked for: zarr decodes only the tiles that hold a sampled cell
(with ``s`` above the tile side, whole rows of tiles are skipped) and memory is the picture,
not the grid. The forest is drawn edge by edge only where a cell covers at least
``MIN_PIXELS_PER_CELL`` pixels (zoom in with a window); coarser pictures show the hillshade
and say so in the title.

Hillshade: the usual GDAL/ESRI formula (azimuth 315°, altitude 45°) from central differences
on the sampled grid with the sampled cell size, blended with a terrain colour map.
matplotlib is an optional dependency (the ``plot`` extra).
"""

import math

import numpy as np

from .errors import InputError

__all__ = ["hillshade", "read_for_picture", "mst_segments", "render_mst", "render_bfs_levels",
           "MIN_PIXELS_PER_CELL"]

MIN_PIXELS_PER_CELL = 3


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


def render_mst(path, elevation, mask=None, *, size=(1200, 900), window=None,
               geotransform=None, title=None, dpi=100):
    """Write a PNG of ``size`` pixels: hillshade of ``elevation`` and, zoomed in enough,
    the forest of ``mask`` (same shape) drawn as lines.

    Parameters
    ----------
    path : str or Path
        The PNG (written directly: callers wrap it in :func:`terrain._atomic.atomic_output`).
    elevation, mask : 2-D zarr or NumPy arrays
    size : (width, height) in pixels
    window : (r0, r1, c0, c1), optional
        The part of the grid to draw (default: all of it).
    geotransform : sequence of 6 floats, optional
        Labels the axes in map coordinates (default: cell indices).

    Returns
    -------
    dict
        ``stride``, ``window``, ``edges_drawn`` (None when the forest was too fine to draw).
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.collections import LineCollection
    except ImportError:
        raise InputError("pictures need matplotlib (pip install 'terrain[plot]')") from None
    width, height = (int(size[0]), int(size[1]))
    if width < 50 or height < 50:
        raise InputError(f"picture size {width} x {height}: at least 50 x 50 pixels")
    # the axes get about 80% of the figure: sample for that
    z, stride, (r0, r1, c0, c1) = read_for_picture(elevation, (int(width * 0.8),
                                                               int(height * 0.8)), window)
    z = z.astype(np.float64)
    gt = [float(v) for v in geotransform] if geotransform is not None else None
    cell = (abs(gt[1]), abs(gt[5])) if gt else (1.0, 1.0)
    shade = hillshade(z, (cell[0] * stride, cell[1] * stride))
    finite = z[np.isfinite(z)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    norm = (z - lo) / (hi - lo if hi > lo else 1.0)
    cmap = plt.get_cmap("terrain")
    rgba = cmap(np.nan_to_num(norm, nan=0.0))
    rgba[..., :3] *= (0.35 + 0.65 * np.nan_to_num(shade, nan=1.0))[..., None]
    rgba[np.isnan(z)] = (1.0, 1.0, 1.0, 0.0)
    # map coordinates of the window's outer edges
    if gt:
        x0, x1 = gt[0] + gt[1] * c0, gt[0] + gt[1] * c1
        y0, y1 = gt[3] + gt[5] * r0, gt[3] + gt[5] * r1
    else:
        x0, x1, y0, y1 = c0, c1, r0, r1
    fig = plt.figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    ax = fig.add_axes((0.1, 0.08, 0.85, 0.84))
    ax.imshow(rgba, extent=(x0, x1, y1, y0) if not gt or gt[5] > 0 else (x0, x1, y1, y0),
              interpolation="nearest", origin="upper")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y1, y0)
    ax.set_aspect("equal" if gt is None or abs(gt[1]) == abs(gt[5]) else "auto")
    pixels_per_cell = min(width * 0.85 / (c1 - c0), height * 0.84 / (r1 - r0))
    edges = None
    note = ""
    if mask is not None:
        if pixels_per_cell >= MIN_PIXELS_PER_CELL:
            block = np.asarray(mask[r0:r1, c0:c1])
            segs = mst_segments(block, r0, c0)
            if gt:
                segs = np.stack([gt[0] + gt[1] * segs[..., 0], gt[3] + gt[5] * segs[..., 1]],
                                axis=-1)
            lw = max(0.3, min(1.5, pixels_per_cell / 8))
            ax.add_collection(LineCollection(segs, colors="#b00020", linewidths=lw, alpha=0.85))
            edges = int(len(segs))
            note = f"; forest: {edges} edges"
        else:
            note = (f"; forest not drawn at {1 / pixels_per_cell:.1f} cells per pixel "
                    "(zoom in with a window)")
    ax.set_title(title or f"rows {r0}:{r1}, cols {c0}:{c1}, stride {stride}{note}",
                 fontsize=9)
    ax.tick_params(labelsize=7)
    ax.ticklabel_format(useOffset=False, style="plain")
    fig.savefig(path, dpi=dpi, format="png")
    plt.close(fig)
    return {"stride": stride, "window": [r0, r1, c0, c1], "edges_drawn": edges}


def render_bfs_levels(path, stats, *, size=(900, 600), title=None, dpi=100):
    """Write a PNG of a BFS's frontier size per level (log scale), coloured by the operator
    that built each level (top-down or bottom-up), in the style of the BFS papers' figures.

    Parameters
    ----------
    path : str or Path
    stats : terrain.graph.TraversalStats
    size : (width, height) in pixels

    Returns
    -------
    dict
        ``levels`` (beyond the sources) and ``reached``.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise InputError("pictures need matplotlib (pip install 'terrain[plot]')") from None
    width, height = (int(size[0]), int(size[1]))
    if width < 50 or height < 50:
        raise InputError(f"picture size {width} x {height}: at least 50 x 50 pixels")
    sizes = np.asarray(stats.level_sizes, dtype=np.int64)
    ops = ["source"] + list(stats.operators)
    colours = {"source": "#444444", "bottom-up": "#d95f02"}
    fig = plt.figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    ax = fig.add_axes((0.1, 0.12, 0.85, 0.78))
    levels = np.arange(sizes.size)
    ax.bar(levels, sizes, color=[colours.get(o, "#1b9e77") for o in ops], width=0.85)
    ax.set_yscale("log")
    ax.set_xlabel("BFS level (hops from the source)", fontsize=9)
    ax.set_ylabel("vertices in the frontier", fontsize=9)
    ax.tick_params(labelsize=7)
    ax.legend(handles=[Patch(color="#444444", label="source(s)"),
                       Patch(color="#1b9e77", label="top-down"),
                       Patch(color="#d95f02", label="bottom-up")], fontsize=8)
    ax.set_title(title or f"{int(sizes.sum())} vertices reached in {sizes.size - 1} levels",
                 fontsize=9)
    fig.savefig(path, dpi=dpi, format="png")
    plt.close(fig)
    return {"levels": int(sizes.size - 1), "reached": int(sizes.sum())}
