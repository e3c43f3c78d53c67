"""benchmarks/zoo_perf_bench.sh on a machine without a GPU: `--list` names the smoke and timed
items of each mode, so a case renamed in the zoo (a -k name that selects nothing) is caught
here and not on the lent GPU; an unknown MODE is refused."""

import os
import pathlib
import re
import subprocess

import pytest

from tests.benchmarks._listing import sections

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "zoo_perf_bench.sh"


def _list(mode):
    env = dict(os.environ, MODE=mode)
    return subprocess.run(["bash", str(SCRIPT), "--list"], env=env, capture_output=True,
                          text=True, timeout=300)


def _timed_and_smoke(mode):
    """([[item, ...] per timed shard], [smoke items]) of `mode`'s --list (which must succeed)."""
    r = _list(mode)
    assert r.returncode == 0, r.stderr
    got = sections(r.stdout)
    return ([v for k, v in got.items() if k.startswith("timed shard")],
            got["smoke (correctness only)"])


@pytest.mark.slow(reason="seven tirxh bench --collect-only runs over the zoo")
def test_new_mode_times_each_variant_beside_its_plain_case_one_kernel_per_shard():
    shards, smoke = _timed_and_smoke("new")
    assert len(shards) == 8
    want = {"layernorm": 5, "rmsnorm": 4, "swiglu": 4, "tma_copy": 3, "add_rmsnorm": 3,
            "quant_fp8": 2}
    seen = {}
    for items in shards:
        kernels = {i.split("[")[0] for i in items}
        assert len(kernels) == 1, items  # one suite: its inputs are prepared once
        (k,) = kernels
        plain = f"{k}[n64M]" if k == "swiglu" else f"{k}[r16384_c8192]"
        assert plain not in items[1:], items  # where a shard has the plain case, it is first
        seen.setdefault(k, []).extend(items)
    assert {k: len(v) for k, v in seen.items()} == want  # every named case exists, once
    for k, items in seen.items():
        assert len(set(items)) == len(items)
        assert (f"{k}[n64M]" if k == "swiglu" else f"{k}[r16384_c8192]") in items
    assert all(re.search(r"_l2p|_l1na|_bulk|^layernorm\[", i) for i in smoke), smoke
    assert {"tma_copy[r100_c200_s2_bulk]", "layernorm[r1_c520]",
            "rmsnorm[r5_c1000_b64_l2p256]", "rmsnorm[r5_c4096_p2_l1na]"} <= set(smoke)


@pytest.mark.slow(reason="five tirxh bench --collect-only runs over the zoo")
def test_s6_mode_times_the_inductor_variants_after_each_default_case():
    shards, smoke = _timed_and_smoke("s6")
    assert [s[0] for s in shards] == ["rmsnorm[r16384_c8192]", "swiglu[n64M]",
                                      "tma_copy[r16384_c8192]", "reduce_rows[r8192_c8192]",
                                      "reg_copy[r16384_c8192]"]
    assert [len(s) for s in shards] == [8, 8, 6, 5, 3]  # every named case exists, once
    assert all(len(set(s)) == len(s) and len({i.split("[")[0] for i in s}) == 1
               for s in shards)
    assert shards[0][1] == "rmsnorm[r16384_c8192_tri_pol]"  # the likeliest winner next
    assert len(smoke) == 13 and all(re.search(r"_pol|_st|_w\d|reg_copy", i) for i in smoke)


@pytest.mark.slow(reason="six tirxh bench --collect-only runs over the zoo")
def test_s4_mode_times_the_new_kernels_beside_the_ones_they_replace():
    shards, smoke = _timed_and_smoke("s4")
    assert [s[0] for s in shards] == [
        "cumsum[r1_c64M_t16k]", "topk_f32[r4096_c32768_k64_plain]",
        "topk_bf16[r8192_c32768_k64]", "reduce_rows[r8192_c8192]", "transpose[r16384_c8192]"]
    assert [len(s) for s in shards] == [7, 5, 3, 3, 5]   # every named case exists, once
    assert all(len(set(s)) == len(s) for s in shards)
    assert {"cumsum_pipe[r1_c5000]", "topk_f32_pipe[r5_c2052_k64]",
            "topk_bf16_pipe[r4_c1000_k33]", "reduce_rows[r6_c1001_scalar]",
            "transpose[r200_c136_tr64_p3]"} <= set(smoke)


@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_s5_mode_times_cumsum_smem_beside_the_cumsum_cases_it_replaces():
    shards, smoke = _timed_and_smoke("s5")
    assert shards == [
        ["cumsum[r1_c64M_t16k]", "cumsum_smem[r1_c64M]", "cumsum_smem[r1_c64M_o1]"],
        ["cumsum[r1_c64M_t8k]", "cumsum_smem[r1_c64M_s8]", "cumsum_smem[r1_c64M_s0]"],
        ["cumsum[r8_c4M_t16k]", "cumsum_smem[r8_c4M]"]]
    assert len(smoke) == 5 and all(i.startswith("cumsum_smem[") for i in smoke), smoke
    assert {"cumsum_smem[r1_c3080]", "cumsum_smem[r3_c2604]",
            "cumsum_smem[r2_c9000_b160_o1]"} <= set(smoke)


