"""zoo/kernels/cumsum_tma.py (`cumsum_smem`'s tile with the shared part scanned as one run per
thread and written back with one bulk copy): small cases bit-exact in numsim and clean in
sync_check, the tails of a run, the scratch reusable across launches, the error bound on
real-valued data, what the checks catch when the scan or the bulk store's synchronization is
broken, refused shapes, and the H200 cases' registers and shared memory (ptxas)."""

import numpy as np
import pytest

import tirxh_sync_check as sc
from tests.zoo.zoo_modules import (assert_matches, ctas_per_sm, declare, kcoral_job_on_sim,
                                  load, load_mutant, mismatches, relaunch_on_scratch,
                                  scan_error_and_bound, simulate, small_cases)

MOD = load("cumsum_tma")
CUMSUM = load("cumsum")  # the flags' layout (status, epoch) is `cumsum`'s
SUITE = MOD.SUITE


def _case(name):
    return next(c for c in SUITE.cases if c.name == name)


def _sync(suite, case):
    return sc.check_kernel(suite.kernel, suite.make_inputs(case, 0), consts=suite.consts(case),
                           grid=suite.grid(case))


@pytest.mark.parametrize("case", small_cases("cumsum_tma"), ids=lambda c: c.name)
def test_small_case_is_exact(case):
    res, inputs = simulate(SUITE, case)
    assert_matches(SUITE, case, res, inputs)


@pytest.mark.parametrize("case", small_cases("cumsum_tma"), ids=lambda c: c.name)
def test_small_case_is_sync_clean(case):
    sync, race = _sync(SUITE, case)
    assert [f.kind for f in sync.findings + race.findings] == []
    assert sync.verdict == race.verdict == "clean"


def test_the_small_cases_cut_a_run_and_skip_a_shared_part():
    """Where the row's last tile ends: inside a thread's run (a float4 in, the next out), in
    the register part (the copies skipped), with both stores and SCH even and odd."""
    def shared_left(case):
        p = case.params
        last = p["cols"] % MOD.tile_elems(p["BLOCK"], p["CHUNKS"], p["SCH"])
        return last - p["BLOCK"] * p["CHUNKS"] * 4, p["SCH"] * 4
    for name in ("r1_c3084", "r3_c2604", "r2_c9004_b160"):
        left, run = shared_left(_case(name))
        assert left > 0 and left % run != 0, name   # a run cut in the middle
    left, _ = shared_left(_case("r1_c12000_t256"))
    assert left < 0 or left % 4 == 0
    assert {c.params["BST"] for c in small_cases("cumsum_tma")} == {0, 1}
    assert {c.params["SCH"] % 2 for c in small_cases("cumsum_tma")} == {0, 1}
    assert {c.params["EARLY"] for c in small_cases("cumsum_tma")} == {0, 1}


def test_second_launch_on_the_same_scratch_is_right():
    case = _case("r1_c12000_t256")
    res, inputs = simulate(SUITE, case)
    ntiles = SUITE.grid(case)[0]
    assert int(res.outputs["counter"][0]) == ntiles
    res2, statuses, epochs = relaunch_on_scratch(SUITE, case, res, inputs)
    assert int(res2.outputs["counter"][0]) == 2 * ntiles
    assert epochs == {1} and statuses == {CUMSUM.ST_P}  # every tile ends with its prefix


