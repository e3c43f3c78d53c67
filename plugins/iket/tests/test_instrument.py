"""The profiling build: the IR pass, the hidden parameter, the PTX it emits, and that nvJitLink
assembles it."""

import re

import pytest

import tirxh.lang as T
from tirxh.api import ir
from tirxh_iket.transform import compile_profiling_build
from tirxh_iket.instrument import InstrumentError, instrument
from tirxh_iket.layout import PARAM_NAME, TraceLayout


@T.kernel(grid=(4, 2), block=(64, 2))
def ws(out: T.gptr[T.u32], n: T.u32):
    w = T.warp_index()
    with T.if_(w == 0, uniform=True):
        with T.range(n) as k:
            with T.iket.range("load"):
                T.ptx.st.global_.u32(out.at(k), k)
    with T.else_():
        with T.iket.range("mma"):
            T.iket.mark("tick")


@T.kernel(block=32)
def bare(out: T.gptr[T.u32]):
    T.ptx.st.global_.u32(out.at(0), 1)


@T.kernel(block=32)
def clash(iket_trace: T.gptr[T.u32]):
    with T.iket.range("x"):
        T.ptx.st.global_.u32(iket_trace.at(0), 1)


def test_pass_adds_parameter_and_records():
    base = ws.specialize()
    k, layout = instrument(base, capacity=16)
    assert [p.name for p in k.params] == ["out", "n", PARAM_NAME]
    assert k.params[-1].kind == "ptr"
    assert not any(isinstance(s, ir.Annotation) for s in k.walk())
    # the kernel's cached IR is untouched
    assert any(isinstance(s, ir.Annotation) for s in base.walk())
    assert [p.name for p in base.params] == ["out", "n"]
    assert [(s.kind, s.name) for s in layout.sites] == [
        ("begin", "load"), ("end", "load"), ("begin", "mma"), ("mark", "tick"), ("end", "mma")]
    assert layout.warps_per_cta == 4 and layout.capacity == 16
    assert layout.buffer_bytes((4, 2, 1)) == 8 * 4 * 16 * 32
    stores = [i for i in k.instructions() if i.spelling.startswith("st.global.v")]
    assert len(stores) == 2 * len(layout.sites)
    assert all(i.guard is not None for i in stores)  # one lane per warp writes
    assert layout.cost["instructions_per_event"] == 11
    assert TraceLayout.from_json(layout.to_json()) == layout


def test_profiling_build_assembles_with_line_info():
    ck, layout = compile_profiling_build(ws, "sm_90a", capacity=16)
    assert ck.cubin
    ptx = ck.ptx
    assert ".param .u64 iket_trace" in ptx
    for needed in ("%globaltimer", "%clock64", "%smid", "%warpid", "activemask.b32",
                   "st.global.v2.u64", "st.global.v4.u32"):
        assert needed in ptx, needed
    assert "atom" not in ptx  # the slot scheme needs no atomics
    # records carry the valid bit and the site index as an immediate
    assert re.search(r"st\.global\.v4\.u32 \t\[%rdu\d+\+16\], \{2147483648,", ptx)
    # the record's instructions sit at the annotation's Python line
    line = layout.sites[0].line
    assert re.search(rf"\.loc\t\d+ {line} 0\n\tmov\.u64 \t%rdu\d+, %globaltimer", ptx)
    # the normal build of the same kernel is unchanged
    assert "globaltimer" not in ws.ptx("sm_90a")


def test_no_annotations_is_an_error():
    with pytest.raises(InstrumentError, match="'bare'.*has no T.iket annotations"):
        instrument(bare.specialize())


def test_parameter_clash_is_an_error():
    with pytest.raises(InstrumentError, match="already named 'iket_trace'"):
        instrument(clash.specialize())


@pytest.mark.parametrize("cap", [0, -1, 1.5, 1 << 21])
def test_bad_capacity(cap):
    with pytest.raises(InstrumentError, match="capacity must be an int"):
        instrument(ws.specialize(), capacity=cap)
