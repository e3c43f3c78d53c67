"""zoo/kernels/kda_bwd_prep_sg.py (piece 2a's prep with the gate's g_raw, k, q staged in shared
memory in one round; session 14, branch kdabwd11): its outputs against float64 and
bit-identical to kda_bwd_prep_tc PREP=2's reverse walk (WALK=1) and to kda_bwd_prep_only
(WALK=0); the gate's dependent global-load rounds in its SASS (the point of the variant);
sync_check clean (the staging's stores against the P, M phase's writes of the same tiles);
resources; bytes."""

import numpy as np
import pytest

import tirxh.lang as T

from tests.zoo._zoo import resident_ctas_per_sm, sync_race
from tests.zoo.zoo_modules import assert_matches, load

MOD = load("kda_bwd_prep_sg")
PT = load("kda_bwd_prep_tc")
PO = load("kda_bwd_prep_only")
SLOW = pytest.mark.slow   # numsim of 256 threads: ~2-4 s a chunk


def _run(kernel, x, case, outputs, consts):
    import tirxh_numsim as ns  # the numsim plugin distribution (installed with the project)
    return ns.run(kernel, x, grid=MOD.SUITE.grid(case), outputs=outputs, consts=consts)


def _case(name):
    return next(c for c in MOD.SUITE.cases if c.name == name)


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if "t20" in c.name else SLOW)
                                  for c in MOD.SUITE.cases if c.small], ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    x = MOD.SUITE.make_inputs(case, 0)
    res = _run(MOD.kda_bwd_prep_sg, x, case, ["bt", "eg"], MOD.SUITE.consts(case))
    assert_matches(MOD.SUITE, case, res, x)


@pytest.mark.parametrize("name", ["t20_h1_deep", "s2_t20_h1_deep",
                                  pytest.param("pack_80_1_30_h2", marks=SLOW),
                                  pytest.param("s2_pack_80_1_30_h2", marks=SLOW)])
def test_outputs_are_bit_identical_to_kda_bwd_prep_tc(name):
    """The same bf16 elements through the same conversions, every later phase the same code:
    N's words, B^T and exp(G_C) equal kda_bwd_prep_tc PREP=2 FORWARD=0's to the bit, at STAGE
    1 (the gate staged) and 2 (the second pass too)."""
    case = _case(name)
    x = MOD.SUITE.make_inputs(case, 0)
    outs = ["nfrag", "bt", "eg"]
    mine = _run(MOD.kda_bwd_prep_sg, x, case, outs, MOD.SUITE.consts(case)).outputs
    theirs = _run(PT.kda_bwd_prep_tc, dict(x), case, outs, dict(FORWARD=0, PREP=2)).outputs
    for n in outs:
        assert np.array_equal(np.asarray(mine[n]), np.asarray(theirs[n])), n
    assert np.any(np.asarray(mine["bt"]) != 0)


@pytest.mark.parametrize("stage", [1, 2])
def test_prep_alone_is_kda_bwd_prep_only(stage):
    """WALK=0: the prep and exp(G_C) only, as kda_bwd_prep_only (the timing twins po_.., po2_..):
    the same exp(G_C) to the bit, and no walk output written."""
    case = _case("t20_h1_deep")
    x = MOD.SUITE.make_inputs(case, 0)
    mine = _run(MOD.kda_bwd_prep_sg, x, case, ["bt", "eg"], dict(WALK=0, STAGE=stage)).outputs
    po = {n: x[n] for n in ("q", "k", "g_raw", "beta", "A_log", "dt_bias", "chunk_tok",
                            "chunk_rows", "eg")}
    theirs = _run(PO.kda_bwd_prep_only, dict(po, do=x["y"]), case, ["eg"], {}).outputs
    assert np.array_equal(np.asarray(mine["eg"]), np.asarray(theirs["eg"]))
    assert not np.any(np.asarray(mine["bt"]))


def _load_rounds(sass_lines):
    """Dependent rounds of global loads in straight-line SASS: a round ends at the first
    instruction that reads a register a global load of the current round writes (the loads of
    earlier rounds are taken as landed)."""
    import re
    epoch, pend, rounds = 0, {}, 0
    for line in sass_lines:
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)\s*(.*?);", line)
        if not m:
            continue
        op, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
        base = op.split(".")[0]
        width = 4 if ".128" in op else 2 if ".64" in op else 1
        regs = [{int(r) + i for r in re.findall(r"\bR(\d+)\b", a) for i in range(width
                 if j == 0 else 1)} for j, a in enumerate(args)]
        store = base in ("STG", "STS", "ST", "RED", "ATOM", "BAR", "BRA", "HMMA", "ISETP",
                         "FSETP", "EXIT")
        reads = set().union(*(regs if store else regs[1:])) if regs else set()
        if any(pend.get(r) == epoch for r in reads):
            rounds, epoch = rounds + 1, epoch + 1
        dst = set() if store or not regs else regs[0]
        for r in dst:
            pend.pop(r, None)
        if base in ("LDG", "LD"):
            pend.update({r: epoch for r in dst})
    return rounds


