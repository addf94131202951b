"""Flow directions and accumulation against independent oracles (tests/oracles.py: a
priority-flood fill, a plain reference of the documented D8/D4 + Barnes flats, networkx's
topological order), the certificate, and the tiled runs against the in-core one."""

import numpy as np
import pytest

from grids import dem
from oracles import priority_flood, ref_accumulation, ref_directions
from terrain.errors import InputError
from terrain.hydrology import flow_accumulation, flow_directions
from terrain.verify import verify_flow

CASES = [(kind, shape, seed) for kind in ("random", "integer", "plateau", "holes")
         for shape, seed in (((17, 23), 0), ((40, 33), 1), ((31, 64), 2))]
CELL = (10.0, 7.0)


def _filled(kind, shape, seed, conn=8):
    return priority_flood(dem(kind, shape, seed), conn)


@pytest.mark.parametrize("conn", [8, 4])
@pytest.mark.parametrize("kind,shape,seed", CASES)
def test_directions_match_the_reference_and_certify(kind, shape, seed, conn):
    f = _filled(kind, shape, seed, conn)
    got = flow_directions(f, CELL, conn, backend="cpu")
    np.testing.assert_array_equal(got.direction, ref_directions(f, CELL, conn))
    acc = flow_accumulation(got.direction, backend="cpu")
    cert = verify_flow(f, got.direction, acc, connectivity=conn, cellsize=CELL)
    assert cert.ok, cert.violation


def undrained_cells(z, conn):
    """The cells of a DEM that drain nowhere, by the reference: code 0 (ref_directions)
    and no outlet (every neighbour on the grid and valid), row-major."""
    pad = np.pad(np.isnan(np.asarray(z, np.float32)), 1, constant_values=True)
    R, C = np.shape(z)
    steps = [(0, 1), (1, 0), (0, -1), (-1, 0)] + [(1, 1), (1, -1), (-1, 1), (-1, -1)][:conn - 4]
    boundary = np.zeros((R, C), bool)
    for dr, dc in steps:
        boundary |= pad[1 + dr:R + 1 + dr, 1 + dc:C + 1 + dc]
    return np.argwhere((ref_directions(z, CELL, conn) == 0) & ~boundary).tolist()


@pytest.mark.parametrize("conn", [8, 4])
@pytest.mark.parametrize("kind,shape,seed", CASES[:6])
def test_cells_that_drain_nowhere_are_counted_and_the_first_named(kind, shape, seed, conn):
    z = dem(kind, shape, seed)
    want = undrained_cells(z, conn)
    assert want, "the unfilled DEM has pits"
    for tile, group in ((None, 1), (4, 2), (8, 1)):
        s = flow_directions(z, CELL, conn, tile=tile, group_tiles=group, backend="cpu").stats
        assert s["undrained"] == len(want) and list(s["first_undrained"]) == want[0]
        assert s["outlets"] + s["undrained"] == np.count_nonzero(
            ref_directions(z, CELL, conn) == 0)
    s = flow_directions(_filled(kind, shape, seed, conn), CELL, conn, backend="cpu").stats
    assert s["undrained"] == 0 and "first_undrained" not in s


def test_a_dem_given_filled_that_is_not_is_refused():
    import terrain
    from terrain.hydrology import NotFilled
    z = np.full((5, 6), 5.0, np.float32)
    z[2, 3] = 1.0
    with pytest.raises(NotFilled, match=r"dem: not depression-filled: 1 cell drains nowhere "
                                        r"\(pits, or flats with no lower way out\), the first "
                                        "at row 2, column 3"):
        terrain.flow(z, filled=True, backend="cpu")
    assert terrain.flow(z, backend="cpu").direction.values[2, 3] != 0  # filled first


