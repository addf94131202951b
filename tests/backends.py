"""The shared harness asserting that every backend gives what the CPU (NumPy/Numba) gives.

    from backends import assert_backends_identical
    assert_backends_identical(lambda backend: bfs(graph, 0, backend=backend).dist)

The function is called once per backend with a :class:`terrain.backend.Backend`; results
(arrays, scalars, tuples, lists, dicts, dataclasses of those) must be identical, bit for
bit, NaN where NaN. Without a GPU the call skips the test (use it in ``gpu``-marked tests).
"""

import dataclasses

import numpy as np
import pytest

from terrain.backend import get_backend, gpu_available

__all__ = ["assert_identical", "assert_backends_identical", "run_on_backends"]


def _host(x):
    if hasattr(x, "get") and not isinstance(x, (dict, np.ndarray)):
        return x.get()  # a CuPy array
    return x


def assert_identical(a, b, path="result"):
    """Recursive exact comparison with a message naming the differing part."""
    a, b = _host(a), _host(b)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        a, b = dataclasses.asdict(a), dataclasses.asdict(b)
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys differ"
        for k in a:
            assert_identical(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{path}[{i}]")
    elif isinstance(a, (np.ndarray, np.generic)) or isinstance(b, (np.ndarray, np.generic)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, f"{path}: shapes {a.shape} != {b.shape}"
        assert a.dtype == b.dtype, f"{path}: dtypes {a.dtype} != {b.dtype}"
        np.testing.assert_array_equal(a, b, err_msg=path, strict=True)
    elif isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        pass
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def run_on_backends(fn, *args, **kwargs):
    """``{"cpu": fn(cpu, ...), "gpu": fn(gpu, ...)}``; skips the test without a GPU."""
    if not gpu_available():
        pytest.skip("needs a CUDA GPU and CuPy")
    return {name: fn(get_backend(name), *args, **kwargs) for name in ("cpu", "gpu")}


def assert_backends_identical(fn, *args, **kwargs):
    """Run ``fn(backend, *args, **kwargs)`` on the CPU and the GPU; assert identical results."""
    results = run_on_backends(fn, *args, **kwargs)
    assert_identical(results["cpu"], results["gpu"], path=getattr(fn, "__name__", "result"))
    return results["cpu"]
