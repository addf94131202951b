"""``python -m benchmarks cost-distance --peers``: the GIS user's whole job, GeoTIFF in,
GeoTIFF out, as three processes timed side by side.

The input: friction uniform in [1, 2] (:func:`benchmarks.common.friction_grid`, seed
0) as a tiled DEFLATE float32 GeoTIFF in UTM, cell size 1; one source at the centre cell,
8-connected, the friction model (cost of an arc = its length × the mean friction of its two
cells: r.cost's, ``MCP_Geometric``'s and ``--cost friction``'s). The processes:

* terrain: ``python -m terrain.run cost-distance F.tif --source-cell R,C --cost friction
  --friction F.tif -o OUT.zarr --geotiff-dir DIR --overwrite`` (the Zarr store and three
  Cloud-Optimized GeoTIFFs: distance, allocation, backlink), with ``--terrain-python``
  as a user's installation runs it (its own environment: the test extra's packages, such
  as boto3, which rasterio imports when present, stay out);
* GRASS GIS: a new location from the GeoTIFF, ``r.in.gdal``, ``r.cost`` (8 neighbours, no
  knight's move) from the centre's map coordinates, ``r.out.gdal`` of the distances as a
  tiled DEFLATE GeoTIFF (``grass`` on the PATH, or ``--grass``);
* scikit-image: a script (``--skimage-python``: a virtual environment with
  ``pip install scikit-image rasterio``) that reads the GeoTIFF with rasterio, runs
  ``MCP_Geometric.find_costs`` from the centre and writes the distances as a tiled DEFLATE
  GeoTIFF.

The peers write one layer (distances), terrain three; none of them builds overviews but
terrain. Runs alternate (terrain, GRASS, skimage, terrain, ...); each figure is the
minimum over ``--repeat`` runs of the wall seconds and, separately, of the child's user +
system CPU seconds (``wait4``: its own and its waited-for children's, which a loaded
machine does not inflate as it does the wall), and the largest peak RSS of the process or
any child it waited for. The machine's load average is printed before and after. The
peers' distances are compared with terrain's ``distance.tif``.
"""

import os
import shutil
from pathlib import Path

import numpy as np

from .common import MAX_REL_DIFF, friction_grid, terrain_command, timed_child, verdict

__all__ = ["bench_cost_peers", "GRASS_SCRIPT", "SKIMAGE_SCRIPT", "friction_tif"]

#: bash: GRASS_SCRIPT GRASS FRICTION.tif OUT.tif X Y
GRASS_SCRIPT = """\
set -e
grass=$1; in=$(realpath "$2"); out=$(realpath -m "$3"); x=$4; y=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$grass" -c "$in" "$tmp/loc" -e >/dev/null 2>&1
"$grass" "$tmp/loc/PERMANENT" --exec bash -c "
set -e
r.in.gdal -o input='$in' output=fr --quiet
g.region raster=fr
r.cost input=fr output=cost start_coordinates=$x,$y --quiet
r.out.gdal input=cost output='$out' format=GTiff createopt=TILED=YES,COMPRESS=DEFLATE \
  --quiet --overwrite
" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
"""

#: python SKIMAGE_SCRIPT FRICTION.tif OUT.tif X Y
SKIMAGE_SCRIPT = """\
import sys
import numpy as np
import rasterio
from skimage.graph import MCP_Geometric
src, out, x, y = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
with rasterio.open(src) as ds:
    fr = ds.read(1).astype(np.float64)
    profile = ds.profile
    row, col = ds.index(x, y)
costs, _ = MCP_Geometric(fr, fully_connected=True).find_costs([(row, col)])
profile.update(dtype="float64", tiled=True, blockxsize=256, blockysize=256,
               compress="deflate", nodata=None)
with rasterio.open(out, "w", **profile) as dst:
    dst.write(costs, 1)
"""

X0, Y0 = 500000.0, 4000000.0  # the lower left corner (UTM 17N), cell size 1


def friction_tif(workdir, side, seed=0):
    """The friction GeoTIFF of one side (made once, reused)."""
    import rasterio
    from rasterio.transform import Affine

    tif = Path(workdir) / f"friction-{side}-s{seed}.tif"
    if not tif.exists():
        part = tif.with_name(tif.name + ".partial")
        with rasterio.open(part, "w", driver="GTiff", height=side, width=side, count=1,
                           dtype="float32", crs="EPSG:32617",
                           transform=Affine(1.0, 0, X0, 0, -1.0, Y0 + side), tiled=True,
                           compress="deflate") as dst:
            dst.write(friction_grid(side, side, seed), 1)
        os.replace(part, tif)
    return tif


