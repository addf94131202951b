"""Arc tables and cost models of terrain.grid.costs: sanity, Numba == NumPy twin bit for bit,
hand-computed values, input checks."""

import math

import numba
import numpy as np
import pytest

from terrain.errors import InputError
from terrain.grid._costs_cpu import arc_cost, exp_det, pair_factor, quad_factor
from terrain.grid.costs import (ARC_DC, ARC_DR, ARC_NAMES, COST_MODELS, KNIGHT_MID, TOBLER_V0,
                                arc_codes, arc_costs_np, arc_factor_np, arc_lengths,
                                check_friction, cost_model_code, exp_det_np, knight_mid)


def test_arc_tables():
    assert COST_MODELS == ("absdiff", "friction", "tobler")
    assert ARC_DR.dtype == np.int64 and ARC_DC.dtype == np.int64
    arcs = list(zip(ARC_DR.tolist(), ARC_DC.tolist()))
    assert len(set(arcs)) == 16
    # codes 0..7: the 8 neighbours clockwise from east (row 0 = north, so S is dr = +1)
    assert arcs[:8] == [(0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1)]
    # codes 8..15: the 8 knight moves, clockwise from ENE
    assert all({abs(dr), abs(dc)} == {1, 2} for dr, dc in arcs[8:])
    angles = [(math.atan2(dr, dc) + 0.5) % (2 * math.pi) for dr, dc in arcs[8:]]  # ENE first
    assert angles == sorted(angles)
    assert ARC_NAMES[0] == "E" and ARC_NAMES[2] == "S" and ARC_NAMES[8] == "ENE"
    assert arc_codes(4).tolist() == [0, 2, 4, 6]
    assert arc_codes(8).tolist() == list(range(8))
    assert arc_codes("16").tolist() == list(range(16))
    # every arc set is closed under reversal (the reverse arc of k is in the same set)
    for conn in (4, 8, 16):
        ks = arc_codes(conn).tolist()
        assert {(-ARC_DR[k], -ARC_DC[k]) for k in ks} == {(ARC_DR[k], ARC_DC[k]) for k in ks}


def test_arc_lengths():
    L = arc_lengths((3.0, 2.0))
    assert L.dtype == np.float64 and L.shape == (16,)
    assert L[0] == 3.0 and L[2] == 2.0 and L[4] == 3.0 and L[6] == 2.0
    assert L[1] == math.sqrt(13.0)
    assert L[8] == math.sqrt(36.0 + 4.0)   # ENE: 2 columns, 1 row
    assert L[10] == math.sqrt(9.0 + 16.0)  # SSE: 1 column, 2 rows
    assert arc_lengths((1.0, -1.0))[1] == math.sqrt(2.0)  # a negative dy (north-up) counts by size


@pytest.mark.parametrize("bad", [(0, 1), (1, float("nan")), (1, float("inf")), "x", (1,)])
def test_arc_lengths_rejects(bad):
    with pytest.raises(InputError):
        arc_lengths(bad)


@pytest.mark.parametrize("bad", [3, 6, "8.5", None, 32])
def test_arc_codes_rejects(bad):
    with pytest.raises(InputError):
        arc_codes(bad)


def test_model_codes_and_friction_check():
    assert [cost_model_code(m) for m in COST_MODELS] == [0, 1, 2]
    with pytest.raises(InputError, match="slope"):
        cost_model_code("slope")
    f = check_friction(np.array([[1, np.nan], [0, 2]]))
    assert f.dtype == np.float32
    with pytest.raises(InputError, match=r"friction.*\(1, 0\)"):
        check_friction(np.array([[1, np.nan], [-0.5, 2]]), name="friction raster f.tif")


def test_hand_computed_costs():
    L = arc_lengths((10.0, 10.0))
    f32 = np.float32
    # absdiff ignores length and friction, symmetric
    assert arc_cost(f32(5), f32(2.5), pair_factor(f32(9), f32(9)), 1, 0, L) == 2.5
    assert arc_cost(f32(2.5), f32(5), pair_factor(f32(9), f32(9)), 1, 0, L) == 2.5
    # friction: length * mean friction
    assert arc_cost(f32(0), f32(100), pair_factor(f32(1), f32(2)), 0, 1, L) == 15.0
    assert arc_cost(f32(0), f32(0), pair_factor(f32(1), f32(2)), 1, 1, L) == L[1] * 1.5
    # a knight arc: length * the mean friction of its ends and the two cells it passes between
    knight = quad_factor(f32(1), f32(2), f32(3), f32(6))
    assert knight == 3.0 == arc_factor_np(1, 2, 3, 6)
    assert arc_cost(f32(0), f32(0), knight, 8, 1, L) == math.sqrt(500.0) * 3.0
    # tobler: flat 10 m at 5 km/h * exp(-0.175)
    flat = arc_cost(f32(0), f32(0), pair_factor(f32(1), f32(1)), 0, 2, L)
    assert flat == pytest.approx(10.0 / (TOBLER_V0 * math.exp(-3.5 * 0.05)), rel=1e-15)
    # the fastest slope is -0.05 (downhill 0.5 m over 10 m): exactly L / V0
    assert arc_cost(f32(0.5), f32(0), pair_factor(f32(1), f32(1)), 0, 2, L) == 10.0 / TOBLER_V0
    up = arc_cost(f32(0), f32(1), pair_factor(f32(1), f32(1)), 0, 2, L)
    down = arc_cost(f32(1), f32(0), pair_factor(f32(1), f32(1)), 0, 2, L)
    assert up == pytest.approx(10.0 / (TOBLER_V0 * math.exp(-3.5 * 0.15)), rel=1e-15)
    assert down == pytest.approx(10.0 / (TOBLER_V0 * math.exp(-3.5 * 0.05)), rel=1e-15)
    assert up != down  # anisotropic
    # tobler with friction multiplies by the mean friction
    assert arc_cost(f32(0), f32(1), pair_factor(f32(2), f32(4)), 0, 2, L) == up * 3.0
    # a cliff: the cost overflows to +inf (an arc never taken), no error
    assert arc_cost(f32(0), f32(3e4), pair_factor(f32(1), f32(1)), 0, 2, L) == math.inf