def _gate_sass(kernel, consts):
    """The SASS between the first and second ``BAR.SYNC`` (the gate phase)."""
    sass = kernel.compile("sm_90a", **consts).sass.splitlines()
    bars = [i for i, line in enumerate(sass) if "BAR.SYNC" in line]
    return sass[bars[0] + 1:bars[1] + 1]


def test_the_gate_waits_on_global_loads_once():
    """ptxas 13.0 on this machine (2026-12-03): kda_bwd_prep_tc's gate waits on its scalar
    global loads in >= 20 dependent rounds (25), this one's in one (A_log and dt_bias)."""
    ours = _load_rounds(_gate_sass(MOD.kda_bwd_prep_sg, dict(WALK=1)))
    theirs = _load_rounds(_gate_sass(PT.kda_bwd_prep_tc, dict(FORWARD=0, PREP=2)))
    assert ours <= 1 and theirs >= 20, (ours, theirs)


def test_the_prep_waits_on_global_loads_a_few_times():
    """The whole prep-alone kernel's SASS, rounds counted statically (a loop body once):
    kda_bwd_prep_only 32 (norms 3, gate 26, the second pass's loop body 2 of its 8 x 2, the
    dO loop's 1), STAGE=1 7 (the gate's 26 -> 1), STAGE=2 6 (norms 3, gate 1, then dO and k, q
    one round of wide loads each, issued by ptxas before the barriers they follow)."""
    def whole(kernel, consts):
        return _load_rounds(kernel.compile("sm_90a", **consts).sass.splitlines())
    po = whole(PO.kda_bwd_prep_only, {})
    s1 = whole(MOD.kda_bwd_prep_sg, dict(WALK=0, STAGE=1))
    s2 = whole(MOD.kda_bwd_prep_sg, dict(WALK=0, STAGE=2))
    assert po >= 30 and s1 <= 7 and s2 <= 6, (po, s1, s2)


def test_the_round_count_sees_dependent_loads():
    """The measure itself: two loads then a use is one round; a load, its use, a load, its use
    two."""
    one = ["/*0000*/ LDG.E R2, desc[UR4][R4.64] ;", "/*0010*/ LDG.E R3, desc[UR4][R6.64] ;",
           "/*0020*/ FADD R8, R2, R3 ;"]
    two = ["/*0000*/ LDG.E R2, desc[UR4][R4.64] ;", "/*0010*/ FADD R8, R2, R2 ;",
           "/*0020*/ LDG.E R3, desc[UR4][R6.64] ;", "/*0030*/ FADD R9, R3, R8 ;"]
    assert (_load_rounds(one), _load_rounds(two)) == (1, 2)


@SLOW
@pytest.mark.parametrize("name", ["pack_80_1_30_h2", "s2_pack_80_1_30_h2"])
def test_sync_check_is_clean(name):
    """The varlen pack on 2 heads: the staging stores, the gate's reads of the P and M tiles,
    then P and M's own writes there after the gate's barrier; STAGE=2 also y's tile written
    beside T's blocks, k and q into the P tile after them, read by the second pass."""
    for result in sync_race(MOD.SUITE, _case(name)):
        assert result.verdict == "clean", [f.message for f in result.findings]


@pytest.mark.parametrize("stage", [1, 2])
def test_compiles_without_spills_one_cta_an_sm(stage):
    r = MOD.kda_bwd_prep_sg.compile("sm_90a", WALK=1, STAGE=stage).resources
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
    assert resident_ctas_per_sm(MOD.SUITE, MOD.SUITE.cases[0]) == 1


def test_bytes_flops_and_bad_walk():
    ck = 12288
    assert MOD._bytes(1, 8192, 96, WALK=0) == PO._bytes(1, 8192, 96)
    assert MOD._bytes(1, 8192, 96) == PT._bytes(1, 8192, 96)
    assert MOD._flops(1, 8192, 96, WALK=0) == 2 * PT.TC.pm_macs(2) * ck
    assert MOD.check_walk(2) and not MOD.check_walk(0)
    assert MOD.check_stage(0) and not MOD.check_stage(2)
    with pytest.raises(ValueError, match=r"WALK=2 must be 1"):
        T.suite(MOD.kda_bwd_prep_sg, inputs=MOD.inputs, reference=MOD.reference,
                outputs=["bt", "eg"], constraints=MOD.constraints,
                cases=[T.case("bad", B=1, T_=20, H=1, WALK=2)])


