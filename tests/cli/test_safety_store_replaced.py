"""An input store replaced (``mv new.zarr IN.zarr``, what ``--overwrite`` does from outside)
or removed while a command reads it: one line naming the store, exit 2, nothing published,
as for a DEM rewritten during a run (tests/cli/test_safety_stores.py). Before, streams
published lines of both stores, watershed and path the old store's result, verify a
violation of a good store (exit 1), and a removal was a traceback."""

import importlib
import os
import shutil

import pytest

from cli import run_main

A, B = "a", "b"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The fill, flow, cost-distance and tile stores of two synthetic DEMs."""
    from terrain.io import write_synth
    from terrain.run import main
    d = tmp_path_factory.mktemp("stores")
    for seed, name in enumerate((A, B), start=1):
        write_synth(d / f"{name}.asc", 96, 80, seed=seed)
        for argv in (("fill", "-o", f"fill-{name}.zarr"), ("flow", "-o", f"flow-{name}.zarr"),
                     ("cost-distance", "--source-cell", "5,5", "-o", f"cost-{name}.zarr"),
                     ("ingest", "-o", f"tiles-{name}.zarr")):
            assert main([argv[0], str(d / f"{name}.asc"), *(str(d / a) if a.endswith(".zarr")
                                                            else a for a in argv[1:]),
                         "--scheduler", "synchronous"]) == 0
    return d


def _while_read(monkeypatch, module, name, store, new=None):
    """``module.name`` (called once the command has read part of ``store``) that first
    replaces ``store`` by a copy of ``new`` (renamed into place, the old one renamed away),
    or removes it (``new`` None)."""
    module = importlib.import_module(module)
    real = getattr(module, name)

    def then_read(*a, **k):
        if new is None:
            shutil.rmtree(store)
        else:
            shutil.copytree(new, store.with_name("new.zarr"))
            os.rename(store, store.with_name("gone.zarr"))
            os.rename(store.with_name("new.zarr"), store)
            shutil.rmtree(store.with_name("gone.zarr"))
        return real(*a, **k)
    monkeypatch.setattr(module, name, then_read)


CASES = {  # command: (its input's kind, the reader called once part of it is read, argv)
    "streams": ("flow", "pipelines.watershed", "stream_lines",
                ("--threshold", "20", "-o", "out.gpkg")),
    "watershed": ("flow", "pipelines.watershed", "label_outlets",
                  ("--outlet-cell", "40,40", "-o", "out.tif")),
    "path": ("cost", "pipelines.cost_distance", "trace_paths", ("--to-cell", "40,40", "-o",
                                                               "out.gpkg")),
    "plot": ("flow", "terrain.plot", "render_hydrology", ("-o", "out.png")),
    "verify": ("fill", "terrain.verify", "verify_fill", ()),
    "info": ("tiles", "pipelines.info", "describe_store", ()),
}


def _run(capsys, monkeypatch, tmp_path, stores, command, replaced):
    kind, module, reader, argv = CASES[command]
    store = tmp_path / "IN.zarr"
    shutil.copytree(stores / f"{kind}-{A}.zarr", store)
    _while_read(monkeypatch, module, reader, store,
                stores / f"{kind}-{B}.zarr" if replaced else None)
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_main(capsys, command, "IN.zarr", *argv, scheduler=None)
    out = argv[-1] if "-o" in argv else None
    assert rc == 2 and err == ("terrain: IN.zarr: changed while this run read it (written by "
                               "another command): "
                               + (f"{out} not written; " if out else "") + "run it again\n"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == (["IN.zarr"] if replaced else [])


@pytest.mark.parametrize("command", ["streams", "watershed", "path", "plot", "info"])
def test_a_store_replaced_while_read_is_refused(capsys, monkeypatch, tmp_path, stores, command):
    _run(capsys, monkeypatch, tmp_path, stores, command, replaced=True)


def test_a_fill_store_replaced_while_verified_is_not_a_violation(capsys, monkeypatch, tmp_path,
                                                                 stores):
    # it was `FAIL cell (...): depth 0 is not filled - elevation`, exit 1: a good store
    # flagged as broken
    _run(capsys, monkeypatch, tmp_path, stores, "verify", replaced=True)


@pytest.mark.parametrize("command", ["streams", "watershed", "path", "plot", "verify", "info"])
def test_a_store_removed_while_read_is_one_line(capsys, monkeypatch, tmp_path, stores, command):
    # streams, plot and verify: `KeyError: 'accumulation'`, `FileNotFoundError: IN.zarr/depth:
    # no Zarr array` tracebacks, exit 1
    _run(capsys, monkeypatch, tmp_path, stores, command, replaced=False)
