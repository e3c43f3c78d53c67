"""Diagnostics: out-of-bounds and misaligned accesses, uninitialized shared reads, unwritten
outputs, NaN origin, deadlock, unsupported instructions (incomplete, never a silent pass)."""

import numpy as np

import tirxh.lang as T
import tirxh_numsim as ns


@T.kernel(grid=1, block=64)
def off_by_one(x: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.tid.x
    with T.if_(i <= n):  # bug: should be i < n
        T.ptx.st.global_.f32(out.at(i), T.ptx.ld.global_.f32(x.at(i)))


def test_out_of_bounds_names_kernel_line_lane_address_buffer():
    res = ns.run(off_by_one, dict(x=np.ones(40, np.float32), out=np.zeros(40, np.float32), n=40),
                 grid=(1,))
    assert res.verdict == "error"
    oob = [f for f in res.diagnostics if f.kind == "numsim.out-of-bounds"]
    assert len(oob) == 2  # the read of x and the write of out, once per instruction
    rd = oob[0]
    assert "lane 8" in rd.message and "'off_by_one'" in rd.message
    assert rd.data["buffer"].startswith("x+160")
    assert rd.where.line == off_by_one.fn.__code__.co_firstlineno + 4
    assert rd.lanes == [8] and rd.warps == ["cta (0, 0, 0) warp 1"] and "warp 1" in rd.message
    assert "write" in oob[1].message and oob[1].data["buffer"].startswith("out+160")
    # the in-bounds lanes still ran
    assert np.all(res.outputs["out"] == 1.0)


def test_misaligned_access():
    @T.kernel(grid=1, block=32)
    def k(x: T.gptr[T.u8], out: T.gptr[T.u32]):
        i = T.tid.x
        v = T.ptx.ld.global_.u32(x.at(i * 4 + 1))
        T.ptx.st.global_.u32(out.at(i), v)
    res = ns.run(k, dict(x=np.arange(200, dtype=np.uint8), out=np.zeros(32, np.uint32)),
                 grid=(1,))
    kinds = {f.kind for f in res.diagnostics}
    assert "numsim.misaligned" in kinds and res.verdict == "error"


def test_uninitialized_shared_read_and_unwritten_output():
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.f32]):
        buf = T.shared(T.f32, (64,), name="tile")
        i = T.tid.x
        T.ptx.st.shared.f32(buf.at(i), 1.0)
        with T.if_(i < 16):
            T.ptx.st.global_.f32(out.at(i), T.ptx.ld.shared.f32(buf.at(i + 32)))
    res = ns.run(k, dict(out=np.zeros(32, np.float32)), grid=(1,), outputs=["out"])
    kinds = [f.kind for f in res.diagnostics]
    assert "numsim.uninitialized-shared" in kinds
    un = [f for f in res.diagnostics if f.kind == "numsim.uninitialized-shared"][0]
    assert "tile+128" in un.message and un.severity == "review"
    unw = [f for f in res.diagnostics if f.kind == "numsim.unwritten-output"][0]
    assert "16 of 32" in unw.message and unw.data["first"][0] == [16]
    assert res.verdict == "error"


def test_nan_origin_is_flagged_once_per_instruction():
    @T.kernel(grid=1, block=32)
    def k(x: T.gptr[T.f32], out: T.gptr[T.f32]):
        i = T.tid.x
        v = T.ptx.ld.global_.f32(x.at(i))
        T.ptx.st.global_.f32(out.at(i), v * 0.0 + v / v)
    x = np.array([0.0, 1.0, np.inf, 2.0] * 8, np.float32)
    res = ns.run(k, dict(x=x, out=np.zeros(32, np.float32)), grid=(1,))
    nan = [f for f in res.diagnostics if f.kind == "numsim.nan-origin"]
    assert len(nan) == 2 and res.verdict == "review"
    assert {f.data["instruction"] for f in nan} == {"mul.f32", "div.rn.f32"}


