"""The cuda board's host-side code that needs no GPU: parameter packing and target names."""

import ctypes

import numpy as np
import pytest

from kcoral.boards.cuda import _ParamBlock, pack_params, target_for
from kcoral.errors import JobFailure

PARAMS = [{"name": "a", "kind": "ptr", "dtype": "f32", "size": 8, "align": 8},
          {"name": "n", "kind": "scalar", "dtype": "u32", "size": 4, "align": 4},
          {"name": "s", "kind": "scalar", "dtype": "f32", "size": 4, "align": 4},
          {"name": "m", "kind": "tensormap", "dtype": "b8", "size": 128, "align": 64}]


def tm(desc):
    return bytes(range(128))


def test_pack_by_kind():
    args = [{"buffer": "a"}, {"scalar": 4096, "dtype": "u32"}, {"scalar": 0.5, "dtype": "f32"},
            {"tensormap": {"source": "a"}}]
    out = pack_params(PARAMS, args, {"a": 0x7F0012345678}.__getitem__, tm)
    assert out[0] == (0x7F0012345678).to_bytes(8, "little")
    assert out[1] == np.uint32(4096).tobytes()
    assert out[2] == np.float32(0.5).tobytes()
    assert out[3] == bytes(range(128))


def test_pack_errors():
    with pytest.raises(JobFailure, match="takes 4 parameters"):
        pack_params(PARAMS, [{"buffer": "a"}], lambda n: 0, tm)
    bad = [{"scalar": 1, "dtype": "u64"}, {"scalar": 1, "dtype": "u32"},
           {"scalar": 1.0, "dtype": "f32"}, {"tensormap": {}}]
    with pytest.raises(JobFailure, match=r"args\[0\] \(a\): the kernel expects a ptr"):
        pack_params(PARAMS, bad, lambda n: 0, tm)
    with pytest.raises(JobFailure, match="does not fit in u32"):
        pack_params(PARAMS[:2], [{"buffer": "a"}, {"scalar": -1, "dtype": "u32"}],
                    lambda n: 0, tm)
    with pytest.raises(JobFailure, match="8-byte value for a 4-byte parameter"):
        pack_params(PARAMS[:2], [{"buffer": "a"}, {"scalar": 1, "dtype": "u64"}],
                    lambda n: 0, tm)
    with pytest.raises(JobFailure, match="CUtensorMap is 64 bytes"):
        pack_params(PARAMS[3:], [{"tensormap": {}}], lambda n: 0, lambda d: b"x" * 64)


def test_pack_without_metadata_follows_args():
    out = pack_params(None, [{"scalar": 16, "dtype": "u64"}, {"scalar": 3, "dtype": "s32"}],
                      lambda n: 0, tm)
    assert [len(b) for b in out] == [8, 4]


def test_param_block_is_a_void_pointer_array_with_aligned_values():
    packed = [b"\x01" * 8, b"\x02" * 4, bytes(range(128))]
    blk = _ParamBlock(packed)
    ptrs = (ctypes.c_void_p * 3).from_address(blk.address)
    for p, b in zip(ptrs, packed):
        assert p % 128 == 0  # CUtensorMap needs 64-byte alignment
        assert ctypes.string_at(p, len(b)) == b


def test_discovery_never_raises():
    from kcoral.boards.cuda import CudaBoardType, gpu_count
    n, why = gpu_count()
    assert (n > 0) == (why == "")
    boards = CudaBoardType().discover({})
    assert len(boards) == n
    assert all(b.type == "cuda" and b.limits["memory_bytes"] > 0 for b in boards)


@pytest.mark.parametrize("cc,target", [((9, 0), "sm_90a"), ((8, 0), "sm_80"),
                                       ((10, 0), "sm_100a"), ((8, 9), "sm_89")])
def test_target_for(cc, target):
    assert target_for(*cc) == target
