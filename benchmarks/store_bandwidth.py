"""``python -m benchmarks.store_bandwidth DEM.zarr MST.zarr``: what the host does with a
store at its own rate, beside an ``mst`` run of it: every shard of the DEM's ``elevation``
decoded, then the result's ``mst`` mask decoded, encoded and written again (into a
``probe`` array of ``MST.zarr``, removed after), on 16 and on 8 threads, with the run's own
readers and writers (:func:`terrain.tiles.store.read_block`, ``write_block``). Prints one
line a measurement (docs/scale.md, "Measured points").
"""

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

import zarr

from terrain.tiles import open_store
from terrain.tiles.store import (checksummed, read_block, result_compressors, shard_windows,
                                 write_block)

from .common import verdict


def _stored_bytes(folder):
    return sum(os.path.getsize(os.path.join(root, f))
               for root, _, files in os.walk(folder) for f in files)


def _timed(threads, fn, items):
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        out = list(pool.map(fn, items))
    return out, time.perf_counter() - t0


def main(dem, mst):
    store = open_store(dem)
    side = store.tile * store.tiles_per_shard
    windows = shard_windows(store.shape, side)
    stored = _stored_bytes(os.path.join(dem, "elevation"))
    print(f"{len(windows)} shards of {side}²; elevation {stored / 1e9:.2f} GB stored, mask "
          f"{_stored_bytes(os.path.join(mst, 'mst')) / 1e9:.2f} GB stored")
    for threads in (16, 8):
        sizes, dt = _timed(threads, lambda w: read_block(dem, "elevation", w).nbytes, windows)
        print(f"decode elevation, {threads} threads: {sum(sizes) / 1e9:.2f} GB in {dt:.2f} s "
              f"({sum(sizes) / 1e9 / dt:.2f} GB/s decoded)")
    masks, dt = _timed(16, lambda w: read_block(mst, "mst", w), windows)
    raw = sum(m.nbytes for m in masks)
    print(f"decode mask, 16 threads: {raw / 1e9:.2f} GB in {dt:.2f} s")
    group = zarr.open_group(mst, mode="a")
    group.create_array("probe", shape=store.shape, dtype="uint8", chunks=(store.tile,) * 2,
                       shards=(side, side), fill_value=0,
                       compressors=checksummed(result_compressors("codes")),
                       config={"write_empty_chunks": False}, overwrite=True)
    try:
        for threads in (16, 8):
            _, dt = _timed(threads, lambda a: write_block(mst, "probe", *a),
                           list(zip(windows, masks)))
            print(f"encode + write mask, {threads} threads: {dt:.2f} s "
                  f"({raw / 1e9 / dt:.2f} GB/s of mask)")
    finally:
        del group["probe"]
    return verdict([], unchecked="the host's rates alone, no contender")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m benchmarks.store_bandwidth",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("dem", metavar="DEM.zarr", help="a tile store (its elevation is decoded)")
    ap.add_argument("mst", metavar="MST.zarr", help="the mst output of DEM.zarr")
    args = ap.parse_args()
    raise SystemExit(main(args.dem, args.mst))
