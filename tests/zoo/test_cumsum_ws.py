"""zoo/kernels/cumsum_ws.py (`cumsum_persist`'s ring with one warp per CTA that does only the
look-back): small cases bit-exact in numsim and clean in sync_check, what they cover (rings
that wrap, runs cut by a row's end, several rows), the scratch reusable across launches, the
error bound on real-valued data, what the checks catch when a piece of the hand-off between the
look-back warp and the scanning warps is taken out, refused shapes, and the H200 cases'
residency (one wave)."""

import re
from pathlib import Path

import numpy as np
import pytest

from tests.zoo._zoo import SMS, mutant, resident_ctas_per_sm, spills, sync_race
from tests.zoo.zoo_modules import (assert_matches, declare, kcoral_job_on_sim, load, mismatches,
                                   relaunch_on_scratch, scan_error_and_bound, simulate,
                                   small_cases)

MOD = load("cumsum_ws")
PERSIST = load("cumsum_persist")  # the ring's helpers (`per_sm`, `ring_why`) are its
CUMSUM = load("cumsum")  # the flags' layout (status, epoch) is `cumsum`'s
SUITE = MOD.SUITE


def _case(name):
    return next(c for c in SUITE.cases if c.name == name)


@pytest.mark.parametrize("case", small_cases("cumsum_ws"), ids=lambda c: c.name)
def test_small_case_is_exact(case):
    res, inputs = simulate(SUITE, case)
    assert_matches(SUITE, case, res, inputs)


@pytest.mark.parametrize("case", small_cases("cumsum_ws"), ids=lambda c: c.name)
def test_small_case_is_sync_clean(case):
    sync, race = sync_race(SUITE, case)
    assert [f.kind for f in sync.findings + race.findings] == []
    assert sync.verdict == race.verdict == "clean"


