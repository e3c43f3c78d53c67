"""The cuda board's tensor-map encoding arguments (`tensormap_args`, and the call `_tensormap`
makes), checked on the CPU. The rank-1 case is the H200 failure of 2026-11-30:
``cuTensorMapEncodeTiled`` returned CUDA_ERROR_INVALID_VALUE for dims [32], strides [], u32."""

import numpy as np
import pytest

import tirxh.lang as T
from kcoral.boards.cuda import CudaDevice, tensormap_args
from kcoral.errors import JobFailure


def describe(shape, box, dtype=np.uint32, **kw):
    return T.TensorMap("src", box=box, **kw).describe(np.zeros(shape, dtype))


def test_rank1_gets_one_well_formed_stride():
    d = describe((32,), (32,))
    assert d["strides"] == []  # what TensorMap.describe() gives: no outer dimension
    a = tensormap_args(d)
    assert a["rank"] == 1 and a["dims"] == [32] and a["box"] == [32]
    assert a["strides"] == [128]  # 32 x 4 bytes, a multiple of 16
    assert a["elem_strides"] == [1]
    assert (a["dtype"], a["swizzle"], a["l2_promotion"], a["oob_fill"]) == \
        ("UINT32", "NONE", "NONE", "NONE")


@pytest.mark.parametrize("n,dtype,stride", [(5, np.uint32, 32), (3, np.uint8, 16),
                                            (8, np.float16, 16), (100, np.float32, 400)])
def test_rank1_stride_is_rounded_up_to_16(n, dtype, stride):
    assert tensormap_args(describe((n,), (n,), dtype))["strides"] == [stride]


def test_rank2_keeps_the_outer_stride_innermost_first():
    a = tensormap_args(describe((64, 128), (16, 32), np.float16, swizzle=64, oob_fill="nan"))
    assert a["dims"] == [128, 64] and a["strides"] == [256] and a["box"] == [32, 16]
    assert (a["dtype"], a["swizzle"], a["oob_fill"]) == ("FLOAT16", "64B", "NAN_REQUEST_ZERO_FMA")


def test_malformed_maps_name_the_field():
    d = describe((64, 128), (16, 32))
    with pytest.raises(JobFailure, match=r"'src'.*strides \[\] should have rank - 1 = 1"):
        tensormap_args(dict(d, strides=[]))
    with pytest.raises(JobFailure, match=r"strides \[100\] are not positive multiples of 16"):
        tensormap_args(dict(d, strides=[100]))
    with pytest.raises(JobFailure, match=r"box \[32\] should have 2 entries"):
        tensormap_args(dict(d, box=[32]))
    with pytest.raises(JobFailure, match=r"unsupported 'c64'"):
        tensormap_args(dict(d, dtype="c64"))
    with pytest.raises(JobFailure, match=r"oob_fill 'inf'"):
        tensormap_args(dict(d, oob_fill="inf"))
    with pytest.raises(JobFailure, match=r"rank 6"):
        tensormap_args(dict(d, dims=[1] * 6, strides=[16] * 5, box=[1] * 6,
                            elem_strides=[1] * 6))


class _Recorder:
    """Stands in for the driver: records the arguments of cuTensorMapEncodeTiled."""

    def __init__(self, cu):
        self._cu = cu
        self.calls = []

    def __getattr__(self, name):
        return getattr(self._cu, name)

    def cuTensorMapEncodeTiled(self, *args):
        self.calls.append(args)
        return (self._cu.CUresult.CUDA_SUCCESS, self._cu.CUtensorMap())


def test_the_driver_call_for_a_rank1_map_has_one_stride():
    from cuda.bindings import driver as cu
    dev = CudaDevice.__new__(CudaDevice)  # no GPU: only the host-side call construction
    dev.cu = _Recorder(cu)
    dev.ptrs = {"src": 0x7F0000001000}
    dev._check = lambda res, what, kind="launch": res[1]
    out = dev._tensormap(describe((32,), (32,)))
    assert len(out) == 128
    (dt, rank, addr, dims, strides, box, elem, interleave, sw, l2, oob), = dev.cu.calls
    assert rank == 1 and addr == 0x7F0000001000
    assert [int(x) for x in dims] == [32] and [int(x) for x in strides] == [128]
    assert [int(x) for x in box] == [32] and [int(x) for x in elem] == [1]
    assert dt == cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT32
    assert sw == cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE
    with pytest.raises(JobFailure, match="tensor map source 'nope' is not a buffer"):
        dev._tensormap(dict(describe((32,), (32,)), source="nope"))


@pytest.mark.gpu
def test_rank1_map_encodes_on_the_gpu():
    """The H200 failure itself: the driver accepts the rank-1 map now."""
    from kcoral.boards import BoardSpec
    dev = CudaDevice(BoardSpec(name="cuda0", type="cuda", target="sm_90a",
                               options={"ordinal": 0}))
    try:
        dev.alloc("src", 32 * 4)
        assert len(dev._tensormap(describe((32,), (32,)))) == 128
    finally:
        dev.close()
