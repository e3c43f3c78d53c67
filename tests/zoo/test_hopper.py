"""zoo/kernels/hopper.py: tile sizes as shifts, and the wgmma descriptor's bit fields (PTX ISA
9.7.15.5.1) as numsim computes them from a traced kernel."""

import numpy as np
import pytest

import tirxh.lang as T

from ._zoo import load

HOP = load("hopper")


def test_log2_of_tile_sizes():
    assert [HOP.log2(n) for n in (1, 2, 64, 128, 256)] == [0, 1, 6, 7, 8]
    for bad in (0, 96, -4):
        with pytest.raises(ValueError, match=f"expected a power of two, got {bad}"):
            HOP.log2(bad)


@T.kernel(grid=1, block=32)
def _descs(out: T.gptr[T.u64], addr: T.u32):
    with T.if_(T.tid.x == 0):
        T.ptx.st.global_.u64(out.at(0), HOP.desc(addr, 16, 1024))
        T.ptx.st.global_.u64(out.at(1), HOP.desc(addr + 0x40000, 128 * 128, 1024))


def test_descriptor_fields():
    ns = pytest.importorskip("tirxh_numsim")
    addr = 0x1A400   # a 1024-aligned shared address
    res = ns.run(_descs, {"out": np.zeros(2, np.uint64), "addr": addr}, grid=(1,),
                 outputs=["out"])
    assert res.verdict == "clean", res.summary
    k_major, mn_major = (int(x) for x in res.outputs["out"])
    assert k_major == (addr >> 4) | (1 << 16) | (64 << 32) | (1 << 62)
    # bits 0-13 take the address modulo 2^18; LBO = one 64-column box of 128 rows
    assert mn_major == (addr >> 4) | ((128 * 128 >> 4) << 16) | (64 << 32) | (1 << 62)
