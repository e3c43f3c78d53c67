"""benchmarks/kda_fwd_bwd_bench.py (KDA forward + backward as one KCoral job per case) and
kda_bench.sh's group fb: the synthetic timing inputs, the refused arguments, the shapes the
group times, and (slow) a small case's job built and validated without a daemon."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fla_prewarm  # noqa: E402
import kda_fwd_bwd_bench as B  # noqa: E402


def test_timing_inputs_are_the_plans_buffers_without_a_reference():
    x = B.timing_inputs(np.random.default_rng(0), 1, 130, 2, lens=(64, 66))
    for n in B.M.SCRATCH + B.M.OUTPUTS + B.REF_ARGS + ("chunk_tok", "chunk_rows"):
        assert n in x, n
    assert x["s0"].shape == (3, 2, 128, 128) and x["do"].shape == (1, 130, 2, 128)
    assert list(x["cu_seqlens"]) == [0, 64, 130] and list(x["chunk_off"]) == [0, 1, 3]
    assert str(x["do"].dtype) == "bfloat16" and x["dht"].dtype == np.float32


def test_unknown_cases_and_a_missing_daemon_are_refused(capsys):
    with pytest.raises(SystemExit):
        B.main(["--build-only", "--cases", "t8192_h96", "t1_h9"])
    assert "unknown case(s) ['t1_h9']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        B.main(["--cases", "t20_h1_deep"])
    assert "--kcoral HOST:PORT is required" in capsys.readouterr().err


def test_group_fb_times_the_plans_large_cases_and_prewarms_them():
    text = (ROOT / "benchmarks" / "kda_bench.sh").read_text()
    shapes = re.search(r'for s in \$\{FB_SHAPES:-([^}]*)\}', text).group(1).split()
    large = {c.name for c in B.M.CASES if not c.small}
    assert set(shapes) == large == {"t8192_h96", "t8192_h64"}
    assert all(s in fla_prewarm.SHAPES for s in shapes)
    assert "|fb|" in text and "pw_bwd=--bwd" in text.split('*" fb "*)')[1].split("esac")[0]


def test_plan_names_the_job_and_an_unknown_plan_is_refused(capsys):
    assert B.item("f32") == "kda_fwd_bwd" and B.item("tc") == "kda_fwd_bwd_tc"
    with pytest.raises(SystemExit):
        B.main(["--build-only", "--plan", "wgmma"])
    assert "invalid choice: 'wgmma'" in capsys.readouterr().err
    text = (ROOT / "benchmarks" / "kda_bench.sh").read_text()
    # one plan, or several; the default one of kda_fwd_bwd's plans (the fastest measured)
    default = re.search(r'read -r -a FB_PLANS <<<"\$\{FB_PLAN:-(\w+)\}"', text)
    assert default and default.group(1) in B.M.PLANS, default
    assert text.count('"${FB[@]}" --plan "$p"') == 4   # both prebuilds, the smoke, the timing


@pytest.mark.slow
def test_a_small_case_builds_a_valid_job_of_seven_launches(monkeypatch, tmp_path):
    """The kernels compiled, the job laid out and validated (kcoral.job); the merged module's
    assembly (ptxas, ~80 s) replaced by a stand-in: tests/core/test_planjob.py assembles one."""
    monkeypatch.setattr(B, "_assemble", lambda cache: lambda ptx, target, prefer: (b"x", ""))
    job = B.build(next(c for c in B.M.CASES if c.name == "t20_h1_deep"), cache=tmp_path)
    assert [ln.entry for ln in job.launches][0] == "kda_fb_fwd" and len(job.launches) == 7
    assert {c.buffer for c in job.checks} == set(B.M.OUTPUTS)
    assert job.baselines[0].name == "fla.chunk_kda.fwd_bwd"
    assert len(job.runs) == 2 and set(job.runs[0].expected) == set(B.M.OUTPUTS)


@pytest.mark.slow
@pytest.mark.parametrize("plan", ["tc3", "tc4"])
def test_one_prep_plans_build_six_launches_with_their_scratch_zeroed(monkeypatch, tmp_path,
                                                                     plan):
    """Plans "tc3" and "tc4": one prep launch for both walks; the forward walk's operands
    (nfrag_f, bt_f) and tc4's stored prep tiles (ptile) are scratch (zeroed on the board, never
    uploaded: 1.6 and 1.2 GB at T8192 H96); the declared bytes read the raw inputs once for both
    walks, and tc4's add the tiles' write and read."""
    monkeypatch.setattr(B, "_assemble", lambda cache: lambda ptx, target, prefer: (b"x", ""))
    job = B.build(next(c for c in B.M.CASES if c.name == "t20_h1_deep"), cache=tmp_path,
                  plan_name=plan)
    assert [ln.entry for ln in job.launches] == [
        "kda_fb_fwd", "kda_fb_prep", "kda_fb_chain_f", "kda_fb_chain_b", "kda_fb_pieces",
        "kda_fb_local"]
    init = {b.name: b.init.kind for b in job.buffers}
    assert init["nfrag_f"] == init["bt_f"] == init["nfrag"] == "zeros"
    assert init.get("ptile") == ("zeros" if plan == "tc4" else None)
    assert B.M._bytes(1, 8192, 96, plan="tc3") < B.M._bytes(1, 8192, 96, plan="tc2")
    assert B.M._bytes(1, 8192, 96, plan="tc4") > B.M._bytes(1, 8192, 96, plan="tc3")
