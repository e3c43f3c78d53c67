"""Progress across CTAs (issue 19): kernels whose CTAs wait for each other through global memory
(a last-block reduction that broadcasts its result, a split-K turnstile, a spin-first consumer, a
persistent kernel with a grid-wide barrier) run to completion against their references in every
mode, and their buggy twins are reported as deadlocks naming every CTA's and warp's position.

Modes: ``batched`` (no trace: all CTAs' warps vectorized in one group), ``small-batches`` (no
trace, one CTA admitted at a time: spins must wait for CTAs not started yet) and ``per-warp``
(``trace=True``: one warp per group, one CTA admitted at a time).
"""

import inspect

import numpy as np
import pytest

import tirxh.lang as T
import tirxh_numsim as ns
from tirxh_numsim import sim

MODES = ["batched", "small-batches", "per-warp"]


def run(kernel, inputs, mode, monkeypatch, **kw):
    if mode == "small-batches":
        monkeypatch.setattr(sim, "BATCH_LANES", 32)  # one CTA per batch
    return ns.run(kernel, inputs, trace=mode == "per-warp", **kw)


def deadlock(res):
    dl = [f for f in res.diagnostics if f.kind == "numsim.deadlock"]
    assert dl and res.verdict == "error", res.summary()
    return dl[0]


def line_of(kernel, text: str) -> int:
    """The source line of `kernel` that contains `text`."""
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, s in enumerate(lines) if text in s)


def spinning_at(kernel) -> str:
    """How a deadlock report names a warp spinning in `kernel`'s ``T.while_`` loop."""
    return f"spinning in the loop at {kernel.fn.__code__.co_filename}:{line_of(kernel, 'T.while_')}"


# --- a last-block reduction whose total every block waits for -------------------------------------