def test_the_small_cases_wrap_their_rings_and_cut_runs():
    """Every small case has a CTA with more tiles than stages (the ring wraps, so the look-back
    warp's slot and `ready` barrier are reused), both ring depths and SLACKs, several rows, and
    a row end inside a thread's run (a float4 in, the next out)."""
    small = small_cases("cumsum_ws")
    for case in small:
        p = case.params
        tile = MOD.tile_elems(p["BLOCK"], p["RUN4"])
        ntiles = p["rows"] * -(-p["cols"] // tile)
        assert SUITE.grid(case)[0] == p["CTAS"] < ntiles, case.name
        assert -(-ntiles // p["CTAS"]) > p["STAGES"], case.name  # CTA 0's ring wraps
        last, run = p["cols"] % tile, p["RUN4"] * 4
        assert last and last % run and (last % run) % 4 == 0, case.name  # a run cut mid-way
    assert {c.params["STAGES"] for c in small} == {2, 3, 4}
    assert {c.params["SLACK"] for c in small} == {0, 1}
    assert {c.params["POL"] for c in small} == {0, 1}
    assert max(c.params["rows"] for c in small) > 1
    assert max(c.params["BLOCK"] for c in small) > 32      # several warps' totals


def test_the_block_has_one_warp_more_than_the_scan():
    case = _case("r2_c25004_b160")
    assert SUITE.kernel.compile("sm_90a", **SUITE.consts(case)).launch_metadata()["block"][0] \
        == case.params["BLOCK"] + 32


def test_agg_adds_the_aggregate_warp_and_its_barriers():
    """AGG 1: BLOCK + 64 threads; every small ring has an AGG 1 twin (the same shapes, the
    hand-off through `summed` exercised on each); AGG 0 builds no `summed` barrier."""
    case = _case("r2_c25004_b160_a")
    built = SUITE.kernel.compile("sm_90a", **SUITE.consts(case))
    assert built.launch_metadata()["block"][0] == case.params["BLOCK"] + 64
    names = {c.name for c in small_cases("cumsum_ws")}
    assert {n + "_a" for n in PERSIST.RING_SMALL} <= names
    assert "summed" in built.ptx
    assert "summed" not in SUITE.kernel.compile("sm_90a", **SUITE.consts(
        _case("r2_c25004_b160"))).ptx


def test_pol_hints_the_loads_and_not_the_stores():
    def ptx(name):
        case = _case(name)
        return SUITE.kernel.compile("sm_90a", **SUITE.consts(case)).ptx
    hinted = ptx("r2_c25004_b160_pol")
    assert "createpolicy.fractional.L2::evict_last.b64" in hinted
    assert re.search(r"cp\.async\.bulk\.shared::cluster\.global\.mbarrier::complete_tx::bytes"
                     r"\.L2::cache_hint", hinted)
    assert "cache_hint" not in ptx("r2_c25004_b160")
    assert not re.search(r"cp\.async\.bulk\.global\.shared::cta\.bulk_group\.L2", hinted)


def test_second_launch_takes_one_ticket_per_cta_and_the_next_epoch():
    case = _case("r3_c1020_s3")
    res, inputs = simulate(SUITE, case)
    grid = SUITE.grid(case)[0]
    assert int(res.outputs["counter"][0]) == grid
    res2, statuses, epochs = relaunch_on_scratch(SUITE, case, res, inputs)
    assert int(res2.outputs["counter"][0]) == 2 * grid
    assert epochs == {1} and statuses == {CUMSUM.ST_P}  # every tile ends with its prefix


def test_error_on_real_valued_data_is_within_the_stated_bound():
    """`cumsum`'s bound, (log2(TILE) + tiles up to it) * eps * sum |x|, with a run's RUN - 1
    sequential adds and the look-back warp's aggregate (TILE / 128 sequential adds a lane
    partial, 2 + 5 more) on top, as the module docstring describes the order (RUN = 12, 6
    float4s a lane here)."""
    case = MOD.make_case("normal", rows=2, cols=6000, BLOCK=64, RUN4=3, STAGES=2, SLACK=0,
                         LOOK=1, CTAS=3)
    tile = MOD.tile_elems(64, 3)
    err, bound = scan_error_and_bound(SUITE, case, tile)
    x = np.abs(SUITE.make_inputs(case, 3)["x"].astype(np.float64))
    scale = bound / (np.log2(tile) + np.arange(x.shape[1]) // tile + 1)  # eps * sum |x|
    assert (err <= bound + (3 * 4 - 1 + tile // 128 + 7) * scale).all()
    assert err.max() > 0  # real-valued data does round (the bound is not vacuous)


# the mutations: what each check sees when a piece of the protocol is taken out
READY_WAIT = "                    ready[ring.stage].wait(ring.phase)\n"
ARRIVE = "            ready[ring.stage].arrive()  # 32 arrivals: every lane's reads are released\n"
REFILL_WAIT = "                T.ptx.cp.async_.bulk.wait_group.read(SLACK)\n"
FENCE = ("                T.ptx.fence.proxy.async_.shared__cta()  # generic writes -> the bulk "
         "store's reads\n")
OFFSET_BAR = ("                write_back(T.ptx.ld.shared.f32(pre.at(ring.stage)))\n"
              "            T.ptx.bar.sync(1, BLOCK)\n")
EXIT_WAIT = ("            T.ptx.cp.async_.bulk.wait_group.read(0)  # no bulk store reads shared "
             "memory at exit\n")
LB_FULL_WAIT = "            full[ring.stage].wait(ring.phase)\n        with T.iket.range(\"agg\"):\n"


def _kinds(mod, name):
    sync, race = sync_race(mod.SUITE, _case(name))
    verdict = "error" if "error" in (sync.verdict, race.verdict) else race.verdict
    return [f.kind for f in sync.findings + race.findings], verdict


@pytest.mark.parametrize("edit,name,kind", [
    # warp 0 reads the tile's prefix before the look-back warp wrote it
    ((READY_WAIT, "                    pass\n"), "r3_c1020_s3", "race"),
    # only lane 0 of the look-back warp arrives: its other lanes' reads of the stage are not
    # ordered before the refill (the barrier then counts 1)
    ((ARRIVE, "            with T.if_(lane == 0):\n    " + ARRIVE),
     "r1_c1772_s2", "race"),
    # the look-back warp sums the stage before its bulk load completed
    ((LB_FULL_WAIT, "            pass\n        with T.iket.range(\"agg\"):\n"),
     "r3_c1020_s3", "race"),
    # the stage refilled while tile k - 1's bulk store may still read it (SLACK 0)
    ((REFILL_WAIT, ""), "r1_c1772_s2", "race.stage-reuse"),
    # the bulk store reads what the threads wrote without the proxy fence
    ((FENCE, ""), "r1_c1772_s2", "proxy.missing-fence"),
    # the other scanning warps read their offsets before warp 0 wrote them (5 warps)
    ((OFFSET_BAR, OFFSET_BAR.replace("            T.ptx.bar.sync(1, BLOCK)\n", "")),
     "r2_c25004_b160", "race"),
    # the CTA exits while its last bulk stores may still read the ring
    ((EXIT_WAIT, "            pass\n"), "r3_c1020_s3", "exit.bulk-store-pending"),
], ids=["no-ready-wait", "one-lane-arrives", "no-look-back-load-wait", "refill-before-store-read",
        "no-proxy-fence", "no-offset-barrier", "no-exit-wait"])
def test_a_broken_hand_off_is_caught(edit, name, kind, tmp_path):
    src = edit
    if src[0] == ARRIVE:   # the mutant's barrier must expect one arrival, not 32
        mod = mutant(tmp_path, "cumsum_ws", [src, ("(ready, 32)", "(ready, 1)")])
    else:
        mod = mutant(tmp_path, "cumsum_ws", [src])
    kinds, verdict = _kinds(mod, name)
    assert verdict == "error" and any(k.startswith(kind) for k in kinds), kinds


SUMMED_WAIT = "                    summed[ring.stage].wait(ring.phase)\n"
SUMMED_ARRIVE = ("            summed[ring.stage].arrive()  # 32 arrivals: every lane's reads are "
                 "released\n")
AGG_SLOT = "                T.ptx.st.shared.f32(aggs.at(ring.stage), agg)\n"


@pytest.mark.parametrize("edit,name,kind", [
    # AGG 1: the look-back warp reads the stage's sum before the aggregate warp wrote it
    ((SUMMED_WAIT, "                    pass\n"), "r3_c1020_s3_a", "race"),
    # only lane 0 of the aggregate warp arrives: its other lanes' reads of the stage are not
    # ordered before the refill (the barrier then counts 1)
    ((SUMMED_ARRIVE, "            with T.if_(lane == 0):\n    " + SUMMED_ARRIVE),
     "r1_c1772_s2_a", "race"),
    # the aggregate warp sums the stage before its bulk load completed
    ((LB_FULL_WAIT, "            pass\n        with T.iket.range(\"agg\"):\n"),
     "r1_c12004_t256_a", "race"),
], ids=["no-summed-wait", "one-agg-lane-arrives", "no-aggregate-load-wait"])
def test_a_broken_aggregate_hand_off_is_caught(edit, name, kind, tmp_path):
    edits = [edit] + ([("(summed, 32)", "(summed, 1)")] if edit[0] == SUMMED_ARRIVE else [])
    mod = mutant(tmp_path, "cumsum_ws", edits)
    kinds, verdict = _kinds(mod, name)
    assert verdict == "error" and any(k.startswith(kind) for k in kinds), kinds


def test_the_check_catches_a_stale_aggregate_slot(tmp_path):
    """AGG 1: the look-back warp learns a tile's sum only through the stage's slot; the slot
    never written leaves 0 there, and the P it publishes is short of the tile."""
    mod = mutant(tmp_path, "cumsum_ws", [(AGG_SLOT, "                pass\n")])
    case = _case("r3_c1020_s3_a")
    res, inputs = simulate(mod.SUITE, case)
    assert mismatches(mod.SUITE, case, res, inputs)


PASS2 = ("                rewrite_run(raddr, RUN4, T.reg(T.f32, init=T.ptx.add.f32(\n"
         "                    T.ptx.ld.shared.f32(wt.at(warp)), excl)), lambda j: in_row(col0, j))\n")


@pytest.mark.parametrize("new,name", [
    ("                rewrite_run(raddr, RUN4, T.reg(T.f32, init=T.ptx.ld.shared.f32(wt.at(warp))),\n"
     "                            lambda j: in_row(col0, j))\n", "r2_c25004_b160"),  # no lane offset
    ("                rewrite_run(raddr, RUN4, T.reg(T.f32, init=excl), lambda j: in_row(col0, j))\n",
     "r1_c1772_s2"),                                         # one warp: no tile prefix
], ids=["no-lane-offset", "no-tile-prefix"])
def test_the_check_catches_a_wrong_offset(new, name, tmp_path):
    mod = mutant(tmp_path, "cumsum_ws", [(PASS2, new)])
    case = _case(name)
    res, inputs = simulate(mod.SUITE, case)
    assert mismatches(mod.SUITE, case, res, inputs)


def test_the_check_catches_an_aggregate_short_of_its_tile(tmp_path):
    """The look-back warp's aggregate is the only thing the later tiles learn of a tile: one
    float4 a lane left out of it shows in every later tile of the row."""
    old = "            for i in range(per_lane):\n"
    mod = mutant(tmp_path, "cumsum_ws", [(old, old.replace("per_lane", "per_lane - 1"))])
    case = _case("r3_c1020_s3")
    res, inputs = simulate(mod.SUITE, case)
    assert mismatches(mod.SUITE, case, res, inputs)


@pytest.mark.parametrize("params,match", [
    (dict(BLOCK=48), r"BLOCK=48 must be a multiple of 32 in \[32, 992\]"),
    (dict(BLOCK=1024), r"BLOCK=1024 must be a multiple of 32 in \[32, 992\]"),
    (dict(RUN4=0), r"RUN4=0 must be at least 1"),
    (dict(STAGES=2), r"STAGES=2 at least 2 \+ SLACK"),          # SLACK 1: nothing ahead
    (dict(STAGES=1, SLACK=0), r"STAGES=1 at least 2 \+ SLACK"),
    (dict(SLACK=2, STAGES=4), r"SLACK=2 0 or 1"),
    (dict(RUN4=17, STAGES=4),
     r"= 278528 bytes of ring \(\+2 KB\) exceed an SM's 232448"),
    (dict(CTAS=133), r"CTAS=133 must be in \[1, 132\]: one wave of 1 CTA\(s\) per SM"),
    (dict(RUN4=6, CTAS=265), r"CTAS=265 must be in \[1, 264\]: one wave of 2"),
    (dict(LOOK=3), r"LOOK=3 must be 1, 2, 4 or 8"),
    (dict(POL=3), r"POL=3 must be 0 \(no policy\) or 1 \(evict-last loads\)"),
    (dict(AGG=2), r"AGG=2 must be 0 \(the look-back warp sums each tile\) or 1"),
    (dict(BLOCK=992, AGG=1), r"BLOCK=992 must be a multiple of 32 in \[32, 960\]"),
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
def test_h200_cases_are_one_resident_wave(case):
    """A CTA waits on other CTAs' flags: the whole grid must be resident at once (what ptxas
    built: registers and shared memory), exactly the CTAs per SM the case is named for."""
    per_sm = resident_ctas_per_sm(SUITE, case)
    assert per_sm == PERSIST.per_sm(case.params["BLOCK"], case.params["RUN4"],
                                    case.params["STAGES"], extra=32 + 32 * case.params["AGG"])
    assert SUITE.grid(case)[0] == case.params["CTAS"] == SMS * per_sm


def test_h200_cases_do_not_spill():
    assert spills(SUITE) == {}


def test_kcorals_protocol_passes_on_the_sim_board(tmp_path):
    """KCoral's job as the H200 runs it, on numsim's board: repeated launches on one scratch
    (the epochs), the perturbation guard leaving the scratch (`flags`, `counter`) alone."""
    res = kcoral_job_on_sim(SUITE, _case("r1_c12004_t256"), tmp_path)
    g = res["guards"]["perturbation"]
    assert g["status"] == "passed" and g["perturbed"] == ["x"]
    assert set(g["skipped"]) == {"flags", "counter"}
    assert all(r["ok"] for r in res["correctness"]) and res["sim"]["launches"] >= 8


@pytest.mark.parametrize("name", ["r2_c25004_b160", "r2_c25004_b160_a"])
def test_the_iket_build_records_every_phase_within_the_benchmarks_capacity(name):
    """MODE=cum10 profiles the default, MODE=cum11 the AGG 1 default, with
    ``--iket-capacity`` N: the profiling build (run by numsim on a small case) must compute the
    same result and record 2 events per range and tile (the look-back warp: wait, agg,
    look_back, with AGG 1 wait, look_back and the aggregate warp wait, agg; warp 0: wait, sum,
    ready, scan, store; the other scanning warps: wait, sum, scan, store), and N must hold the
    H200 case's busiest warp (ceil(tiles / CTAs) tiles of 10 events), or the profile comes
    back `incomplete`."""
    iket = pytest.importorskip("tirxh_iket.transform")
    decode = pytest.importorskip("tirxh_iket.decode").decode
    ns = pytest.importorskip("tirxh_numsim")
    case = _case(name)
    consts, grid = SUITE.consts(case), (SUITE.grid(case)[0], 1, 1)
    ck, layout = iket.compile_profiling_build(SUITE.kernel, "sm_90a", consts, capacity=64)
    inputs = SUITE.make_inputs(case, 0)
    trace = np.zeros(layout.buffer_bytes(grid) // 8, np.uint64)
    res, _ = simulate(SUITE, case, inputs=inputs)
    prof = ns.run(ck, dict(inputs, iket_trace=trace), grid=grid)
    assert prof.verdict == "clean"
    np.testing.assert_array_equal(prof.outputs["out"], res.outputs["out"])
    tl = decode(prof.outputs["iket_trace"].view(np.uint8), layout)
    ctas, nw, agg = case.params["CTAS"], case.params["BLOCK"] // 32, case.params["AGG"]
    assert tl.issues == [] and len(tl.warps) == ctas * (nw + 1 + agg)
    tiles = {cta: len(range(cta, 16, ctas)) for cta in range(ctas)}  # 2 rows of 8 tiles
    for w in tl.warps:
        names = [s.name for s in w.spans]
        per_tile = ((["wait", "look_back"] if agg else ["wait", "agg", "look_back"])
                    if w.warp == nw else ["wait", "agg"] if w.warp == nw + 1 else
                    ["wait", "sum", "ready", "scan", "store"] if w.warp == 0 else
                    ["wait", "sum", "scan", "store"])
        assert names == per_tile * tiles[w.cta], (w.cta, w.warp)
    script = (Path(__file__).resolve().parents[2] / "benchmarks" / "zoo_perf_bench.sh")
    big = "r1_c64M_a" if agg else "r1_c64M"   # MODE=cum11 profiles the AGG 1 default
    m = re.search(r"cumsum_ws\[%s\] --iket --iket-capacity (\d+)" % big, script.read_text())
    h200 = _case(big).params
    ntiles = -(-h200["cols"] // MOD.tile_elems(h200["BLOCK"], h200["RUN4"]))
    assert m and int(m.group(1)) >= 10 * -(-ntiles // h200["CTAS"])


@pytest.mark.parametrize("name", ["r1_c33260_g40_a_c", "r2_c25004_b160_a_c"])
def test_coal_reads_consecutive_flags_and_counts_them_j_major(name, tmp_path, monkeypatch):
    """COAL 1: `cumsum._counted_j_major` counts a window read 32 consecutive flags a load. Its
    later loads (j >= 1) never counted is caught on the 40-CTA case, whose look-backs find their
    nearest P 32 or more back (or none in the window), and not on the 3-CTA one (P always in j
    = 0): the small cases cover both."""
    import sys
    cum = sys.modules["cumsum"]   # the module the zoo's kernels import the look-back from
    real = cum._counted_j_major

    def first_load_only(is_p, lane):
        any_p, counted = real(is_p, lane)
        return any_p, counted[:1] + [counted[0] & ~counted[0] for _ in counted[1:]]

    monkeypatch.setattr(cum, "_counted_j_major", first_load_only)
    mod = mutant(tmp_path, "cumsum_ws", [])
    case = next(c for c in mod.SUITE.cases if c.name == name)
    res, inputs = simulate(mod.SUITE, case)
    assert bool(mismatches(mod.SUITE, case, res, inputs)) == (name == "r1_c33260_g40_a_c")


@pytest.mark.parametrize("name,look", [("r1_c64M_a_c", 4), ("r1_c64M_a_l8_c", 8)])
def test_coal_issues_a_rounds_loads_before_its_ballots(name, look):
    """COAL 1's round takes one ballot over the lane's flags, then one per load that waits for
    it (and the `waiting` one: LOOK + 2), so the LOOK loads are all in flight before the first
    ballot (one L2 round trip a round); without that ptxas issued LOOK 4's last load after
    three ballots (two round trips). The AGG 1 default (COAL 0) issues its 4 the same way,
    with 2 ballots."""
    def sass(case):
        return SUITE.kernel.compile("sm_90a", **SUITE.consts(_case(case))).sass
    for case, loads, votes in ((name, look, look + 2), ("r1_c64M_a", 4, 2)):
        ops = re.findall(r"(LDG\.E\.64\.STRONG\.GPU|VOTE\.ANY)", sass(case))
        assert ops.count("VOTE.ANY") == votes and ops[:loads] == [ops[0]] * loads, (case, ops)
        assert ops[0].startswith("LDG") and ops.count(ops[0]) == loads, (case, ops)