def test_error_on_real_valued_data_is_within_the_stated_bound():
    """`cumsum`'s bound, (log2(TILE) + tiles up to it) * eps * sum |x|, with a run's RUN - 1
    sequential adds on top, as the module docstring states it (RUN = 12 here)."""
    case = MOD.make_case("normal", rows=2, cols=20000, BLOCK=64, CHUNKS=1, SCH=3)
    tile = MOD.tile_elems(64, 1, 3)
    err, bound = scan_error_and_bound(SUITE, case, tile)
    x = np.abs(SUITE.make_inputs(case, 3)["x"].astype(np.float64))
    scale = bound / (np.log2(tile) + np.arange(x.shape[1]) // tile + 1)  # eps * sum |x|
    assert (err <= bound + (3 * 4 - 1) * scale).all()
    assert err.max() > 0  # real-valued data does round (the bound is not vacuous)


# the mutations: what each check sees when a piece of the kernel is taken out
FENCE = ("            T.ptx.fence.proxy.async_.shared__cta()  # generic writes -> the bulk copy's "
         "reads\n")
WAIT = "        full.wait(0)\n"
LANE_OFFSET = "        T.ptx.add.f32(v[0], v[0], acc)\n"   # `rewrite_run`
SEGMENT_OFFSET = ("                T.ptx.st.shared.v4.f32(raddr + 16 * j, [T.ptx.add.f32(vi, off) "
                  "for vi in v],\n                                       pred=p)\n")
RUN_TOTAL = "            T.ptx.st.shared.f32(wt.at(CHUNKS * nw + warp), incl)\n"


def test_a_bulk_store_without_the_proxy_fence_is_caught(tmp_path):
    mut = load_mutant("cumsum_tma", FENCE, "", tmp_path)
    _, race = _sync(mut.SUITE, _case("r1_c3084"))
    assert race.verdict == "error" and "proxy.missing-fence" in [f.kind for f in race.findings]


def test_a_bulk_store_before_the_other_warps_wrote_is_a_race(tmp_path):
    mut = load_mutant("cumsum_tma", FENCE + "            T.ptx.bar.sync(0)\n", FENCE, tmp_path)
    _, race = _sync(mut.SUITE, _case("r2_c9004_b160"))
    assert race.verdict == "error" and any(f.kind.startswith("race") for f in race.findings)


def test_publishing_before_every_warp_summed_is_a_race(tmp_path):
    """EARLY: warp 0 reads the nw warp sums after the barrier that follows their writes."""
    bar = '        with T.iket.range("bar_sum"):\n            T.ptx.bar.sync(0)\n'
    mut = load_mutant("cumsum_tma", bar, "", tmp_path)
    _, race = _sync(mut.SUITE, _case("r2_c9004_b160"))
    assert race.verdict == "error" and any(f.kind.startswith("race") for f in race.findings)


def test_reading_a_run_before_the_copy_completes_is_a_race(tmp_path):
    mut = load_mutant("cumsum_tma", WAIT, "", tmp_path)
    _, race = _sync(mut.SUITE, _case("r1_c3084"))
    assert race.verdict == "error" and any(f.kind.startswith("race") for f in race.findings)


@pytest.mark.parametrize("old,new,name", [
    (LANE_OFFSET, "", "r1_c3084"), (LANE_OFFSET, "", "r2_c9004_b160"),
    (SEGMENT_OFFSET, "", "r1_c3084"), (SEGMENT_OFFSET, "", "r2_c9004_b160"),
    # one warp: its segment is the tile's last, whose total no offset needs (EARLY's A is the
    # warp sums'); five warps: the later segments' offsets are wrong
    (RUN_TOTAL, "            pass\n", "r2_c9004_b160"),
    (RUN_TOTAL, "            pass\n", "r2_c9004_b160_e0")],
    ids=["no-lane-offset", "no-lane-offset-b160", "no-segment-offset",
         "no-segment-offset-b160", "no-run-total-b160", "no-run-total-b160-e0"])
def test_the_check_catches_a_wrong_scan_of_the_runs(old, new, name, tmp_path):
    mut = load_mutant("cumsum_tma", old, new, tmp_path)
    case = _case(name)
    res, inputs = simulate(mut.SUITE, case)
    assert mismatches(mut.SUITE, case, res, inputs)


@pytest.mark.parametrize("params,match", [
    (dict(BLOCK=48), r"BLOCK=48 must be a multiple of 32"),
    (dict(BLOCK=1024, CHUNKS=8), r"BLOCK/32 \* \(CHUNKS \+ 1\) = 288 warp totals"),
    (dict(CHUNKS=17), r"CHUNKS=17 must be in \[1, 16\]"),
    (dict(SCH=0), r"SCH=0 at least 1 \(the shared part is this kernel's\)"),
    (dict(BLOCK=512, SCH=29), r"SCH=29: BLOCK \* SCH \* 16 = 237568 bytes of shared memory"),
    (dict(LOOK=3), r"LOOK=3 must be 1, 2, 4 or 8"),
    (dict(BST=2), r"BST=2 0 \(st.global\) or 1 \(bulk store\)"),
    (dict(EARLY=2), r"EARLY=2 must be 0 \(publish after the scan\) or 1"),
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
    """The bandwidth argument (B per SM) assumes exactly 4 CTAs of 256 threads per SM at the
    cap of 64 registers, no spill traffic, the shared part in shared memory."""
    p = case.params
    assert ctas_per_sm(SUITE, case, 256, p["MAXREG"], MOD.stash_bytes(256, p["SCH"])) == 4


@pytest.mark.parametrize("name", ["r1_c12000_t256", "r2_c9004_b160"])
def test_kcorals_protocol_passes_on_the_sim_board(name, tmp_path):
    """KCoral's job as the H200 runs it, on numsim's board: repeated launches on one scratch
    (the epochs), the perturbation guard leaving the scratch (`flags`, `counter`) alone, every
    correctness check passing (the bulk store included)."""
    res = kcoral_job_on_sim(SUITE, _case(name), tmp_path)
    g = res["guards"]["perturbation"]
    assert g["status"] == "passed" and g["perturbed"] == ["x"]
    assert set(g["skipped"]) == {"flags", "counter"}
    assert all(r["ok"] for r in res["correctness"]) and res["sim"]["launches"] >= 8
