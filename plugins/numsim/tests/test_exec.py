"""Execution model: divergence and reconvergence, loops and breaks, exits, shared memory,
barriers, warp collectives, atomics, and the batched/per-warp modes agreeing."""

import numpy as np
import pytest

import tirxh.lang as T
import tirxh_numsim as ns
from tirxh_numsim.testing import one


@T.kernel(grid=1, block=64)
def diverge(out: T.gptr[T.u32]):
    i = T.tid.x
    acc = T.reg(T.u32, 0)
    with T.if_((i & 1) == 0):
        acc.set(acc + 10)
        with T.if_(i < 8):
            acc.set(acc + 100)
        with T.else_():
            acc.set(acc + 1000)
    with T.else_():
        with T.range(i) as k:       # divergent trip counts: lane i runs i times
            acc.set(acc + 1)
            with T.if_(k == 4):
                T.break_()           # ...but at most 5
    acc.set(acc + 7)                 # every lane reconverges here
    T.ptx.st.global_.u32(out.at(i), acc)


def _diverge_ref():
    out = []
    for i in range(64):
        if i % 2 == 0:
            acc = 10 + (100 if i < 8 else 1000)
        else:
            acc = min(i, 5)
        out.append(acc + 7)
    return np.array(out, np.uint32)


@pytest.mark.parametrize("per_warp,trace", [(False, False), (False, True), (True, True)],
                         ids=["batched", "batched-traced", "per-warp"])
def test_divergence_loops_break_reconverge(per_warp, trace):
    res = ns.run(diverge, dict(out=np.zeros(64, np.uint32)), grid=(1,), trace=trace,
                 per_warp=per_warp)
    assert res.verdict == "clean", res.summary()
    assert res.stats["mode"] == ("per-warp" if per_warp else "batched")
    assert np.array_equal(res.outputs["out"], _diverge_ref())


def test_while_loop_and_exit():
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        i = T.tid.x
        with T.if_(i < 3):
            T.ptx.exit()
        x = T.reg(T.u32, 0)
        x.set(i)
        n = T.reg(T.u32, 0)
        with T.while_(lambda: x != 1):
            with T.if_((x & 1) == 0):
                x.set(x >> 1)
            with T.else_():
                x.set(x * 3 + 1)
            n.set(n + 1)
        T.ptx.st.global_.u32(out.at(i), n)

    def collatz(v):
        n = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            n += 1
        return n
    res = ns.run(k, dict(out=np.full(32, 99, np.uint32)), grid=(1,))
    assert res.verdict == "clean", res.summary()
    assert list(res.outputs["out"][:3]) == [99, 99, 99]  # exited lanes wrote nothing
    assert list(res.outputs["out"][3:]) == [collatz(i) for i in range(3, 32)]


def test_endless_loop_hits_the_budget_and_is_incomplete():
    @T.kernel(grid=1, block=32)
    def spin(out: T.gptr[T.u32]):
        with T.loop():
            T.ptx.st.global_.u32(out.at(0), 1)
    res = ns.run(spin, dict(out=np.zeros(4, np.uint32)), grid=(1,), max_instructions=1000)
    assert res.verdict == "incomplete"
    assert "instruction budget" in res.incomplete[0]


def test_budget_message_says_how_much_ran_and_which_loop_used_it():
    @T.kernel(grid=2, block=64)
    def k(out: T.gptr[T.u32]):
        acc = T.reg(T.u32, 0)
        with T.range(4):
            acc.set(acc + 1)
        x = T.reg(T.u32, 1)
        with T.while_(lambda: x != 0):  # x stays odd: never 0, and never the same twice
            x.set(x + 2)
        T.ptx.st.global_.u32(out.at(T.ctaid.x * 64 + T.tid.x), acc)
    res = ns.run(k, dict(out=np.zeros(128, np.uint32)), grid=(2,), max_instructions=3000)
    assert res.verdict == "incomplete"
    msg = res.incomplete[0]
    first = k.fn.__code__.co_firstlineno
    where = f"{k.fn.__code__.co_filename}:{first + 6}"
    assert msg.startswith("instruction budget of 3000 warp-instructions exhausted: ")
    assert f"{res.stats['warp_instructions']} warp-instructions " \
        f"({res.stats['lane_instructions']} lane-instructions) ran" in msg
    assert f"in the loop at {where}" in msg
    assert f"running the loop at {where} when it ran out" in msg
    assert res.stats["loops"][0]["loop"] == f"loop at {where}"
    assert res.stats["loops"][0]["warp_instructions"] > 2900


