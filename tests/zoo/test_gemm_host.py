"""zoo/kernels/gemm_host.py: the Hopper GEMMs' host side on the CPU: the shapes TMA cannot
describe refused with the rule, split-K / stream-K settings checked, workspace sizes, inputs
and references cached per shape and seed, and the bf16 tolerance's reach."""

from __future__ import annotations

import gemm_host as H
import numpy as np
import pytest

from tirxh.api import numpy_dtype


@pytest.mark.parametrize("kernel,shape,kw,rule", [
    ("bf16", (128, 128, 100), {}, r"K = 100: rows of A .* 200 bytes, not a multiple of 16"),
    ("bf16", (128, 100, 64), {"B_KMAJOR": False}, r"N = 100: rows of an N-major B"),
    ("bf16", (128, 100, 64), {}, r"N = 100: rows of C .*use EPI='direct'"),
    ("bf16", (0, 128, 64), {}, r"M, N, K must be positive"),
    ("fp8", (128, 128, 4104), {}, r"gemm_fp8: K = 4104: rows of A .*\(K % 16 != 0\)"),
    ("bf16", (128, 128, 192), {"SPLITK": 4}, r"SPLITK = 4 needs at least 4 K slices of 64"),
])
def test_shapes_tma_cannot_describe_are_refused(kernel, shape, kw, rule):
    M, N, K = shape
    inputs = (H.bf16_inputs if kernel == "bf16" else H.fp8_inputs)(128, 1)
    with pytest.raises(ValueError, match=rule):
        inputs(np.random.default_rng(0), M, N, K, **kw)


def test_red_workspace_is_one_tile_per_tile():
    slots = H.splitk_buffers(200, 136, 128, 64, 1, 4, "slots")
    red = H.splitk_buffers(200, 136, 128, 64, 1, 4, "red")
    assert slots["ws"].size == 6 * 4 * 128 * 64 and red["ws"].size == 6 * 128 * 64
    assert red["cnt"].size == slots["cnt"].size == 2 * 6


def test_large_inputs_and_reference_are_computed_once_per_seed():
    inputs = H.bf16_inputs(128, 1)
    x = inputs(np.random.default_rng(5), 1024, 512, 512)
    y = inputs(np.random.default_rng(5), 1024, 512, 512)
    z = inputs(np.random.default_rng(6), 1024, 512, 512)
    assert x["a"] is y["a"] and x["b"] is y["b"] and x["a"] is not z["a"]
    assert not x["a"].flags.writeable
    r1 = H.bf16_reference(x["a"], x["b"])["c"]
    assert H.bf16_reference(y["a"], y["b"])["c"] is r1
    want = (x["a"].astype(np.float32) @ x["b"].astype(np.float32).T).astype(r1.dtype)
    assert np.array_equal(r1.view(np.uint16), want.view(np.uint16))


def test_tolerance_takes_a_one_ulp_flip_and_refuses_a_wrong_tile():
    bf16 = numpy_dtype("bf16")
    ref = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32) * 50
    ref = ref.astype(bf16)
    flip = ref.copy().view(np.uint16)
    flip[3, 5] += 1
    assert H.BF16_TOLERANCE.compare(flip.view(bf16), ref)["ok"]
    wrong = ref.copy()
    wrong[:64, :64] = 0
    assert not H.BF16_TOLERANCE.compare(wrong, ref)["ok"]


def test_split_k_and_stream_k_settings_are_checked():
    with pytest.raises(ValueError, match=r"REDUCE = 'atomic': expected 'slots', 'peers', 'red' "
                                         r"or 'pair'"):
        H.bf16_inputs(128, 1)(np.random.default_rng(0), 128, 128, 256, BN=128, SPLITK=2,
                              REDUCE="atomic")
    with pytest.raises(ValueError,
                       match=r"STREAMK needs REDUCE = 'red' and SPLITK = 1 .*'slots'"):
        H.bf16_inputs(128, 1)(np.random.default_rng(0), 128, 128, 256, BN=128, STREAMK=True)
    with pytest.raises(ValueError, match=r"STREAMK needs .*SPLITK = 2\)"):
        H.bf16_inputs(128, 2)(np.random.default_rng(0), 128, 128, 256, BN=128, STREAMK=True,
                              REDUCE="red", SPLITK=2)
    one = H.splitk_buffers(200, 136, 128, 64, 1, 1)
    assert one["ws"].size == 1 and one["cnt"].size == 1       # nothing to reduce
    pair = H.splitk_buffers(200, 136, 128, 64, 1, 2, "pair")
    assert pair["ws"].size == 1 and pair["cnt"].size == 1     # summed in shared memory
    sk = H.splitk_buffers(200, 136, 128, 64, 1, 1, "red", streamk=True)
    assert sk["ws"].size == 6 * 128 * 64 and not sk["ws"].any() and not sk["cnt"].any()
    # the stream-K tail cuts fewer tiles than the grid has workers: 132 slots, not 2048
    tail = H.splitk_buffers(8192, 8192, 128, 256, 2, 1, "red", streamk="tail", workers=66)
    assert tail["ws"].size == 132 * 128 * 256 and tail["cnt"].size == 2 * 132
    few = H.splitk_buffers(2048, 1024, 128, 256, 2, 1, "red", streamk="tail", workers=66)
    assert few["ws"].size == 64 * 128 * 256           # 32 pairs: all of them on the tail
    every = H.splitk_buffers(8192, 8192, 128, 256, 2, 1, "red", streamk="tail")
    assert every["cnt"].size == 2 * 2048               # no grid given: a slot per tile
