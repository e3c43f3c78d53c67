"""zoo/kernels/cumsum_smem.py (tiles split between registers and a bulk-copied shared part, block
order): small cases bit-exact in numsim and clean in sync_check, the scratch reusable across
launches, the error bound on real-valued data, the synchronization and tail handling that the
checks catch when broken, refused shapes, and the H200 cases' registers and shared memory
(ptxas), on which the occupancy in the module's bandwidth argument rests."""

import numpy as np
import pytest

import tirxh_sync_check as sc
from tests.zoo.zoo_modules import (assert_matches, ctas_per_sm, declare, kcoral_job_on_sim,
                                  load, load_mutant, mismatches, relaunch_on_scratch,
                                  scan_error_and_bound, simulate, small_cases)

MOD = load("cumsum_smem")
CUMSUM = load("cumsum")  # the flags' layout (status, epoch) is `cumsum`'s
SUITE = MOD.SUITE


def _case(name):
    return next(c for c in SUITE.cases if c.name == name)


@pytest.mark.parametrize("case", small_cases("cumsum_smem"), ids=lambda c: c.name)
def test_small_case_is_exact(case):
    res, inputs = simulate(SUITE, case)
    assert_matches(SUITE, case, res, inputs)


@pytest.mark.parametrize("case", small_cases("cumsum_smem"), ids=lambda c: c.name)
def test_small_case_is_sync_clean(case):
    sync, race = sc.check_kernel(SUITE.kernel, SUITE.make_inputs(case, 0),
                                 consts=SUITE.consts(case), grid=SUITE.grid(case))
    assert [f.kind for f in sync.findings + race.findings] == []
    assert sync.verdict == race.verdict == "clean"


def test_the_small_cases_cover_the_tails_of_the_shared_part():
    """A last tile whose shared part is short (r1_c3080), one with none in the row (r3_c2604:
    the copy skipped, 0 bytes expected), groups of SG and fewer (r2_c9000_b160_o1)."""
    def last(case):
        p = case.params
        tile = MOD.tile_elems(p["BLOCK"], p["CHUNKS"], p["SCH"])
        return p["cols"] % tile - p["BLOCK"] * p["CHUNKS"] * 4
    assert 0 < last(_case("r1_c3080")) < _case("r1_c3080").params["BLOCK"] * 3 * 4
    assert last(_case("r3_c2604")) < 0
    p = _case("r2_c9000_b160_o1").params
    assert p["ORDER"] == 1 and p["SCH"] % p["SG"] != 0 and p["SCH"] > p["SG"]


