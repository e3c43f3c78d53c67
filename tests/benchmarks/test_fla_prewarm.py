"""benchmarks/fla_prewarm.py must warm exactly the shapes kda_bench.sh times: its table is checked
against the zoo's KDA suites (shapes, heads, the varlen packs) and the script's SHAPES list."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "zoo" / "kernels"))

import fla_prewarm  # noqa: E402
import kda_decode  # noqa: E402
import kda_fwd  # noqa: E402


def _bench_shapes(var):
    text = (ROOT / "benchmarks" / "kda_bench.sh").read_text()
    m = re.search(var + r'="\$\{' + var + r':-([^}]*)\}"', text)
    return m.group(1).replace("\\\n", " ").split()


def test_every_timed_forward_shape_is_warmed_with_the_suites_geometry():
    cases = {c.name: c for s in (kda_fwd.SUITE, kda_fwd.SUITE_VARLEN) for c in s.cases}
    for shape in _bench_shapes("SHAPES") + _bench_shapes("BWD_SHAPES"):
        B, T, H, lens = fla_prewarm.SHAPES[shape]
        case = next(c for cid, c in cases.items() if cid.startswith(shape + "_v"))
        p = case.params
        assert (p["B"], p["T_"], p["H"], p.get("lens")) == (B, T, H, lens), shape


def test_every_decode_timing_case_is_warmed():
    timed = {c.name: c.params for c in kda_decode.SUITE.cases if not c.small}
    assert set(timed) == set(fla_prewarm.DECODE)
    for cid, p in timed.items():
        assert (p["N"], p["H"], p["TT"]) == fla_prewarm.DECODE[cid]


def test_unknown_shape_is_refused_by_name_before_torch_is_needed(capsys):
    with pytest.raises(SystemExit):
        fla_prewarm.main(["--shapes", "t8192_h96,t123", "--decode", "n9"])
    err = capsys.readouterr().err
    assert "unknown shape(s) t123, n9" in err and "t8192_h96" in err.split("forward")[1]


@pytest.mark.parametrize("script", sorted((ROOT / "benchmarks").glob("*.sh")), ids=lambda p: p.name)
def test_no_bare_wait_beside_a_background_prewarm(script):
    """A bare `wait` waits for every background child, the prewarm included: on the H200
    (2026-12-02) kda_bench.sh's compile step waited 536 s for FLA's autotune and the call timed
    nothing. Scripts that start a long-lived background job wait for named pids only."""
    text = script.read_text()
    if "PREWARM=$!" not in text:
        return
    bare = [n for n, line in enumerate(text.splitlines(), 1) if re.fullmatch(r"\s*wait\s*", line)]
    assert not bare, f"{script.name}: bare `wait` at line(s) {bare}"


def test_every_forward_is_warmed_before_any_forward_and_backward():
    order = fla_prewarm.plan(["pack6_h96", "pack6_h64", "pack8x1024_h64"])
    assert order[:3] == [("pack6_h96", "fla.chunk_kda"), ("pack6_h64", "fla.chunk_kda"),
                         ("pack8x1024_h64", "fla.chunk_kda")]
    assert [b for _, b in order[3:]] == ["fla.chunk_kda.fwd_bwd"] * 3
    with_bwd = fla_prewarm.plan(["t8192_h64"], bwd=True)
    assert with_bwd == [("t8192_h64", "fla.chunk_kda"), ("t8192_h64", "fla.chunk_kda.fwd_bwd"),
                        ("t8192_h64", "fla.chunk_kda.bwd")]


def test_only_keeps_the_named_baselines_in_the_same_order():
    """Group fb times FLA's forward + backward alone: warming the forwards first cost session
    20's call its measurement (the H96 forward + backward was killed half-compiled)."""
    order = fla_prewarm.plan(["t8192_h96", "t8192_h64"], only=["fla.chunk_kda.fwd_bwd"])
    assert order == [("t8192_h96", "fla.chunk_kda.fwd_bwd"), ("t8192_h64", "fla.chunk_kda.fwd_bwd")]
    assert fla_prewarm.plan(["t8192_h64"], bwd=True, only=None) == fla_prewarm.plan(["t8192_h64"],
                                                                                     bwd=True)


def test_unknown_baseline_is_refused_by_name_before_torch_is_needed(capsys):
    with pytest.raises(SystemExit):
        fla_prewarm.main(["--shapes", "t8192_h96", "--only", "fla.chunk_kda.fwd_bwd,fla.nope"])
    err = capsys.readouterr().err
    assert "unknown baseline(s) fla.nope" in err and "fla.chunk_kda.bwd" in err