@pytest.mark.parametrize("conn", [8, 4])
@pytest.mark.parametrize("kind,shape,seed", CASES)
def test_tiled_directions_are_the_in_core_bits(kind, shape, seed, conn):
    f = _filled(kind, shape, seed, conn)
    want = flow_directions(f, CELL, conn, backend="cpu").direction
    for tile, group in ((2, 1), (4, 1), (4, 2), (8, 1), (16, 2)):
        got = flow_directions(f, CELL, conn, tile=tile, group_tiles=group, backend="cpu")
        np.testing.assert_array_equal(got.direction, want, err_msg=f"tile {tile}x{group}")


def test_a_flat_across_many_groups_takes_rounds_and_the_same_bits():
    # one lake of 60 x 60 cells at one level draining by a single cell on the edge
    z = np.full((64, 64), 10.0, np.float32)
    z[2:62, 2:62] = 5.0
    z[40, 0:3] = 5.0
    z[40, 0] = 4.0
    f = priority_flood(z)
    want = ref_directions(f)
    inc = flow_directions(f, backend="cpu")
    np.testing.assert_array_equal(inc.direction, want)
    tiled = flow_directions(f, tile=4, group_tiles=1, backend="cpu")
    assert tiled.stats["flat_passes"] > 16 * 16  # groups ran again as the lake's BFS crossed
    assert tiled.stats["flat_passes_lowered"] > 0  # ... from their kept states
    np.testing.assert_array_equal(tiled.direction, want)
    acc = flow_accumulation(tiled.direction, tile=4, backend="cpu")
    assert acc[40, 0] == np.count_nonzero(
        _upstream_of(tiled.direction, 40, 0))


def test_passes_without_kept_states_run_whole_to_the_same_bits(monkeypatch):
    # the memo of flat states holds nothing: every pass runs whole, in the same order
    import terrain.hydrology.flow as flow
    f = _filled("plateau", (40, 33), 1)
    kept = flow_directions(f, tile=4, group_tiles=1, backend="cpu")
    monkeypatch.setattr(flow, "_memo", flow._FlatMemo(0))
    whole = flow_directions(f, tile=4, group_tiles=1, backend="cpu")
    assert kept.stats["flat_passes_lowered"] > 0 and whole.stats["flat_passes_lowered"] == 0
    assert kept.stats["flat_passes"] == whole.stats["flat_passes"]
    np.testing.assert_array_equal(kept.direction, whole.direction)
    np.testing.assert_array_equal(kept.direction, flow_directions(f, backend="cpu").direction)


def test_passes_spread_over_processes_give_the_same_bits(monkeypatch):
    """Each pass in one of two worker processes, by turns, each with its memo: a state an
    older pass left in one of them was taken for a later pass or the directions, while the
    group's newer passes had run in the other (an external cluster: flats draining to the
    wrong cells, undrained sinks, another result each run)."""
    import itertools
    import terrain.hydrology.flow as flow
    z = np.full((64, 64), 10.0, np.float32)
    z[2:62, 2:62] = 5.0
    z[40, 0:3] = 5.0
    z[40, 0] = 4.0
    f = priority_flood(z)
    want = flow_directions(f, backend="cpu").direction
    for first in (0, 1):
        memos = [flow._FlatMemo(1 << 30), flow._FlatMemo(1 << 30)]
        turns = itertools.cycle(memos[first:] + memos[:first])
        monkeypatch.setattr(flow, "_flat_memo", lambda: next(turns))
        got = flow_directions(f, tile=4, group_tiles=1, backend="cpu")
        np.testing.assert_array_equal(got.direction, want)


def test_the_memo_makes_room_from_other_runs_only():
    from terrain.hydrology.flow import _FlatMemo

    class State:
        nbytes = 40

    memo = _FlatMemo(100)
    memo.put(("a", 1), State())
    memo.put(("a", 2), State())
    memo.put(("a", 3), State())  # no room, and no other run's to drop: not kept
    assert set(memo.states) == {("a", 1), ("a", 2)} and memo.used == 80
    memo.put(("b", 1), State())  # a new run: the old one's states go
    assert set(memo.states) == {("b", 1)} and memo.used == 40
    assert memo.take(("b", 1)) is not None and memo.used == 0


