"""kcoral/baselines/gemm_peers.py: which shapes each peer GEMM takes, the refusal of the others
before any GPU work, and registration only where the peer imports."""

from __future__ import annotations

import pytest

from kcoral.baselines import BaselineRegistry, gemm_peers as gp
from kcoral.errors import JobFailure
from kcoral.plugins import build


@pytest.mark.parametrize("shape,why", [
    ((8192, 8192, 8192), None),
    ((512, 14336, 4096), None),
    ((128, 4096, 4096), "M = 128 is not a multiple of 256"),
    ((4095, 4097, 4104), "M = 4095 is not a multiple of 256; N = 4097 is not a multiple of "
                         "256; K = 4104 is not a multiple of 64"),
])
def test_pyptx_takes_whole_cluster_tiles_only(shape, why):
    assert gp.pyptx_shape_problem(*shape) == why


@pytest.mark.parametrize("shape,why", [
    ((128, 1024, 7168), None),
    ((4095, 4097, 4104), "K = 4104 is not a multiple of 16; N = 4097 is not a multiple of 16"),
])
def test_scaled_mm_wants_k_and_n_multiples_of_16(shape, why):
    assert gp.scaled_mm_shape_problem(*shape) == why


@pytest.mark.parametrize("cls", [gp.PyptxGemm, gp.ScaledMm, gp.ScaledMmFastAccum])
def test_bad_args_are_refused_with_the_field(cls):
    with pytest.raises(JobFailure, match=r"args needs positive integers N/K"):
        cls().prepare(None, {}, {"M": 128, "N": "4096"})


def test_unsupported_shapes_are_refused_before_any_gpu_work():
    with pytest.raises(JobFailure, match=r"torch._scaled_mm.*K = 72 is not a multiple of 16"):
        gp.ScaledMm().prepare(None, {}, {"M": 128, "N": 128, "K": 72})


def test_registered_only_where_the_peer_is_installed(monkeypatch):
    monkeypatch.setattr(gp, "pyptx_available", lambda: False)
    monkeypatch.setattr(gp, "scaled_mm_available", lambda: False)
    reg = BaselineRegistry()
    gp.kcoral_register_baselines(reg)
    assert reg.names() == []
    monkeypatch.setattr(gp, "pyptx_available", lambda: True)
    monkeypatch.setattr(gp, "scaled_mm_available", lambda: True)
    gp.kcoral_register_baselines(reg)
    assert reg.names() == ["pyptx.gemm_hopper", "torch._scaled_mm",
                           "torch._scaled_mm.fast_accum"]


def test_is_a_builtin_kcoral_plugin():
    regs = build(autoload=False)
    assert regs.pm.has_plugin("kcoral.baselines.gemm_peers")
    # here (no torch, no pyptx) nothing is offered; a GPU host with both gets all three
    assert ("pyptx.gemm_hopper" in regs.baselines) == gp.pyptx_available()
