"""zoo/kernels/attn_schedule.py: the attention kernel's tile orders on integers (each covers
every tile once, on any shape, grid and section width), the scheduling model that explains
the causal measurements of 2026-12-02 (the snake's balance at the four benchmark shapes), the
pair order's balance, and the command-line table."""

from __future__ import annotations

import pytest

from ._zoo import load

S = load("attn_schedule")
SHAPES = [(4, 32, 32, 8192), (2, 16, 16, 16384), (4, 32, 32, 2048), (4, 32, 8, 8192)]


@pytest.mark.parametrize("order", S.ORDERS)
@pytest.mark.parametrize("B,S_,H,HG,grid", [
    (1, 400, 1, 1, 2), (1, 300, 2, 2, 3), (2, 80, 2, 2, 2), (1, 1000, 32, 8, 132),
    (3, 1300, 5, 2, 7), (1, 128, 1, 1, 132), (2, 2048, 4, 3, 5), (1, 2000, 3, 3, 11)])
def test_every_tile_runs_exactly_once(order, B, S_, H, HG, grid):
    S.check_cover(S.per_cta(order, B, S_, H, HG, grid), B, S_, H)


def test_a_schedule_that_misses_or_repeats_a_tile_is_named():
    per = S.per_cta("pairs", 1, 400, 1, 1, 2)
    with pytest.raises(ValueError, match=r"tile \(0, 0, 3\) run by CTAs 0 and 1"):
        S.check_cover([per[0], per[1] + [(0, 0, 3)]], 1, 400, 1)
    with pytest.raises(ValueError, match=r"tiles never run: \[\(0, 0, 1\)\]"):
        S.check_cover([per[0], per[1][:1]], 1, 400, 1)


def test_an_unknown_order_is_refused():
    with pytest.raises(ValueError, match=r"ORDER = 'lpt': expected one of \('snake', 'pairs'\)"):
        S.TileOrder("lpt", 4, 1, 1, 4, S.host_ops(2, 0))


def test_the_pair_order_is_long_tile_then_short_tile_of_one_head():
    for tiles in S.per_cta("pairs", 2, 4096, 4, 2, 13):
        for (b0, h0, m0), (b1, h1, m1) in zip(tiles[0::2], tiles[1::2]):
            if m0 + m1 == 31:   # a whole unit (the split tail's halves are alone)
                assert (b0, h0) == (b1, h1) and m0 > m1


def _balance(order, B, H, HKV, S_):
    return S.makespan(S.per_cta(order, B, S_, H, S.heads_per_section(H, HKV, S_), 132))


def test_the_model_explains_the_causal_measurements():
    """The snake's balance (mean / largest CTA load in KV blocks) is 0.97 at B4 H32 S8192 (664
    TFLOP/s measured), 0.66 at B2 H16 S16384 (505) and 0.60 at B4 H32 S2048 (391): the gap
    between the shapes is the schedule's, not the tiles'."""
    bal = {shape: _balance("snake", *shape) for shape in SHAPES}
    assert bal[SHAPES[0]]["max"] == 2079 and bal[SHAPES[0]]["efficiency"] == pytest.approx(
        0.970, abs=1e-3)
    assert bal[SHAPES[1]]["max"] == 3023 and bal[SHAPES[1]]["min"] == 1040
    assert bal[SHAPES[2]]["max"] == 219 and bal[SHAPES[2]]["efficiency"] == pytest.approx(
        0.602, abs=1e-3)
    assert bal[SHAPES[3]]["efficiency"] == pytest.approx(0.993, abs=1e-3)


def test_the_pair_order_balances_every_causal_benchmark_shape():
    """Every CTA within one unit (nm + 1 blocks) of the mean; the split tail round costs its
    longest tile: at S8192 4 units are left on 132 CTAs (31 units of 65 blocks + 33), at
    S16384 68 (15 units of 129 + 98: the tail's units are p = 30..63 of the last 2 heads); at
    S2048 (R = 100 > 2 G / 3) it is not split (8 units of 17)."""
    for shape in SHAPES:
        m = _balance("pairs", *shape)
        assert m["efficiency"] >= 0.969, (shape, m)
        assert m["max"] - m["mean"] <= -(-shape[3] // 128) + 1, (shape, m)
    assert [_balance("pairs", *shape)["max"] for shape in SHAPES] == \
        [31 * 65 + 33, 15 * 129 + 98, 8 * 17, 31 * 65 + 33]


def test_the_pair_order_reads_no_more_kv_heads_at_once_than_the_snake():
    """A round of units reads at most the snake's number of KV heads (8 / 4 / 32 / 8: 32 MB at
    the MHA shapes, 32 MB for GQA's 8 KV heads of 4 MB)."""
    got = []
    for B, H, HKV, S_ in SHAPES:
        hg = S.heads_per_section(H, HKV, S_)
        got.append([S.kv_heads_in_flight(o, S.per_cta(o, B, S_, H, hg, 132), H, HKV)
                    for o in S.ORDERS])
    assert got == [[8, 8], [4, 4], [32, 32], [8, 8]]


def test_heads_per_section_keeps_about_16mb_of_k_and_v_in_l2():
    assert [S.heads_per_section(H, HKV, S_) for _, H, HKV, S_ in SHAPES] == [4, 2, 16, 16]


def test_predict_scales_the_makespan_by_the_block_time():
    rows = S.predict([(1, 1, 1, 400)], 2, lambda H, HKV, S_: 1, {(1, 1, 1, 400): 2.0})
    assert [(r[1], r[2]["max"], r[3]) for r in rows] == [("snake", 5, 10.0), ("pairs", 5, 10.0)]
    assert rows[0][4] == pytest.approx(2 * 400 * 400 * 128 / 10.0 / 1e6)


def test_the_command_prints_the_model_table(capsys):
    assert S.main(["--shape", "2,16,16,16384", "--block-us", "1.5"]) == 0
    out = capsys.readouterr().out
    assert "| (2, 16, 16, 16384) | snake | 3023 / 2001.5 | 0.662 | 4534 |" in out
    assert "| (2, 16, 16, 16384) | pairs | 2033 / 2001.5 | 0.984 | 3050 |" in out


def test_the_command_refuses_a_malformed_shape(capsys):
    with pytest.raises(SystemExit):
        S.main(["--shape", "2,16,16"])
    assert "--shape '2,16,16': expected B,H,HKV,S (four integers)" in capsys.readouterr().err