def test_a_loop_that_can_never_change_is_a_deadlock_not_a_budget():
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        with T.loop():
            T.ptx.nanosleep.u32(100)  # waits for nothing: nothing can ever end this loop
        T.ptx.st.global_.u32(out.at(T.tid.x), 1)
    res = ns.run(k, dict(out=np.zeros(32, np.uint32)), grid=(1,))
    f = [f for f in res.diagnostics if f.kind == "numsim.deadlock"]
    assert f and not res.incomplete, res.summary()
    assert (f"cta (0, 0, 0) warp 0: spinning in the loop at {k.fn.__code__.co_filename}:"
            f"{k.fn.__code__.co_firstlineno + 2}: an iteration that reads no memory repeats "
            "exactly") in f[0].message
    # two parameter instructions and two iterations (the second repeats the first); nothing
    # was written since, so running it again could not change anything
    assert res.stats["warp_instructions"] == 4


@T.kernel(grid=2, block=128)
def smem_reverse(x: T.gptr[T.f32], out: T.gptr[T.f32]):
    buf = T.shared(T.f32, (128,))
    i = T.tid.x
    g = T.ctaid.x * 128 + i
    T.ptx.st.shared.f32(buf.at(i), T.ptx.ld.global_.f32(x.at(g)))
    T.ptx.bar.sync(0)
    T.ptx.st.global_.f32(out.at(g), T.ptx.ld.shared.f32(buf.at(127 - i)))


@pytest.mark.parametrize("trace", [False, True])
def test_shared_memory_and_bar_sync(trace):
    x = np.arange(256, dtype=np.float32)
    res = ns.run(smem_reverse, dict(x=x, out=np.zeros(256, np.float32)), grid=(2,), trace=trace,
                 outputs=["out"])
    assert res.verdict == "clean", res.summary()
    want = np.concatenate([x[:128][::-1], x[128:][::-1]])
    assert np.array_equal(res.outputs["out"], want)


def test_bar_sync_in_divergent_code_splits_the_warps():
    @T.kernel(grid=1, block=64)
    def k(out: T.gptr[T.u32]):
        buf = T.shared(T.u32, (64,))
        i = T.tid.x
        with T.if_(i < 32):
            T.ptx.st.shared.u32(buf.at(i), i)
            T.ptx.bar.sync(0)
        with T.else_():
            T.ptx.st.shared.u32(buf.at(i), i * 2)
            T.ptx.bar.sync(0)
        T.ptx.st.global_.u32(out.at(i), T.ptx.ld.shared.u32(buf.at(63 - i)))
    res = ns.run(k, dict(out=np.zeros(64, np.uint32)), grid=(1,))
    assert res.verdict == "clean", res.summary()
    # the two warps reach different bar.sync instructions: the group splits and each warp
    # arrives on its own
    assert res.stats["mode"] == "batched" and res.stats["splits"] == 1
    want = [2 * (63 - i) if 63 - i >= 32 else 63 - i for i in range(64)]
    assert list(res.outputs["out"]) == want


def _shfl_model(mode: str, v: list, b: int, c: int):
    """(d, p) per lane by the PTX ISA pseudo-code of shfl.sync (all lanes active)."""
    seg, clamp = (c >> 8) & 0x1F, c & 0x1F
    out = []
    for lane in range(32):
        max_lane = (lane & seg) | (clamp & ~seg)
        min_lane = lane & seg
        j = {"up": lane - b, "down": lane + b, "bfly": lane ^ b,
             "idx": min_lane | (b & ~seg)}[mode]
        p = j >= max_lane if mode == "up" else j <= max_lane
        out.append((v[j] if p else v[lane], p))
    return out


@pytest.mark.parametrize("mode,b,c", [("down", 3, (24 << 8) | 31), ("up", 2, 24 << 8),
                                      ("bfly", 5, 31), ("idx", 9, (16 << 8) | 31),
                                      ("down", 1, 15)])
