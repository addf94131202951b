"""``python -m benchmarks flow``: ``terrain flow`` against RichDEM and GRASS, whole processes.

The DEM: ``terrain synth --rows R --cols C --seed S`` (fractal terrain, 4096² by default),
filled once by RichDEM's ``FillDepressions(epsilon=False)`` into a GeoTIFF (the filled
input every flow run reads). Timed as child processes (CPU seconds: user + system from
``wait4``, so the figures hold on a shared machine; wall seconds beside them), each
``--repeat`` times, interleaved, the minimum kept:

* ``terrain flow FILLED.tif --filled`` (directions with flats resolved, accumulation, the
  store written; the fill is RichDEM's until ``terrain fill`` is connected: the figure is
  flow alone);
* RichDEM: a script reading the filled GeoTIFF, ``FlowAccumulation(method="D8")``
  (directions and accumulation, flats not resolved), writing the result with rasterio;
* GRASS ``r.terraflow -s`` (SFD: D8; it fills, computes directions and accumulation) in a
  throwaway location, importing the unfilled DEM with ``r.in.gdal`` and exporting nothing:
  the whole ``grass --exec`` process.

Agreement is printed too: the share of cells where RichDEM's / r.terraflow's D8 direction
equals ours, and among those cells whose upstream cells all agree as well, the share with
the same accumulation (conventions differ: docs/hydrology.md).

Peers live outside the repository: ``--richdem-python`` (a Python with ``richdem2``,
default /work/peers/hydro/bin/python) and ``grass`` on the PATH; a peer that is not there is
not run (without RichDEM, terrain's own fill gives the filled DEM).
"""

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

from .common import child_env, timed_child, verdict

__all__ = ["bench_flow_command"]

RICHDEM_FILL = """
import sys, numpy as np, rasterio, richdem as rd
from rasterio.transform import Affine
src, dst = sys.argv[1], sys.argv[2]
with rasterio.open(src) as f:
    z = f.read(1).astype(np.float32); prof = f.profile
nod = prof.get("nodata")
z = np.where(z == nod, -9999, z).astype(np.float32) if nod is not None else z
r = rd.rdarray(z, no_data=-9999)
r.geotransform = prof["transform"].to_gdal()
rd.FillDepressions(r, epsilon=False, in_place=True)
out = np.asarray(r, np.float32)
prof = dict(driver="GTiff", height=out.shape[0], width=out.shape[1], count=1,
            dtype="float32", crs=prof["crs"], transform=prof["transform"], nodata=-9999)
with rasterio.open(dst, "w", **prof) as f:
    f.write(out, 1)
"""

RICHDEM_ACC = """
import sys, numpy as np, rasterio, richdem as rd
src, dst = sys.argv[1], sys.argv[2]
with rasterio.open(src) as f:
    z = f.read(1).astype(np.float32); prof = f.profile
r = rd.rdarray(z, no_data=prof.get("nodata", -9999))
r.geotransform = prof["transform"].to_gdal()
acc = rd.FlowAccumulation(r, method="D8")
if len(sys.argv) > 3:
    props = rd.FlowProportions(r, method="D8")
    np.save(sys.argv[3], np.asarray(props))
prof = dict(driver="GTiff", height=z.shape[0], width=z.shape[1], count=1, dtype="float64",
            crs=prof["crs"], transform=prof["transform"], nodata=-1)
with rasterio.open(dst, "w", **prof) as f:
    f.write(np.asarray(acc, np.float64), 1)
"""


def _grass_script(tif, outdir, export):
    exports = ""
    if export:
        exports = (f"r.out.gdal -c input=acc output={outdir}/tf_acc.tif format=GTiff "
                   f"type=Float64 --quiet\n"
                   f"r.out.gdal -c input=dir output={outdir}/tf_dir.tif format=GTiff "
                   f"type=Int32 --quiet\n")
    return textwrap.dedent(f"""\
        set -e
        r.in.gdal -o input={tif} output=dem --quiet
        g.region raster=dem
        r.terraflow -s elevation=dem filled=filled direction=dir swatershed=sw \\
            accumulation=acc tci=tci memory=2000 --quiet
        """) + exports


def _grass(tif, workdir, export=False):
    """argv of one ``grass --exec`` run in a fresh location (created by the call)."""
    loc = Path(tempfile.mkdtemp(dir=workdir)) / "loc"
    script = Path(workdir) / ("tf_export.sh" if export else "tf.sh")
    script.write_text(_grass_script(tif, workdir, export))
    return ["grass", "-c", "EPSG:32617", str(loc), "--exec", "bash", str(script)], loc.parent


