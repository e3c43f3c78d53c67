"""The event records sync_check reads for warp collectives (`events.WarpSync`): the lanes that
executed the instruction, its member mask and the lanes that had exited."""

import numpy as np

import tirxh.lang as T
import tirxh_numsim as ns
from tirxh_numsim import events as ev


@T.kernel(block=32)
def collectives(out: T.gptr[T.u32]):
    lane = T.laneid()
    with T.if_(lane >= 28):
        T.ptx.ret()  # lanes 28-31 exit
    v = T.ptx.shfl.sync.bfly.b32(lane, 1, 31, 0x0FFFFFFF)
    with T.if_(lane < 16):
        bal = T.ptx.vote.ballot.sync.b32(lane < 4, 0xFFFF)
        T.ptx.bar.warp.sync(0xFFFF)
        T.ptx.st.global_.u32(out.at(lane), bal + v)


def test_collectives_record_lanes_member_mask_and_exited_lanes():
    res = ns.run(collectives, dict(out=np.zeros(32, np.uint32)), grid=(1,), trace=True)
    assert res.verdict == "clean", res.summary()
    got = [(e.op, e.lanes, e.membermask, e.exited) for e in res.trace.of_kind(ev.WarpSync)]
    assert got == [("shfl.sync", 0x0FFFFFFF, 0x0FFFFFFF, 0xF0000000),
                   ("vote.ballot", 0xFFFF, 0xFFFF, 0xF0000000),
                   ("bar.warp.sync", 0xFFFF, 0xFFFF, 0xF0000000)]


@T.kernel(block=32)
def aligned(src: T.gptr[T.u32], out: T.gptr[T.u32]):
    tile = T.shared(T.u32, (8, 4), align=16, name="tile")
    lane = T.laneid()
    T.ptx.st.shared.u32(tile.at(lane >> 2, lane & 3), T.ptx.ld.global_.u32(src.at(lane)))
    T.ptx.bar.sync(0)
    frag = T.reg(T.u32, init=0)
    with T.if_(lane < 8):
        T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"]([frag], tile.at(lane, 0))
    T.ptx.st.global_.u32(out.at(lane), frag)


def test_aligned_collectives_record_the_lanes_that_executed_them():
    """ldmatrix's memory event names the lanes whose row addresses it used; the WarpSync event
    names the lanes that executed it."""
    res = ns.run(aligned, dict(src=np.arange(32, dtype=np.uint32), out=np.zeros(32, np.uint32)),
                 grid=(1,), trace=True)
    (e,) = [e for e in res.trace.of_kind(ev.WarpSync)]
    assert (e.op, e.lanes, e.exited) == ("ldmatrix", 0xFF, 0)


@T.kernel(block=32)
def diverging(out: T.gptr[T.u32]):
    lane = T.laneid()
    with T.if_(lane < 4):                       # if: lanes 0-3 / 4-31
        T.ptx.st.global_.u32(out.at(lane), 1)
    with T.if_(T.ctaid.x == 0):                 # uniform: no divergence recorded
        T.ptx.st.global_.u32(out.at(lane), 2)
    i = T.reg(T.u32, init=0)
    with T.loop():                              # break: lane 0 leaves after one iteration, ...
        T.break_(i > lane)
        i.set(i + 1)
    with T.range(lane & 1) as _:                # for: even lanes run no iteration
        T.ptx.st.global_.u32(out.at(lane), 3)


def test_divergence_is_recorded_where_the_lanes_split():
    res = ns.run(diverging, dict(out=np.zeros(32, np.uint32)), grid=(1,), trace=True)
    d = [(e.construct, e.lanes, e.other) for e in res.trace.of_kind(ev.Divergence)]
    assert d[0] == ("if", 0xF, 0xFFFFFFF0)
    breaks = [x for x in d if x[0] == "break"]
    assert len(breaks) == 31 and breaks[0] == ("break", 0x1, 0xFFFFFFFE)
    assert ("for", 0x55555555, 0xAAAAAAAA) in d
    assert len(d) == 1 + 31 + 1  # the odd lanes later leave the for together: no split


# --- grouped (vectorized) traced runs keep each warp's own trace ----------------------------------

