"""Shared test set-up: the ``gpu`` marker skips without a GPU; helpers live in tests/backends.py."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from terrain.backend import gpu_available  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and CuPy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def backend(request):
    """Each test using this fixture runs on the CPU and, where there is one, on the GPU."""
    from terrain.backend import get_backend
    return get_backend(request.param)


@pytest.fixture
def small_shards(monkeypatch):
    import terrain.tiles.store as store
    monkeypatch.setattr(store, "SHARD_TARGET_SIDE", 16)  # groups = shards of 16 cells