@pytest.mark.parametrize("conn", [8, 4])
def test_lowering_flat_distances_gives_the_fresh_ones(conn):
    # distances of halos h1, lowered to halos h2 <= h1: those of h2 from scratch
    from terrain.hydrology._flow_cpu import classify, flat_distances, lower_flat_distances
    step = 1 if conn == 8 else 2
    rng = np.random.default_rng(3)
    z = _filled("plateau", (64, 72), 5, conn)
    zp = z[8:52, 8:62]  # a group's window inside the grid, with its halo of 2
    code = classify(zp, None, True, np.ones(8), step)
    ring = np.zeros(zp.shape, bool)
    ring[1, 1:-1] = ring[-2, 1:-1] = ring[1:-1, 1] = ring[1:-1, -2] = True
    inf = np.int32(2**31 - 1)
    changed = 0
    for trial in range(4):
        h1 = [np.where(ring & (rng.random(zp.shape) < 0.5), rng.integers(1, 40, zp.shape),
                       inf).astype(np.int32) for _ in range(2)]
        h2 = [np.where(ring & (rng.random(zp.shape) < 0.3), np.minimum(h, rng.integers(
            1, 40, zp.shape)), h).astype(np.int32) for h in h1]
        away, towards = flat_distances(zp, code, *h1, step)
        before = away.copy(), towards.copy()
        lower_flat_distances(code, *h2, step, away, towards)
        want = flat_distances(zp, code, *h2, step)
        np.testing.assert_array_equal(away, want[0])
        np.testing.assert_array_equal(towards, want[1])
        changed += int((away != before[0]).sum() + (towards != before[1]).sum())
    assert changed > 100  # the lower halos reached into the flats


def _upstream_of(d, r, c):
    """Cells whose path passes (r, c), by walking every path (the slow way)."""
    from oracles import HDC, HDR
    R, C = d.shape
    hit = np.zeros((R, C), bool)
    for a in range(R):
        for b in range(C):
            x, y = a, b
            for _ in range(R * C):
                if (x, y) == (r, c):
                    hit[a, b] = True
                    break
                v = d[x, y]
                if v in (0, 255):
                    break
                k = int(v).bit_length() - 1
                x, y = x + HDR[k], y + HDC[k]
    return hit


@pytest.mark.parametrize("kind,shape,seed", CASES)
def test_accumulation_matches_networkx_and_tiles_give_the_same_bits(kind, shape, seed):
    f = _filled(kind, shape, seed)
    d = flow_directions(f, backend="cpu").direction
    want = ref_accumulation(d)
    got = flow_accumulation(d, backend="cpu")
    np.testing.assert_array_equal(got, want)
    for tile, group in ((2, 1), (4, 1), (4, 2), (8, 2)):
        tiled = flow_accumulation(d, tile=tile, group_tiles=group, backend="cpu")
        np.testing.assert_array_equal(tiled.view(np.uint64), got.view(np.uint64))


def test_weighted_accumulation():
    f = _filled("random", (40, 33), 3)
    d = flow_directions(f, backend="cpu").direction
    rng = np.random.default_rng(0)
    w = rng.random(f.shape)
    w[0, 0] = np.nan  # counts as 0
    got = flow_accumulation(d, w, backend="cpu")
    np.testing.assert_array_equal(got, ref_accumulation(d, w))
    assert verify_flow(f, d, got, w).ok
    tiled = flow_accumulation(d, w, tile=4, backend="cpu")
    # float weights: boundary sums associate per node (documented): within rounding
    np.testing.assert_allclose(tiled, got, rtol=1e-13)
    assert verify_flow(f, d, tiled, w, rtol=1e-12).ok
    wi = rng.integers(0, 100, f.shape).astype(np.float64)  # integer weights: exact sums
    np.testing.assert_array_equal(flow_accumulation(d, wi, tile=4, backend="cpu"),
                                  flow_accumulation(d, wi, backend="cpu"))