def _sum_broadcast(last_is):
    """x[i] + sum(x) for every i: each block sums its 64 elements (shared-memory tree), publishes
    the partial and takes a ticket; the block that takes the last ticket sums the partials and
    publishes the total with a release store; every block spins on that flag (acquire), then adds
    the total. `last_is(ticket)` picks the last block (the bug: an off-by-one)."""
    @T.kernel(grid=lambda n: n // 64, block=64)
    def sum_broadcast(x: T.gptr[T.u32], partial: T.gptr[T.u32], state: T.gptr[T.u32],
                      out: T.gptr[T.u32], n: T.u32):
        buf = T.shared(T.u32, (64,))
        total = T.shared(T.u32, (1,))
        tid = T.tid.x
        g = T.ctaid.x * 64 + tid
        v = T.ptx.ld.global_.u32(x.at(g))
        T.ptx.st.shared.u32(buf.at(tid), v)
        T.ptx.bar.sync(0)
        for s in (32, 16, 8, 4, 2, 1):
            with T.if_(tid < s):
                T.ptx.st.shared.u32(buf.at(tid), T.ptx.ld.shared.u32(buf.at(tid)) +
                                    T.ptx.ld.shared.u32(buf.at(tid + s)))
            T.ptx.bar.sync(0)
        with T.if_(tid == 0):
            T.ptx.st.global_.u32(partial.at(T.ctaid.x), T.ptx.ld.shared.u32(buf.at(0)))
            T.ptx.fence.acq_rel.gpu()
            ticket = T.ptx.atom.global_.add.u32(state.at(0), 1)   # state[0]: tickets taken
            with T.if_(last_is(ticket, T.nctaid.x)):
                acc = T.reg(T.u32, 0)
                with T.range(T.nctaid.x) as b:
                    acc.set(acc + T.ptx["ld.relaxed.gpu.global.u32"](partial.at(b)))
                T.ptx.st.global_.u32(state.at(2), acc)             # state[2]: the total
                T.ptx["st.release.gpu.global.u32"](state.at(1), 1)  # state[1]: published
            with T.while_(lambda: T.ptx["ld.acquire.gpu.global.u32"](state.at(1)) == 0):
                pass                                                  # wait for the total
            T.ptx.st.shared.u32(total.at(0), T.ptx.ld.global_.u32(state.at(2)))
        T.ptx.bar.sync(0)
        T.ptx.st.global_.u32(out.at(g), v + T.ptx.ld.shared.u32(total.at(0)))
    return sum_broadcast


last_block = _sum_broadcast(lambda t, n: t == n - 1)
no_last_block = _sum_broadcast(lambda t, n: t == n)  # BUG: no ticket is ever nctaid


def _sum_inputs(n=256):
    x = (np.arange(n, dtype=np.uint32) * 7 + 3) % 1000
    return dict(x=x, partial=np.zeros(n // 64, np.uint32), state=np.zeros(3, np.uint32),
                out=np.zeros(n, np.uint32), n=n)


@pytest.mark.parametrize("mode", MODES)
def test_last_block_reduction_broadcast(mode, monkeypatch):
    inp = _sum_inputs()
    res = run(last_block, inp, mode, monkeypatch, grid=(4,), outputs=["out"])
    assert res.verdict == "clean", res.summary()
    assert np.array_equal(res.outputs["out"], inp["x"] + inp["x"].sum(dtype=np.uint32))
    assert res.outputs["state"][0] == 4


@pytest.mark.parametrize("mode", MODES)
def test_last_block_reduction_without_a_last_block_deadlocks(mode, monkeypatch):
    res = run(no_last_block, _sum_inputs(), mode, monkeypatch, grid=(4,), outputs=["out"])
    f = deadlock(res)
    assert f.where.line == line_of(no_last_block, "T.while_")
    # every CTA: warp 0 spins on the flag, warp 1 waits at the barrier after the if
    assert f"ctas (0, 0, 0)..(3, 0, 0) (4 CTAs) warp 0: {spinning_at(no_last_block)}" in f.message
    assert "ctas (0, 0, 0)..(3, 0, 0) (4 CTAs) warp 1: blocked on bar.sync 0" in f.message
    assert len(f.data["positions"]) == 8 and f.data["stuck_warps"] == 8
    assert res.stats["warp_instructions"] < 5000  # the spins were not executed for long


# --- a split-K turnstile ----------------------------------------------------------------------------

SPLITS, KS = 4, 16  # K = SPLITS * KS


def _splitk(wait_for):
    """C[tile] = sum over splits of A[tile rows] @ B[split slice], one CTA per (split, tile):
    each computes its partial (mul.f32 then add.f32 per k), then waits at the tile's turnstile
    until it is its turn (`wait_for(split)`), adds its partial to C in split order, and lets
    the next split in (release)."""
    @T.kernel(grid=lambda tiles: (SPLITS, tiles), block=64)
    def splitk(a: T.gptr[T.f32], b: T.gptr[T.f32], c: T.gptr[T.f32], turn: T.gptr[T.u32]):
        split, tile = T.ctaid.x, T.ctaid.y
        row = tile * 64 + T.tid.x
        acc = T.reg(T.f32, 0.0)
        with T.range(KS) as kk:
            k = split * KS + kk
            prod = T.ptx.mul.rn.f32(T.ptx.ld.global_.f32(a.at(row * (SPLITS * KS) + k)),
                                    T.ptx.ld.global_.f32(b.at(k)))
            acc.set(T.ptx.add.rn.f32(acc, prod))
        with T.if_(T.tid.x == 0):
            with T.while_(lambda: T.ptx["ld.acquire.gpu.global.u32"](turn.at(tile)) !=
                          wait_for(split)):
                pass
        T.ptx.bar.sync(0)
        T.ptx.st.global_.f32(c.at(row), T.ptx.add.rn.f32(T.ptx.ld.global_.f32(c.at(row)), acc))
        T.ptx.fence.acq_rel.gpu()
        T.ptx.bar.sync(0)
        with T.if_(T.tid.x == 0):
            T.ptx["st.release.gpu.global.u32"](turn.at(tile), split + 1)
    return splitk


splitk = _splitk(lambda s: s)
splitk_skips_a_turn = _splitk(lambda s: s + (s >> 1))  # BUG: split 2 waits for turn 3


def _splitk_inputs(tiles=2):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((tiles * 64, SPLITS * KS)).astype(np.float32)
    b = rng.standard_normal(SPLITS * KS).astype(np.float32)
    return dict(a=a, b=b, c=np.zeros(tiles * 64, np.float32),
                turn=np.zeros(tiles, np.uint32))


def _splitk_reference(a, b):
    c = np.zeros(a.shape[0], np.float32)
    for s in range(SPLITS):          # the turnstile's order, in f32 like the kernel
        acc = np.zeros(a.shape[0], np.float32)
        for kk in range(KS):
            k = s * KS + kk
            acc = acc + a[:, k] * b[k]
        c = c + acc
    return c


@pytest.mark.parametrize("mode", MODES)
def test_split_k_turnstile(mode, monkeypatch):
    inp = _splitk_inputs()
    res = run(splitk, inp, mode, monkeypatch, grid=(SPLITS, 2), outputs=["c"])
    assert res.verdict == "clean", res.summary()
    assert np.array_equal(res.outputs["c"], _splitk_reference(inp["a"], inp["b"]))
    assert list(res.outputs["turn"]) == [SPLITS, SPLITS]


@pytest.mark.parametrize("mode", MODES)
def test_split_k_turnstile_that_skips_a_turn_deadlocks(mode, monkeypatch):
    res = run(splitk_skips_a_turn, _splitk_inputs(), mode, monkeypatch, grid=(SPLITS, 2))
    f = deadlock(res)
    at = spinning_at(splitk_skips_a_turn)
    # splits 0 and 1 of each tile finished; split 2 waits for turn 3 and split 3 for turn 4
    for tile in range(2):
        assert f"ctas (0, {tile}, 0)..(1, {tile}, 0) (2 CTAs) warps 0, 1: finished" in f.message
        assert f"ctas (2, {tile}, 0)..(3, {tile}, 0) (2 CTAs) warp 0: {at}" in f.message
    assert f.message.count("warp 1: blocked on bar.sync 0") == 2


# --- a consumer that spins before its producer runs -----------------------------------------------

def _spin_first(flag_slot: int):
    """CTA 0 consumes what CTA 1 produces: its thread 0 spins on a volatile flag before CTA 1
    has even started (CTAs start in order). CTA 1 writes the data, fences and raises the flag
    (the bug: at the wrong slot)."""
    @T.kernel(grid=2, block=64)
    def spin_first(x: T.gptr[T.f32], data: T.gptr[T.f32], flag: T.gptr[T.u32],
                   out: T.gptr[T.f32]):
        tid = T.tid.x
        with T.if_(T.ctaid.x == 0):  # consumer
            with T.if_(tid == 0):
                with T.while_(lambda: T.ptx["ld.volatile.global.u32"](flag.at(0)) == 0):
                    pass
            T.ptx.bar.sync(0)
            T.ptx.fence.acq_rel.gpu()
            T.ptx.st.global_.f32(out.at(tid), T.ptx.ld.global_.f32(data.at(tid)) * 2.0)
        with T.else_():  # producer
            T.ptx.st.global_.f32(data.at(tid), T.ptx.ld.global_.f32(x.at(tid)) + 1.0)
            T.ptx.fence.acq_rel.gpu()
            T.ptx.bar.sync(0)
            with T.if_(tid == 0):
                T.ptx["st.volatile.global.u32"](flag.at(flag_slot), 1)
    return spin_first


spin_first = _spin_first(0)
spin_first_wrong_flag = _spin_first(1)


def _spin_inputs():
    return dict(x=np.arange(64, dtype=np.float32), data=np.zeros(64, np.float32),
                flag=np.zeros(2, np.uint32), out=np.zeros(64, np.float32))


@pytest.mark.parametrize("mode", MODES)
def test_spin_first_consumer(mode, monkeypatch):
    inp = _spin_inputs()
    res = run(spin_first, inp, mode, monkeypatch, grid=(2,), outputs=["out"])
    assert res.verdict == "clean", res.summary()
    assert np.array_equal(res.outputs["out"], (inp["x"] + 1) * 2)
    # the spin is recognized after two iterations, not executed until the producer runs
    assert res.stats["warp_instructions"] < 400, res.stats


@pytest.mark.parametrize("mode", MODES)
def test_spin_first_consumer_whose_flag_is_never_raised_deadlocks(mode, monkeypatch):
    res = run(spin_first_wrong_flag, _spin_inputs(), mode, monkeypatch, grid=(2,))
    f = deadlock(res)
    assert (f"cta (0, 0, 0) warp 0: {spinning_at(spin_first_wrong_flag)}: an iteration reading "
            "global memory repeats exactly") in f.message
    assert "cta (0, 0, 0) warp 1: blocked on bar.sync 0" in f.message
    assert "cta (1, 0, 0) warps 0, 1: finished" in f.message
    assert res.stats["warp_instructions"] < 400


def test_a_spin_on_a_cta_cut_by_max_ctas_says_so():
    res = ns.run(spin_first, _spin_inputs(), grid=(2,), max_ctas=1)
    f = deadlock(res)
    assert "cta (0, 0, 0) warp 0: spinning in the loop" in f.message
    assert "only the first 1 CTAs of the grid run: [numsim] max_ctas" in f.message


# --- a persistent kernel with a grid-wide barrier ---------------------------------------------------

ITERS = 3


def _persistent(target):
    """ITERS steps of y[t+1][i] = y[t][(i+1) % n] + 1 by one persistent CTA per 64 elements: a
    step reads an element of the next CTA, so the grid synchronizes between steps. The grid
    barrier: bar.sync; thread 0 fences, counts itself in and spins until the count reaches
    `target(step, nctaid)`; bar.sync (the bug: one arrival too many expected)."""
    @T.kernel(grid=lambda n: n // 64, block=64)
    def persistent(y: T.gptr[T.u32], count: T.gptr[T.u32], n: T.u32):
        tid = T.tid.x
        i = T.ctaid.x * 64 + tid
        src = T.ptx.rem.u32(i + 1, n)
        with T.range(ITERS) as t:
            v = T.ptx.ld.global_.u32(y.at(t * n + src))
            T.ptx.st.global_.u32(y.at((t + 1) * n + i), v + 1)
            T.ptx.bar.sync(0)
            with T.if_(tid == 0):
                T.ptx.fence.acq_rel.gpu()
                T.ptx.red.global_.add.u32(count.at(0), 1)
                with T.while_(lambda: T.ptx["ld.acquire.gpu.global.u32"](count.at(0)) <
                              target(t + 1, T.nctaid.x)):
                    pass
            T.ptx.bar.sync(0)
    return persistent


persistent = _persistent(lambda step, n: step * n)
persistent_overcounts = _persistent(lambda step, n: step * n + 1)


def _persistent_inputs(n=256):
    y = np.zeros((ITERS + 1) * n, np.uint32)
    y[:n] = np.arange(n, dtype=np.uint32) * 3
    return dict(y=y, count=np.zeros(1, np.uint32), n=n)


@pytest.mark.parametrize("mode", MODES)
def test_persistent_kernel_with_a_grid_barrier(mode, monkeypatch):
    inp = _persistent_inputs()
    res = run(persistent, inp, mode, monkeypatch, grid=(4,))
    assert res.verdict == "clean", res.summary()
    want = inp["y"].reshape(ITERS + 1, -1).copy()
    for t in range(ITERS):
        want[t + 1] = np.roll(want[t], -1) + 1
    assert np.array_equal(res.outputs["y"].reshape(ITERS + 1, -1), want)
    assert res.outputs["count"][0] == 4 * ITERS


@pytest.mark.parametrize("mode", MODES)
def test_grid_barrier_expecting_one_arrival_too_many_deadlocks(mode, monkeypatch):
    res = run(persistent_overcounts, _persistent_inputs(), mode, monkeypatch, grid=(4,))
    f = deadlock(res)
    assert f"ctas (0, 0, 0)..(3, 0, 0) (4 CTAs) warp 0: {spinning_at(persistent_overcounts)}" \
        in f.message
    assert "ctas (0, 0, 0)..(3, 0, 0) (4 CTAs) warp 1: blocked on bar.sync 0" in f.message
    assert res.outputs["count"][0] == 4  # every CTA arrived once, then waited forever
