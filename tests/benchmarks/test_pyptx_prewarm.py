"""benchmarks/pyptx_prewarm.py without a GPU: shape names are checked before anything is
imported, every shape goes through KCoral's own pyptx baseline (a shape it refuses is skipped
with the rule, a failed call is reported and the next shape still runs, the budget stops new
shapes), and a machine without torch or pyptx is skipped with exit status 0."""

import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import pyptx_prewarm  # noqa: E402
from kcoral.baselines import gemm_peers  # noqa: E402
from kcoral.errors import JobFailure  # noqa: E402


def test_shape_names_parse_in_order_once_and_bad_ones_are_named_together():
    got = pyptx_prewarm.parse_shapes(["m512n4096k4096", "m8192n1024k7168", "m512n4096k4096"])
    assert got == [("m512n4096k4096", 512, 4096, 4096), ("m8192n1024k7168", 8192, 1024, 7168)]
    with pytest.raises(ValueError, match=r"unknown shape name\(s\) 'm512', 'x1': expected mMnNkK"):
        pyptx_prewarm.parse_shapes(["m512", "m128n4096k4096", "x1"])


def test_bad_names_are_refused_before_kcoral_or_torch_is_needed(capsys):
    with pytest.raises(SystemExit):
        pyptx_prewarm.main(["--shapes", "m512n4096", "m128n4096k4096"])
    assert "unknown shape name(s) 'm512n4096'" in capsys.readouterr().err


def test_without_pyptx_it_says_so_and_exits_0(monkeypatch, capsys):
    monkeypatch.setattr(gemm_peers, "pyptx_available", lambda: False)
    assert pyptx_prewarm.main(["--shapes", "m512n4096k4096"]) == 0
    assert "prewarm: SKIPPED: torch or pyptx is not installed here" in capsys.readouterr().out


class _FakePyptx:
    """KCoral's PyptxGemm as the prewarm sees it: refuses M % 256, fails at 777 rows."""

    calls: list = []

    def available(self, board):
        assert board.kind == "cuda" and board.info() == {"ordinal": 0}
        return None

    def prepare(self, board, doc, args):
        if args["M"] % 256:
            raise JobFailure("validation.baseline", f"M = {args['M']} is not a multiple of 256")

        def run():
            if args["N"] == 777:
                raise RuntimeError("launch failed")
            self.calls.append(args)
        return run


@pytest.fixture
def fake_pyptx(monkeypatch):
    monkeypatch.setattr(gemm_peers, "pyptx_available", lambda: True)
    monkeypatch.setattr(gemm_peers, "PyptxGemm", _FakePyptx)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(
        cuda=types.SimpleNamespace(synchronize=lambda: None)))
    _FakePyptx.calls = []
    return _FakePyptx


def test_each_shape_runs_through_the_baseline_refused_and_failed_ones_said(fake_pyptx, capsys):
    rc = pyptx_prewarm.main(["--shapes", "m128n4096k4096", "m512n777k4096", "m512n4096k4096"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "prewarm m128n4096k4096: skipped (M = 128 is not a multiple of 256)" in out
    assert "prewarm m512n777k4096 pyptx.gemm_hopper: FAILED after" in out
    assert "RuntimeError: launch failed" in out
    assert "prewarm m512n4096k4096 pyptx.gemm_hopper: " in out and "prewarm: done in" in out
    assert fake_pyptx.calls == [{"M": 512, "N": 4096, "K": 4096}]


def test_no_shape_starts_after_the_budget(fake_pyptx, capsys):
    pyptx_prewarm.main(["--budget", "-1", "--shapes", "m512n4096k4096"])
    assert "prewarm: budget spent before m512n4096k4096" in capsys.readouterr().out
    assert fake_pyptx.calls == []


def test_gemm_bench_prewarms_the_shapes_it_times_before_gpu_bench_starts():
    text = (ROOT / "benchmarks" / "gemm_bench.sh").read_text()
    prewarm = text.index('export PREWARM="${PREWARM-python3 benchmarks/pyptx_prewarm.py')
    assert "--shapes $shapes}" in text[prewarm:prewarm + 200]
    assert prewarm < text.index("bash benchmarks/gpu_bench.sh")