def test_an_infinite_weight_is_refused():
    f = _filled("random", (40, 33), 3)
    d = flow_directions(f, backend="cpu").direction
    w = np.ones(f.shape)
    w[17, 5] = -np.inf
    for tile in (None, 4):  # one block, and groups (the cell named in the grid's terms)
        with pytest.raises(InputError, match=r"weights: cell \(17, 5\) is -inf"):
            flow_accumulation(d, w, tile=tile, backend="cpu")

def test_named_outlets_replace_the_edge():
    z = dem("random", (30, 30), 4)
    outl = np.zeros(z.shape, bool)
    outl[15, 15] = True
    f = priority_flood(z, outlets=outl)
    got = flow_directions(f, outlets=outl, backend="cpu").direction
    np.testing.assert_array_equal(got, ref_directions(f, outlets=outl))
    assert np.count_nonzero(got == 0) == 1 and got[15, 15] == 0
    acc = flow_accumulation(got, backend="cpu")
    assert acc[15, 15] == z.size  # everything drains to the one outlet
    assert verify_flow(f, got, acc, outlets=outl).ok
    tiled = flow_directions(f, outlets=outl, tile=4, backend="cpu").direction
    np.testing.assert_array_equal(tiled, got)


def test_esri_codes_on_a_cone():
    y, x = np.mgrid[-3:4, -3:4]
    z = (np.hypot(x, y)).astype(np.float32)  # a pit at the centre: every cell drains in
    outl = np.zeros(z.shape, bool)
    outl[3, 3] = True
    d = flow_directions(z, outlets=outl, backend="cpu").direction
    assert d[3, 0] == 1 and d[3, 6] == 16 and d[0, 3] == 4 and d[6, 3] == 64
    assert d[0, 0] == 2 and d[0, 6] == 8 and d[6, 6] == 32 and d[6, 0] == 128


def _certified_case():
    f = _filled("integer", (40, 33), 1)
    d = flow_directions(f, backend="cpu").direction
    return f, d, flow_accumulation(d, backend="cpu")


def test_certificate_rejects_a_cycle():
    f, d, acc = _certified_case()
    r, c = np.argwhere((d == 1) & (np.roll(d, -1, axis=1) != 255))[5]
    bad = d.copy()
    bad[r, c + 1] = 16  # points back
    cert = verify_flow(f, bad)
    assert not cert.ok


def test_certificate_rejects_a_climb_a_sink_and_a_wrong_accumulation():
    f, d, acc = _certified_case()
    assert verify_flow(f, d, acc).ok
    inner = np.argwhere(d[1:-1, 1:-1] != 0)[7] + 1
    r, c = inner
    for code in (1, 2, 4, 8, 16, 32, 64, 128):
        if code != d[r, c]:
            bad = d.copy()
            bad[r, c] = code
            assert not verify_flow(f, bad).ok
    bad = d.copy()
    bad[r, c] = 0
    assert "sink" in verify_flow(f, bad).violation
    wrong = acc.copy()
    wrong[r, c] += 1
    assert "accumulation" in verify_flow(f, d, wrong).violation
    bad = d.copy()
    bad[r, c] = 3
    assert "ESRI" in verify_flow(f, bad).violation
    unfilled = dem("random", (20, 20), 0)
    assert not verify_flow(unfilled, flow_directions(unfilled, backend="cpu").direction).ok


def test_accumulation_refuses_a_cycle_and_a_path_off_the_grid():
    d = np.array([[1, 16, 0]], np.uint8)
    with pytest.raises(InputError, match="cycle"):
        flow_accumulation(d, backend="cpu")
    with pytest.raises(InputError, match="off the grid"):
        flow_accumulation(np.array([[64, 0]], np.uint8), backend="cpu")
    with pytest.raises(InputError, match="ESRI"):  # once a loop that never ended
        flow_accumulation(np.array([[3, 0]], np.uint8), backend="cpu")
    with pytest.raises(InputError, match="cycle"):
        d = np.zeros((8, 8), np.uint8)
        d[3, 3], d[3, 4], d[4, 4], d[4, 3] = 1, 4, 16, 64  # a loop across 4 tiles
        flow_accumulation(d, tile=4, backend="cpu")


