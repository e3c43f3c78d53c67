"""benchmarks/zoo_all_bench.sh without a GPU: the shard string it hands gpu_bench.sh, a clear
refusal of an unknown group, and a skip that says why (the GPU run: docs/PERFORMANCE.md)."""

import pathlib
import subprocess

import pytest

from kcoral.boards.cuda import gpu_count
from tests.zoo.zoo_modules import load

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "zoo_all_bench.sh"


def _run(*args):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60)


def test_shards_are_one_k_expression_per_group_in_the_order_given():
    r = _run("--shards", "kda", "vector")
    assert r.returncode == 0
    assert r.stdout.strip().split("|") == [
        "kda_fwd[t8192_h64_v64ws8]@",
        "vadd[n64M]@ or reduce_rows[r8192_c8192_w16_u1_pol_r32]@ or gemm_mma[m4096n4096k4096]@sm_90a"]


def test_the_default_is_both_halves_without_kda():
    """kda_fwd's job spends its budget in FLA's first autotune unless kda_bench.sh warms FLA up
    (session 7): the default leaves it out; `half1`/`half2` are one device call each."""
    default = _run("--shards").stdout.strip().split("|")
    halves = _run("--shards", "half1", "half2").stdout.strip().split("|")
    assert default == halves and len(default) == 8
    assert not any("kda_fwd" in s for s in default)
    assert _run("--shards", "half2", "kda").stdout.strip().split("|")[-1] == \
        "kda_fwd[t8192_h64_v64ws8]@"


def test_an_unknown_group_is_refused_by_name():
    r = _run("--shards", "norms", "gemms")
    assert r.returncode == 2 and "unknown group 'gemms'" in r.stderr


@pytest.mark.slow   # one zoo collection per group: ~3 s each
def test_every_group_selects_its_items():
    """Each headline item exists under its current case name (cases are renamed when a faster
    variant becomes the default: session 5's transpose and reduce_rows, session 6's kda_fwd)."""
    r = subprocess.run(["bash", str(SCRIPT), "--list", "half1", "half2", "kda"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    groups = r.stdout.split("== ")[1:]
    assert len(groups) == 9
    for g in groups:
        name, *items = g.strip().splitlines()
        assert items, f"group {name} selects nothing"
    assert sum(len(g.strip().splitlines()) - 1 for g in groups) >= 27
    listed = r.stdout
    for headline in ("reduce_rows[r8192_c8192_w16_u1_pol_r32]", "rmsnorm[r16384_c8192_tri_pol2]",
                     "add_rmsnorm[r16384_c8192]", "swiglu[n64M_b128_u1_stcs]",
                     "kda_decode_bulk[n256_h64_t1]", "cumsum_tma[r1_c64M_k8]",
                     "topk_f32_warp[r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta2_q8]",
                     "topk_f32_warp[r4096_c32768_k64_st_a_v4_g1fu_w32_sd2]",
                     "topk_bf16_warp[r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_ta2_q8]"):
        assert headline in listed, headline


def test_the_headlines_are_top_ks_mains():
    """Every top-k case tagged `main` (the size's fastest measured: it changes when a faster
    variant is measured, sessions 15-27) is a headline, so the whole-zoo run times the current
    mains and not the ones before them (session 29 found two of three stale)."""
    mod = load("topk_warp")
    mains = [f"{suite.kernel.name}[{c.name}]@" for suite in (mod.SUITE_F32, mod.SUITE_BF16)
             for c in suite.cases if "main" in c.tags]
    assert len(mains) == 3
    movement = _run("--shards", "movement").stdout
    for m in mains:
        assert m in movement, m


def test_list_refuses_a_group_that_selects_nothing(tmp_path):
    script = tmp_path / "benchmarks" / "zoo_all_bench.sh"
    script.parent.mkdir()
    (tmp_path / "zoo").mkdir()
    script.write_text(SCRIPT.read_text().replace('G[kda]="kda_fwd[t8192_h64_v64ws8]@"',
                                                 'G[kda]="kda_fwd[no_such_case]@"'))
    r = subprocess.run(["bash", str(script), "--list", "kda"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "no item selected by group(s): kda" in r.stderr


@pytest.mark.skipif(gpu_count()[0] > 0, reason="this host has a GPU")
def test_without_a_gpu_it_says_so_and_exits_0():
    r = _run("norms")
    assert r.returncode == 0 and "SKIPPED: no NVIDIA GPU here" in r.stdout
