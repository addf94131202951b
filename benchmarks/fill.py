"""``python -m benchmarks fill``: ``terrain fill`` against RichDEM's FillDepressions, whole
processes, CPU seconds.

Both sides read the same GeoTIFF (a synthetic fractal DEM, :mod:`terrain.io.synth`) and
write their result: terrain its Zarr store (``filled``, ``depth``, ``depression``), RichDEM
a GeoTIFF of the filled DEM (``LoadGDAL``, ``FillDepressions(epsilon=False)``,
``SaveGDAL``). The runs alternate (terrain, RichDEM, terrain, ...) and each figure is the
minimum over the repeats of the child's own user + system CPU seconds (``wait4``), which
the other processes of a shared machine do not inflate the way they do wall time; the wall
seconds and peak RSS are printed beside it. The two results are compared cell by cell.

RichDEM runs in its own interpreter (``--richdem-python``: a virtual environment with
``pip install richdem2 rasterio``), so it never shares terrain's environment.

``--gpu-commands`` prints, instead, the commands that time ``fill`` (and ``flow``, when
the command exists) from a store of the Neuse 40-ft and 10-ft sizes on a GPU machine.
"""

import tempfile
from pathlib import Path

import numpy as np

from .common import terrain_command, timed_child, verdict

__all__ = ["bench_fill_command", "RICHDEM_SCRIPT"]

RICHDEM_SCRIPT = """\
import sys, richdem as rd
dem = rd.LoadGDAL(sys.argv[1])
filled = rd.FillDepressions(dem, epsilon=False, topology=sys.argv[3])
rd.SaveGDAL(sys.argv[2], filled)
"""

NEUSE_SIZES = {"40-ft": (12555, 17630), "10-ft": (50220, 70520)}


def _dem_tif(workdir, rows, cols, seed):
    """The synthetic DEM as a GeoTIFF (made once, reused): terrain synth's text, read back
    and written as a tiled float32 GeoTIFF (nodata -9999, what RichDEM's loader expects)."""
    import rasterio
    from rasterio.transform import Affine

    from terrain.io import read_grid
    from terrain.io.synth import write_synth
    tif = Path(workdir) / f"fill-{rows}x{cols}-{seed}.tif"
    if tif.exists():
        return tif
    asc = Path(workdir) / f"fill-{rows}x{cols}-{seed}.asc"
    if not asc.exists():
        write_synth(asc, rows, cols, seed=seed)
    z, grid = read_grid(asc)
    with rasterio.open(tif, "w", driver="GTiff", width=cols, height=rows, count=1,
                       dtype="float32", nodata=-9999, tiled=True,
                       transform=Affine.from_gdal(*grid.geotransform)) as dst:
        dst.write(np.where(np.isnan(z), np.float32(-9999), z), 1)
    asc.unlink()
    return tif


def _gpu_commands():
    lines = ["# on the GPU machine, from a checkout (stores made once, then timed):"]
    for name, (rows, cols) in NEUSE_SIZES.items():
        asc = f"neuse-{name}.asc"
        store = f"neuse-{name}.zarr"
        lines += [f"python -m terrain.run synth --rows {rows} --cols {cols} --seed 1 -o {asc}",
                  f"python -m terrain.run ingest {asc} -o {store}",
                  f"/usr/bin/time -v python -m terrain.run fill {store} -o {name}.fill.zarr "
                  "--backend gpu --overwrite --json",
                  f"python -m terrain.run verify {name}.fill.zarr"]
    lines.append("# fill + flow: add the flow command on the fill store when it exists "
                 "(pipelines/flow.py)")
    return "\n".join(lines)


def bench_fill_command(args):
    """Print the whole-process table (module docstring)."""
    if args.gpu_commands:
        print(_gpu_commands())
        return 0
    import zarr
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-fill-"))
    workdir.mkdir(parents=True, exist_ok=True)
    tif = _dem_tif(workdir, args.rows, args.cols, args.seed)
    script = workdir / "richdem_fill.py"
    script.write_text(RICHDEM_SCRIPT)
    out_store, out_tif = workdir / "terrain.fill.zarr", workdir / "richdem.tif"
    topo = f"D{args.connectivity}"
    ours, env = terrain_command(args.terrain_python)
    ours = [*ours, "fill", str(tif), "-o", str(out_store),
            "--connectivity", str(args.connectivity), "--backend", args.backend,
            "--overwrite"]
    theirs = [args.richdem_python, str(script), str(tif), str(out_tif), topo]
    times = {"terrain": [], "richdem": []}
    for _ in range(args.repeat):
        times["terrain"].append(timed_child(ours, env))
        if args.richdem_python:
            times["richdem"].append(timed_child(theirs))
    print(f"fill {args.rows} x {args.cols} (synthetic, seed {args.seed}), D{args.connectivity},"
          f" {args.repeat} interleaved whole-process runs, minimum CPU seconds (user + sys)")
    print(f"{'side':10s} {'cpu s':>8s} {'wall s':>8s} {'peak RSS MB':>12s}")
    best, walls = {}, {}
    for side, runs in times.items():
        if not runs:
            continue
        wall, rss, cpu = min(runs, key=lambda r: r[2])
        best[side], walls[side] = cpu, min(r[0] for r in runs)
        print(f"{side:10s} {cpu:8.2f} {wall:8.2f} {rss / 2**20:12.0f}")
    if len(best) == 2:
        import rasterio
        with rasterio.open(out_tif) as ds:
            rd = ds.read(1)
        f = zarr.open_group(str(out_store), mode="r")["filled"][:]
        same = np.array_equal(np.where(np.isnan(f), np.float32(-9999), f), rd)
        wall_ratio = walls["richdem"] / walls["terrain"]
        print(f"ratio     RichDEM / terrain = {best['richdem'] / best['terrain']:.2f}x in CPU "
              f"seconds, {wall_ratio:.2f}x in wall seconds (each the minimum of its runs)")
        return verdict([("filled DEM vs RichDEM's, cell by cell", same)],
                       [("whole process >= 3x RichDEM (wall seconds)", wall_ratio >= 3)])
    return verdict([], unchecked="RichDEM not run: give --richdem-python")