@pytest.mark.slow(reason="three tirxh bench --collect-only runs over the zoo")
def test_cum6_mode_times_cumsum_tma_after_the_cumsum_smem_case_of_its_shape():
    shards, smoke = _timed_and_smoke("cum6")
    assert shards == [
        ["cumsum_smem[r1_c64M]", "cumsum_tma[r1_c64M]", "cumsum_tma[r1_c64M_st0]",
         "cumsum_tma[r1_c64M_e0]"],
        ["cumsum_smem[r8_c4M]", "cumsum_tma[r1_c64M_k8]", "cumsum_tma[r8_c4M]"]]
    assert len(smoke) == 8 and all(i.startswith("cumsum_tma[") for i in smoke), smoke
    assert {"cumsum_tma[r1_c3084_st0]", "cumsum_tma[r2_c9004_b160_e0]"} <= set(smoke)
    # the iket profile before the shards names the timed default case
    m = re.search(r'PROFILES="\$\{PROFILES-kernels/cumsum_tma\.py::(\S+) --iket ',
                  SCRIPT.read_text())
    assert m and m.group(1) == "cumsum_tma[r1_c64M]" == shards[0][1]


def test_an_unknown_mode_is_refused():
    r = _list("fast")
    assert r.returncode == 2 and "MODE=fast must be 'all' (issue 14's variants), 'new', " \
        "'s4', 's5', 'cum6', 's6', 'topk3', 'topk4', 'topk5', 'tma7', 'scan7', 'tma8', " \
        "'scan8', 'cum9', 'tma9', 'cum10', 'scan9', 'rms10', 'cum11', 'scan10', 'cum12', " \
        "'scan11', 'scan12', 'cum13', 'topk13', 'topk14', 'topk15', 'topk16', 'topk17', " \
        "'topk18', 'flush1' or 'bulk1'" in r.stderr


@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_topk3_mode_times_each_warp_variant_beside_the_pipe_case_of_its_shape():
    shards, smoke = _timed_and_smoke("topk3")
    assert [s[0] for s in shards] == ["topk_f32_pipe[r4096_c32768_k64]",
                                      "topk_f32_pipe[r16384_c8192_k50]",
                                      "topk_bf16_pipe[r8192_c32768_k64]"]
    assert [len(s) for s in shards] == [6, 4, 5]  # every named case exists
    assert all(i.startswith(("topk_f32_warp[", "topk_bf16_warp[")) for s in shards
               for i in s[1:])
    assert smoke and all("_warp[" in i for i in smoke)


@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_topk4_mode_times_each_strict_variant_after_the_pipe_and_warp_controls():
    shards, smoke = _timed_and_smoke("topk4")
    assert shards == [
        ["topk_f32_pipe[r4096_c32768_k64]", "topk_f32_warp[r4096_c32768_k64]",
         "topk_f32_warp[r4096_c32768_k64_st]"],
        ["topk_f32_pipe[r16384_c8192_k50]", "topk_f32_warp[r16384_c8192_k50]",
         "topk_f32_warp[r16384_c8192_k50_st]"],
        ["topk_bf16_pipe[r8192_c32768_k64]", "topk_bf16_warp[r8192_c32768_k64]",
         "topk_bf16_warp[r8192_c32768_k64_st]"]]
    assert len(smoke) == 4 and all(re.search(r"_warp\[.*_st\]$", i) for i in smoke), smoke


@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_topk5_mode_times_the_append_variants_after_the_strict_control_biggest_step_first():
    shards, smoke = _timed_and_smoke("topk5")
    assert shards == [
        ["topk_f32_warp[r4096_c32768_k64_st]", "topk_f32_warp[r4096_c32768_k64_st_a_v4]",
         "topk_f32_warp[r4096_c32768_k64_st_a]"],
        ["topk_f32_warp[r16384_c8192_k50_st]", "topk_f32_warp[r16384_c8192_k50_st_a_v4]",
         "topk_f32_warp[r16384_c8192_k50_st_a]"],
        ["topk_bf16_warp[r8192_c32768_k64_st]", "topk_bf16_warp[r8192_c32768_k64_st_a_v4]",
         "topk_bf16_warp[r8192_c32768_k64_st_a_v2]", "topk_bf16_warp[r8192_c32768_k64_st_a]"]]
    assert len(smoke) == 6 and all(re.search(r"_warp\[.*_ap(st)?\]$", i) for i in smoke), smoke


