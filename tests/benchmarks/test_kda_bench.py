"""benchmarks/kda_bench.sh's argument checks: a wrong group or shape is refused by name before
the script touches the GPU, the pip cache or the daemon (a device call is minutes of budget)."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "kda_bench.sh"


def run_script(*groups, **env):
    full = {**os.environ, "OUT": "/nonexistent/never-created", **env}
    return subprocess.run(["bash", str(SCRIPT), *groups], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("groups, env, message", [
    (("nosuchgroup",), {}, "unknown group nosuchgroup"),
    (("wsc",), {"WSC_SHAPES": "t8192_h64 t8192_h128"},
     "WSC_SHAPES takes t8192_h96 and t8192_h64, not t8192_h128"),
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
