"""terrain._transfer, the GPU modules' host <-> device copies through a ring of pinned
slots: run on the host with a fake CuPy (copies are memmoves) and tiny slots so the ring
wraps many times; the GPU runs are in test_mst_graph.py and test_sssp_gpu.py."""

import contextlib
import ctypes
import types

import numpy as np
import pytest

import terrain._transfer as transfer


class FakeCupy:
    """Just enough of CuPy for the transfer ring on the host: device arrays are NumPy
    arrays, copies are memmoves, events and streams are no-ops."""

    class ndarray(np.ndarray):
        @property
        def data(self):
            return types.SimpleNamespace(ptr=self.ctypes.data)

    class _Event:
        def __init__(self, **kw):
            pass

        def record(self, stream=None):
            pass

        def synchronize(self):
            pass

    def __init__(self):
        device = types.SimpleNamespace(id=0)
        self.cuda = types.SimpleNamespace(
            alloc_pinned_memory=bytearray, Event=self._Event,
            Device=lambda *i: contextlib.nullcontext(device) if i else device,
            get_current_stream=lambda: types.SimpleNamespace(ptr=0, synchronize=lambda: None),
            runtime=types.SimpleNamespace(
                memcpyHostToDevice=1, memcpyDeviceToHost=2,
                memcpyAsync=lambda dst, src, size, kind, stream: ctypes.memmove(dst, src, size)))

    def empty(self, shape, dtype):
        return np.full(shape, 7, dtype).view(self.ndarray)  # garbage shows


@pytest.fixture
def tiny_slots(monkeypatch):
    monkeypatch.setattr(transfer, "SLOT_BYTES", 4096)


def test_to_device_in_many_pieces_narrowing_on_the_way(tiny_slots):
    """int64 -> int32 and int32 -> uint8 narrowed by the workers piece by piece (the ring
    wraps), equal dtypes copied as they are; a value that does not fit is reported."""
    cp = FakeCupy()
    rng = np.random.default_rng(1)
    indptr = np.cumsum(rng.integers(0, 9, 50_001)).astype(np.int64)
    indices = rng.integers(-2**31, 2**31 - 1, 70_003).astype(np.int32)
    weights = rng.integers(1, 101, 70_003).astype(np.int32)
    floats = rng.random(3_333).astype(np.float32)
    host = [indptr, indices, weights, floats, np.zeros(0, np.int64)]
    wire = [np.int32, np.int32, np.uint8, np.float32, np.int32]
    device = [cp.empty(a.shape, d) for a, d in zip(host, wire)]
    pieces = transfer._pieces(host, device)
    assert len(pieces) > 3 * (transfer.workers()[1] + transfer.SPARE_SLOTS)
    assert {c for _, _, c in pieces} >= {512, 1024}  # sized by the wider dtype
    copies = transfer.to_device(cp, host, device)
    copies.wait()
    assert copies.fits == [True] * 5
    for h, d in zip(host, device):
        assert np.array_equal(np.asarray(d), h) and d.dtype != np.int64
    weights[60_000] = 256  # one piece wraps a value
    narrow = cp.empty(weights.shape, np.uint8)
    assert transfer.to_device(cp, [indices, weights], [cp.empty(70_003, np.int32),
                                                       narrow]).fits == [True, False]
    assert narrow[60_000] == 0 and np.array_equal(narrow[:60_000], weights[:60_000])


@pytest.mark.parametrize("pinned", [False, True])
def test_to_host_pageable_through_the_ring_or_pinned(tiny_slots, pinned):
    cp = FakeCupy()
    rng = np.random.default_rng(2)
    device = [rng.random((301, 7)).view(cp.ndarray), np.arange(-5, 40_000, dtype=np.int32)
              .view(cp.ndarray), np.zeros(0, np.uint8).view(cp.ndarray)]
    out = transfer.to_host(cp, device, pinned=pinned)
    for d, o in zip(device, out):
        assert type(o) is np.ndarray and o.dtype == d.dtype and o.shape == d.shape
        assert np.array_equal(o, np.asarray(d)) and not np.shares_memory(o, np.asarray(d))
    small = transfer.to_host(cp, device[2:] + [device[1][:10]])  # plain copies
    assert np.array_equal(small[1], np.arange(-5, 5))