@pytest.mark.slow(reason="six tirxh bench --collect-only runs over the zoo")
def test_tma7_mode_times_the_bytes_in_flight_cases_after_their_controls():
    """docs/TUNING.md's session-10 predictions name these items: each shard one kernel, its
    control(s) first, every named case present once."""
    shards, smoke = _timed_and_smoke("tma7")
    assert [s[0] for s in shards] == ["tma_copy[r16384_c8192]", "reg_copy[r16384_c8192]",
                                      "softmax_tma[r16384_c8192_p256]",
                                      "softmax_tma[r65536_c2048]", "softmax[r16384_c8192]"]
    assert [len(s) for s in shards] == [8, 2, 6, 3, 1]
    # the likeliest winners next
    assert shards[0][1] == "tma_copy[r16384_c8192_b32_s3_p256]"
    assert shards[2][2] == "softmax_tma[r16384_c8192_p512_s2_b256]"
    assert shards[3][1] == "softmax_tma[r65536_c2048_s3_p1024]"
    assert all(len(set(s)) == len(s) and len({i.split("[")[0] for i in s}) == 1
               for s in shards)
    assert sorted(smoke) == ["softmax_tma[r5_c2056_cta2]", "softmax_tma[r9_c1032_s2_cta2]",
                             "tma_copy[r100_c200_b16_s5_cta2]", "tma_copy[r100_c200_s2]",
                             "tma_copy[r100_c200_s4_lag2]"]


@pytest.mark.slow(reason="five tirxh bench --collect-only runs over the zoo")
def test_scan7_mode_leads_each_shard_with_the_sizes_main_case():
    shards, smoke = _timed_and_smoke("scan7")
    assert shards == [
        ["topk_f32_warp[r16384_c8192_k50_st]", "topk_f32_warp[r16384_c8192_k50_st_a_v4]",
         "topk_f32_warp[r16384_c8192_k50_st_a_v4_f5]", "topk_f32_warp[r16384_c8192_k50_st_f5]",
         "topk_f32_warp[r16384_c8192_k50_st_a_v4_w4s20]",
         "topk_f32_warp[r16384_c8192_k50_st_a_v4_sk2]",
         "topk_f32_warp[r16384_c8192_k50_st_a_v4_sk6]"],
        ["topk_f32_warp[r4096_c32768_k64_st_a_v4]", "topk_f32_warp[r4096_c32768_k64_st_a_v4_f6]",
         "topk_f32_warp[r4096_c32768_k64_st_a_v4_sk6]",
         "topk_bf16_warp[r8192_c32768_k64_st_a_v4]",
         "topk_bf16_warp[r8192_c32768_k64_st_a_v4_f6]",
         "topk_bf16_warp[r8192_c32768_k64_st_a_v4_sk6]"],
        ["cumsum_tma[r1_c64M_k8]", "cumsum_tma[r1_c64M_k8_l4]"],
        ["cumsum_tma[r8_c4M]", "cumsum_tma[r8_c4M_k8]", "cumsum_tma[r8_c4M_k8_l4]"]]
    assert sorted(smoke) == sorted([
        "topk_f32_warp[r5_c2052_k64_fe3]", "topk_f32_warp[r4_c1100_k17_v4_fe1]",
        "topk_f32_warp[r5_c2052_k64_fe3_sk]",
        "topk_bf16_warp[r5_c1000_k33_fe2]", "cumsum_tma[r2_c9004_b160]",
        "cumsum_tma[r2_c9004_b160_st0]", "cumsum_tma[r2_c9004_b160_e0]"]), smoke


@pytest.mark.slow(reason="six tirxh bench --collect-only runs over the zoo")
def test_tma8_mode_times_the_path_and_policy_cases_after_their_controls():
    """docs/TUNING.md's session-11 predictions name these items: tma_copy's and reg_copy's
    defaults lead their shards (the in-job controls of the path_copy factorial), each shard one
    kernel, every named case present once; the smoke runs every new small case."""
    shards, smoke = _timed_and_smoke("tma8")
    assert shards == [
        ["tma_copy[r16384_c8192]", "tma_copy[r16384_c8192_pol3]"],
        ["reg_copy[r16384_c8192]", "reg_copy[r16384_c8192_pol]"],
        ["path_copy[r16384_c8192_lb]", "path_copy[r16384_c8192_sb]",
         "path_copy[r16384_c8192_lbsb]", "path_copy[r16384_c8192_lb_pol]",
         "path_copy[r16384_c8192_sb_pol]", "path_copy[r16384_c8192_lbsb_pol]",
         "path_copy[r16384_c8192_u8_lbsb]"],
        ["softmax_tma[r16384_c8192_s4_b256]", "softmax_tma[r16384_c8192_s4_b256_pol]",
         "softmax_tma[r16384_c8192_p256_s2_pol]", "softmax_tma[r16384_c8192_s4_b256_k8]",
         "softmax_tma[r16384_c8192_s4_b256_pol_k8]"],
        ["softmax_tma[r65536_c2048_s3_p512]", "softmax_tma[r65536_c2048_s3_p512_pol]"]]
    paths = [f"path_copy[{r}_{p}]" for r in ("r8_c8", "r100_c200_b32_u2")
             for p in ("lb", "sb", "lbsb", "lb_pol", "sb_pol", "lbsb_pol")]
    assert sorted(smoke) == sorted(paths + ["path_copy[r100_c200_b32_u8_lbsb]",
        "tma_copy[r100_c200_s2_pol3]", "tma_copy[r100_c200_s2_bulk_pol3]",
        "reg_copy[r100_c200_b32_u2_pol]", "softmax_tma[r9_c1032_s2_cta2_pol]",
        "softmax_tma[r9_c1032_s2_cta2_k3]"]), smoke


