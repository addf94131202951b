"""The grid commands (mst, fill, flow, cost-distance) read their input alike
(:func:`pipelines._command.open_input`): a folder that is no tile store, and a URL where no
store is, are refused in one message naming them as given."""

import pytest

from terrain.errors import InputError


def _commands():
    from pipelines.cost_distance import run_cost_distance
    from pipelines.fill import run_fill
    from pipelines.flow import run_flow
    from pipelines.mst import run_mst
    return {"mst": run_mst, "fill": run_fill, "flow": run_flow,
            "cost-distance": lambda i, o: run_cost_distance(i, o, cells=["1,1"])}


@pytest.mark.parametrize("command", ["mst", "fill", "flow", "cost-distance"])
def test_a_folder_that_is_no_store_is_said_so(tmp_path, command):
    # fill, flow and cost-distance said "is a directory, not a grid file" of a folder, where
    # a folder can be the input: a tile store
    folder = tmp_path / "dem"
    folder.mkdir()
    with pytest.raises(InputError, match=f"^{folder}: is a directory, not a grid file or a "
                                         "tile store written by ingest$"):
        _commands()[command](folder, tmp_path / "o.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dem"]


@pytest.mark.parametrize("command", ["mst", "fill", "flow", "cost-distance"])
def test_a_url_holding_no_store_is_named_as_given(tmp_path, command):
    # fill, flow and cost-distance took the URL for a path: "memory:/b/none.zarr: no such file"
    with pytest.raises(InputError, match="^memory://b/none.zarr: no such store$"):
        _commands()[command]("memory://b/none.zarr", tmp_path / "o.zarr")
    assert list(tmp_path.iterdir()) == []
