"""benchmarks/topk_guess_model.py: the replay of top-k's carried guess (the rule's pieces, and
on a small sample the misses GUESS=2 removes), without a GPU."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import topk_guess_model as gm  # noqa: E402


def test_keys_order_like_the_floats_and_invert():
    v = np.array([-np.inf, -2.5, -0.0, 0.0, 1e-30, 2.3, np.inf], np.float32)
    keys = gm.keys_of(v)
    assert np.all(np.diff(keys.astype(np.int64)) > 0)
    assert [gm.value_of(int(x)) for x in keys][1:] == pytest.approx(v[1:].tolist())


def test_hand_on_cuts_to_16_bits_and_a_short_rows_to_12_lowered():
    entries = np.sort(np.random.default_rng(0).standard_normal(100).astype(np.float32))[::-1]
    g = gm.hand_on(entries, k=50, rank=91)
    assert int(gm.keys_of([g])[0]) == int(gm.keys_of(entries[90:91])[0]) & 0xFFFF0000
    short = gm.hand_on(entries[:60], k=50, rank=91)   # 60 < 5k/4: 12 bits, one unit lower
    assert int(gm.keys_of([short])[0]) == (int(gm.keys_of(entries[59:60])[0]) & 0xFFF00000) \
        - (1 << 20)


def test_a_row_unlike_the_last_misses_under_guess1_not_guess2():
    """Rows of 8192 normals; row 2 of each chain of 4 scaled by 1.1: GUESS=1 hands row 3 that
    row's rank-91 value (~2.52, which ~48 of a normal row reach: about half the rows miss);
    GUESS=2 the mean of two guesses' keys (~2.40, ~67 reach: rarely a miss)."""
    vals, cols = gm.top_rows(np.random.default_rng(1), 128, 8192, 320)
    vals = vals.reshape(32, 4, -1)
    vals[:, 2] *= 1.1
    vals = vals.reshape(128, -1)
    r1 = gm.replay(vals, cols, 50, 91, 160, 4, 1024, guess_mode=1)
    r2 = gm.replay(vals, cols, 50, 91, 160, 4, 1024, guess_mode=2)
    assert r1["misses"] >= 5 and all(w[0] == 3 for w in r1["where"])
    assert r2["misses"] * 4 <= r1["misses"], (r1["misses"], r2["misses"])


def test_the_seed_is_the_jth_lane_maximum_of_the_sample():
    """Lane l holds vectors l, l + 32, ... (4 elements each) of the first `sample` columns; the
    seed is the j-th largest of the lanes' maxima, -inf when fewer lanes hold any."""
    vals = np.array([9.0, 8.0, 7.0, 6.0, 5.0], np.float32)
    cols = np.array([0, 3, 4, 200, 9000])       # lanes 0, 0, 1, 18; the last outside
    assert gm.seed_of(vals, cols, 2048, 1) == 9.0
    assert gm.seed_of(vals, cols, 2048, 2) == 7.0     # lane 0's second is not a lane maximum
    assert gm.seed_of(vals, cols, 2048, 3) == 6.0
    assert gm.seed_of(vals, cols, 2048, 4) == -np.inf


def test_a_seeded_short_first_row_misses_its_successor_unless_lowered_a_unit():
    """numpy seed 5000's two rows (tests/zoo/test_topk_warp.py runs the same pair in numsim):
    from SEED=1's threshold the first row ends with 65 entries, its cut key reaches 49 of the
    second; the unit lower for short rows with no guess before them removes that miss."""
    vals, cols = gm.top_rows(np.random.default_rng(5000), 2, 8192, 320)
    plain = gm.replay(vals, cols, 50, 91, 160, 2, 1024, 2, seed=(2048, 21))
    assert plain["where"] == [(1, 65, 49)]
    fresh = gm.replay(vals, cols, 50, 91, 160, 2, 1024, 2, seed=(2048, 21), short_unit="fresh")
    assert fresh["misses"] == 0
