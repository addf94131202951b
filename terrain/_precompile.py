"""Compile terrain's Numba kernels into their on-disk cache: ``python -m terrain._precompile``.

``setup.py`` runs it on the build tree so that ``pip install .`` ships the
``numba.njit(cache=True)`` kernels compiled (Numba keys the cache by the source's content,
its version, the Python version and the CPU; elsewhere it compiles as before). It runs the
real commands on tiny inputs on the CPU and the synchronous scheduler, so the cached
signatures are the ones a real run asks for; a command that fails is reported and skipped.
"""

import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["warm_up"]


def _write_grid(path, rows=24, cols=20):
    lines = [f"ncols {cols}", f"nrows {rows}", "xllcorner 0", "yllcorner 0", "cellsize 10",
             "NODATA_value -9999"]
    lines += [" ".join("-9999" if (r * 7 + c * 3) % 23 == 0
                       else f"{(r * 31 + c * 17) % 97 + 0.25 * c:.2f}" for c in range(cols))
              for r in range(rows)]
    path.write_text("\n".join(lines) + "\n")


def _write_edges(path, n=64):
    path.write_text("".join(f"{i} {(i * 5 + 1) % n} {i % 7 + 1}\n{i} {(i + 1) % n} {i % 3 + 1}\n"
                            for i in range(n)))


def _commands(tmp):
    grid, edges, tall = tmp / "warm.asc", tmp / "warm.txt", tmp / "tall.asc"
    _write_grid(grid)
    # two shards of rows (2048 and 8): the tiled routes' steps between groups, which a grid
    # of one shard never takes (a first tiled fill of 8192² after install compiled them for
    # 7 s of its 22 s)
    _write_grid(tall, rows=2056, cols=24)
    _write_edges(edges)
    cpu = ["--backend", "cpu", "--scheduler", "synchronous"]
    return [
        ["mst", str(grid), "-o", str(tmp / "warm.mst.zarr"), *cpu],
        ["ingest", str(grid), "-o", str(tmp / "warm.zarr"), *cpu[2:]],
        ["synth", "--rows", "8", "--cols", "8", "-o", str(tmp / "synth.asc")],
        ["bfs", str(edges), "--source", "0", *cpu],
        ["diameter", str(edges), *cpu],
        ["sssp", str(edges), "--source", "0", *cpu],
        ["sssp", str(edges), "--source", "0", "--algorithm", "crauser", *cpu],
        ["sssp", str(edges), "--source", "0", "--algorithm", "delta", *cpu],
        ["mst", str(edges), "-o", str(tmp / "warm.graph-mst.npz"), *cpu[:2]],
        # in core the fill and flow run C; their tiled routes (the walk's kernels) Numba
        ["fill", str(tall), "-o", str(tmp / "warm.fill.zarr"), "--route", "tiled", "--tile",
         "8", *cpu],
        ["flow", str(tall), "-o", str(tmp / "warm.flow.zarr"), "--route", "tiled", "--tile",
         "8", *cpu],
        # in core the cost distance runs C; its tiled algorithm's kernels are Numba (a first
        # tiled run of the sample compiled them for 18 s); levels of boundary graphs, which a
        # grid under 16384 tiles does not build unless asked, for their Dijkstras (4.4 s of a
        # first tiled run of a larger grid)
        ["cost-distance", str(tall), "--source-cell", "5,5", "-o", str(tmp / "warm.cost.zarr"),
         "--route", "tiled", "--max-height", "3", *cpu],
    ]


def warm_up(commands=None, verbose=True):
    """Run every command (or those named in ``commands``) once on tiny inputs; return the
    names of those that failed."""
    from terrain.run import main

    failed = []
    if commands is None or "mst" in commands:
        failed += _warm_tiled_mst(verbose)
    with tempfile.TemporaryDirectory(prefix="terrain-precompile-") as d:
        for argv in _commands(Path(d)):
            if commands is not None and argv[0] not in commands:
                continue
            t0 = time.perf_counter()
            sink = io.StringIO()
            try:
                with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                    status = main(argv)
            except Exception as e:  # noqa: BLE001 - a warm-up never breaks a build
                status, sink = 1, io.StringIO(f"{type(e).__name__}: {e}")
            if status:
                failed.append(argv[0])
            if verbose:
                print(f"terrain precompile: {argv[0]:9s} {'ok' if not status else 'FAILED'} "
                      f"{time.perf_counter() - t0:5.1f} s"
                      + ("" if not status else f" ({sink.getvalue().strip()[-200:]})"),
                      file=sys.stderr)
    return failed


def _warm_tiled_mst(verbose):
    """The grid MST's tiled kernels (Borůvka per tile, reductions, merges): a tiny grid's
    ``mst`` runs in core (no Numba), a large one's on the CPU takes tiles."""
    import numpy as np

    from terrain.grid import grid_mst
    t0 = time.perf_counter()
    z = np.arange(24 * 20, dtype=np.float32).reshape(24, 20) % 7
    z[3, 4] = np.nan
    try:
        for connectivity in (4, 8):
            grid_mst(z, connectivity, tile=8, group_tiles=2, backend="cpu", in_core=False)
        failed = []
    except Exception:  # noqa: BLE001 - a warm-up never breaks a build
        failed = ["mst (tiled)"]
    if verbose:
        print(f"terrain precompile: mst tiles {'ok' if not failed else 'FAILED'} "
              f"{time.perf_counter() - t0:5.1f} s", file=sys.stderr)
    return failed


if __name__ == "__main__":  # python -m terrain._precompile [COMMAND ...]
    sys.exit(1 if warm_up(sys.argv[1:] or None) else 0)
