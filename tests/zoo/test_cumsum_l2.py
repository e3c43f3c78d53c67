"""zoo/kernels/cumsum_l2.py (reduce-then-scan a segment at a time, the second read from the L2):
small cases bit-exact in numsim and clean in sync_check, what they cover (segments that cut
rows, a row carried across segments, several flag words a lane), the scratch reusable across
launches, the error bound on real-valued data, what the checks catch when a piece of the
protocol is taken out, refused shapes, and the H200 cases' residency (one wave, 2 CTAs an SM)."""

import numpy as np
import pytest

from tests.zoo._zoo import SMS, mutant, resident_ctas_per_sm, spills, sync_race
from tests.zoo.zoo_modules import (assert_matches, declare, kcoral_job_on_sim, load, mismatches,
                                   relaunch_on_scratch, scan_error_and_bound, simulate,
                                   small_cases)

MOD = load("cumsum_l2")
CUMSUM = load("cumsum")   # the flags' layout (status, epoch) is `cumsum`'s
SUITE = MOD.SUITE


def _case(name):
    return next(c for c in SUITE.cases if c.name == name)


@pytest.mark.parametrize("case", small_cases("cumsum_l2"), ids=lambda c: c.name)
def test_small_case_is_exact(case):
    res, inputs = simulate(SUITE, case)
    assert_matches(SUITE, case, res, inputs)


@pytest.mark.parametrize("case", small_cases("cumsum_l2"), ids=lambda c: c.name)
def test_small_case_is_sync_clean(case):
    sync, race = sync_race(SUITE, case)
    assert [f.kind for f in sync.findings + race.findings] == []
    assert sync.verdict == race.verdict == "clean"


