"""zoo/kernels/kda_decode_cols.py: kda_decode's small cases, odd sizes and rings that wrap (every
token count, saturated gates) in numsim against the float64 recurrence; sync_check clean, and
each ordering of the producer/compute hand-back shown to be load-bearing (without it, sync_check
reports the race); the padded chunks keep the state's shared accesses conflict-free (and the
unpadded layout would not); the rotated rows' gate sources are load-bearing; one CTA per SM
without spills; refused shapes. PREP = 1 (the producer warp prepares each head's gates and norms
once, in shared memory): its small cases, its hand-back (`tok`, `ready`) load-bearing. PREP = 2
(a tenth warp prepares them; the producer keeps PREP = 0's loop): its small cases, its ring clean
and its waits load-bearing, the producer's copies without waterfall loops. START = 1 (the first
head's load before the other stages'): its rings clean, its copies' order. DYN = 1 (heads from a
counter): its rings clean, its waits load-bearing, the counter never cleared. The iket build: the
same results, each head's ranges recorded."""

import re
from pathlib import Path

import numpy as np
import pytest

import tirxh.lang as T

from ._zoo import (check, load, mutant, resident_ctas_per_sm, small_cases, spills, sync_race,
                   ticket_atomics)

MOD = load("kda_decode_cols")
BULK = load("kda_decode_bulk")
B = MOD.B                      # the kda_decode_bulk that kda_decode_cols imports
RING = next(c for c in MOD.SUITE.cases if c.name == "n7_h1_t2_c2")
PREP_RING = next(c for c in MOD.SUITE.cases if c.name == "n7_h1_t2_c2_prep")
PW_RING = next(c for c in MOD.SUITE.cases if c.name == "n7_h1_t2_c2_pw")


@pytest.mark.parametrize("suite,case", small_cases(MOD.SUITE))
def test_small_cases_match_the_reference_in_numsim(suite, case):
    res = check(suite, case)
    assert res.verdict == "clean", [f.message for f in res.findings]