def test_second_launch_on_the_same_scratch_is_right():
    """Block order: the ticket serves the epoch only, one per CTA; the second launch's flags
    all carry epoch 1 although the first launch's were left in place."""
    case = _case("r1_c12000_t256")
    res, inputs = simulate(SUITE, case)
    ntiles = SUITE.grid(case)[0]
    assert int(res.outputs["counter"][0]) == ntiles
    res2, statuses, epochs = relaunch_on_scratch(SUITE, case, res, inputs)
    assert int(res2.outputs["counter"][0]) == 2 * ntiles
    assert epochs == {1} and statuses == {CUMSUM.ST_P}  # every tile ends with its prefix


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("start", [(1 << 32) - 1, 3 * (5 << 32)])
def test_tickets_past_two_to_the_32_take_the_64_bit_division(start, order):
    case = MOD.make_case("late", rows=1, cols=700, BLOCK=32, CHUNKS=1, SCH=1, LOOK=1,
                         ORDER=order)
    ntiles = SUITE.grid(case)[0]
    assert ntiles == 3 and start % ntiles == 0
    inputs = SUITE.make_inputs(case, 4)
    inputs["counter"][0] = start
    res, _ = simulate(SUITE, case, inputs=inputs)
    assert_matches(SUITE, case, res, inputs)
    tags = res.outputs["flags"] >> np.uint64(32)
    assert set((tags >> np.uint64(2)).tolist()) == {(start // ntiles) & CUMSUM.EPOCH_MASK}


def test_error_on_real_valued_data_is_within_the_stated_bound():
    """`cumsum`'s bound holds: the shared chunks' thread sums and lane offsets change the
    order of the adds, not their number along any element's path by more than a few."""
    case = MOD.make_case("normal", rows=2, cols=20000, BLOCK=64, CHUNKS=1, SCH=2)
    err, bound = scan_error_and_bound(SUITE, case, MOD.tile_elems(64, 1, 2))
    assert (err <= bound).all()
    assert err.max() > 0  # real-valued data does round (the bound is not vacuous)


# the mutations: what each check sees when a piece of the kernel is taken out
WAIT = "        full.wait(0)\n"
EXCL = "T.ptx.add.f32(v[0], v[0], T.ptx.sub.f32(i, t))"
WRITE_BACK = "        T.ptx.st.shared.v4.f32(a, v, pred=p)\n"
SHORT = ("nbytes = T.ptx.selp.u32(T.ptx.min.u32(T.ptx.sub.u32(cols, s0), sm_n) << 2, 0, have)")


def test_reading_the_shared_part_before_the_copy_completes_is_a_race(tmp_path):
    mut = load_mutant("cumsum_smem", WAIT, "", tmp_path)
    case = _case("r1_c3080")
    sync, race = sc.check_kernel(mut.SUITE.kernel, mut.SUITE.make_inputs(case, 0),
                                 consts=mut.SUITE.consts(case), grid=mut.SUITE.grid(case))
    assert race.verdict == "error"
    assert any(f.kind.startswith("race") for f in race.findings)


@pytest.mark.parametrize("old,new", [(EXCL, "pass"), (WRITE_BACK, "")],
                         ids=["no-lane-offset", "no-write-back"])
def test_the_check_catches_a_wrong_scan_of_the_shared_part(old, new, tmp_path):
    mut = load_mutant("cumsum_smem", old, new, tmp_path)
    case = _case("r1_c3080")
    res, inputs = simulate(mut.SUITE, case)
    assert mismatches(mut.SUITE, case, res, inputs)


def test_a_full_copy_past_the_row_end_is_caught(tmp_path):
    """The last tile's copy clipped to the row: copying the whole shared part reads past `x`
    (numsim) and expects more bytes than a short tile has (sync_check's tx accounting)."""
    mut = load_mutant("cumsum_smem", SHORT, "nbytes = T.ptx.selp.u32(sm_n << 2, 0, have)",
                      tmp_path)
    case = _case("r1_c3080")
    res, _ = simulate(mut.SUITE, case)
    assert "numsim.out-of-bounds" in [d.kind for d in res.diagnostics]
    sync, _ = sc.check_kernel(mut.SUITE.kernel, mut.SUITE.make_inputs(case, 0),
                              consts=mut.SUITE.consts(case), grid=mut.SUITE.grid(case))
    assert "mbarrier.tx-mismatch" in [f.kind for f in sync.findings]


@pytest.mark.parametrize("params,match", [
    (dict(BLOCK=48), r"BLOCK=48 must be a multiple of 32"),
    (dict(BLOCK=1024, CHUNKS=4, SCH=5), r"BLOCK/32 \* \(CHUNKS \+ SCH\) = 288 warp totals"),
    (dict(CHUNKS=0), r"CHUNKS=0 must be in \[1, 16\]"),
    (dict(SCH=-1), r"SCH=-1 at least 0"),
    (dict(BLOCK=512, SCH=29), r"SCH=29: BLOCK \* SCH \* 16 = 237568 bytes of shared memory"),
    (dict(LOOK=3), r"LOOK=3 must be 1, 2, 4 or 8"),
    (dict(ORDER=2), r"ORDER=2 0 \(block index\) or 1 \(ticket\)"),
    (dict(SG=0), r"SG=0 \(shared chunks scanned together\) must be at least 1"),
    (dict(MAXREG=16), r"MAXREG=16 must be 0 \(no cap\) or in 32..255"),
    (dict(cols=0), r"rows=1 and cols=0 must be positive"),
    (dict(cols=1002), r"cols=1002 must be a multiple of 4"),
    (dict(rows=64, cols=1 << 26), r"rows\*cols=4294967296 must be below 2\^32"),
])
def test_refused_shapes_name_the_case_and_the_constraint(params, match):
    kw = dict(rows=1, cols=1000)
    kw.update(params)
    with pytest.raises(ValueError, match=r"case 'bad': .*" + match):
        declare(SUITE, MOD.make_case("bad", **kw), MOD.constraints)


@pytest.mark.parametrize("case", [c for c in SUITE.cases if not c.small], ids=lambda c: c.name)
def test_h200_cases_fit_four_ctas_per_sm_without_spills(case):
    """The bandwidth argument assumes 4 CTAs of 256 threads per SM: 64 registers at most (the
    cap), no spill traffic, and 4 x (shared memory + 1 KB reserved) within the SM's 228 KB."""
    assert ctas_per_sm(SUITE, case, 256, 64, MOD.stash_bytes(256, case.params["SCH"])) >= 4


def test_kcorals_protocol_passes_on_the_sim_board(tmp_path):
    """What the H200 run does, on the CPU: KCoral's whole job (seeds, repeated launches on one
    scratch, the perturbation guard in place and fresh) on numsim's board; the scratch
    (`flags`, `counter`: zeros) is left alone by the guard, every correctness check passes."""
    res = kcoral_job_on_sim(SUITE, _case("r1_c12000_t256"), tmp_path)
    g = res["guards"]["perturbation"]
    assert g["status"] == "passed" and g["perturbed"] == ["x"]
    assert set(g["skipped"]) == {"flags", "counter"}
    assert all(r["ok"] for r in res["correctness"]) and res["sim"]["launches"] >= 8