def _read(tif):
    import rasterio
    with rasterio.open(tif) as ds:
        return ds.read(1).astype(np.float64)


def _rel(a, b):
    if (np.isfinite(a) != np.isfinite(b)).any():
        return float("inf")
    ok = np.isfinite(a)
    return float(np.max(np.abs(a[ok] - b[ok]) / np.maximum(np.abs(b[ok]), 1e-300)))


def _load():
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def bench_cost_peers(args):
    """Print the table of the module docstring for every side of ``--sides``."""
    work = Path(args.workdir or "/tmp/terrain-bench-cost-peers")
    work.mkdir(parents=True, exist_ok=True)
    grass = None if args.grass == "none" else args.grass or shutil.which("grass")
    skimage = None if args.skimage_python == "none" else args.skimage_python
    (work / "grass_cost.sh").write_text(GRASS_SCRIPT)
    (work / "skimage_cost.py").write_text(SKIMAGE_SCRIPT)
    ours, env = terrain_command(args.terrain_python)
    sides = [int(s) for s in str(args.sides).split(",")]
    checks, goals = [], []
    print(f"cost distance, whole processes: friction U[1,2] GeoTIFF (seed {args.seed}), centre "
          f"source, 8-connected; {args.repeat} interleaved runs, minimum wall and minimum CPU "
          f"(user + sys) seconds; {os.cpu_count()} CPUs, load average {_load()}")
    print(f"{'side':>6s} {'process':22s} {'wall s':>8s} {'CPU s':>8s} {'wall/ours':>10s} "
          f"{'CPU/ours':>9s} {'peak MB':>8s}  max rel. diff of distances vs ours")
    for side in sides:
        tif = friction_tif(work, side, args.seed)
        r = c = side // 2
        x, y = X0 + c + 0.5, Y0 + side - r - 0.5
        out = work / f"out-{side}"
        out.mkdir(exist_ok=True)
        cmds = {"terrain": [*ours, "cost-distance", str(tif),
                            "--source-cell", f"{r},{c}", "--cost", "friction", "--friction",
                            str(tif), "-o", str(out / "terrain.zarr"), "--geotiff-dir",
                            str(out / "terrain"), "--overwrite", "--backend", "cpu"]}
        if grass:
            cmds["GRASS r.cost"] = ["bash", str(work / "grass_cost.sh"), grass, str(tif),
                                    str(out / "grass.tif"), str(x), str(y)]
        if skimage:
            cmds["skimage MCP_Geometric"] = [skimage, str(work / "skimage_cost.py"),
                                             str(tif), str(out / "skimage.tif"), str(x), str(y)]
        runs = {name: [] for name in cmds}
        for _ in range(args.repeat):
            for name, cmd in cmds.items():
                if name != "terrain":
                    (out / f"{'grass' if 'GRASS' in name else 'skimage'}.tif").unlink(
                        missing_ok=True)
                runs[name].append(timed_child(cmd, env if name == "terrain" else None))
        distances = _read(out / "terrain" / "distance.tif")
        best = {n: (min(w for w, _, _ in v), min(u for _, _, u in v), max(m for _, m, _ in v))
                for n, v in runs.items()}
        for name, (wall, cpu, peak) in best.items():
            note = "-"
            if name != "terrain":
                theirs = _read(out / ("grass.tif" if "GRASS" in name else "skimage.tif"))
                diff = _rel(theirs, distances)
                note = f"{diff:.1e}"
                checks.append((f"{side}² distances vs {name}'s (max rel. diff {note})",
                               diff <= MAX_REL_DIFF))
                if side >= 1024:
                    goals.append((f"{side}² >= 3x {name} in CPU seconds",
                                  cpu / best["terrain"][1] >= 3))
            print(f"{side:6d} {name:22s} {wall:8.2f} {cpu:8.2f} "
                  f"{wall / best['terrain'][0]:10.2f} {cpu / best['terrain'][1]:9.2f} "
                  f"{peak / 1e6:8.0f}  {note}",
                  flush=True)
    print(f"load average at the end {_load()}")
    return verdict(checks, goals)