def test_timing_suites_declare_only_the_outputs_their_cases_write():
    """WALK=0 writes exp(G_C) alone: its timing cases (po_.., po2_..) declare "eg" only, the
    walk's "bt" and "eg". Declared with "bt" (session 15, H200, /work/notes/s15/d6/calibsg/
    call.log) po_t8192_h96 and po2_t8192_h96 failed: KCoral poisons a declared output, and 'bt',
    never written, held NaN on the guards' check of the first launch. The case names stay what
    `benchmarks/kda_bench.sh calib` with CALIB_EXTRA=kda_bwd_prep_sg selects."""
    suites = [v for v in vars(MOD).values() if isinstance(v, T.Suite)]
    declared = {}
    for s in suites:
        for c in s.cases:
            assert c.name not in declared, c.name
            declared[c.name] = list(s.outputs)
            assert ("bt" in s.outputs) == bool(c.params.get("WALK", 1)), (c.name, s.outputs)
    t8192 = [c.name for c in MOD.PR.SUITE_TIMING.cases if c.name.startswith("t8192")]
    assert t8192 and {n: declared[n] for n in declared if "t8192" in n} == dict(
        [(n, ["bt", "eg"]) for n in t8192] + [(p + n, ["eg"]) for p in ("po_", "po2_")
                                              for n in t8192])


def test_the_prep_alone_never_touches_bt_so_its_timing_cases_bind_one_element():
    """At WALK=0 'bt' is loaded from its parameter and converted, nothing more (no load, no
    store through it): its timing cases bind a one-element buffer instead of uploading 805 MB of
    zeros; the walk (WALK=1) does use it. Every other input as `timing_inputs` gives it."""
    from tirxh.core.written import never_written, pointer_uses
    for stage in (1, 2):
        ir = MOD.kda_bwd_prep_sg.compile("sm_90a", WALK=0, STAGE=stage).ir_json()
        assert pointer_uses(ir, "bt") == ["ld.param.u64", "cvta.to.global.u64"], stage
        assert never_written(ir, ["bt", "eg"]) == ["bt"]
    walk = MOD.kda_bwd_prep_sg.compile("sm_90a", WALK=1, STAGE=2).ir_json()
    assert any(u.startswith("st.") for u in pointer_uses(walk, "bt"))
    assert never_written(walk, ["bt", "eg"]) == []
    mine = MOD.prep_timing_inputs(np.random.default_rng(5), 1, 128, 2)
    full = MOD.timing_inputs(np.random.default_rng(5), 1, 128, 2)
    assert mine["bt"].shape == (1,) and full["bt"].size > 1
    assert all(np.array_equal(mine[n], full[n]) for n in full if n != "bt")
    assert MOD.SUITE_TIMING_PREP.inputs is MOD.prep_timing_inputs


def test_the_prep_alone_on_the_sim_board_declaring_bt_or_not(tmp_path):
    """End to end on KCoral's sim board (numsim), a one-chunk twin of po_t8192_h96 (no
    reference: the first launch is its own): declaring 'bt' fails as correctness.unwritten
    naming it (on the H200 it failed as a self-"mismatch"), declaring "eg" alone with the
    one-element 'bt' passes the guards."""
    from kcoral.client import KCoralClient
    from kcoral.server import Daemon
    from tirxh.core.benchjob import build_job
    d = Daemon({"boards": {"sim": {}}}, state_dir=tmp_path, port=0).start()
    c = KCoralClient(d.address, client_name="prep-sg")
    try:
        got = {}
        for outs, inputs in ((("bt", "eg"), MOD.timing_inputs), (("eg",), MOD.prep_timing_inputs)):
            s = T.suite(MOD.kda_bwd_prep_sg, inputs=inputs, outputs=list(outs),
                        constraints=MOD.constraints,
                        cases=[T.case("tiny", B=1, T_=64, H=1, WALK=0, STAGE=1)])
            case = s.cases[0]
            ck = MOD.kda_bwd_prep_sg.compile("sm_90a", **s.consts(case))
            job = build_job(ck, s, case, put=c.put_blob, timing={"warmup": 1}, seeds=[1, 2])
            got[outs] = c.run(job, timeout=600)
    finally:
        c.close()
        d.stop(2)
    bad, ok = got[("bt", "eg")], got[("eg",)]
    err = bad["result"]["error"]
    assert bad["state"] == "failed" and err["type"] == "correctness.unwritten", err
    assert err["message"].startswith("'bt' was never written by the kernel on the timing inputs: "
                                     "all 16384 elements still hold the poison pattern")
    assert ok["state"] == "done", ok["result"].get("error")
    g = ok["result"]["guards"]
    assert g["timed_output"]["status"] == g["perturbation"]["status"] == "passed"