def test_shfl_sync_pred_says_whether_the_source_lane_was_in_range(mode, b, c):
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32], inrange: T.gptr[T.u32]):
        lane = T.laneid()
        d, p = T.reg(T.b32), T.reg(T.pred)
        T.ptx.shfl.sync[mode].b32((d, p), lane * 10 + 1, b, c, 0xFFFFFFFF)
        T.ptx.st.global_.u32(out.at(lane), d)
        T.ptx.st.global_.u32(inrange.at(lane), T.ptx.selp.u32(1, 0, p))
    res = ns.run(k, dict(out=np.zeros(32, np.uint32), inrange=np.zeros(32, np.uint32)),
                 grid=(1,), outputs=["out", "inrange"])
    assert res.verdict == "clean", res.summary()
    want = _shfl_model(mode, [10 * i + 1 for i in range(32)], b, c)
    assert list(res.outputs["out"]) == [d for d, _ in want]
    assert list(res.outputs["inrange"]) == [int(p) for _, p in want]
    assert "shfl.sync.pred" in res.stats["ops"]


@pytest.mark.parametrize("trace", [False, True], ids=["batched", "traced"])
def test_barrier_id_in_a_register_may_differ_between_warps(trace):
    """Each warpgroup syncs on its own named barrier (id 1 + warpgroup, a register): the id is
    uniform in each warp, so the warps run together and each barrier counts its own 128."""
    @T.kernel(grid=2, block=256)
    def k(out: T.gptr[T.u32]):
        buf = T.shared(T.u32, (256,))
        tid = T.tid.x
        wg = tid >> 7
        T.ptx.st.shared.u32(buf.at(tid), tid * 3 + T.ctaid.x)
        T.ptx.bar.sync(wg + 1, 128)
        mate = (tid & 128) | (127 - (tid & 127))  # a thread of the same warpgroup
        T.ptx.st.global_.u32(out.at(T.ctaid.x * 256 + tid), T.ptx.ld.shared.u32(buf.at(mate)))
    res = ns.run(k, dict(out=np.zeros(512, np.uint32)), grid=(2,), trace=trace,
                 outputs=["out"])
    assert res.verdict == "clean", res.summary()
    t = np.arange(256)
    mate = (t & 128) | (127 - (t & 127))
    assert np.array_equal(res.outputs["out"], np.concatenate([mate * 3, mate * 3 + 1]))
    if not trace:
        assert res.stats["splits"] == 0  # both barriers complete at once


def test_barrier_id_that_differs_inside_a_warp_is_an_error():
    @T.kernel(grid=1, block=64)
    def k(out: T.gptr[T.u32]):
        tid = T.tid.x
        T.ptx.bar.sync(tid & 1)  # BUG: lanes of one warp name different barriers
        T.ptx.st.global_.u32(out.at(tid), tid)
    res = ns.run(k, dict(out=np.zeros(64, np.uint32)), grid=(1,))
    f = [f for f in res.diagnostics if f.kind == "numsim.barrier-nonuniform"]
    assert f and res.verdict == "error", res.summary()
    assert "the barrier id differs across the active lanes of warp 0" in f[0].message
    assert f[0].data["values"] == [0, 1]
    assert f[0].where.line == k.fn.__code__.co_firstlineno + 3


def test_shuffles_votes_redux_match():
    v = np.arange(32, dtype=np.uint32) * 3
    off = np.full(32, 1, np.uint32)
    clamp = np.full(32, 31, np.uint32)
    full = np.full(32, 0xFFFFFFFF, np.uint32)
    got = one("shfl.sync.down.b32", "b32", [("b32", v), ("u32", off), ("u32", clamp),
                                            ("b32", full)])
    assert list(got) == [3 * min(i + 1, 31) if i < 31 else 93 for i in range(32)]
    got = one("shfl.sync.up.b32", "b32", [("b32", v), ("u32", off), ("u32", np.zeros(32,
                                                                                    np.uint32)),
                                          ("b32", full)])
    assert list(got) == [0] + [3 * (i - 1) for i in range(1, 32)]
    got = one("shfl.sync.bfly.b32", "b32", [("b32", v), ("u32", np.full(32, 5, np.uint32)),
                                            ("u32", clamp), ("b32", full)])
    assert list(got) == [3 * (i ^ 5) for i in range(32)]
    got = one("shfl.sync.idx.b32", "b32", [("b32", v), ("u32", np.full(32, 7, np.uint32)),
                                           ("u32", clamp), ("b32", full)])
    assert list(got) == [21] * 32
    p = np.array([1] * 31 + [0], np.uint32)
    assert one("vote.all.sync.pred", "pred", [("pred", p), ("b32", full)])[0] == 0
    assert one("vote.any.sync.pred", "pred", [("pred", p), ("b32", full)])[0] == 1
    assert one("vote.uni.sync.pred", "pred", [("pred", p), ("b32", full)])[0] == 0
    assert one("vote.ballot.sync.b32", "b32", [("pred", p), ("b32", full)])[0] == 0x7FFFFFFF
    assert one("redux.sync.add.u32", "u32", [("u32", v), ("b32", full)])[0] == v.sum()
    assert one("redux.sync.max.s32", "s32", [("s32", v.view(np.int32) - 50),
                                            ("b32", full)])[0] == 93 - 50
    assert one("redux.sync.xor.b32", "b32", [("b32", v), ("b32", full)])[0] == \
        np.bitwise_xor.reduce(v)
    keys = np.array([i % 4 for i in range(32)], np.uint32)
    got = one("match.any.sync.b32", "b32", [("b32", keys), ("b32", full)])
    assert got[0] == sum(1 << i for i in range(0, 32, 4))
    assert one("activemask.b32", "b32", [])[0] == 0xFFFFFFFF


