"""benchmarks/kda_bench.sh without a GPU: KDA_BENCH_LIST=1 names the smoke's and every job's
items of a group as `tirxh bench --collect-only` selects them, so a group whose -k selects
nothing or the wrong variants (a renamed case, a substring that also matches another variant)
is caught here and not on the lent GPU; an unknown group is refused."""

import os
import pathlib
import subprocess

import pytest

from tests.benchmarks._listing import sections

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "kda_bench.sh"


def _run(*groups, **env):
    return subprocess.run(["bash", str(SCRIPT), *groups], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, **env))


def _jobs(*groups, **env) -> dict:
    """{job name: [kernel[case], ...]} of the groups' --list output (which must succeed)."""
    r = _run(*groups, KDA_BENCH_LIST="1", **env)
    assert r.returncode == 0, r.stdout + r.stderr
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


def test_unknown_group_is_refused_with_the_known_ones():
    r = _run("wsx", KDA_BENCH_LIST="1")
    assert r.returncode == 2
    assert "unknown group wsx" in r.stdout and "wsd" in r.stdout and "slimpacks" in r.stdout