@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_scan8_mode_leads_each_shard_with_the_sizes_measured_best():
    """docs/PERFORMANCE.md's session-11 predictions (branch topk8) name these items: each shard
    one size, its in-job controls first (session 11's best), every new case present once."""
    shards, smoke = _timed_and_smoke("scan8")
    f, l, b = ("topk_f32_warp[r16384_c8192_k50", "topk_f32_warp[r4096_c32768_k64",
               "topk_bf16_warp[r8192_c32768_k64")
    assert shards == [
        [f"{f}_st]", f"{f}_st_a_v4_f5]", f"{f}_st_a_v4_g1]", f"{f}_st_a_v4_g1fu]",
         f"{f}_st_a_v8_g1fu]", f"{f}_st_a_v4_g1fu_w32]"],
        [f"{l}_st_a_v4]", f"{l}_st_a_v4_g1fu]", f"{l}_st_a_v8_g1fu]", f"{l}_st_a_v4_g1fu_w32]"],
        [f"{b}_st_a_v4]", f"{b}_st_a_v4_g1fu]", f"{b}_st_a_v4_g1fu_w32]"]]
    assert sorted(smoke) == sorted([
        "topk_f32_warp[r6_c2052_k37_g1s12]", "topk_f32_warp[r4_c1000_k1_v1_g1]",
        "topk_f32_warp[r5_c2052_k64_v8g1]", "topk_f32_warp[r5_c2052_k64_fu]",
        "topk_f32_warp[r4_c2052_k50_v8fu]", "topk_f32_warp[r3_c1000_k1_fu]",
        "topk_bf16_warp[r5_c1000_k33_g1]", "topk_bf16_warp[r5_c1000_k33_fu]"]), smoke


@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_scan9_mode_leads_each_shard_with_scan8s_best_then_the_seeded_forms():
    """docs/PERFORMANCE.md's session-13 predictions (branch topk9) name these items: each shard
    one size, session 13's measured best first as in-job controls, then SEED=1's forms."""
    shards, smoke = _timed_and_smoke("scan9")
    f, l, b = ("topk_f32_warp[r16384_c8192_k50_st_a", "topk_f32_warp[r4096_c32768_k64_st_a",
               "topk_bf16_warp[r8192_c32768_k64_st_a")
    assert shards == [
        [f"{f}_v8_g1fu]", f"{f}_v4_g1fu_w32]", f"{f}_v8_g1fu_sd]", f"{f}_v4_g1fu_w32_sd]"],
        [f"{l}_v8_g1fu]", f"{l}_v8_g1fu_sd]", f"{l}_v4_g1fu_w32_sd]"],
        [f"{b}_v4_g1fu]", f"{b}_v4_g1fu_sd]", f"{b}_v4_g1fu_w32_sd]"]]
    assert sorted(smoke) == sorted([
        "topk_f32_warp[r5_c4100_k7_sd]", "topk_f32_warp[r3_c8196_k50_v8_sd]",
        "topk_f32_warp[r3_c2052_k64_sd]", "topk_bf16_warp[r5_c4104_k9_sd]"]), smoke


@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_scan10_mode_leads_each_shard_with_its_controls_then_the_sd2_forms():
    """docs/PERFORMANCE.md's session-14 predictions (branch topk10) name these items: f32 32768,
    bf16 32768, f32 8192, each shard's in-job controls first, then SEED=2's forms; the smoke is
    the three small `_sd2` cases (and scan9's smoke keeps its own four)."""
    shards, smoke = _timed_and_smoke("scan10")
    f, l, b = ("topk_f32_warp[r16384_c8192_k50_st_a", "topk_f32_warp[r4096_c32768_k64_st_a",
               "topk_bf16_warp[r8192_c32768_k64_st_a")
    assert shards == [
        [f"{l}_v8_g1fu]", f"{l}_v4_g1fu_w32]", f"{l}_v8_g1fu_sd2]", f"{l}_v4_g1fu_w32_sd2]"],
        [f"{b}_v4_g1fu]", f"{b}_v4_g1fu_w32]", f"{b}_v4_g1fu_sd2]", f"{b}_v4_g1fu_w32_sd2]"],
        [f"{f}_v8_g1fu_sd]", f"{f}_v4_g1fu_w32_sd2]"]]
    assert sorted(smoke) == sorted([
        "topk_f32_warp[r5_c4100_k7_sd2]", "topk_f32_warp[r3_c8196_k50_v8_sd2]",
        "topk_bf16_warp[r5_c4104_k9_sd2]"]), smoke