def test_the_small_cases_cover_odd_sizes_every_token_count_and_saturated_gates():
    small = [c.params for c in MOD.SUITE.cases if c.small]
    assert {p["TT"] for p in small} == {1, 2, 3, 4}
    assert any(p.get("gate") == "deep" and p.get("CTAS") == 1 for p in small)
    # a CTA walks more heads than the ring has stages (the stages are refilled)
    assert any(-(-p["N"] * p["H"] // p.get("CTAS", 132)) > 3 for p in small)


def test_the_prepared_gates_cover_every_token_count_odd_sizes_and_saturated_gates():
    """PREP = 1's small cases: TT = 1..4, a CTA walking 5 heads through 3 stages with deep
    gates (each stage's `tok`, `full`, `ready` and `done` in both phases), odd N H over 3 CTAs;
    and each of kda_decode's four large shapes has its PREP = 1 twin (benchmarks/kda_bench.sh
    decodecols2 times them beside PREP = 0's)."""
    small = [c.params for c in MOD.SUITE.cases if c.small and c.params.get("PREP") == 1]
    assert {p["TT"] for p in small} == {1, 2, 3, 4}
    assert any(p.get("gate") == "deep" and p.get("CTAS") == 1 and p["N"] * p["H"] > 3
               for p in small)
    big = {c.name for c in MOD.SUITE.cases if not c.small}
    assert {f"{c.name}_{k}" for c in MOD.D.SUITE.cases if not c.small
            for k in ("prep", "tail")} <= big
    tail = [c.params for c in MOD.SUITE.cases if c.small and c.params.get("TAIL")]
    # TAIL = 1 on CTAs of 1, 2, 3, 4 and 5 heads (the deferred stores of min(heads, 3))
    assert {-(-p["N"] * p["H"] // MOD._ctas(p["N"], p["H"], p.get("CTAS", 132))) for p in tail
            } >= {1, 2, 4, 5}


def test_the_preparing_warp_covers_every_token_count_and_rings_that_wrap():
    """PREP = 2's small cases: TT = 1..4, deep and slow gates, CTAs of 1 to 5 heads (from the
    4th head the preparing warp rewrites a stage's `pre`); a PREP = 2
    twin of each large shape, tagged "pwarp" and "alt", not "ring" (decodecols2 keeps its items)."""
    small = [c.params for c in MOD.SUITE.cases if c.small and c.params.get("PREP") == 2]
    assert {p["TT"] for p in small} == {1, 2, 3, 4}
    assert {p.get("gate") for p in small} >= {"deep", "slow"}
    assert {-(-p["N"] * p["H"] // MOD._ctas(p["N"], p["H"], p.get("CTAS", 132))) for p in small
            } >= {1, 2, 4, 5}
    big = [c for c in MOD.SUITE.cases if not c.small and c.params.get("PREP") == 2
           and not c.params.get("START")]                  # `_pwst`: START = 1's (below)
    shapes = [c.name for c in MOD.D.SUITE.cases if not c.small]
    assert sorted(c.name for c in big) == sorted([f"{n}_pw" for n in shapes] +
                                                 [f"{n}_pwtail" for n in shapes])
    # "alt": out of kda_bench's smokes; "pwtail": TAIL = 1's twins (decodecols4 times them)
    assert all(c.tags == (("pwtail", "alt") if c.params.get("TAIL") else ("pwarp", "alt"))
               for c in big)


def test_a_grid_balanced_below_ctas_walks_every_head_once():
    """5 heads and CTAS = 4 take 2 rounds: 3 CTAs (2, 2 and 1 heads), each head's o and state
    written once (numsim checks every output element written and within tolerance)."""
    case = next(c for c in MOD.SUITE.cases if c.name == "n5_h1_t2_c4")
    assert MOD.SUITE.grid(case) == (3, 1, 1)
    assert [MOD._ctas(n, 1, c) for n, c in ((7, 2), (9, 3), (10, 3), (1, 132))] == [2, 3, 3, 1]


def test_the_ring_is_clean_under_sync_check():
    """Two CTAs walk 4 and 3 heads through 3 stages: each stage is handed back by the compute
    warps' mbarrier, stored, and refilled behind its store."""
    assert MOD.SUITE.grid(RING) == (2, 1, 1)
    sync, race = sync_race(MOD.SUITE, RING)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings
    assert "events checked" in race.summary


@pytest.mark.parametrize("old,new,code", [
    ("done[ring.stage].wait(ring.phase)\n                    store_or_defer(j, prev)",
     "store_or_defer(j, prev)", "race.read-write"),
    ("done[s].init(32 * WARPS)", "done[s].init(32)", "mbarrier.phase-overrun"),
    ("T.ptx.fence.proxy.async_.shared__cta()", "pass", "proxy.missing-fence"),
], ids=["no-done-wait", "one-warp-hands-back", "no-proxy-fence"])
def test_each_ordering_of_the_hand_back_is_needed(tmp_path, old, new, code):
    """The producer storing a stage before the compute warps wrote it back (no wait, or a
    barrier whose phase one warp completes: the others overrun it), the threads' writes not
    fenced for the copy engine: each a finding. (The refill behind ``wait_group.read`` is
    kda_decode_bulk's `store_and_refill`, whose tests remove that wait.)"""
    mod = mutant(tmp_path, "kda_decode_cols", [(old, new)])
    found = [f for r in sync_race(mod.SUITE, RING) for f in r.findings]
    assert code in {f.kind for f in found}, sorted({f.kind for f in found})


def test_the_prepared_gates_ring_is_clean_under_sync_check():
    """PREP = 1: the tokens land on `tok` before the state on `full`; the producer warp reads
    them, writes the gates to `pre` and arrives on `ready` (32 lanes); the compute warps wait on
    all three; the producer rewrites a stage's `pre` only after that stage's `done`."""
    sync, race = sync_race(MOD.SUITE, PREP_RING)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


def test_the_deferred_stores_ring_is_clean_under_sync_check():
    """TAIL = 1: the last three heads' stores wait for the CTA's last load; the refill issued
    while the head's own store is deferred waits for every store to have read (a mutant
    waiting for all but the newest lets the refill overwrite the previous head's stage while
    its store reads it)."""
    case = next(c for c in MOD.SUITE.cases if c.name == "n7_h1_t2_c2_tail")
    sync, race = sync_race(MOD.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


def test_the_preparing_warp_ring_is_clean_under_sync_check():
    """PREP = 2: a tenth warp waits on `tok`, prepares the gates into `pre` and arrives on
    `ready`; the producer warp runs PREP = 0's loop; two CTAs of 4 and 3 heads (the 4th head
    rewrites the first stage's `pre`)."""
    assert MOD.SUITE.grid(PW_RING) == (2, 1, 1)
    sync, race = sync_race(MOD.SUITE, PW_RING)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


def test_the_preparing_warp_and_the_producer_copy_without_waterfall_loops():
    """PREP = 1's producer runs its copies inside a loop that all 32 lanes walk: ptxas cannot
    prove the copies' addresses warp-uniform and wraps each UBLKCP in a loop over the lanes'
    values (R2UR, BRA.U.ANY: 48 a head at TT = 4); PREP = 2 keeps PREP = 0's lane-0 loop, none.
    Block of 10 warps; one CTA an SM (session 14's SASS: 160 registers, 0 spills)."""
    big = {c.name: c for c in MOD.SUITE.cases if not c.small}

    def compiled(name):
        return MOD.SUITE.kernel.compile("sm_90a", **MOD.SUITE.consts(big[name]))
    assert compiled("n64_h64_t4_pw").launch_metadata()["block"][0] == 320
    assert compiled("n64_h64_t4_prep").launch_metadata()["block"][0] == 288
    assert "BRA.U.ANY" not in compiled("n64_h64_t4_pw").sass
    assert "BRA.U.ANY" not in compiled("n64_h64_t4_pwtail").sass
    # 48 copies in the loop (16 store, 16 token, 16 state) and 32 in each of the 3 first loads
    assert compiled("n64_h64_t4_prep").sass.count("BRA.U.ANY") == 48 + 3 * 32
    assert resident_ctas_per_sm(MOD.SUITE, big["n64_h64_t4_pw"]) == 1


def _heads_stored_before_the_last_state_landed(case_name):
    """One simulated launch of a one-CTA case: how many heads' state stores (16 bulk copies a
    head) were issued before the CTA's last state chunk completed its `full` phase."""
    numsim = pytest.importorskip("tirxh_numsim")
    from tirxh_numsim.events import AsyncOp, MBarrierEvent
    case = next(c for c in MOD.SUITE.cases if c.name == case_name)
    assert MOD.SUITE.grid(case) == (1, 1, 1)
    res = numsim.run(MOD.SUITE.kernel, MOD.SUITE.make_inputs(case), consts=MOD.SUITE.consts(case),
                     grid=MOD.SUITE.grid(case), trace=True)
    ops = {e.op_id: e for e in res.trace.of_kind(AsyncOp) if e.stage == "issue"}
    landed = max(e.seq for e in res.trace.of_kind(MBarrierEvent)
                 if e.completed_phase and e.by_async is not None
                 and ops[e.by_async].nbytes == MOD.CROWS * MOD.V * 4)
    stores = [e.seq for e in ops.values() if e.direction == "store"]
    assert len(stores) == 16 * case.params["N"] * case.params["H"]
    return sum(seq < landed for seq in stores) // 16


def test_tail_stores_the_last_three_heads_only_after_the_last_load():
    """One CTA of 5 heads: TAIL = 1 stores heads 0 and 1 (their stages are refilled) before the
    last head's state lands and heads 2, 3, 4 after; PREP = 1 alone has stored head 2 by then
    in numsim's schedule (its store is issued when the head is computed). (numsim lands a
    head's tokens with its state, so the producer's `tok` wait before the deferred stores
    already orders them here; on the device the tokens land first and the `full` wait does.)"""
    assert _heads_stored_before_the_last_state_landed("n5_h1_t4_deep_c1_tail") == 2
    assert _heads_stored_before_the_last_state_landed("n5_h1_t4_deep_c1_prep") > 2


@pytest.mark.parametrize("name", ["n7_h1_t2_c2_tail", "n7_h1_t2_c2_pwtail"])
def test_the_deferred_stores_refill_waits_for_every_store(tmp_path, name):
    mod = mutant(tmp_path, "kda_decode_cols",
                 [("bulk.wait_group.read(0)", "bulk.wait_group.read(1)")])
    case = next(c for c in mod.SUITE.cases if c.name == name)
    found = [f for r in sync_race(mod.SUITE, case) for f in r.findings]
    assert "race.stage-reuse" in {f.kind for f in found}, sorted({f.kind for f in found})


def test_the_deferred_stores_beside_the_preparing_warp_are_clean_under_sync_check():
    """TAIL = 1 with PREP = 2 (session 19): the producer's lane-0 loop defers the last three
    heads' stores as PREP = 1's did; CTAs of 4 and 3 heads."""
    case = next(c for c in MOD.SUITE.cases if c.name == "n7_h1_t2_c2_pwtail")
    sync, race = sync_race(MOD.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


def test_tail_beside_the_preparing_warp_defers_the_last_three_stores():
    """PREP = 2 with TAIL = 1 stores heads 0 and 1 before the last head's state lands, like
    PREP = 1's TAIL; PREP = 2 alone has stored head 2 by then (numsim's schedule)."""
    assert _heads_stored_before_the_last_state_landed("n5_h1_t4_deep_c1_pwtail") == 2
    assert _heads_stored_before_the_last_state_landed("n5_h1_t4_deep_c1_pw") > 2


@pytest.mark.parametrize("old,new,code,name", [
    ("                ready[ring.stage].wait(ring.phase)\n", "", "race.read-write",
     "n2_h2_t1_prep"),
    ("ready[s].init(32)", "ready[s].init(1)", "mbarrier.arrival-count", PREP_RING.name),
    ("        tok[stage].wait(phase)\n", "", "race.read-write", PREP_RING.name),
    ("        tok[stage].wait(phase)\n", "", "race.read-write", PW_RING.name),
], ids=["no-ready-wait", "one-lane-readies", "no-tok-wait", "pw-no-tok-wait"])
def test_each_ordering_of_the_prepared_gates_is_needed(tmp_path, old, new, code, name):
    """The compute warps reading `pre` before the producer wrote it, a `ready` phase that one
    lane completes, the producer reading tokens the copy engine has not landed: each a
    finding. (The first on one head a CTA: on the ring, its races make sync_check explore
    for over a minute.)"""
    mod = mutant(tmp_path, "kda_decode_cols", [(old, new)])
    case = next(c for c in mod.SUITE.cases if c.name == name)
    found = [f for r in sync_race(mod.SUITE, case) for f in r.findings]
    assert code in {f.kind for f in found}, sorted({f.kind for f in found})


def _state_wavefronts(suite, case):
    """(accesses, wavefronts) of the compute warps' 16-byte f32 shared loads and stores in one
    simulated launch: a 16-byte access is served a quarter warp (8 lanes) at a time, each quarter
    in as many wavefronts as the most distinct 4-byte words that one of the 32 banks holds."""
    numsim = pytest.importorskip("tirxh_numsim")
    from tirxh_numsim.events import MemAccess
    res = numsim.run(suite.kernel, suite.make_inputs(case), consts=suite.consts(case),
                     grid=suite.grid(case), trace=True)
    accesses = wavefronts = 0
    pending: dict = {}      # numsim records a vector access as one event per element, in order
    for e in res.trace.of_kind(MemAccess):
        if e.space != "shared" or e.instr is None or not e.instr.spelling.endswith("v4.f32"):
            continue
        parts = pending.setdefault((e.cta, e.warp, id(e.instr)), [])
        parts.append(e)
        if len(parts) < 4:
            continue
        del pending[(e.cta, e.warp, id(e.instr))]
        accesses += 1
        for quarter in range(4):
            banks: dict = {}
            for lane, start, end in (r for p in parts for r in p.ranges):
                if lane // 8 == quarter:
                    for word in range(start // 4, end // 4):
                        banks.setdefault(word % 32, set()).add(word)
            wavefronts += max((len(w) for w in banks.values()), default=0)
    assert not pending, "a 16-byte access recorded in other than 4 element events"
    return accesses, wavefronts


def test_the_padded_chunks_make_the_state_accesses_conflict_free(tmp_path):
    """Every ld/st.shared.v4.f32 of the state takes the minimum of 4 wavefronts (one a quarter
    warp), as kda_decode_bulk's whole rows; without the 64 bytes of padding the two rg of a
    quarter warp meet on the same 16 banks: 8."""
    case = next(c for c in MOD.SUITE.cases if c.name == "n2_h2_t1")
    n, waves = _state_wavefronts(MOD.SUITE, case)
    assert n == 2 * 4 * 8 * 16 and waves == 4 * n          # 4 heads x 8 warps x 16 rows x 2
    flat = mutant(tmp_path, "kda_decode_cols",
                  [("CSTRIDE = CROWS * V + 16", "CSTRIDE = CROWS * V")])
    n2, waves2 = _state_wavefronts(flat.SUITE, case)
    assert (n2, waves2) == (n, 8 * n)


@pytest.mark.parametrize("name", ["n1_h3_t4_deep", "n1_h3_t4_prep"])
def test_the_rotated_rows_take_their_decays_from_the_rotated_lanes(tmp_path, name):
    """An odd rg walks its rows from its second chunk: the gate's source lanes follow, or with
    PREP the rows whose prepared decays it reads (a mutant reading the unrotated ones decays the
    wrong rows and leaves the reference's tolerance)."""
    mod = mutant(tmp_path, "kda_decode_cols", [("((i + 2 * odd) & 3)", "(i & 3)")])
    case = next(c for c in mod.SUITE.cases if c.name == name)
    assert check(mod.SUITE, case).verdict != "clean"


def test_one_persistent_cta_per_sm_without_spills():
    """Three 70 KB stages fill an SM's shared memory: one CTA of 9 warps per SM, the grid one
    wave of the fewest CTAs that take as many rounds as 132 (N64 H64: 128 x 32 heads, not
    31 rounds on 132 and a 32nd on 4); the state registers and tokens fit without spilling."""
    big = {c.name: c for c in MOD.SUITE.cases if not c.small}
    bulk = {c.name for c in BULK.SUITE.cases if not c.small}
    twins = ("prep", "tail", "pw", "pwtail", "st", "pwst", "dyn", "dyn_ta")
    assert set(big) == bulk | {f"{c.name}_{k}" for c in MOD.D.SUITE.cases if not c.small
                               for k in twins}
    # "ring" (decodecols2's) for PREP = 0 and 1 without START or DYN; the other twins not
    assert all(("ring" in c.tags) == (c.params.get("PREP") != 2 and not c.params.get("START")
                                      and not c.params.get("DYN")) for c in big.values())
    grids = {name: MOD.SUITE.grid(c)[0] for name, c in big.items()}
    want = {"n256_h64_t1": 132, "n128_h96_t1": 131, "n64_h64_t4": 128,
            "n1024_h32_t2": 132, "n64_h64_t4_c128": 128}
    assert grids == {**want, **{f"{n}_{k}": g for n, g in want.items() if "c128" not in n
                                for k in twins}}
    for name in ("n64_h64_t4", "n64_h64_t4_prep", "n64_h64_t4_st", "n64_h64_t4_pwst",
                 "n64_h64_t4_dyn", "n64_h64_t4_dyn_ta"):
        assert resident_ctas_per_sm(MOD.SUITE, big[name]) == 1, name
    assert spills(MOD.SUITE) == {}


def test_refused_shapes_name_the_case_and_the_rule():
    """kda_decode_bulk's rules (tested there) with this kernel's shared memory: 3 stages of
    padded chunks fit at every TT, 4 at none."""
    assert MOD.smem_bytes(4, 3) <= B.SMEM_LIMIT < MOD.smem_bytes(1, 4)
    with pytest.raises(ValueError, match=r"case 'bad': STAGES=4, TT=1: 270512 bytes of shared "
                                         r"memory exceed the 232448 of a CTA"):
        B.ring_suite(MOD.kda_decode_cols, MOD.constraints, [T.case("bad", N=2, H=2, STAGES=4)])
    assert MOD.constraints(N=2, H=2, TT=5) and MOD.constraints(N=2, H=2, CTAS=0)
    # PREP = 1 adds TT x 656 bytes and 2 mbarriers a stage: 3 stages still fit at TT = 4
    assert MOD.smem_bytes(4, 3, 1) <= B.SMEM_LIMIT
    assert MOD.constraints(N=2, H=2, PREP=3) == [
        "PREP=3 must be 0 (each compute warp its gates), 1 (the producer warp's, in shared "
        "memory) or 2 (a warp of their own's)"]
    # TAIL with every PREP (session 19: the lane-0 loop of PREP = 0 and 2 defers too)
    assert not any(MOD.constraints(N=2, H=2, PREP=pr, TAIL=1) for pr in (0, 1, 2))
    assert MOD.constraints(N=2, H=2, TAIL=2) == [
        "TAIL=2 must be 0 or 1 (the last heads' stores after the last load)"]


def test_inputs_reference_and_tolerances_are_kda_decodes():
    """kda_decode's reference, tolerance and baselines (the same objects as kda_decode_bulk's);
    its inputs plus DYN's head counter `sched` (one zero u64), which every case takes (one
    kernel signature: bulk's parameters, then `sched`). bench_with.py --share-inputs makes a
    shape's arrays and float64 reference once for all of kda_decode_cols' variants (session 21:
    no longer across kda_decode_bulk too, whose kernel takes no counter)."""
    for attr in ("reference", "tolerance", "baselines"):
        assert getattr(MOD.SUITE, attr) == getattr(BULK.SUITE, attr), attr
    assert MOD.SUITE.inputs is MOD.inputs and MOD.SUITE.reference is MOD.D.reference
    case = next(c for c in MOD.SUITE.cases if c.name == "n7_h1_t2_c2")
    ours, theirs = MOD.SUITE.make_inputs(case, 3), BULK.SUITE.make_inputs(case, 3)
    assert set(ours) == set(theirs) | {"sched"}
    assert all(np.array_equal(ours[n], theirs[n]) for n in theirs if n != "o")  # o: np.empty
    assert ours["sched"].dtype == np.uint64 and ours["sched"].tolist() == [0]
    assert ([repr(p) for p in MOD.kda_decode_cols.runtime_params][:-1]
            == [repr(p) for p in BULK.kda_decode_bulk.runtime_params])
    assert MOD.kda_decode_cols.runtime_params[-1].name == "sched"


@pytest.mark.parametrize("name", ["n7_h1_t2_c2", "n7_h1_t2_c2_pw"])
def test_the_iket_build_records_each_heads_phases_and_computes_the_same(name):
    """`tirxh profile --iket` on kda_decode_cols (session 21: where T = 4's 3.2 us of fixed cost
    beyond a copy's goes, s21/d6-d7): the profiling build, run by numsim on a ring that wraps (7
    heads on 2 CTAs: 4 and 3 heads through 3 stages), computes what the plain build computes
    and records, per head, `wait_full` and `head` on each compute warp and `wait_done` on the
    producer (its lane 0); the preparing warp of PREP = 2 records nothing. The capacity session
    21's profile ran at (docs/PERFORMANCE.md) holds the busiest warp at n64_h64_t4 (2 ranges x
    2 events a head)."""
    iket = pytest.importorskip("tirxh_iket.transform")
    decode = pytest.importorskip("tirxh_iket.decode").decode
    ns = pytest.importorskip("tirxh_numsim")
    from .zoo_modules import simulate as simulate_one
    case = next(c for c in MOD.SUITE.cases if c.name == name)
    grid = MOD.SUITE.grid(case)
    ck, layout = iket.compile_profiling_build(MOD.SUITE.kernel, "sm_90a", MOD.SUITE.consts(case),
                                              capacity=64)
    plain, inputs = simulate_one(MOD.SUITE, case)
    trace = np.zeros(layout.buffer_bytes(grid) // 8, np.uint64)
    prof = ns.run(ck, dict(inputs, iket_trace=trace), grid=grid)
    assert prof.verdict == "clean"
    for out in MOD.SUITE.outputs:
        np.testing.assert_array_equal(prof.outputs[out], plain.outputs[out])
    tl = decode(prof.outputs["iket_trace"].view(np.uint8), layout)
    heads = {cta: len(range(cta, 7, 2)) for cta in range(2)}
    assert tl.issues == []
    assert {(w.cta, w.warp) for w in tl.warps} == {(c, w) for c in range(2) for w in range(9)}
    for w in tl.warps:
        want = ["wait_done"] if w.warp == MOD.PRODUCER else ["wait_full", "head"]
        assert [s.name for s in w.spans] == want * heads[w.cta], (w.cta, w.warp)
    docs = (Path(__file__).resolve().parents[2] / "docs" / "PERFORMANCE.md").read_text()
    m = re.search(r"kda_decode_cols\[n64_h64_t4\] --iket\s+--iket-capacity (\d+)", docs)
    big = next(c for c in MOD.SUITE.cases if c.name == "n64_h64_t4").params
    ctas = MOD._grid(big["N"], big["H"], big.get("CTAS", 132))[0]
    assert m and int(m.group(1)) >= 4 * -(-big["N"] * big["H"] // ctas)


@pytest.mark.parametrize("name", ["n7_h1_t2_c2_st", "n7_h1_t2_c2_pwst"])
def test_the_first_head_first_ring_is_clean_under_sync_check(name):
    """START = 1 (session 21): the producer's lane 0 waits on the first stage's `full` (phase 0,
    completed by the copies' bytes alone) before it asks for the other stages; the compute
    warps wait on the same phase. Beside PREP = 0 and PREP = 2, two CTAs of 4 and 3 heads."""
    case = next(c for c in MOD.SUITE.cases if c.name == name)
    sync, race = sync_race(MOD.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


@pytest.mark.parametrize("shape", ["n7_h1_t2_c2", "n64_h64_t4"])
def test_the_first_head_first_asks_for_one_stage_before_its_first_wait(shape):
    """What START = 1 changes (QUEUE 93's question: does the first head land among the other
    stages' loads?): before the producer's first mbarrier wait, one stage's bulk copies (16
    state chunks and 4 token rows a token) instead of STAGES'; every copy is still there. The
    big twins `_st` and `_pwst` are tagged "start" and "alt", not "ring" (decodecols5 times
    them; decodecols3 and 4 leave them out)."""
    def copies(name):
        c = next(c for c in MOD.SUITE.cases if c.name == name)
        ptx = MOD.SUITE.kernel.compile("sm_90a", **MOD.SUITE.consts(c)).ptx
        first = ptx[:ptx.index("mbarrier.try_wait")]
        return (first.count("cp.async.bulk.shared::cluster.global"),
                ptx.count("cp.async.bulk.shared::cluster.global"), c)
    before, total, c = copies(shape)
    assert before == c.params.get("STAGES", 3) * (MOD.CHUNKS + 4 * c.params["TT"])
    for kind in ("st", "pwst"):
        b, t, twin = copies(f"{shape}_{kind}")
        assert (b, t) == (before // 3, total)
        assert twin.params == {**c.params, "START": 1, **({"PREP": 2} if kind == "pwst" else {})}
        if not c.small:
            assert set(twin.tags) == {"start", "alt"}


def test_the_first_head_first_is_refused_beside_prep_1():
    """PREP = 1's producer warp prepares the first heads' gates beside their loads (all 32 lanes):
    START = 1 is refused there, and any value but 0 or 1, naming the rule."""
    assert any("START=1 needs PREP=0 or 2" in m for m in MOD.constraints(1, 3, 4, PREP=1, START=1))
    assert any("START=2 must be 0 or 1" in m for m in MOD.constraints(1, 3, 4, START=2))
    assert MOD.constraints(1, 3, 4, PREP=2, START=1) == []


DYN_RING = next(c for c in MOD.SUITE.cases if c.name == "n7_h1_t2_c2_dyn")


@pytest.mark.parametrize("name", ["n7_h1_t2_c2_dyn", "n1_h3_t1_dyn", "n7_h1_t2_c2_dyn_ta",
                                  "n1_h3_t1_dyn_ta"])
def test_the_counter_walk_is_clean_under_sync_check(name):
    """DYN = 1 (session 21): the producer's lane 0 takes each head from `sched`, writes it to
    `hidx` and arrives on `asg`; the compute warps read head j + 1's index after its `asg`
    phase and leave at END. 7 heads on 2 CTAs, and 3 heads on 3 CTAs (a CTA may take none)."""
    case = next(c for c in MOD.SUITE.cases if c.name == name)
    sync, race = sync_race(MOD.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


@pytest.mark.parametrize("old,new,code", [
    ("                asg[na.stage].wait(na.phase)\n                nxt", "                nxt",
     "race.read-write"),
    ("                asg[s].init(1)", "                asg[s].init(2)", "deadlock"),
], ids=["no-asg-wait", "asg-never-completes"])
def test_each_ordering_of_the_counter_walk_is_needed(tmp_path, old, new, code):
    """The compute warps reading the next head's index before the producer wrote it, and an
    `asg` phase that one arrival cannot complete: each a finding."""
    mod = mutant(tmp_path, "kda_decode_cols", [(old, new)])
    found = [f for r in sync_race(mod.SUITE, DYN_RING) for f in r.findings]
    assert code in {f.kind for f in found}, sorted({f.kind for f in found})


@pytest.mark.parametrize("name", ["n7_h1_t2_c2_dyn", "n1_h3_t1_dyn"])
def test_the_counter_needs_no_clearing_between_launches(name):
    """A launch takes exactly N H + grid tickets (one a head, one END a CTA), so the head is the
    ticket mod N H + grid whatever launch it is: numsim's results match the reference with the
    counter left by 0, 5 and 2^32 / (N H + grid) launches (the last crosses 2^32: the 64-bit
    remainder), and the launch leaves it N H + grid further on."""
    ns = pytest.importorskip("tirxh_numsim")
    case = next(c for c in MOD.SUITE.cases if c.name == name)
    grid = MOD.SUITE.grid(case)
    per = case.params["N"] * case.params["H"] + grid[0]
    for start in (0, 5 * per, (2 ** 32 // per) * per):
        inputs = MOD.SUITE.make_inputs(case, 0)
        inputs["sched"] = np.array([start], np.uint64)
        expected = MOD.SUITE.expected(case, inputs)
        res = ns.run(MOD.SUITE.kernel, dict(inputs), grid=grid, consts=MOD.SUITE.consts(case),
                     outputs=["o", "state", "sched"])
        assert res.verdict == "clean"
        for out in ("o", "state"):
            assert MOD.SUITE.tolerance_for(out).compare(res.outputs[out], expected[out])["ok"]
        assert int(res.outputs["sched"][0]) == start + per


@pytest.mark.parametrize("per_warp", [False, True], ids=["lockstep", "per-warp"])
@pytest.mark.parametrize("name", ["n7_h1_t2_c2_dyn_ta", "n5_h3_t3_c3_dyn_ta", "n1_h3_t1_dyn_ta"])
def test_the_early_tickets_reset_the_counter_at_the_launchs_end(name, per_warp):
    """TAKE = 1 (session 27): each refill's ticket asked a head early on the counter's low word.
    The launch still takes exactly N H + grid tickets (every ticket asked is read), so the holder
    of its last one sets the counter back to 0: numsim's results match the reference from a
    counter of 0 and of 3 (N H + grid) (what DYN = 1's launches leave, on inputs a shard's
    variants share), and the counter is 0 after each of two launches in a row, in lockstep and
    in numsim's per-warp schedule (a warp runs until it waits: one CTA takes heads ahead). The
    atomics write the counter's low word only, so `sched` is read back, not checked as an
    output every element of which is written."""
    ns = pytest.importorskip("tirxh_numsim")
    case = next(c for c in MOD.SUITE.cases if c.name == name)
    grid = MOD.SUITE.grid(case)
    per = case.params["N"] * case.params["H"] + grid[0]
    for start in (0, 3 * per):
        inputs = MOD.SUITE.make_inputs(case, 0)
        inputs["sched"] = np.array([start], np.uint64)
        for _ in range(2):
            expected = MOD.SUITE.expected(case, inputs)
            res = ns.run(MOD.SUITE.kernel, dict(inputs), grid=grid,
                         consts=MOD.SUITE.consts(case), outputs=["o", "state"],
                         per_warp=per_warp)
            assert res.verdict == "clean"
            for out in ("o", "state"):
                assert MOD.SUITE.tolerance_for(out).compare(res.outputs[out],
                                                            expected[out])["ok"], (start, out)
            assert int(res.outputs["sched"][0]) == 0
            inputs = dict(inputs, state=res.outputs["state"], sched=res.outputs["sched"])


def test_an_early_ticket_is_read_a_head_after_it_is_asked():
    """TAKE = 1's SASS: the refill's ticket is the u32 atomic's own register, and the first
    instruction that reads it is not the next one (DYN = 1's u64 ticket is read at once)."""
    case = next(c for c in MOD.SUITE.cases if c.name == "n64_h64_t4_dyn_ta")
    _, adds, wide = ticket_atomics(MOD.SUITE, case)
    assert adds and not wide
    for dest, atom, nxt in adds:
        assert not re.search(rf"\b{dest}\b", nxt), (atom, nxt)


def test_the_counter_walk_is_refused_beside_prep_tail_and_start():
    """DYN = 1 is written for PREP = 0's ring: PREP, TAIL or START beside it is refused, naming
    them; and any value but 0 or 1."""
    assert any("DYN=1 needs PREP=0, TAIL=0 and START=0" in m
               for m in MOD.constraints(1, 3, 4, PREP=2, DYN=1))
    assert any("DYN=1 needs" in m for m in MOD.constraints(1, 3, 4, TAIL=1, DYN=1))
    assert any("DYN=2 must be 0" in m for m in MOD.constraints(1, 3, 4, DYN=2))
    assert MOD.constraints(1, 3, 4, DYN=1) == []
    assert any("TAKE=1 needs DYN=1" in m for m in MOD.constraints(1, 3, 4, TAKE=1))
    assert any("TAKE=2 must be 0 or 1" in m for m in MOD.constraints(1, 3, 4, DYN=1, TAKE=2))
    assert MOD.constraints(1, 3, 4, DYN=1, TAKE=1) == []
