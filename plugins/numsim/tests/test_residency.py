"""Co-residency (`tirxh_numsim.residency`): a CTA that waits on a CTA not started yet hangs a GPU
whose SMs cannot hold every CTA it waits with; numsim says so from the compiled kernel's
resources, and does not flag waits on CTAs already started (tickets in start order)."""

import numpy as np
import pytest

import tirxh.lang as T
import tirxh_numsim as ns
from tirxh_numsim import residency
from tirxh_numsim.residency import H200, Need, ctas_per_sm

BIG = 120 * 1024  # shared bytes per CTA: one CTA per H200 SM, 132 on the GPU


@T.kernel(block=32, smem=BIG)
def grid_barrier(count: T.gptr[T.u32], out: T.gptr[T.u32]):
    """Every CTA counts itself in, then spins until all have."""
    with T.if_(T.tid.x == 0):
        T.ptx.red.release.gpu.global_.add.u32(count.at(0), 1)
        with T.while_(lambda: T.ptx["ld.acquire.gpu.global.u32"](count.at(0)) < T.nctaid.x):
            pass
        T.ptx.st.global_.u32(out.at(T.ctaid.x), T.ctaid.x)


@T.kernel(block=32, smem=BIG)
def ticket_chain(count: T.gptr[T.u32], flags: T.gptr[T.u32], out: T.gptr[T.u32]):
    """Each CTA takes a ticket in start order and waits only for the previous ticket's flag
    (a decoupled look-back's forward-progress-safe shape, as zoo/kernels/cumsum.py)."""
    with T.if_(T.tid.x == 0):
        t = T.ptx.atom.relaxed.gpu.global_.add.u32(count.at(0), 1)
        with T.if_(t > 0):
            with T.while_(lambda: T.ptx["ld.acquire.gpu.global.u32"](flags.at(t - 1)) == 0):
                pass
        T.ptx.st.release.gpu.global_.u32(flags.at(t), 1)
        T.ptx.st.global_.u32(out.at(t), t)


def _run(kernel, n, compiled=True, **kw):
    target = kernel.compile("sm_90a") if compiled else kernel
    inputs = dict(count=np.zeros(1, np.uint32), out=np.zeros(n, np.uint32))
    if kernel is ticket_chain:
        inputs["flags"] = np.zeros(n, np.uint32)
    return ns.run(target, inputs, grid=(n,), **kw)


def _coresidency(res):
    return [f for f in res.diagnostics if f.kind == "numsim.co-residency"]


def test_an_oversubscribed_grid_barrier_is_an_error():
    res = _run(grid_barrier, 140)
    (f,) = _coresidency(res)
    assert res.verdict == "error" and f.severity == "error"
    assert "133..140 of its 140 CTAs must be resident at once, but only 1 CTA(s) per SM " in \
        f.message and "x 132 SMs = 132 fit on an H200: the GPU hangs" in f.message
    assert f.data["fit"] == 132 and f.data["regs"] > 0
    assert np.array_equal(res.outputs["out"], np.arange(140))  # numsim itself finishes


@pytest.mark.parametrize("trace", [False, True])
def test_a_grid_barrier_that_fits_is_clean(trace):
    res = _run(grid_barrier, 132, trace=trace)
    assert not _coresidency(res) and res.verdict == "clean", res.summary()


def test_the_per_cta_count_is_exact_when_traced():
    res = _run(grid_barrier, 134, trace=True)
    (f,) = _coresidency(res)
    assert f.data["need_low"] == 134 and f.data["need_high"] == 134  # one CTA per unit


def test_without_registers_the_bound_holds_when_shared_memory_decides():
    res = _run(grid_barrier, 140, compiled=False)
    (f,) = _coresidency(res)
    assert f.severity == "error" and "any registers" in f.message


def test_waiting_on_earlier_tickets_is_not_flagged():
    res = _run(ticket_chain, 300)
    assert not _coresidency(res) and res.verdict == "clean", res.summary()
    assert np.array_equal(res.outputs["out"], np.arange(300))


def test_ctas_per_sm_follows_threads_registers_and_shared_memory():
    assert ctas_per_sm(1024, 32, 0) == 2  # threads
    assert ctas_per_sm(256, 128, 0) == 2  # 128 x 256 = 32768 registers a CTA
    assert ctas_per_sm(128, 168, 0) == 3  # 168 x 32 = 5376 -> 5376 a warp (256-granular)
    assert ctas_per_sm(32, 16, 0) == 32  # the per-SM cap
    assert ctas_per_sm(32, None, 100 * 1024) == 2  # shared memory, with 1 KB reserved each
    assert ctas_per_sm(1024, 255, 0) == 0  # does not fit at all


def test_a_bound_between_the_register_extremes_is_incomplete():
    class K:  # what check reads of a kernel
        name, threads_per_block, dynamic_smem, shared = "k", 256, 0, []
        loc = type("L", (), {"file": "k.py", "line": 3})()

    # 256 threads: 1 CTA/SM with 255 registers (132), 8 without counting them (1056)
    (f,) = residency.check(Need(200, 200), K, None, 300, H200)
    assert f.severity == "incomplete" and "132..1056" in f.message
    assert residency.check(Need(200, 200), K, 32, 300, H200) == []
    (r,) = residency.check(Need(200, 1100), K, 32, 1200, H200)
    assert r.severity == "review" and "may hang" in r.message
    assert residency.check(Need(), K, None, 300, H200) == []