def test_the_small_cases_cut_rows_at_segments_and_carry_them():
    """Every small case has more tiles than CTAs (several segments) and a segment that ends
    inside a row; one has a row spanning three segments (P carried twice), one more CTAs than
    a lane's flag word (two words a lane), one more than one warp, one a partial last segment."""
    spans, words, warps, partial = [], [], [], []
    for case in small_cases("cumsum_l2"):
        p = case.params
        tile = MOD.tile_elems(p["BLOCK"], p["CHUNKS"], p["VEC"])
        per_row = -(-p["cols"] // tile)
        total, g = p["rows"] * per_row, SUITE.grid(case)[0]
        assert total > g and any((s * g) % per_row for s in range(1, -(-total // g))), case.name
        spans.append(max(len({(r * per_row + i) // g for i in range(per_row)})
                         for r in range(p["rows"])))
        words.append(g > 32)
        warps.append(p["BLOCK"] > 32)
        partial.append(total % g)
    assert max(spans) >= 3 and any(words) and any(warps) and any(partial)


def test_a_second_launch_takes_one_ticket_per_cta_and_the_next_epoch():
    case = _case("r3_c3004")
    res, inputs = simulate(SUITE, case)
    grid = SUITE.grid(case)[0]
    assert int(res.outputs["counter"][0]) == grid
    res2, statuses, epochs = relaunch_on_scratch(SUITE, case, res, inputs)
    assert int(res2.outputs["counter"][0]) == 2 * grid
    assert epochs == {1} and statuses == {CUMSUM.ST_A}   # every tile's sum, this launch's


def test_error_on_real_valued_data_is_within_the_stated_bound():
    """`cumsum`'s bound, (log2(TILE) + tiles up to it) * eps * sum |x|, as the module states."""
    case = MOD.make_case("normal", rows=2, cols=6000, BLOCK=64, CHUNKS=2, CTAS=3)
    err, bound = scan_error_and_bound(SUITE, case, MOD.tile_elems(64, 2, 4))
    assert (err <= bound).all()
    assert err.max() > 0   # real-valued data does round (the bound is not vacuous)


FRESH = "                fresh = (hi == tag) | ~ok\n"
PARITY = "        par = s & 1\n"
CARRY = ("        prefix = T.ptx.add.f32(T.ptx.selp.f32(P, 0.0, row_t * per_row < first),\n")
ADVANCE = "        P.set(T.ptx.add.f32(T.ptx.selp.f32(P, 0.0, row_l * per_row < first),\n"


def _run(suite, case, per_warp):
    ns = pytest.importorskip("tirxh_numsim")
    inputs = suite.make_inputs(case, 0)
    return ns.run(suite.kernel, inputs, grid=suite.grid(case), outputs=list(suite.outputs),
                  consts=suite.consts(case), per_warp=per_warp), inputs


def test_without_the_epoch_check_a_cta_scans_from_sums_not_yet_published(tmp_path):
    """A flag is this launch's sum only when its tag carries this launch's epoch (and status A):
    without the check, a CTA that runs ahead reads zero (or the last launch's) sums. numsim's
    lockstep schedule publishes every sum before any CTA reads, so the per-warp schedule
    shows it (tests/zoo/test_scan_schedules.py runs every scan's small cases under it)."""
    mod = mutant(tmp_path, "cumsum_l2", [(FRESH, "                fresh = (hi >= 0) | ~ok\n")])
    for name in ("r1_c5000", "r3_c3004"):
        case = next(c for c in mod.SUITE.cases if c.name == name)
        res, inputs = _run(mod.SUITE, case, per_warp=True)
        assert mismatches(mod.SUITE, case, res, inputs), name


@pytest.mark.parametrize("edit,name", [
    # a row that began in an earlier segment starts from 0 here
    ((CARRY, CARRY.replace("selp.f32(P, 0.0", "selp.f32(0.0, 0.0")), "r3_c3004"),
    # the running prefix not carried past a segment
    ((ADVANCE, ADVANCE.replace("selp.f32(P, 0.0", "selp.f32(0.0, 0.0")), "r1_c5000"),
], ids=["no-carry-into-the-tile", "no-carry-past-the-segment"])
def test_a_broken_prefix_gives_a_wrong_scan(edit, name, tmp_path):
    mod = mutant(tmp_path, "cumsum_l2", [edit])
    case = next(c for c in mod.SUITE.cases if c.name == name)
    res, inputs = simulate(mod.SUITE, case)
    assert mismatches(mod.SUITE, case, res, inputs)


def test_one_buffer_of_warp_sums_for_two_segments_is_a_race(tmp_path):
    """A(s + 1) follows A(s) with no barrier between thread 0's reads of the warps' sums and
    the next writes: with one buffer racecheck reports the read and the write (2 warps)."""
    mod = mutant(tmp_path, "cumsum_l2", [(PARITY, "        par = 0\n")])
    sync, race = sync_race(mod.SUITE, next(c for c in mod.SUITE.cases if c.name == "r1_c5000"))
    assert race.verdict == "error"
    assert {f.kind for f in race.findings} == {"race.read-write"}


@pytest.mark.parametrize("params,match", [
    (dict(rows=1, cols=4096, BLOCK=48), r"BLOCK=48 must be a multiple of 32"),
    (dict(rows=1, cols=4096, BLOCK=1024, CHUNKS=16), r"warp totals must fit one warp's scan"),
    (dict(rows=1, cols=4096, CHUNKS=32), r"CHUNKS \* VEC at most 64"),
    (dict(rows=1, cols=4096, CTAS=265), r"CTAS=265 must be in \[1, 264\]: at most 2 CTAs an SM"),
    (dict(rows=1 << 12, cols=1 << 20), r"rows\*cols=4294967296 must be below 2\^32"),
    (dict(rows=1, cols=4096, POL=2), r"POL=2 must be 0"),
])
def test_refused_shapes_name_the_case_and_the_constraint(params, match):
    with pytest.raises(ValueError, match=r"case 'bad': .*" + match):
        declare(SUITE, MOD.make_case("bad", **params), MOD.constraints)


@pytest.mark.slow(reason="compiles the H200 cases with ptxas")
def test_the_h200_cases_are_one_wave_without_spills():
    """Every CTA waits on every other's sums: 264 CTAs need 2 an SM at once (95 registers at
    CHUNKS 8, 128 at 16: 2 x 256 x 128 fills the register file exactly)."""
    assert spills(SUITE) == {}
    for case in SUITE.cases:
        if not case.small:
            assert SUITE.grid(case)[0] <= SMS * resident_ctas_per_sm(SUITE, case), case.name


@pytest.mark.slow(reason="KCoral's whole job on numsim's board")
def test_kcorals_job_reuses_the_scratch_across_launches(tmp_path):
    """KCoral's job as the H200 runs it, on numsim's board: repeated launches on one scratch
    (the epochs), the perturbation guard leaving the scratch (`flags`, `counter`) alone."""
    res = kcoral_job_on_sim(SUITE, _case("r3_c3004"), tmp_path)
    g = res["guards"]["perturbation"]
    assert g["status"] == "passed" and g["perturbed"] == ["x"]
    assert set(g["skipped"]) == {"flags", "counter"}
    assert all(r["ok"] for r in res["correctness"]) and res["sim"]["launches"] >= 8


def test_the_iket_build_records_each_phase_within_the_benchmarks_capacity():
    """MODE=cum13 profiles r1_c64M with ``--iket-capacity`` N: the profiling build (numsim, a
    small case) computes what the plain build computes and records, per segment, a ``reduce``
    and a ``scan`` on every warp and warp 0's ``wait`` inside its ``scan``; N holds the H200
    case's warp 0 (3 ranges a segment, 2 events each)."""
    import re
    from pathlib import Path
    iket = pytest.importorskip("tirxh_iket.transform")
    decode = pytest.importorskip("tirxh_iket.decode").decode
    ns = pytest.importorskip("tirxh_numsim")
    case = _case("r1_c5000")    # 5 tiles on 2 CTAs: 3 segments, the last with CTA 0's tile only
    consts, grid = SUITE.consts(case), (SUITE.grid(case)[0], 1, 1)
    ck, layout = iket.compile_profiling_build(SUITE.kernel, "sm_90a", consts, capacity=64)
    res, inputs = simulate(SUITE, case)
    trace = np.zeros(layout.buffer_bytes(grid) // 8, np.uint64)
    prof = ns.run(ck, dict(inputs, iket_trace=trace), grid=grid)
    assert prof.verdict == "clean"
    np.testing.assert_array_equal(prof.outputs["out"], res.outputs["out"])
    tl = decode(prof.outputs["iket_trace"].view(np.uint8), layout)
    assert tl.issues == [] and len(tl.warps) == 2 * 2
    for w in tl.warps:   # A(0), then A(s + 1) before B(s); warp 0 waits inside its B
        scan = ["scan", "wait"] if w.warp == 0 else ["scan"]
        want = ["reduce", "reduce"] + scan + ["reduce"] + scan + scan
        assert [s.name for s in w.spans] == want, (w.cta, w.warp)
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "zoo_perf_bench.sh"
    m = re.search(r"cumsum_l2\[r1_c64M\] --iket --iket-capacity (\d+)", script.read_text())
    big = _case("r1_c64M").params
    tiles = -(-big["cols"] // MOD.tile_elems(big["BLOCK"], big["CHUNKS"], big["VEC"]))
    assert m and int(m.group(1)) >= 2 * 3 * -(-tiles // big["CTAS"])