def _inputs(workdir, rows, cols, seed, richdem_python):
    """The synthetic DEM (ASCII, then GeoTIFF) and RichDEM's fill of it (without RichDEM
    (``richdem_python`` None), terrain's)."""
    from terrain.io.synth import write_synth
    asc = workdir / f"dem{rows}x{cols}s{seed}.asc"
    tif = workdir / f"dem{rows}x{cols}s{seed}.tif"
    filled = workdir / f"filled{rows}x{cols}s{seed}{'' if richdem_python else 'terrain'}.tif"
    if not asc.exists():
        write_synth(asc, rows, cols, seed=seed)
    if not tif.exists():
        import rasterio
        from terrain.io import read_grid
        z, grid = read_grid(asc)
        with rasterio.open(tif, "w", driver="GTiff", height=rows, width=cols, count=1,
                           dtype="float32", crs="EPSG:32617", nodata=-9999,
                           transform=rasterio.Affine.from_gdal(*grid.geotransform)) as f:
            f.write(np.where(np.isnan(z), -9999, z).astype(np.float32), 1)
    if not filled.exists() and not richdem_python:
        import rasterio
        from terrain.hydrology import fill_depressions
        with rasterio.open(tif) as src:
            profile, z = src.profile, src.read(1, masked=True)
        f = fill_depressions(z.filled(np.nan).astype(np.float32), 8).filled
        with rasterio.open(filled, "w", **profile) as dst:
            dst.write(np.where(np.isnan(f), -9999, f).astype(np.float32), 1)
    elif not filled.exists():
        subprocess.run([richdem_python, "-c", RICHDEM_FILL, str(tif), str(filled)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return tif, filled


def _agreement(ours_dir, ours_acc, their_dir, their_acc):
    """Share of valid cells with the same direction; share of the same accumulation among
    the cells whose whole upstream has the same directions."""
    from terrain.hydrology import flow_accumulation
    valid = ours_dir != 255
    same = valid & (ours_dir == their_dir)
    # a cell's accumulation can agree only if every cell upstream routes alike: count the
    # disagreeing cells upstream (accumulate 1 at each disagreeing cell along our directions)
    bad_up = flow_accumulation(ours_dir, np.where(same, 0.0, 1.0))
    clean = same & (bad_up == 0)
    agree = clean & (ours_acc == their_acc)
    return (float(same.sum() / valid.sum()), float(clean.sum() / valid.sum()),
            float(agree.sum() / max(1, clean.sum())))


def _richdem_directions(props_path):
    """ESRI codes from RichDEM's D8 proportions (its neighbours 1..8: W, NW, N, NE, E, SE,
    S, SW)."""
    p = np.load(props_path)
    codes = np.array([0, 16, 32, 64, 128, 1, 2, 4, 8], np.uint8)
    k = np.argmax(p[:, :, 1:], axis=2) + 1
    has = p[:, :, 1:].max(axis=2) > 0
    out = np.where(has, codes[k], 0).astype(np.uint8)
    return np.where(p[:, :, 0] < 0, 255, out)


def bench_flow_command(args):
    """``python -m benchmarks flow [--rows R --cols C] [--repeat N] [--workdir DIR]``."""
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="terrain-bench-flow-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rd_py = args.richdem_python if Path(args.richdem_python).exists() else None
    if rd_py is None:
        print(f"RichDEM: not run (no {args.richdem_python}; give --richdem-python)")
    tif, filled = _inputs(workdir, args.rows, args.cols, args.seed, rd_py)
    env = child_env()
    out = workdir / "ours.flow.zarr"
    runs = {"terrain flow --filled": [sys.executable, "-m", "terrain.run", "flow", str(filled),
                                      "--filled", "-o", str(out), "--overwrite",
                                      "--backend", args.backend or "auto"]}
    if rd_py:
        runs["RichDEM FlowAccumulation D8"] = [rd_py, "-c", RICHDEM_ACC, str(filled),
                                               str(workdir / "rd_acc.tif")]
    has_grass = shutil.which("grass") is not None
    best = {name: (float("inf"), float("inf"), 0) for name in runs}
    if has_grass:
        best["GRASS r.terraflow -s (fill + flow)"] = (float("inf"), float("inf"), 0)
    for _ in range(args.repeat):
        for name, argv in runs.items():
            wall, rss, cpu = timed_child(argv, env)
            best[name] = tuple(min(a, b) for a, b in zip(best[name], (cpu, wall, -rss)))
        if has_grass:
            argv, loc = _grass(tif, workdir)
            try:
                wall, rss, cpu = timed_child(argv, env)
            finally:
                shutil.rmtree(loc, ignore_errors=True)
            name = "GRASS r.terraflow -s (fill + flow)"
            best[name] = tuple(min(a, b) for a, b in zip(best[name], (cpu, wall, -rss)))
    print(f"flow {args.rows} x {args.cols} (terrain synth, seed {args.seed}); minimum of "
          f"{args.repeat} interleaved runs; CPU = user + system seconds of the process")
    print(f"{'':38s} {'CPU s':>8s} {'wall s':>8s} {'peak RSS':>10s}")
    for name, (cpu, wall, rss) in best.items():
        print(f"{name:38s} {cpu:8.2f} {wall:8.2f} {-rss / 2**20:8.0f} MB")
    if args.agreement:
        import rasterio
        import zarr
        g = zarr.open_group(str(out), mode="r")
        d, acc = g["direction"][:], g["accumulation"][:]
        if rd_py:
            subprocess.run([rd_py, "-c", RICHDEM_ACC, str(filled), str(workdir / "rd_acc.tif"),
                            str(workdir / "rd_props.npy")], check=True)
            with rasterio.open(workdir / "rd_acc.tif") as f:
                racc = f.read(1)
            rdir = _richdem_directions(workdir / "rd_props.npy")
            print("RichDEM: same direction %.3f, whole upstream alike %.3f, same accumulation "
                  "there %.4f" % _agreement(d, acc, rdir, racc))
        if has_grass:
            argv, loc = _grass(tif, workdir, export=True)
            subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
            shutil.rmtree(loc, ignore_errors=True)
            with rasterio.open(workdir / "tf_dir.tif") as f:
                tdir = f.read(1)
            with rasterio.open(workdir / "tf_acc.tif") as f:
                tacc = f.read(1)
            tdir = np.where((tdir > 0) & (tdir <= 128), tdir, 0).astype(np.uint8)
            print("r.terraflow -s: same direction %.3f, whole upstream alike %.3f, same "
                  "accumulation there %.4f" % _agreement(d, acc, tdir, tacc))
    print(json.dumps({"workdir": str(workdir)}))
    return verdict([], unchecked="the peers' directions and accumulations follow other "
                   "conventions; --agreement prints the shares that agree")