@pytest.mark.slow(reason="a tirxh bench --collect-only run over the zoo")
def test_scan11_mode_leads_with_its_controls_then_the_pk_forms():
    """docs/PERFORMANCE.md's session-15 predictions (branch topk11) name these items: bf16 8192
    x 32768's measured best two (`_v4_g1fu_sd2`, `_v4_g1fu_w32_sd2`) as in-job controls first,
    then their PK=1 forms, the likelier winner (`_w32_sd2_pk`) before the other, so that a cut
    loses the lesser; the smoke is the three small PK cases and no other."""
    shards, smoke = _timed_and_smoke("scan11")
    b = "topk_bf16_warp[r8192_c32768_k64_st_a"
    assert shards == [[f"{b}_v4_g1fu_sd2]", f"{b}_v4_g1fu_w32_sd2]",   # file order
                       f"{b}_v4_g1fu_w32_sd2_pk]", f"{b}_v4_g1fu_sd2_pk]"]]
    assert sorted(smoke) == sorted([
        "topk_bf16_warp[r5_c1000_k33_pk]", "topk_bf16_warp[r5_c4104_k9_pk2]",
        "topk_bf16_warp[r3_c3000_k50_v4_pk]"]), smoke


@pytest.mark.slow(reason="a tirxh bench --collect-only run over the zoo")
def test_scan12_mode_leads_with_its_controls_then_the_4k_steps():
    """docs/PERFORMANCE.md's session-22 predictions name these items: bf16 8192 x 32768's
    measured best (`_v4_g1fu_w32_sd2_pk`) and its 16-warp form as in-job controls, then the 4
    KB steps (`_v8_g1fu_sd2_pk`), their bulk-copied ring (`_bk`) and the best's sorted row end
    (`_so`); f32 8192's best and its `_so` in a shard of their own; the smoke is the small bf16
    VECS 8, BULK and SORT cases and no other."""
    shards, smoke = _timed_and_smoke("scan12")
    b = "topk_bf16_warp[r8192_c32768_k64_st_a"
    f = "topk_f32_warp[r16384_c8192_k50_st_a"
    assert shards == [[f"{b}_v4_g1fu_w32_sd2_pk]", f"{b}_v4_g1fu_sd2_pk]",
                       f"{b}_v8_g1fu_sd2_pk]", f"{b}_v8_g1fu_sd2_pk_bk]",
                       f"{b}_v4_g1fu_w32_sd2_pk_so]"],
                      [f"{f}_v8_g1fu_sd]", f"{f}_v8_g1fu_sd_so]"]]
    assert sorted(smoke) == ["topk_bf16_warp[r3_c4104_k50_v8sd2pk]",
                             "topk_bf16_warp[r5_c3112_k64_so]",
                             "topk_bf16_warp[r5_c3112_k64_v8]",
                             "topk_bf16_warp[r5_c3112_k64_v8_bk]",
                             "topk_bf16_warp[r5_c4104_k50_v4_bk]",
                             "topk_bf16_warp[r5_c4104_k50_v4_so]"]


@pytest.mark.slow(reason="a tirxh bench --collect-only run over the zoo")
def test_cum13_mode_times_the_l2_scan_after_cumsum_tmas_best():
    """docs/PERFORMANCE.md's session-22 predictions name these items: cumsum_tma `_k8` at both
    sizes as in-job controls in a shard of their own, then cumsum_l2's five H200 cases; the
    smoke is cumsum_l2's small cases and no other."""
    shards, smoke = _timed_and_smoke("cum13")
    assert shards == [["cumsum_tma[r1_c64M_k8]", "cumsum_tma[r8_c4M_k8]"],
                      ["cumsum_l2[r1_c64M]", "cumsum_l2[r1_c64M_p0]", "cumsum_l2[r1_c64M_c16]",
                       "cumsum_l2[r8_c4M]", "cumsum_l2[r1_c64M_pp]"]]
    assert sorted(smoke) == ["cumsum_l2[r1_c5000]", "cumsum_l2[r3_c2301_g40]",
                             "cumsum_l2[r3_c3004]", "cumsum_l2[r3_c3004_pp]"]