def test_atomics_serialize_in_lane_order():
    @T.kernel(grid=4, block=64)
    def hist(keys: T.gptr[T.u32], bins: T.gptr[T.u32], first: T.gptr[T.u32],
             fsum: T.gptr[T.f32]):
        g = T.ctaid.x * 64 + T.tid.x
        k = T.ptx.ld.global_.u32(keys.at(g))
        T.ptx.red.global_.add.u32(bins.at(k), 1)
        T.ptx.atom.global_.cas.b32(first.at(k), 0xFFFFFFFF, g)
        T.ptx.atom.global_.add.f32(fsum.at(0), 0.5)
        T.ptx.atom.global_.max.u32(first.at(8), g)
    keys = (np.arange(256) * 7 % 8).astype(np.uint32)
    res = ns.run(hist, dict(keys=keys, bins=np.zeros(8, np.uint32),
                            first=np.full(9, 0xFFFFFFFF, np.uint32).astype(np.uint32),
                            fsum=np.zeros(1, np.float32)), grid=(4,))
    assert res.verdict == "clean", res.summary()
    assert list(res.outputs["bins"]) == [32] * 8
    firsts = [int(np.flatnonzero(keys == b)[0]) for b in range(8)]
    assert list(res.outputs["first"][:8]) == firsts
    assert res.outputs["fsum"][0] == 128.0
    assert res.outputs["first"][8] == 0xFFFFFFFF  # max with the initial all-ones


def test_special_registers():
    @T.kernel(grid=(2, 3), block=(8, 4))
    def ids(out: T.gptr[T.u32]):
        lin = (T.ctaid.y * 2 + T.ctaid.x) * 32 + T.tid.y * 8 + T.tid.x
        v = T.ctaid.y * 1000000 + T.ctaid.x * 100000 + T.tid.y * 1000 + T.tid.x * 10
        v2 = v + (T.laneid() & 0) + T.nctaid.y - 3 + T.ntid.x - 8
        T.ptx.st.global_.u32(out.at(lin), v2)
    res = ns.run(ids, dict(out=np.zeros(6 * 32, np.uint32)), grid=(2, 3))
    assert res.verdict == "clean", res.summary()
    o = res.outputs["out"]
    for by in range(3):
        for bx in range(2):
            for ty in range(4):
                for tx in range(8):
                    lin = (by * 2 + bx) * 32 + ty * 8 + tx
                    assert o[lin] == by * 1000000 + bx * 100000 + ty * 1000 + tx * 10


def test_run_accepts_a_compiled_kernel_and_an_item():
    import types
    ck = smem_reverse.compile("sm_90a")
    x = np.arange(256, dtype=np.float32)
    res = ns.run(ck, dict(x=x, out=np.zeros(256, np.float32)), grid=(2,))
    assert res.verdict == "clean" and res.outputs["out"][0] == 127.0
    with pytest.raises(ValueError, match="needs grid="):
        ns.run(ck, dict(x=x, out=np.zeros(256, np.float32)))
    suite = T.suite(smem_reverse, inputs=lambda rng: dict(x=x, out=np.zeros(256, np.float32)),
                    reference=lambda x: {"out": x}, outputs=["out"])
    item = types.SimpleNamespace(suite=suite, case=suite.cases[0], consts=None)
    res = ns.run(item, suite.make_inputs(suite.cases[0]), grid=(2,))
    assert res.verdict == "clean" and res.stats["ctas"] == 2