@T.kernel(block=128, cluster=(2, 1, 1))  # one group: both CTAs' warps
def per_warp_work(a: T.gptr[T.u32], b: T.gptr[T.u32], ticket: T.gptr[T.u32],
                  order: T.gptr[T.u32]):
    buf = T.shared(T.u32, (128,), name="buf")
    bar = T.mbarrier(1)
    tid = T.tid.x
    w = T.warp_index()
    lane = T.laneid()
    g = T.ctaid.x * 128 + tid
    with T.if_(tid == 0):
        bar.init(4)
    T.ptx.bar.sync(0)
    with T.if_(w < 2, uniform=True):             # warps 0, 1 store to a; warps 2, 3 to b
        T.ptx.st.global_.u32(a.at(g), tid + 1)
    with T.else_():
        T.ptx.st.global_.u32(b.at(g), tid + 2)
    with T.if_(tid < 40):                        # warp 0 whole, warp 1 lanes 0-7: it splits
        T.ptx.st.shared.u32(buf.at(tid), tid)
    v = T.reg(T.u32, init=0)
    with T.if_(w == 3, uniform=True):            # warp 3's collective has its own member mask
        with T.if_(lane < 16):
            v.set(T.ptx.shfl.sync.bfly.b32(lane, 1, 31, 0xFFFF))
    with T.else_():
        v.set(T.ptx.shfl.sync.bfly.b32(lane, 1, 31, 0xFFFFFFFF))
    with T.if_(lane == 0):                       # one ticket per warp: the atomics' order
        T.ptx.st.global_.u32(order.at(T.ctaid.x * 4 + w),
                             T.ptx.atom.global_.add.u32(ticket.at(0), 1))
        bar.arrive()
    T.ptx.bar.sync(0)                            # every warp arrived before anyone waits
    bar.wait(0)
    T.ptx.st.shared.u32(buf.at(127 - tid), v)


def _per_warp_work(per_warp: bool):
    res = ns.run(per_warp_work, dict(a=np.zeros(256, np.uint32), b=np.zeros(256, np.uint32),
                                     ticket=np.zeros(1, np.uint32), order=np.zeros(8, np.uint32)),
                 grid=(2,), trace=True, per_warp=per_warp, outputs=["order"])
    assert res.verdict == "clean", res.summary()
    return res


_SKIP = {"seq", "step", "instr", "op_id", "async_id", "by_async",
         # an mbarrier's state after an operation depends on the other warps' order
         "pending", "completed_phase", "phase", "tx_pending"}


def _own(e) -> tuple:
    """An event as its warp sees it: every field but the run-wide numbering and the shared
    state that other warps' progress changes."""
    return (e.kind,) + tuple((k, v) for k, v in vars(e).items() if k not in _SKIP)


def test_grouped_trace_keeps_each_warps_program_order_and_attribution():
    """A traced run executes a CTA's warps together, yet each warp's events (numbered 0, 1, ...
    in the trace's order) are exactly those of the warp run alone (`per_warp`): its lanes, CTA,
    addresses, buffer, member mask, divergence and mbarrier state."""
    grouped, alone = _per_warp_work(False), _per_warp_work(True)
    assert grouped.stats["mode"] == "batched" and alone.stats["mode"] == "per-warp"
    # the warps did run together: fewer group executions than warp executions
    assert grouped.stats["group_instructions"] * 2 < grouped.stats["warp_instructions"]
    by_g, by_a = grouped.trace.by_warp(), alone.trace.by_warp()
    assert sorted(by_g) == sorted(by_a) == [(c, w) for c in range(2) for w in range(4)]
    for key, evs in by_g.items():
        assert [e.seq for e in evs] == list(range(len(evs))), key
        assert [_own(e) for e in evs] == [_own(e) for e in by_a[key]], key
        assert all((e.cta, e.warp) == key for e in evs)
    # attribution checked directly too: each store names its own warp's lanes and words
    for e in grouped.trace.of_kind(ev.MemAccess):
        if e.space == "global" and e.access == "write" and e.buffer in ("a", "b"):
            assert e.buffer == ("a" if e.warp < 2 else "b")
            starts = [s for _, s, _ in e.ranges]
            assert [ln for ln, _, _ in e.ranges] == list(range(32))
            assert starts == [starts[0] + 4 * i for i in range(32)]
            assert (starts[0] - min(r[1] for x in grouped.trace.of_kind(ev.MemAccess)
                                    if x.buffer == e.buffer for r in x.ranges)) // 4 == \
                (e.cta * 128 + e.warp * 32) % (256 if e.buffer == "a" else 512) - \
                (0 if e.buffer == "a" else 64)
    line = next(e.loc.line for e in grouped.trace.of_kind(ev.MemAccess) if e.space == "shared"
                and e.access == "write") - 1  # the `if tid < 40`
    div = [(e.cta, e.warp, e.lanes, e.other) for e in grouped.trace.of_kind(ev.Divergence)
           if e.loc.line == line]
    assert div == [(0, 1, 0xFF, 0xFFFFFF00), (1, 1, 0xFF, 0xFFFFFF00)]
    masks = {(e.cta, e.warp): e.membermask for e in grouped.trace.of_kind(ev.WarpSync)}
    assert masks[(0, 3)] == 0xFFFF and masks[(0, 2)] == 0xFFFFFFFF
    # mbarrier state after each warp's own arrival, the last one completing the phase
    arr = [(e.warp, e.pending, e.completed_phase) for e in grouped.trace.of_kind(ev.MBarrierEvent)
           if e.op == "arrive" and e.cta == 0]
    assert arr == [(0, 3, False), (1, 2, False), (2, 1, False), (3, 4, True)]
    # the atomics' per-word order in the trace is the order numsim applied them
    atoms = [(e.cta, e.warp) for e in grouped.trace.of_kind(ev.MemAccess) if e.atomic]
    tickets = grouped.outputs["order"]
    assert sorted(atoms, key=lambda k: tickets[k[0] * 4 + k[1]]) == atoms
