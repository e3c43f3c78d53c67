"""benchmarks/kda_bench.sh's argument checks: a wrong group or shape is refused by name before
the script touches the GPU, the pip cache or the daemon (a device call is minutes of budget);
and without a GPU, KDA_BENCH_LIST=1 names the smoke's and every job's items of a group as
`tirxh bench --collect-only` selects them, so a -k that selects nothing or the wrong variants
(a renamed case, a substring that also matches another variant) is caught here and not on the
lent GPU."""

import os
import subprocess
from pathlib import Path

import pytest

from tests.benchmarks._listing import sections

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "kda_bench.sh"


def _cols_smoke() -> set:
    """kda_decode_cols's small cases as smoke items: every one is in a decode group's smoke."""
    from tests.zoo._zoo import load
    return {f"kda_decode_cols[{c.name}]" for c in load("kda_decode_cols").SUITE.cases
            if c.small}


def run_script(*groups, timeout=30, **env):
    full = {**os.environ, "OUT": "/nonexistent/never-created", **env}
    return subprocess.run(["bash", str(SCRIPT), *groups], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("groups, env, message", [
    (("nosuchgroup",), {}, "unknown group nosuchgroup"),
    (("prep4",), {}, "tc, tc2, prep2, tf32, calib, prep3)"),
    (("wsc",), {"WSC_SHAPES": "t8192_h64 t8192_h128"},
     "WSC_SHAPES takes t8192_h96 and t8192_h64, not t8192_h128"),
    (("wsf",), {"WSF_SHAPES": "pack6 t8192_h64"},
     "WSF_SHAPES takes t8192, pack6 and pack8x1024, not t8192_h64"),
])
def test_bad_arguments_are_refused_before_any_work(groups, env, message):
    done = run_script(*groups, **env)
    assert done.returncode == 2
    assert message in done.stdout
    assert not Path("/nonexistent/never-created").exists()


def test_group_wsc_times_and_prewarms_the_shapes_it_is_given():
    """One shape (WSC_SHAPES) is one job and one prewarm shape: the other's FLA autotune
    (87.5 s at H64 without the cache, session 8) is not paid for a job that is not run."""
    text = SCRIPT.read_text()
    assert 'pw_shapes="${WSC_SHAPES:-t8192_h96 t8192_h64}"' in text
    assert "for s in ${WSC_SHAPES:-t8192_h96 t8192_h64}; do" in text


def _prewarm_line(*groups) -> str:
    r = run_script(*groups, timeout=120, KDA_BENCH_LIST="1")
    assert r.returncode == 0, r.stdout + r.stderr
    return next(line for line in r.stdout.splitlines() if line.startswith("prewarm: "))


def test_fb_alone_warms_only_flas_forward_and_backward_at_its_shapes():
    """Session 20: warming FLA's forwards first (which group fb never times) left its H96 forward
    + backward half-compiled at the prewarm's limit; the plan's job then autotuned FLA inside its
    execution budget and nothing came back."""
    line = _prewarm_line("fb")
    assert "--shapes t8192_h96,t8192_h64 " in line
    assert "--only=fla.chunk_kda.fwd_bwd" in line and "--bwd" not in line
    with_forward = _prewarm_line("ws", "fb")   # a forward group keeps every baseline
    assert "--only= " in with_forward and "--bwd" in with_forward


def test_fb_job_budget_ends_before_its_client_is_killed():
    """A job that overruns must come back as its typed timeout: the daemon's execution budget is
    the call's time left less a margin whenever that is shorter than FB_EXEC_S."""
    text = SCRIPT.read_text()
    assert 'exec_s=$(( left - 25 < ${FB_EXEC_S:-180} ? left - 25 : ${FB_EXEC_S:-180} ))' in text
    assert '--exec-s "$exec_s"' in text


def _jobs(*groups, **env) -> dict:
    """{job name: [kernel[case], ...]} of the groups' listing (which must succeed, and create
    no OUT)."""
    r = run_script(*groups, timeout=300, KDA_BENCH_LIST="1", **env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not Path("/nonexistent/never-created").exists()
    return sections(r.stdout)


@pytest.mark.slow(reason="three tirxh bench --collect-only runs over the zoo")
def test_wsd_times_the_ahead_variants_after_their_control_in_one_job():
    jobs = _jobs("wsd")
    assert jobs["wsd-t8192_h64"] == [
        "kda_fwd_slim[t8192_h64_v64ws8l]", "kda_fwd_ahead[t8192_h64_v64ws8n]",
        "kda_fwd_ahead[t8192_h64_v64ws8p]", "kda_fwd_ahead[t8192_h64_v64ws8q]"]
    smoke = jobs["smoke"]
    ahead = [i for i in smoke if i.startswith("kda_fwd_ahead[")]
    assert len(ahead) == 5 and all("t8192" not in i for i in smoke)    # every small case
    assert {i for i in smoke if not i.startswith("kda_fwd_ahead[")} == {
        "kda_fwd_slim[b2_t65_h1_v64ws8l_slow]", "kda_fwd_slim[t150_h1_v64ws8l]",
        "kda_fwd_slim[pack_100_8_30_v64ws8l]"}                          # the control's
    assert set(jobs) == {"smoke", "warmup", "wsd-t8192_h64"}


@pytest.mark.slow(reason="a tirxh bench --collect-only run over the zoo")
def test_wse_times_the_pair_variants_after_both_controls_in_one_job():
    jobs = _jobs("wse")
    assert jobs["wse-t8192_h64"] == [
        "kda_fwd_slim[t8192_h64_v64ws8l]", "kda_fwd_ahead[t8192_h64_v64ws8q]",
        "kda_fwd_pair[t8192_h64_v64ws8c]", "kda_fwd_pair[t8192_h64_v64ws8d]"]
    smoke = jobs["smoke"]
    assert all("t8192" not in i for i in smoke)
    assert len([i for i in smoke if i.startswith("kda_fwd_pair[")]) == 13  # every small case
    assert {i.split("[")[0] for i in smoke} == {"kda_fwd_slim", "kda_fwd_ahead", "kda_fwd_pair"}
    assert all("v64ws8l" in i or "v64ws8q" in i for i in smoke if not i.startswith("kda_fwd_pair"))
    assert set(jobs) == {"smoke", "warmup", "wse-t8192_h64"}


@pytest.mark.slow(reason="two tirxh bench --collect-only runs over the zoo")
def test_wsf_times_the_new_pair_forms_beside_v64ws8c_at_each_h64_shape():
    """Group wsf (session 11): one job per H64 shape, kda_fwd_pair's c, e, f and g only (the
    substring v64ws8c must not select another kernel's variant); the smoke covers kda_fwd_pair's
    small cases; WSF_SHAPES narrows the jobs and the prewarm, WSF_VARIANTS the variants (a
    form whose smoke fails on the GPU can be left out and the others still timed)."""
    jobs = _jobs("wsf")
    shapes = ("t8192", "pack6", "pack8x1024")
    for s in shapes:
        assert jobs[f"wsf-{s}_h64"] == [f"kda_fwd_pair[{s}_h64_{v}]"
                                        for v in ("v64ws8c", "v64ws8e", "v64ws8f", "v64ws8g")]
    assert jobs["smoke"] and all(i.startswith("kda_fwd_pair[") for i in jobs["smoke"])
    for v in ("v64ws8e", "v64ws8f", "v64ws8g"):
        assert any(v in i for i in jobs["smoke"]), v
    assert set(jobs) == {"smoke", "warmup"} | {f"wsf-{s}_h64" for s in shapes}
    one = _jobs("wsf", WSF_SHAPES="pack6", WSF_VARIANTS="v64ws8c v64ws8e")
    assert set(one) == {"smoke", "warmup", "wsf-pack6_h64"}
    assert one["wsf-pack6_h64"] == ["kda_fwd_pair[pack6_h64_v64ws8c]",
                                    "kda_fwd_pair[pack6_h64_v64ws8e]"]
    assert one["smoke"] and all("v64ws8c" in i or "v64ws8e" in i for i in one["smoke"])
    assert "pw_shapes=$(printf '%s_h64 ' ${WSF_SHAPES:-t8192 pack6 pack8x1024})" \
        in SCRIPT.read_text()


@pytest.mark.slow(reason="two tirxh bench --collect-only runs over the zoo")
def test_slimpacks_times_each_pack_per_head_count_against_the_chosen_h64_variants():
    jobs = _jobs("slimpacks")
    for pack in ("pack6", "pack8x1024"):
        assert jobs[f"slim-{pack}_h96"] == [f"kda_fwd_slim[{pack}_h96_v128wsl]"]
        assert jobs[f"slim-{pack}_h64"] == [f"kda_fwd_slim[{pack}_h64_v64ws8l]",
                                            f"kda_fwd_ahead[{pack}_h64_v64ws8q]"]
    assert all(i.startswith(("kda_fwd_slim[", "kda_fwd_ahead[")) for i in jobs["smoke"])
    other = _jobs("slimpacks", SLIM_H64="v64ws8p")
    assert other["slim-pack6_h64"] == ["kda_fwd_ahead[pack6_h64_v64ws8p]"]


@pytest.mark.slow(reason="a tirxh bench --collect-only run over the zoo")
def test_wsc_still_selects_only_its_own_variants():
    """kda_fwd_ahead's variants (v64ws8n/p/q) share wsc's prefixes: its jobs keep their three."""
    jobs = _jobs("wsc", WSC_SHAPES="t8192_h64")
    assert jobs["wsc-t8192_h64"] == ["kda_fwd[t8192_h64_v64ws8b]",
                                     "kda_fwd_slim[t8192_h64_v64ws8l]",
                                     "kda_fwd_slim[t8192_h64_v64ws8m]"]


@pytest.mark.slow(reason="two tirxh bench --collect-only runs over the zoo")
def test_decode_times_the_bulk_ring_beside_its_control_in_one_job():
    """Group decode: kda_decode's large cases (tag main) and kda_decode_bulk's (tag ring) in one
    job against FLA; the smoke covers every small case of both; group main stays the control's."""
    jobs = _jobs("decode")
    cases = ["n256_h64_t1", "n128_h96_t1", "n64_h64_t4", "n1024_h32_t2"]
    assert jobs["decode"] == ([f"kda_decode[{c}]" for c in cases]
                              + [f"kda_decode_bulk[{c}]" for c in cases + ["n64_h64_t4_c128"]])
    bulk_small = [i for i in jobs["smoke"] if i.startswith("kda_decode_bulk[")]
    assert len(bulk_small) == 5 and "kda_decode_bulk[n7_h1_t2_c2]" in bulk_small
    main = _jobs("main")
    assert main["decode"] == [f"kda_decode[{c}]" for c in cases]


@pytest.mark.slow(reason="a tirxh bench --collect-only run over the zoo")
def test_decodebulk_times_the_bulk_ring_alone_after_a_decode_only_smoke():
    """Group decodebulk: kda_decode_bulk's large cases only (session 10's decode group spent its
    budget on the control and timed the ring at one shape); its smoke is the decode kernels'."""
    jobs = _jobs("decodebulk")
    cases = ["n256_h64_t1", "n128_h96_t1", "n64_h64_t4", "n1024_h32_t2", "n64_h64_t4_c128"]
    assert jobs["decodebulk"] == [f"kda_decode_bulk[{c}]" for c in cases]
    assert jobs["smoke"] and all(i.startswith("kda_decode") for i in jobs["smoke"])


@pytest.mark.slow(reason="a tirxh bench --collect-only run over the zoo")
def test_decodecols_times_the_column_warps_after_the_bulk_ring_in_one_job():
    """Group decodecols: kda_decode_bulk's five ring cases, then kda_decode_cols's, one job
    (--share-inputs: the second kernel's items find the first's arrays); its smoke is the decode
    kernels' small cases, every one of kda_decode_cols's among them; group decode keeps its
    control and the bulk ring only."""
    jobs = _jobs("decodecols")
    cases = ["n256_h64_t1", "n128_h96_t1", "n64_h64_t4", "n1024_h32_t2", "n64_h64_t4_c128"]
    assert jobs["decodecols"] == ([f"kda_decode_bulk[{c}]" for c in cases]
                                  + [f"kda_decode_cols[{c}]" for c in cases])
    assert {i for i in jobs["smoke"] if i.startswith("kda_decode_cols[")} == _cols_smoke()
    assert all(i.startswith("kda_decode") for i in jobs["smoke"])
    assert not [i for i in _jobs("decode")["decode"] if i.startswith("kda_decode_cols[")]
    assert 'SHARE_INPUTS=1 bench decodecols' in SCRIPT.read_text()


@pytest.mark.slow(reason="a tirxh bench --collect-only run over the zoo")
def test_decodecols2_times_prep_beside_the_column_warps_control_in_one_job():
    """Group decodecols2 (session 13): kda_decode_cols's PREP=0 ring cases (the control and its
    c128 replicate), then the PREP=1 and the PREP=1 TAIL=1 twins of the four shapes, one job on
    shared inputs; group decodecols keeps its ten items."""
    jobs = _jobs("decodecols2")
    cases = ["n256_h64_t1", "n128_h96_t1", "n64_h64_t4", "n1024_h32_t2"]
    assert jobs["decodecols2"] == ([f"kda_decode_cols[{c}]" for c in cases]
                                   + ["kda_decode_cols[n64_h64_t4_c128]"]
                                   + [f"kda_decode_cols[{c}_prep]" for c in cases]
                                   + [f"kda_decode_cols[{c}_tail]" for c in cases])
    assert all(i.startswith("kda_decode") for i in jobs["smoke"])
    assert 'SHARE_INPUTS=1 bench decodecols2' in SCRIPT.read_text()


@pytest.mark.slow(reason="a tirxh bench --collect-only run over the zoo")
def test_decodecols3_times_the_preparing_warp_beside_the_control_in_one_job():
    """Group decodecols3 (session 14): kda_decode_cols's PREP=0 n64_h64_t4, n1024_h32_t2 and
    the c128 replicate, then the PREP=2 twins of the two shapes, one job on shared inputs; its
    smoke is kda_decode_cols's small cases."""
    jobs = _jobs("decodecols3")
    assert jobs["decodecols3"] == ["kda_decode_cols[n64_h64_t4]", "kda_decode_cols[n1024_h32_t2]",
                                   "kda_decode_cols[n64_h64_t4_c128]",
                                   "kda_decode_cols[n64_h64_t4_pw]",
                                   "kda_decode_cols[n1024_h32_t2_pw]"]
    # kda_decode_cols's 28 small cases, none of the large PREP=2 twins (tagged "alt")
    assert set(jobs["smoke"]) == _cols_smoke()
    assert not {f"kda_decode_cols[{c}_pw]" for c in ("n256_h64_t1", "n128_h96_t1", "n64_h64_t4",
                                                      "n1024_h32_t2")} & set(jobs["smoke"])
    assert 'SHARE_INPUTS=1 bench decodecols3' in SCRIPT.read_text()


@pytest.mark.slow(reason="a tirxh bench --collect-only run over the zoo")
def test_decodecols4_times_the_deferred_stores_beside_decodecols3s_items():
    """Group decodecols4 (session 19): decodecols3's five items, then PREP=2's TAIL=1 twins of
    n64_h64_t4 and n1024_h32_t2 (`_pwtail`), one job a shape on shared inputs; PREP=1's
    `_tail` twins stay out (decodecols2 has them)."""
    jobs = _jobs("decodecols4")
    assert jobs["decodecols4"] == ["kda_decode_cols[n64_h64_t4]", "kda_decode_cols[n1024_h32_t2]",
                                   "kda_decode_cols[n64_h64_t4_c128]",
                                   "kda_decode_cols[n64_h64_t4_pw]",
                                   "kda_decode_cols[n1024_h32_t2_pw]",
                                   "kda_decode_cols[n64_h64_t4_pwtail]",
                                   "kda_decode_cols[n1024_h32_t2_pwtail]"]
    assert set(jobs["smoke"]) == _cols_smoke()
    assert 'SHARE_INPUTS=1 bench decodecols4' in SCRIPT.read_text()


def test_decodecols5_times_the_counter_walk_and_the_first_head_first_after_the_control():
    """Group decodecols5 (session 21): the control at n64_h64_t4 and n1024_h32_t2, then DYN=1's
    twins (`_dyn`: heads from a counter), then START=1's (`_st`), one job a shape on shared
    inputs; the c128 replicate, PREP=1's and PREP=2's twins stay out; the smoke covers the
    START=1, DYN=1 and TAKE=1 small cases (every small case of kda_decode_cols); TAKE=1's twins
    (`_dyn_ta`) are decodecols6's."""
    jobs = _jobs("decodecols5")
    assert jobs["decodecols5"] == ["kda_decode_cols[n64_h64_t4]", "kda_decode_cols[n1024_h32_t2]",
                                   "kda_decode_cols[n64_h64_t4_dyn]",
                                   "kda_decode_cols[n1024_h32_t2_dyn]",
                                   "kda_decode_cols[n64_h64_t4_st]",
                                   "kda_decode_cols[n1024_h32_t2_st]"]
    assert set(jobs["smoke"]) == _cols_smoke() and {"kda_decode_cols[n7_h1_t2_c2_pwst]",
                                                    "kda_decode_cols[n1_h3_t1_dyn]"} <= _cols_smoke()
    assert 'SHARE_INPUTS=1 bench decodecols5' in SCRIPT.read_text()


def test_decodecols6_times_the_early_ticket_after_the_counter_walk_and_the_control():
    """Group decodecols6 (session 27): at n64_h64_t4, the control, DYN=1's `_dyn` and TAKE=1's
    `_dyn_ta` (each refill's ticket asked a head early), one job on shared inputs; the smoke
    covers the TAKE=1 small cases."""
    jobs = _jobs("decodecols6")
    assert jobs["decodecols6"] == ["kda_decode_cols[n64_h64_t4]",
                                   "kda_decode_cols[n64_h64_t4_dyn]",
                                   "kda_decode_cols[n64_h64_t4_dyn_ta]"]
    assert {"kda_decode_cols[n7_h1_t2_c2_dyn_ta]",
            "kda_decode_cols[n1_h3_t1_dyn_ta]"} <= set(jobs["smoke"])
    assert 'SHARE_INPUTS=1 bench decodecols6' in SCRIPT.read_text()


def test_bench_args_reach_every_timed_job():
    """BENCH_ARGS (session 15, QUEUE 83: decodecols3 at 200 rounds): the listing names the
    options each job runs with, and the bench line passes them to bench_with.py (which hands
    unknown options to `tirxh bench`)."""
    r = run_script("decodecols3", timeout=300, KDA_BENCH_LIST="1", BENCH_ARGS="--min-rounds 200")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "== decodecols3\n   tirxh bench options: --min-rounds 200" in r.stdout
    assert "kda_decode_cols[n64_h64_t4_pw]" in sections(r.stdout)["decodecols3"]
    assert '--report-log "$WORK/$1.jsonl" ${BENCH_ARGS:-}' in SCRIPT.read_text()


@pytest.mark.slow(reason="two tirxh bench --collect-only runs over the zoo")
def test_prep2_times_the_fused_prep_beside_both_walks_launches_per_shape():
    """Group prep2 (session 12): per T8192 shape one job, kda_bwd_prep2 and the two launches it
    replaces (kda_bwd_prep_tc PREP=2, reverse walk pmt_ and forward walk pmt_fwd_); its smoke is
    those two kernels' PREP=2 small cases and prep2's; group tc2 keeps its reverse-walk items
    only (the forward twins are prep2's)."""
    jobs = _jobs("prep2")
    for s in ("t8192_h96", "t8192_h64"):
        assert jobs[f"prep2-{s}"] == [f"kda_bwd_prep2[{s}]", f"kda_bwd_prep_tc[pmt_{s}]",
                                      f"kda_bwd_prep_tc[pmt_fwd_{s}]"]
    assert len([i for i in jobs["smoke"] if i.startswith("kda_bwd_prep2[")]) == 4
    assert all(i.startswith("kda_bwd_prep2[") or i.startswith("kda_bwd_prep_tc[pmt_")
               for i in jobs["smoke"])
    tc2 = _jobs("tc2", TC2_SHAPES="t8192_h96")["tc2-t8192_h96"]
    assert "kda_bwd_prep_tc[pmt_t8192_h96]" in tc2 and not [i for i in tc2 if "fwd" in i]


@pytest.mark.slow(reason="two tirxh bench --collect-only runs over the zoo")
def test_tf32_times_the_tf32_products_after_the_split_per_shape():
    """Group tf32 (session 12, kdatf32): per T8192 shape one job, kda_bwd_pieces_tc PREP=2 with
    split bf16 products (pmt_) then TF32=1 (tfpmt_); its smoke is those forms' small cases
    (tf_ at unit scale); group tc2 leaves the tf32 forms out (its items and smoke as before)."""
    jobs = _jobs("tf32")
    for s in ("t8192_h96", "t8192_h64"):
        assert jobs[f"tf32-{s}"] == [f"kda_bwd_pieces_tc[pmt_{s}]",
                                     f"kda_bwd_pieces_tc[tfpmt_{s}]"]
    smoke = jobs["smoke"]
    assert len([i for i in smoke if i.startswith("kda_bwd_pieces_tc[tf_")]) == 3
    assert all(i.startswith(("kda_bwd_pieces_tc[pmt_", "kda_bwd_pieces_tc[tf_")) for i in smoke)
    tc2 = _jobs("tc2", TC2_SHAPES="t8192_h96")
    assert not [i for job in tc2.values() for i in job if "[tf" in i]


@pytest.mark.slow(reason="one tirxh bench --collect-only run over the zoo")
def test_calib_times_the_prep_alone_beside_both_walks_per_shape():
    """Group calib (session 13, kdabwd10): per T8192 shape one job, kda_bwd_prep_only (the prep
    of kda_bwd_prep_tc PREP=2 and nothing after it) and that kernel's two walks (pmt_,
    pmt_fwd_); its smoke is those two kernels' small cases only."""
    jobs = _jobs("calib")
    for s in ("t8192_h96", "t8192_h64"):
        assert jobs[f"calib-{s}"] == [f"kda_bwd_prep_only[{s}]", f"kda_bwd_prep_tc[pmt_{s}]",
                                      f"kda_bwd_prep_tc[pmt_fwd_{s}]"]
    smoke = jobs["smoke"]
    assert len([i for i in smoke if i.startswith("kda_bwd_prep_only[")]) == 2
    assert all(i.startswith(("kda_bwd_prep_only[", "kda_bwd_prep_tc[pmt_")) for i in smoke)


@pytest.mark.slow(reason="one tirxh bench --collect-only run over the zoo")
def test_calib_extra_joins_the_same_job():
    """CALIB_EXTRA (session 14, kdabwd11; QUEUE 76): kda_bwd_prep_sg's three T8192 H96 items (the
    STAGE=2 walk, po_, po2_) in the calib job beside the three it is measured against, and its
    small cases in the smoke."""
    jobs = _jobs("calib", CALIB_SHAPES="t8192_h96", CALIB_EXTRA="kda_bwd_prep_sg")
    assert jobs["calib-t8192_h96"] == [
        "kda_bwd_prep_only[t8192_h96]", "kda_bwd_prep_sg[t8192_h96]",
        "kda_bwd_prep_sg[po_t8192_h96]", "kda_bwd_prep_sg[po2_t8192_h96]",
        "kda_bwd_prep_tc[pmt_t8192_h96]", "kda_bwd_prep_tc[pmt_fwd_t8192_h96]"]
    assert len([i for i in jobs["smoke"] if i.startswith("kda_bwd_prep_sg[")]) == 4


@pytest.mark.slow(reason="one tirxh bench --collect-only run over the zoo")
def test_prep3_times_the_planes_form_beside_prep2_per_shape():
    """Group prep3 (session 13, kdaprep3): per T8192 shape one job, kda_bwd_prep2 and
    kda_bwd_prep3 (the same products, operands split once and read by ldmatrix); its smoke is
    the two kernels' small cases (4 each) only."""
    jobs = _jobs("prep3")
    for s in ("t8192_h96", "t8192_h64"):
        assert jobs[f"prep3-{s}"] == [f"kda_bwd_prep2[{s}]", f"kda_bwd_prep3[{s}]"]
    smoke = jobs["smoke"]
    assert len([i for i in smoke if i.startswith("kda_bwd_prep3[")]) == 4
    assert all(i.startswith(("kda_bwd_prep2[", "kda_bwd_prep3[")) for i in smoke)