def test_an_interrupt_stops_the_cpu_flow_within_a_second(stops_on_interrupt):
    """The flow's block kernels poll the stop flag Ctrl-C sets: one 6000² flat (its flats'
    BFS over every cell takes seconds) is left within about a second of the signal."""
    z = np.zeros((6000, 6000), np.float32)
    stops_on_interrupt(lambda: flow_directions(z, backend="cpu"))


def test_each_direction_check_names_its_fault():
    """One corruption per check of the certificate, on a plane falling to the south-east
    (cell (1, 1) drains SE, (2, 2) is the outlet), each refused with its own sentence."""
    f = np.add.outer(np.arange(3), np.arange(3))[::-1, ::-1].astype(np.float32)
    d = flow_directions(f, backend="cpu").direction
    acc = flow_accumulation(d, backend="cpu")
    assert d[1, 1] == 2 and d[2, 2] == 0 and verify_flow(f, d, acc).ok
    faults = {((1, 1), 3): "not an ESRI D8 code", ((1, 1), 255): "is nodata (255)",
              ((0, 0), 64): "points off the grid", ((1, 1), 32): "climbs",
              ((1, 1), 1): "not the steepest descent", ((1, 1), 0): "is an outlet (0)",
              ((2, 2), 16): "should be an outlet (0)"}
    for (cell, code), words in faults.items():
        bad = d.copy()
        bad[cell] = code
        assert words in verify_flow(f, bad).violation, (cell, code)
    d4 = flow_directions(f, connectivity=4, backend="cpu").direction
    d4[1, 1] = 2
    assert "D4 does not have" in verify_flow(f, d4, connectivity=4).violation
    flat = np.zeros((4, 4), np.float32)
    loop = np.zeros((4, 4), np.uint8)  # the edge's cells are outlets; inside, a loop of four
    loop[1, 1], loop[1, 2], loop[2, 2], loop[2, 1] = 1, 4, 16, 64
    assert verify_flow(flat, loop).violation == (
        "direction of cell (1, 1) never reaches an outlet: the directions hold a cycle upstream "
        "of or through it")
    hole = f.copy()
    hole[0, 2] = np.nan
    dh = flow_directions(hole, backend="cpu").direction
    ah = flow_accumulation(dh, backend="cpu")
    assert verify_flow(hole, dh, ah).ok
    ah[0, 2] = 0.0
    assert "NaN exactly at the nodata" in verify_flow(hole, dh, ah).violation


def test_the_device_rules_of_the_fill_and_the_flow(monkeypatch):
    """What the device holds whole, by the one rule of terrain.backend.Backend.fits on made-up
    devices (139 GiB free, an H200's; 79 GiB, an 80 GB H100's): the 10-ft size's flow (20
    bytes a cell of its padded block, 66 GiB) on both but not its fill (beyond the forest's
    2^30 cells); no block of 2^32 cells."""
    from terrain.backend import Backend
    from terrain.hydrology import fill_fits_on_device, flow_fits_on_device

    gpu = Backend("gpu", None)
    free = [139 << 30]
    monkeypatch.setattr(Backend, "free_bytes", lambda self: free[0])
    ten_ft = (50220, 70520)
    assert flow_fits_on_device(ten_ft, gpu) and not fill_fits_on_device(ten_ft, gpu)
    free[0] = 79 << 30
    assert flow_fits_on_device(ten_ft, gpu)  # 65.97 GiB of 71.1
    assert not flow_fits_on_device(ten_ft, gpu, headroom=0.8)  # of 63.2
    assert not flow_fits_on_device((65532, 65532), gpu)  # a padded block of 2^32 cells
    assert fill_fits_on_device((4096, 4096), gpu)
    assert not fill_fits_on_device((4096, 4096), gpu, headroom=1e-3)
    assert not flow_fits_on_device((10, 10), "cpu") and not fill_fits_on_device((10, 10), "cpu")
