"""benchmarks/kda_sass_path.py, the per-phase issue counts and dependent-chain estimates behind
docs/TUNING.md's "The prep's in-place chains": the scoreboard walk on hand-written SASS, the
phase split's refusal of a body without the prep's barriers, and on the compiled variants the
claims the batched prep rests on (row by row, the gate's chain is latency, not issue; the
batched gate, materialize and A/M blocks have shorter chains)."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import kda_sass_path as S  # noqa: E402

LISTING = """
        /*0550*/                   FFMA R1, R2, R3, R4 ;                 /* 0x0000 */
        /*0560*/                   LDS R5, [R6+0x80] ;
        /*0570*/              @!P1 FADD R7, R5, R1 ;
        /*0580*/                   STS [R6], R7 ;
"""


def test_listing_is_parsed_in_order():
    assert S.instructions(LISTING) == ["FFMA R1, R2, R3, R4", "LDS R5, [R6+0x80]",
                                       "@!P1 FADD R7, R5, R1", "STS [R6], R7"]


def test_chain_waits_for_sources_and_issues_one_per_cycle():
    # independent: issued at cycles 1 and 2, the last result at 2 + 5
    assert S.chain(["FFMA R1, R2, R3, R4", "FADD R5, R6, R6"]) == 7
    # dependent on an ALU result: issued at 1 and 6, ready at 11
    assert S.chain(["FFMA R1, R2, R3, R4", "FADD R5, R1, R1"]) == 11
    # the listing: LDS issued at 2 (ready at 32), the FADD at 32, the store at 37
    assert S.chain(S.instructions(LISTING)) == 37
    # a 128-bit load writes 4 registers; a guard predicate is a source
    assert S.chain(["LDS.128 R4, [R1]", "FADD R9, R7, R7"]) == 1 + 30 + 5
    assert S.chain(["ISETP.GE.AND P1, PT, R1, R2, PT", "@P1 FADD R9, R8, R8"]) == 1 + 5 + 5


def test_a_body_without_the_prep_barriers_is_refused():
    with pytest.raises(ValueError, match=r"1 BAR.SYNC 0x1 in the SASS: not a warp-specialized "
                                         r"KDA forward \(its prep loop has 6 named barriers\)"):
        S.phases("/*0010*/ BAR.SYNC.DEFER_BLOCKING 0x1, 0x100 ;")


def test_unknown_variant_is_named(capsys):
    assert S.main(["v1"]) == 2
    assert "unknown variant 'v1'; known: v64s2, " in capsys.readouterr().out


@pytest.mark.slow(reason="compiles two kda_fwd variants with ptxas (~20 s)")
def test_batched_gate_is_issue_bound_where_row_by_row_was_latency_bound():
    old = {r["phase"]: r for r in S.phases(S.variant_sass("v64ws8"))}
    new = {r["phase"]: r for r in S.phases(S.variant_sass("v64ws8b"))}
    # row by row: ~3x the issue count in dependent latency; batched: within 1.5x of issue
    assert old["gate"]["chain"] > 2.5 * old["gate"]["issue"], old["gate"]
    assert new["gate"]["chain"] < 1.5 * new["gate"]["issue"], new["gate"]
    assert new["gate"]["mufu"] == old["gate"]["mufu"]
    # materialize's vectors loaded before their stores; the A/M blocks of a unit side by side
    assert new["materialize+diag"]["chain"] < 0.8 * old["materialize+diag"]["chain"]
    assert new["blocks"]["chain"] < 0.6 * old["blocks"]["chain"], (old["blocks"], new["blocks"])
    for p in ("factors", "inverse"):     # the phases BATCH does not touch
        assert new[p]["issue"] == pytest.approx(old[p]["issue"], rel=0.05), p
    # the state warps' chunk is found: its 232 mma.sync (16 value rows x the chunk's products)
    assert old["state (one warp)"]["hmma"] == new["state (one warp)"]["hmma"] == 232


PREP_LISTING = "\n".join(
    [f"        /*{16 * i:04x}*/                   {text} ;" for i, text in enumerate(
        ["MOV R1, R2", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R7+URZ], R2", "FADD R3, R1, R1"]
        + ["BAR.SYNC.DEFER_BLOCKING 0x1, 0x80"] * 6 + ["EXIT"])])


def test_code_size_counts_the_prep_loop_and_the_kernel():
    """16 bytes an instruction: the kernel's 10, the prep loop's from after the last mbarrier
    wait before the first named barrier to the sixth named barrier (7 instructions)."""
    assert S.code_size(PREP_LISTING) == {"kernel": 160, "prep_loop": 112}


def test_code_size_refuses_a_body_without_the_prep_barriers():
    with pytest.raises(ValueError, match=r"1 BAR.SYNC 0x1 in the SASS: not a warp-specialized "
                                         r"KDA forward"):
        S.code_size("/*0010*/ BAR.SYNC.DEFER_BLOCKING 0x1, 0x100 ;")


def test_trips_of_the_slim_prep_loops():
    """kda_fwd_slim's gate body runs 2 x (blocks per thread) times per chunk, its looped A/M
    block once per block of the busiest warp; kda_fwd's phases are unrolled (no trips)."""
    assert S.trips("v128wsb") == {} and S.trips("v64ws8") == {}
    assert S.trips("v128wsl") == {"gate": 4} and S.trips("v64ws8l") == {"gate": 2}
    assert S.trips("v128wsm") == {"gate": 4, "blocks": 5}
    assert S.trips("v64ws8m") == {"gate": 2, "blocks": 4}


def test_trips_multiply_a_phase():
    once = S.phases(PREP_LISTING)
    twice = S.phases(PREP_LISTING, {"norms": 2})
    assert twice[0]["issue"] == 2 * once[0]["issue"] == 2
    assert twice[0]["chain"] == 2 * once[0]["chain"] and twice[1:] == once[1:]
