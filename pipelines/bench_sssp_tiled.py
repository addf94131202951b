"""Per-phase timings of the tiled SSSP (``terrain.grid.sssp_tiled``) beside the in-core one.

``python -m pipelines.bench_sssp_tiled --size 1024 --tile 16 --heights 0,1`` prints one JSON
line per measurement: phase 1 alone (:func:`tile_boundaries` on the whole grid), then for each
height cap a full run (index = phase 1 + bottom-up matrices, sources up, top + down, phase 3)
and a second query with two new sources reusing the index; finally the in-core
:func:`grid_sssp` on the same grid and whether the distances are equal. The DEM is random
integers 0..99 with ``absdiff`` (integer costs: the two algorithms must agree bit for bit),
8-connected, one source in the centre. Compilation is done before timing.
"""

import argparse
import json
import time

import numpy as np

from terrain.grid.sssp import grid_sssp
from terrain.grid.sssp_tiled import TiledSpec, tile_boundaries, tiled_sssp

from ._bench import peak_rss_bytes


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--tile", type=int, default=16)
    p.add_argument("--heights", default="0", help="comma-separated caps ('None': default)")
    p.add_argument("--backend", default="cpu")
    a = p.parse_args(argv)
    n, tile = a.size, a.tile
    heights = [None if h == "None" else int(h) for h in a.heights.split(",")]
    z = np.random.default_rng(0).integers(0, 100, (n, n)).astype(np.float32)
    tiled_sssp(z[:64, :64], [(3, 3)], tile=16, backend=a.backend)  # compile
    spec = TiledSpec((n, n), tile, 8)
    t = time.perf_counter()
    tile_boundaries(spec, z, np.ones_like(z), (0, n, 0, n), a.backend)
    phase1 = round(time.perf_counter() - t, 2)
    print(json.dumps({"size": n, "tile": tile, "phase1_alone_s": phase1}), flush=True)
    r = None
    for h in heights:
        r = tiled_sssp(z, [(n // 2, n // 2)], tile=tile, backend=a.backend, max_height=h)
        t = time.perf_counter()
        r2 = tiled_sssp(z, [(1, 1), (n - 2, 5)], tile=tile, backend=a.backend, reuse=r.index)
        print(json.dumps({"size": n, "tile": tile, "height": r.stats["height"],
                          "times_s": {k: round(v, 2) for k, v in r.stats["times"].items()},
                          "reuse_query_s": round(time.perf_counter() - t, 2),
                          "reuse_times_s": {k: round(v, 2) for k, v in r2.stats["times"].items()},
                          "peak_rss_bytes": peak_rss_bytes()}), flush=True)
    t = time.perf_counter()
    ref = grid_sssp(z, [(n // 2, n // 2)], backend=a.backend)
    print(json.dumps({"in_core_grid_sssp_s": round(time.perf_counter() - t, 2),
                      "equal": bool(r is None or np.array_equal(ref.distance, r.distance))}),
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