def test_scan12_timelines_hold_their_busiest_warp():
    """The three iket profiles of MODE=scan12 name cases that exist, and each capacity holds
    the busiest warp's events: 2 a range, a `wait` a step and a `row_end` a row on the warp
    with the most rows (rows over the grid's warps, rounded up), a `seed` first, and room for
    at least two rows read again (an `again` each). Too small a capacity loses events and the
    timeline's counts (benchmarks/item_timeline.py then exits 1)."""
    from tests.zoo.zoo_modules import load
    mod = load("topk_warp")
    block = re.search(r'scan12 \]; then(.*?)\nelif', SCRIPT.read_text(), re.S).group(1)
    profiles = re.findall(r"kernels/topk_warp\.py::(\w+)\[(\w+)\] --iket --iket-capacity (\d+)",
                          block)
    assert len(profiles) == 3
    for kernel, name, cap in profiles:
        suite = mod.SUITE_F32 if kernel == "topk_f32_warp" else mod.SUITE_BF16
        case = next(c for c in suite.cases if c.name == name)
        p = suite.consts(case)
        warps = suite.grid(case)[0] * p["WARPS"]
        rows = -(-case.params["rows"] // warps)
        vec = 4 if kernel == "topk_f32_warp" else 8
        steps = -(-(-(-p["cols"] // vec) // 32) // p["VECS"])
        need = 2 * ((1 if p["SEED"] else 0) + rows * (steps + 1) + 2)
        assert need <= int(cap) <= need + 64, (name, need, cap)


@pytest.mark.slow(reason="eleven tirxh bench --collect-only runs over the zoo")
def test_several_modes_in_one_call_are_the_union_of_each_in_order():
    """MODE="tma8 scan8": one set-up and one smoke for both (device time is the scarce
    thing): the timed shards are tma8's then scan8's, the smoke every small case of either; a
    wrong name among them is refused by name."""
    both = _timed_and_smoke("tma8 scan8")
    tma8, scan8 = _timed_and_smoke("tma8"), _timed_and_smoke("scan8")
    assert both[0] == tma8[0] + scan8[0]
    assert sorted(both[1]) == sorted(tma8[1] + scan8[1])
    r = _list("tma8 fast")
    assert r.returncode == 2 and "MODE=fast must be" in r.stderr


@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_cum9_mode_times_cumsum_persist_beside_cumsum_tmas_best():
    """docs/PERFORMANCE.md's session-12 predictions (branch cumsum9) name these items: the
    controls (cumsum_tma's measured best at both sizes) in a shard of their own, so no cut
    loses them; each size's cumsum_persist variants in one shard, the default first."""
    shards, smoke = _timed_and_smoke("cum9")
    p = "cumsum_persist[r1_c64M"
    assert shards == [
        ["cumsum_tma[r1_c64M_k8]", "cumsum_tma[r8_c4M_k8]"],
        [f"{p}]", f"{p}_s2]", f"{p}_s4]", f"{p}_s4_lag]", f"{p}_c2]", f"{p}_b512]", f"{p}_l2]",
         f"{p}_l8]"],
        ["cumsum_persist[r8_c4M]", "cumsum_persist[r8_c4M_c2]", "cumsum_persist[r8_c4M_s4_lag]"]]
    assert sorted(smoke) == sorted([
        "cumsum_persist[r1_c1772_s2]", "cumsum_persist[r3_c1020_s3]",
        "cumsum_persist[r1_c12004_t256]", "cumsum_persist[r2_c25004_b160]",
        "cumsum_persist[r3_c1020_lag]", "cumsum_persist[r2_c25004_b160_lag]"]), smoke
    # the iket profile before the shards names the timed default case
    m = re.search(r'PROFILES="\$\{PROFILES-kernels/cumsum_persist\.py::(\S+) --iket ',
                  SCRIPT.read_text())
    assert m and m.group(1) == "cumsum_persist[r1_c64M]" == shards[1][0]


@pytest.mark.slow(reason="five tirxh bench --collect-only runs over the zoo")
def test_tma9_mode_times_the_one_box_copies_beside_their_controls():
    """docs/PERFORMANCE.md's session-13 predictions (branch tmacopy9) name these items: the
    TMA ring's default and `_pol3` lead tma_copy's shard, the likeliest winner next; reg_copy
    and path_copy `_lbsb` (the same geometry by 1-D bulk copies) are the in-job controls, each
    in a shard of its own; the smoke runs every PERSIST=0 small case and nothing else."""
    shards, smoke = _timed_and_smoke("tma9")
    one = "tma_copy[r16384_c8192_one_b"
    assert shards == [
        ["tma_copy[r16384_c8192]", "tma_copy[r16384_c8192_pol3]", f"{one}8x128_pol3]",
         f"{one}8x128]"],
        ["reg_copy[r16384_c8192]", "reg_copy[r16384_c8192_pol]"],
        ["path_copy[r16384_c8192_lbsb]", "path_copy[r16384_c8192_lbsb_pol]"],
        [f"{one}4x256_pol3]", f"{one}8x128_t64_pol3]", f"{one}16x128_t256_pol3]"]]
    assert sorted(smoke) == ["tma_copy[r100_c200_one]", "tma_copy[r100_c200_one_b4x128_el]",
                             "tma_copy[r3_c24_one]"]
@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_cum10_mode_times_cumsum_ws_beside_both_controls():
    """docs/PERFORMANCE.md's session-13 predictions (branch cumsum10) name these items: the
    controls (cumsum_tma's and cumsum_persist's measured best at both sizes) in a shard of their
    own, so no cut loses them; each size's cumsum_ws variants in one shard, the default first;
    the iket profile of the default first of all."""
    shards, smoke = _timed_and_smoke("cum10")
    w = "cumsum_ws[r1_c64M"
    assert shards == [
        ["cumsum_persist[r1_c64M_s4_lag]", "cumsum_persist[r8_c4M_s4_lag]",
         "cumsum_tma[r1_c64M_k8]", "cumsum_tma[r8_c4M_k8]"],
        [f"{w}]", f"{w}_pol]", f"{w}_s3]", f"{w}_s5]", f"{w}_l2]", f"{w}_l8]"],
        ["cumsum_ws[r8_c4M]", "cumsum_ws[r8_c4M_pol]", "cumsum_ws[r8_c4M_s5]"]]
    assert sorted(smoke) == sorted(WS_SMALL + WS_SMALL_C), smoke
    m = re.search(r'PROFILES="\$\{PROFILES-kernels/cumsum_ws\.py::(\S+) --iket ',
                  SCRIPT.read_text())
    assert m and m.group(1) == "cumsum_ws[r1_c64M]" == shards[1][0]


# cumsum_ws's small cases: session 13's, and each with AGG 1 (session 14, "_a")
WS_SMALL = [f"cumsum_ws[{n}{a}]" for a in ("", "_a") for n in (
    "r1_c1772_s2", "r3_c1020_s3", "r1_c12004_t256", "r2_c25004_b160", "r2_c25004_b160_pol")]
# and session 15's with COAL 1 (branch cumsum12)
WS_SMALL_C = ["cumsum_ws[r1_c33260_g40_a_c]", "cumsum_ws[r2_c25004_b160_a_c]"]


@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_cum11_mode_times_cumsum_ws_agg_beside_its_controls():
    """docs/PERFORMANCE.md's session-14 predictions (branch cumsum11) name these items: the
    controls (cumsum_tma `_k8` at both sizes, session 13's AGG 0 default) in a shard of their
    own, so no cut loses them; the AGG 1 variants after them, `_a` first; the iket profile
    (the one that decides the mechanism) names `_a`, run before any shard."""
    shards, smoke = _timed_and_smoke("cum11")
    w = "cumsum_ws[r1_c64M_a"
    assert shards == [
        ["cumsum_tma[r1_c64M_k8]", "cumsum_tma[r8_c4M_k8]", "cumsum_ws[r1_c64M]"],
        [f"{w}]", f"{w}_pol]", f"{w}_s5]", f"{w}_l2]"],
        [f"{w}_s3]", "cumsum_ws[r8_c4M_a]", "cumsum_ws[r8_c4M_a_pol]", "cumsum_ws[r8_c4M_a_s5]"]]
    assert sorted(smoke) == sorted(WS_SMALL + WS_SMALL_C), smoke
    text = SCRIPT.read_text()
    mode = text[text.index('= cum11 ]'):text.index('= rms10 ]')]
    m = re.search(r'PROFILES="\$\{PROFILES-kernels/cumsum_ws\.py::(\S+) --iket ', mode)
    assert m and m.group(1) == "cumsum_ws[r1_c64M_a]" == shards[1][0]


@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_cum12_mode_times_cumsum_ws_coal_after_its_controls():
    """docs/PERFORMANCE.md's session-15 predictions (branch cumsum12) name these items: the
    controls (cumsum_tma `_k8` and AGG 1 `_a` at both sizes, `_a_l2`) in a shard of their
    own; the COAL 1 variants after them, `_a_c` first; the iket profile names `_a_c`, run
    before any shard."""
    shards, smoke = _timed_and_smoke("cum12")
    w = "cumsum_ws[r1_c64M_a"
    assert shards == [
        ["cumsum_tma[r1_c64M_k8]", "cumsum_tma[r8_c4M_k8]", f"{w}]", f"{w}_l2]",
         "cumsum_ws[r8_c4M_a]"],
        [f"{w}_c]", f"{w}_l2_c]", f"{w}_l8_c]", "cumsum_ws[r8_c4M_a_c]"]]
    assert sorted(smoke) == sorted(WS_SMALL + WS_SMALL_C), smoke
    text = SCRIPT.read_text()
    mode = text[text.index('= cum12 ]'):text.index('= rms10 ]')]
    m = re.search(r'PROFILES="\$\{PROFILES-kernels/cumsum_ws\.py::(\S+) --iket ', mode)
    assert m and m.group(1) == "cumsum_ws[r1_c64M_a_c]" == shards[1][0]


@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_rms10_mode_times_the_copy_geometry_rmsnorms_after_their_control():
    """docs/PERFORMANCE.md's session-13 predictions (branch rmsnorm10) name these items:
    `_tri_pol2` first in the first shard (the control a cut must not lose), the three BLOCK-1024
    variants, reg_copy `_pol` (the copy the predictions scale from) alone; the smoke runs the
    two BLOCK-1024 small cases and nothing else (no add_rmsnorm case)."""
    shards, smoke = _timed_and_smoke("rms10")
    r = "rmsnorm[r16384_c8192"
    assert shards == [[f"{r}_tri_pol2]", f"{r}_tri1k_pol2]"],
                      [f"{r}_b1024_r32_pol2]", f"{r}_tri1k]"],
                      ["reg_copy[r16384_c8192_pol]"]]
    assert sorted(smoke) == ["rmsnorm[r3_c8184_b1024_pol2_late]",
                             "rmsnorm[r5_c1000_b1024_r32_pol2]"]


@pytest.mark.slow(reason="two tirxh bench --collect-only runs over the zoo")
def test_topk14_mode_times_each_guess2_variant_beside_its_guess1_control():
    shards, smoke = _timed_and_smoke("topk14")
    assert len(shards) == 2
    for shard in shards:
        g2 = [i for i in shard if "_g2fu" in i]
        assert g2 and all(i.replace("_g2fu", "_g1fu") in shard for i in g2), shard
    assert smoke and all("_g2" in i for i in smoke)


@pytest.mark.slow(reason="two tirxh bench --collect-only runs over the zoo")
def test_topk15_mode_times_each_half_row_variant_after_the_best_it_builds_on():
    shards, smoke = _timed_and_smoke("topk15")
    assert len(shards) == 2
    for shard in shards:
        assert "_sp2" in shard[-1] and all("_sp2" not in i for i in shard[:-1]), shard
    assert smoke and all("_sp2" in i for i in smoke)


@pytest.mark.slow(reason="three tirxh bench --collect-only runs over the zoo")
def test_topk17_mode_times_each_early_ticket_after_its_dyn_control():
    shards, smoke = _timed_and_smoke("topk17")
    assert len(shards) == 3 and shards[2] == ["tma_copy[r16384_c8192]"]
    for shard in shards[:2]:
        assert shard[0].endswith("_dyn]") and len(shard) >= 2, shard
        assert all(i.startswith(shard[0][:-1] + "_ta") for i in shard[1:]), shard
    assert smoke and all("_ta" in i for i in smoke)


@pytest.mark.slow(reason="three tirxh bench --collect-only runs over the zoo")
def test_topk18_mode_times_the_lead_and_queue_count_after_the_main():
    """MODE=topk18 (session 27): each size's main (`_ta2_q8`) first, then its twins with another
    lead or queue count; tma_copy's 536.9 MB alone; no profile."""
    shards, smoke = _timed_and_smoke("topk18")
    assert len(shards) == 3 and shards[2] == ["tma_copy[r16384_c8192]"]
    for shard in shards[:2]:
        assert shard[0].endswith("_dyn_ta2_q8]") and len(shard) >= 3, shard
        stem = shard[0][:-len("_ta2_q8]")]
        assert all(i.startswith(stem + "_ta") and i != shard[0] for i in shard[1:]), shard
    assert smoke and all("_ta" in i for i in smoke)


@pytest.mark.slow(reason="four tirxh bench --collect-only runs over the zoo")
def test_flush1_mode_times_the_same_items_once_per_l2_flush():
    """MODE=flush1 (session 28): the copy, top-k's two mains and cumsum_tma `_k8`, one shard per
    L2 flush (`--l2-flush write`, `read`, `none`: gpu_bench.sh's SHARD_ARGS); and a second
    mode's shards keep their own (no) options when modes are combined."""
    r = _list("flush1")
    assert r.returncode == 0, r.stderr
    got = sections(r.stdout)
    assert [k for k in got if k.startswith("timed shard")] == [
        "timed shard 0 (--l2-flush write)", "timed shard 1 (--l2-flush read)",
        "timed shard 2 (--l2-flush none)"]
    items = [v for k, v in got.items() if k.startswith("timed shard")]
    assert items[0] == items[1] == items[2] and sorted(items[0]) == [
        "cumsum_tma[r1_c64M_k8]", "tma_copy[r16384_c8192]",
        "topk_bf16_warp[r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_ta2_q8]",
        "topk_f32_warp[r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta2_q8]"]
    assert got["smoke (correctness only)"] and all(
        "_ta2_q" in i for i in got["smoke (correctness only)"])
    both = sections(_list("topk18 flush1").stdout)
    assert [k for k in both if k.startswith("timed shard")] == [
        "timed shard 0", "timed shard 1", "timed shard 2", "timed shard 3 (--l2-flush write)",
        "timed shard 4 (--l2-flush read)", "timed shard 5 (--l2-flush none)"]


def test_bulk1_mode_times_each_bulk_ring_after_its_main_under_two_flushes():
    """MODE=bulk1 (session 30): each top-k main (`_ta2_q8`) and then its bulk ring (`_bk`), and
    the copy, once under the protocol's write flush and once under the read flush; the smoke
    runs every small bulk-ring case."""
    r = _list("bulk1")
    assert r.returncode == 0, r.stderr
    got = sections(r.stdout)
    assert [k for k in got if k.startswith("timed shard")] == [
        "timed shard 0 (--l2-flush write)", "timed shard 1 (--l2-flush read)"]
    items = [v for k, v in got.items() if k.startswith("timed shard")]
    f32 = "topk_f32_warp[r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta2_q8"
    bf16 = "topk_bf16_warp[r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_ta2_q8"
    wide = "topk_f32_warp[r4096_c32768_k64_st_a_v4_g1fu_w32_sd2"
    assert items[0] == items[1] == ["tma_copy[r16384_c8192]", f"{wide}]", f"{wide}_bk]",
                                    f"{f32}]", f"{f32}_bk]", f"{bf16}]", f"{bf16}_bk]"]
    smoke = got["smoke (correctness only)"]
    assert {i for i in smoke if i.endswith("_bk]")} == {
        "topk_f32_warp[r9_c2056_k50_g2_dyn_ta2_q3_bk]", "topk_f32_warp[r7_c1000_k33_dyn_bk]",
        "topk_f32_warp[r3_c8200_k9_g2_dyn_ta2_bk]", "topk_f32_warp[r3_c8200_k9_g2_sd_bk]",
        "topk_bf16_warp[r5_c4104_k50_v4_bk]", "topk_bf16_warp[r5_c3112_k64_v8_bk]",
        "topk_bf16_warp[r7_c4104_k9_g2_dyn_ta2_q4_bk]"}