def test_unsupported_instruction_is_incomplete_with_line():
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        i = T.tid.x
        T.ptx.st.global_.u32(out.at(i), T.ptx.ld.const.u32(out.at(i)))  # no .const banks
        T.ptx.st.global_.u32(out.at(i), i)
    res = ns.run(k, dict(out=np.zeros(32, np.uint32)), grid=(1,))
    assert res.verdict == "incomplete"
    assert ".const state space" in res.incomplete[0]
    assert f"{k.fn.__code__.co_filename}:{k.fn.__code__.co_firstlineno + 3}" in res.incomplete[0]


def test_deadlock_is_reported_with_the_blocked_warps():
    @T.kernel(grid=1, block=64)
    def k(out: T.gptr[T.u32]):
        bar = T.mbarrier(1)
        i = T.tid.x
        with T.if_(i == 0):
            bar.init(64)  # expects 64 arrivals; nobody arrives
        T.ptx.bar.sync(0)
        bar.wait(0)
        T.ptx.st.global_.u32(out.at(i), i)
    res = ns.run(k, dict(out=np.zeros(64, np.uint32)), grid=(1,))
    dl = [f for f in res.diagnostics if f.kind == "numsim.deadlock"]
    assert dl and res.verdict == "error"
    assert "cta (0, 0, 0) warps 0, 1: blocked on mbarrier.try_wait" in dl[0].message
    assert dl[0].where.line == k.fn.__code__.co_firstlineno + 7  # bar.wait(0)
    assert {(p["warp"], p["state"].split(" ")[0]) for p in dl[0].data["positions"]} == \
        {(0, "blocked"), (1, "blocked")}


def test_a_deadlock_no_other_cta_can_end_stops_before_starting_them():
    """A CTA stuck on its own mbarrier cannot be released by another CTA: with one CTA admitted
    at a time (a trace), numsim reports it without running the rest of the grid."""
    @T.kernel(grid=4, block=32)
    def k(out: T.gptr[T.u32]):
        bar = T.mbarrier(1)
        with T.if_(T.tid.x == 0):
            bar.init(2)  # two arrivals expected, one comes
        T.ptx.bar.sync(0)
        with T.if_(T.tid.x == 0):
            bar.arrive()
        bar.wait(0)
        T.ptx.st.global_.u32(out.at(T.ctaid.x * 32 + T.tid.x), 1)
    res = ns.run(k, dict(out=np.zeros(128, np.uint32)), grid=(4,), trace=True)
    dl = [f for f in res.diagnostics if f.kind == "numsim.deadlock"]
    assert dl, res.summary()
    assert "cta (0, 0, 0) warp 0: blocked on mbarrier.try_wait" in dl[0].message
    assert "(3 CTAs of the grid never started)" in dl[0].message
    assert res.stats["ctas"] == 1
    # without a trace the four CTAs start together, and all four are reported
    res = ns.run(k, dict(out=np.zeros(128, np.uint32)), grid=(4,))
    dl = [f for f in res.diagnostics if f.kind == "numsim.deadlock"]
    assert "ctas (0, 0, 0)..(3, 0, 0) (4 CTAs) warp 0: blocked on mbarrier.try_wait" in \
        dl[0].message and "never started" not in dl[0].message


def test_bad_inputs_are_clear_errors():
    import pytest
    with pytest.raises(ValueError, match="no input for parameter 'n'"):
        ns.run(off_by_one, dict(x=np.ones(4, np.float32), out=np.ones(4, np.float32)), grid=(1,))
    with pytest.raises(ValueError, match="'x' is a pointer; expected a numpy array"):
        ns.run(off_by_one, dict(x=3, out=np.ones(4, np.float32), n=1), grid=(1,))
    with pytest.raises(ValueError, match="output 'nope'"):
        ns.run(off_by_one, dict(x=np.ones(4, np.float32), out=np.ones(4, np.float32), n=1),
               grid=(1,), outputs=["nope"])
    with pytest.raises(TypeError, match="expected a T.kernel"):
        ns.run(object(), {})
