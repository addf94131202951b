"""Every command's ``--json`` names its input and the output it wrote by the same keys."""

import json

from cli import HEADER, ROWS, run_main

#: (argv, its input, its output or None, whether it takes --scheduler), in an order where each
#: command's input exists
COMMANDS = [
    (["mst", "dem.asc", "-o", "m.zarr"], "dem.asc", "m.zarr", True),
    (["fill", "dem.asc", "-o", "f.zarr"], "dem.asc", "f.zarr", True),
    (["flow", "dem.asc", "-o", "fl.zarr"], "dem.asc", "fl.zarr", True),
    (["cost-distance", "dem.asc", "--source-cell", "0,0", "-o", "c.zarr"], "dem.asc", "c.zarr",
     True),
    (["watershed", "fl.zarr", "--outlet-cell", "2,3", "-o", "w.tif"], "fl.zarr", "w.tif", False),
    (["streams", "fl.zarr", "--threshold", "2", "-o", "s.gpkg"], "fl.zarr", "s.gpkg", False),
    (["bfs", "g.txt", "--source", "0", "--out", "b.csv"], "g.txt", "b.csv", True),
    (["sssp", "g.txt", "--source", "0", "--out", "s.csv"], "g.txt", "s.csv", True),
    (["diameter", "g.txt", "--path-out", "p.txt"], "g.txt", "p.txt", True),
    (["mst", "g.txt", "-o", "gm.csv"], "g.txt", "gm.csv", True),
    (["mst", "dem.asc", "-o", "plan.zarr", "--dry-run"], "dem.asc", "plan.zarr", True),
    (["batch", "mst", "dem.asc", "-o", "out"], "dem.asc", "out/dem.mst.zarr", True),
    (["info", "m.zarr"], "m.zarr", None, False),
    (["verify", "m.zarr"], "m.zarr", None, False),
]


def test_every_command_names_its_input_and_output_by_the_same_keys(tmp_path, monkeypatch,
                                                                    capsys):
    """The graph commands said ``graph`` and ``out`` (``diameter``: ``path_out``), ``info``
    ``store`` and ``verify`` ``result`` where the grid commands, ``batch``'s manifest and the
    dry-run plan say ``input`` and ``output``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dem.asc").write_text(HEADER + ROWS)
    (tmp_path / "g.txt").write_text("0 1 1.0\n1 2 2.0\n2 0 1.5\n2 3 1\n")
    inputs, outputs = {}, {}
    for argv, given, written, scheduled in COMMANDS:
        rc, out, err = run_main(capsys, *argv, "--json",
                                scheduler="synchronous" if scheduled else None)
        assert rc == 0, (argv, err)
        said = json.loads(out)
        for i, summary in enumerate(said if isinstance(said, list) else [said]):
            name = " ".join(argv) + (f" row {i}" if isinstance(said, list) else "")
            inputs[name] = sorted(k for k, v in summary.items() if v == given)
            if written:
                outputs[name] = sorted(k for k, v in summary.items() if v == written)
    assert {n: k for n, k in inputs.items() if k != ["input"]} == {}, inputs
    assert {n: k for n, k in outputs.items() if k != ["output"]} == {}, outputs
    assert len(outputs) == sum(1 for *_, written, _ in COMMANDS if written)