def test_exp_det_accuracy_and_twin():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-40, 40, 20000), rng.uniform(0.17, 2, 20000),
                        [0.0, -0.0, 1e-300, 700.0, 709.78, 709.8, -745.2, -700.0, np.nan]])
    got = exp_det_np(x)
    with np.errstate(over="ignore"):
        ref = np.exp(x)
    finite = np.isfinite(ref) & (ref > 1e-300)
    np.testing.assert_allclose(got[finite], ref[finite], rtol=4e-16, atol=0)
    assert got[-4] == np.inf and got[-3] == 0.0 and np.isnan(got[-1])
    twin = np.array([exp_det(v) for v in x.tolist()])
    np.testing.assert_array_equal(got.view(np.uint64)[:-1], twin.view(np.uint64)[:-1])


@numba.njit
def _costs_loop(zu, zv, fu, fv, fa, fb, k, model, lengths):
    out = np.empty(zu.size, np.float64)
    for i in range(zu.size):
        fac = pair_factor(fu[i], fv[i]) if k[i] < 8 else quad_factor(fu[i], fv[i], fa[i], fb[i])
        out[i] = arc_cost(zu[i], zv[i], fac, k[i], model, lengths)
    return out


@pytest.mark.parametrize("model", [0, 1, 2])
def test_numba_equals_numpy_bit_for_bit(model):
    rng = np.random.default_rng(model)
    n = 50000
    zu = rng.normal(300, 200, n).astype(np.float32)
    zv = (zu + rng.normal(0, 30, n)).astype(np.float32)
    zv[:100] = zu[:100]  # flats
    fu = rng.uniform(0, 5, n).astype(np.float32)
    fv = rng.uniform(0, 5, n).astype(np.float32)
    fa = rng.uniform(0, 5, n).astype(np.float32)
    fb = rng.uniform(0, 5, n).astype(np.float32)
    k = rng.integers(0, 16, n)
    L = arc_lengths((30.0, 27.5))
    fac = np.where(k < 8, arc_factor_np(fu, fv), arc_factor_np(fu, fv, fa, fb))
    ref = arc_costs_np(zu, zv, fac, k, model, L)
    got = _costs_loop(zu, zv, fu, fv, fa, fb, k, model, L)
    assert ref.dtype == np.float64
    np.testing.assert_array_equal(ref.view(np.uint64), got.view(np.uint64))
    assert (ref >= 0).all()
    # scalar k broadcasts
    one = arc_costs_np(zu[:10], zv[:10], arc_factor_np(fu[:10], fv[:10]), 3, model, L)
    np.testing.assert_array_equal(one, _costs_loop(zu[:10], zv[:10], fu[:10], fv[:10], fa[:10],
                                                   fb[:10], np.full(10, 3), model, L))


def test_rook_and_diagonal_factor_is_the_quad_mean_of_their_ends():
    """Counting each end twice, the knight's four-cell mean is the pair mean, bit for bit."""
    rng = np.random.default_rng(3)
    fu, fv = (rng.uniform(0, 1e6, 10000).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(arc_factor_np(fu, fv), arc_factor_np(fu, fv, fu, fv))


def test_knight_mid_cells():
    """A knight arc passes between the tail's rook neighbour on its long axis and its
    diagonal neighbour: (r + dr/2, c), (r + dr/2, c + dc) for |dr| = 2, else (r, c + dc/2),
    (r + dr, c + dc/2) (GRASS r.cost -k)."""
    for k in range(8, 16):
        dr, dc = int(ARC_DR[k]), int(ARC_DC[k])
        want = (((dr // 2, 0), (dr // 2, dc)) if abs(dr) == 2 else
                ((0, dc // 2), (dr, dc // 2)))
        assert knight_mid(k) == want
        for m in KNIGHT_MID[k - 8]:
            assert m < 8


def test_friction_checks_on_several_threads_leave_the_warning_filters_alone():
    """All-NaN friction: the check's minimum and the solve's plan skip NaN without a warning
    to silence; silenced with catch_warnings (not thread-safe), calls on four threads left
    an "ignore RuntimeWarning" filter behind, and the user's own warnings went unshown."""
    import sys
    import threading
    import warnings

    from terrain.backend import nanmax
    from terrain.grid._sssp_cpu import bucket_plan
    nan = np.full((64, 64), np.nan, np.float32)
    before = list(warnings.filters)
    switch = sys.getswitchinterval()

    def work():
        for _ in range(300):
            check_friction(nan)
            assert np.isnan(nanmax(nan))
            assert bucket_plan(nan, nan, 1, np.arange(4), np.ones(4), None) is None

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning raised by the checks fails the threads
        sys.setswitchinterval(1e-6)  # the threads interleave inside the calls
        try:
            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            sys.setswitchinterval(switch)
        inside = list(warnings.filters)
    assert inside[1:] == before and warnings.filters == before
