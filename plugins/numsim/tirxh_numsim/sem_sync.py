"""Semantics of the base set's synchronization and warp-level bindings: CTA barriers, fences,
atomics and reductions, and the warp collectives (shfl, vote, match, redux, activemask).

Warps of one `Warps` group execute in lockstep, so warp collectives see all their lanes at once;
barriers count arrivals per warp and block the warp (a `Wait`) until released.
"""

from __future__ import annotations

import numpy as np

from tirxh.api import ir

from . import events as ev
from .machine import SPLIT, WARP, Wait
from .semtable import semantic
from .values import HALF_OF, Unsupported, dtype as T, pack2, round_to, storage, uint_of, unpack2

# --- barriers and fences --------------------------------------------------------------------------

@semantic("bar.sync", "barrier.sync", "bar.arrive", "barrier.arrive")
def _bar(w, instr, mask):
    """CTA barriers: arrivals are counted per warp (32 threads, as the hardware counts);
    ``sync`` blocks the warp until the barrier's thread count is reached. The barrier id (and
    thread count) may be registers: each warp's value must be the same in all its active lanes
    (PTX ISA, barrier: warp-uniform operands), else a ``numsim.barrier-nonuniform`` error; warps
    of a group may use different barriers."""
    ops = instr.operands
    has_count = len(ops) > 1 and ops[1] is not None
    active = w.warps_of(mask)
    ids = _per_warp_value(w, instr, ops[0], mask, active, "barrier id")
    counts = _per_warp_value(w, instr, ops[1], mask, active, "thread count") if has_count \
        else None
    m = w.m
    nthreads = int(np.prod(m.block))
    sync = instr.binding.name in ("bar.sync", "barrier.sync")
    g = w.group
    arrivals: dict = {}  # (cta, id) -> [threads arriving, count operand]
    for i in np.flatnonzero(active):
        key = (w.ctas_local[i], int(ids[i]))
        a = arrivals.setdefault(key, [0, None if counts is None else int(counts[i])])
        a[0] += WARP
    if w.nwarps > 1:
        # warps that run together pass together (their arrivals complete the barrier, or do
        # not reach it for bar.arrive); otherwise they split and arrive one by one, so that
        # each warp blocks, or starts the next generation, as it would alone
        for (c, bid), (n, count) in arrivals.items():
            st = g.bars.get((c, bid), [0, 0])
            need = _need(g, c, count, nthreads)
            if st[0] + n > need or (sync and st[0] + n < need):
                return SPLIT
    released = True
    states = {}
    for (c, bid), (n, count) in arrivals.items():
        st = g.bars.setdefault((c, bid), [0, 0])
        st[0] += n
        states[(c, bid)] = (st, st[1], count)
        if not _bar_try_release(g, c, st, count, _expected(count, nthreads)):
            released = released and not sync
    # each warp's event names its own barrier and count (warps of a group may use different ones)
    bid_l = np.repeat(ids.astype(np.int64), WARP)
    count_l = None if counts is None else np.repeat(counts.astype(np.int64), WARP)
    count0 = None if counts is None else int(counts[np.flatnonzero(active)[0]])
    w.event(ev.BarrierEvent, instr, mask, op="sync" if sync else "arrive", barrier=bid_l,
            count=count_l)
    if not sync or released:
        if sync:
            w.event(ev.BarrierEvent, instr, mask, op="sync", barrier=bid_l, count=count_l,
                    released=True)
        return None
    ((c, bid),) = arrivals
    st, gen, count = states[(c, bid)]
    expected = _expected(count, nthreads)

    def ready():
        return st[1] != gen or _bar_try_release(g, c, st, count, expected)

    def resume():
        w.event(ev.BarrierEvent, instr, mask, op="sync", barrier=bid, count=count0,
                released=True)
    return Wait(ready, f"{instr.spelling} {bid} at {instr.loc}", resume)


def _expected(count, nthreads) -> int:
    """Threads a barrier waits for: the count operand, else the CTA's (in whole warps)."""
    return count if count is not None else -(-nthreads // WARP) * WARP


def _need(g, c, count, nthreads) -> int:
    """Arrivals that release the barrier now: warps that exited count as arrived for a
    whole-CTA barrier."""
    if count is not None:
        return count
    return _expected(None, nthreads) - WARP * g.exited_warps.get(c, 0)


def _per_warp_value(w, instr, op, mask, active, what: str) -> np.ndarray:
    """The value of operand `op` in each warp's first active lane; a warp whose active lanes
    disagree is a ``numsim.barrier-nonuniform`` error (the first lane's value is used)."""
    v = _lanes2d(w.read(op, T("u32")), w)
    act = mask.reshape(w.nwarps, WARP)
    first = np.where(active, act.argmax(axis=1), 0)
    val = v[np.arange(w.nwarps), first]
    bad = active & ((v != val[:, None]) & act).any(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        lanes = sorted(set(int(x) for x in v[i][act[i]]))
        w.m.finding("numsim.barrier-nonuniform", f"{instr.spelling}: the {what} differs across "
                    f"the active lanes of warp {w.warp_ids[i]} (cta {w.cta(i).ctaid}): values "
                    f"{lanes[:8]} (it must be warp-uniform)", instr,
                    w=w, at_lane=i * WARP + int(first[i]), data={"values": lanes[:8]})
    return val


def _bar_try_release(g, c, st, count, expected) -> bool:
    """Release barrier state `st` of CTA `c` when enough threads arrived; warps that exited count
    as arrived for a whole-CTA barrier (as the hardware does for bar.sync without a count)."""
    need = expected
    if count is None:
        need -= WARP * g.exited_warps.get(c, 0)
    if st[0] >= need:
        st[0] = 0
        st[1] += 1
        return True
    return False


@semantic("bar.warp.sync")
def _bar_warp(w, instr, mask):
    """Warps execute in lockstep in numsim, so bar.warp.sync only records an event."""
    collective_event(w, instr, mask)


def aligned_event(w, instr, mask) -> None:
    """Record an ``.aligned`` warp-collective instruction without a member mask (mma.sync,
    movmatrix, ldmatrix, stmatrix) as a `WarpSync` event with the lanes that executed it: its
    memory events name only the lanes whose addresses it used, and sync_check needs the executing
    ones."""
    w.event(ev.WarpSync, instr, mask, op=instr.binding.name, exited=w.exited)


def collective_event(w, instr, mask) -> None:
    """Record a warp collective whose last operand is its member mask (shfl/vote/match/redux/
    bar.warp.sync/elect.sync) as a `WarpSync` event: sync_check checks the lanes that executed it
    against the member mask and the lanes that exited (issue 13 class 3). Each warp's first
    executing lane's member mask is recorded."""
    if w.m.trace is None:
        return
    mm = np.broadcast_to(w.read(instr.operands[-1], T("b32")), (w.L,)).astype(np.int64)
    w.event(ev.WarpSync, instr, mask, op=instr.binding.name, membermask=mm,
            exited=w.exited)


@semantic("membar", "fence", fidelity="ordering_only",
          note="Fences order memory; numsim executes sequentially, so only the event is kept.")
def _fence(w, instr, mask):
    w.event(ev.FenceEvent, instr, mask, fence=instr.binding.effects_for(instr.modifiers).sync or
            "fence", scope=instr.modifiers.get("scope") or instr.modifiers.get("level"),
            spelling=instr.spelling)


# --- atomics --------------------------------------------------------------------------------------

def _atomic_op(op: str, t: str, b, c=None):
    dt = T(t)
    nd = storage(dt) if t not in ("f16x2", "bf16x2") else np.uint32
    nbytes = dt.nbytes

    def as_val(bits):
        return np.array([bits], uint_of(nbytes)).view(nd)[0]

    def as_bits(v):
        return np.array([v], nd).view(uint_of(nbytes))[0]

    def f(cur_bits, lane):
        cur = as_val(cur_bits)
        bv = b[lane] if np.ndim(b) else b
        with np.errstate(over="ignore"):
            if op == "add":
                if t in ("f16x2", "bf16x2"):
                    half = HALF_OF[t]
                    lo, hi = unpack2(np.array([cur_bits], np.uint32), half)
                    blo, bhi = unpack2(np.array([bv], np.uint32), half)
                    r = pack2(round_to(lo.astype(np.float64) + blo.astype(np.float64), half,
                                       "rn"),
                              round_to(hi.astype(np.float64) + bhi.astype(np.float64), half,
                                       "rn"), half)[0]
                    return r
                return as_bits(nd.type(cur + bv) if nd.kind != "V" else cur + bv)
            if op == "exch":
                return as_bits(bv)
            if op == "cas":
                cv = c[lane] if np.ndim(c) else c
                return as_bits(cv) if cur_bits == as_bits(bv) else cur_bits
            if op in ("min", "max"):
                return as_bits(min(cur, bv) if op == "min" else max(cur, bv))
            if op in ("and", "or", "xor"):
                ub = as_bits(bv)
                return {"and": cur_bits & ub, "or": cur_bits | ub, "xor": cur_bits ^ ub}[op]
            if op == "inc":
                return as_bits(0 if cur >= bv else cur + 1)
            if op == "dec":
                return as_bits(bv if (cur == 0 or cur > bv) else cur - 1)
        raise Unsupported(f"atomic .{op}.{t}")
    return f, nbytes, nd


@semantic("atom", "red", note="Atomics applied lane by lane in lane order (one legal "
                              "serialization); float adds round to nearest.")
def _atom(w, instr, mask):
    mods = instr.modifiers
    t, op = mods["type"], mods["op"]
    ops = instr.operands
    is_red = instr.binding.name == "red"
    addr_op = ops[0] if is_red else ops[1]
    bt = t if t not in ("f16x2", "bf16x2") else "b32"
    b = np.broadcast_to(w.read(ops[1] if is_red else ops[2], T(bt)), (w.L,))
    c = np.broadcast_to(w.read(ops[3], T(bt)), (w.L,)) if op == "cas" else None
    f, nbytes, nd = _atomic_op(op, t, b, c)
    old = w.m.atomic(w, instr, mods.get("ss"), w.address(addr_op), mask, nbytes, f)
    if not is_red:
        w.write(ops[0], old.view(nd) if t not in ("f16x2", "bf16x2") else old, mask)


# --- warp collectives -----------------------------------------------------------------------------

def _lanes2d(x, w):
    return np.broadcast_to(x, (w.L,)).reshape(w.nwarps, WARP)


@semantic("shfl.sync", "shfl.sync.pred",
          note="Warp shuffle (up/down/bfly/idx with the c clamp/segment operand); the ``d|p`` form "
               "also writes p: whether the source lane was in range. Lanes reading an inactive "
               "or out-of-range lane keep their own value.")
def _shfl(w, instr, mask):
    collective_event(w, instr, mask)
    ops = instr.operands
    a = _lanes2d(w.read(ops[1], T("b32")), w)
    b = _lanes2d(w.read(ops[2], T("u32")), w).astype(np.int64)
    c = _lanes2d(w.read(ops[3], T("u32")), w).astype(np.int64)
    lane = np.arange(WARP)[None, :]
    clamp = c & 0x1F
    segmask = (c >> 8) & 0x1F
    max_lane = (lane & segmask) | (clamp & ~segmask)
    min_lane = lane & segmask
    mode = instr.modifiers["mode"]
    if mode == "up":
        j = lane - b
        ok = j >= max_lane
    elif mode == "down":
        j = lane + b
        ok = j <= max_lane
    elif mode == "bfly":
        j = lane ^ b
        ok = j <= max_lane
    else:
        j = min_lane | (b & ~segmask)
        ok = j <= max_lane
    j = np.where(ok, j, lane) & 31
    act = mask.reshape(w.nwarps, WARP)
    src_active = np.take_along_axis(act, j, axis=1)
    r = np.take_along_axis(a, j, axis=1)
    r = np.where(src_active, r, a)
    if isinstance(ops[0], ir.Vec):  # shfl.sync.pred: d|p
        d, p = ops[0].elems
        w.write(d, r.reshape(-1), mask)
        w.write(p, ok.reshape(-1), mask)
    else:
        w.write(ops[0], r.reshape(-1), mask)


@semantic("vote.sync", "vote.ballot")
def _vote(w, instr, mask):
    """Warp vote over the active lanes of membermask: all/any/uni, or a ballot bit mask."""
    collective_event(w, instr, mask)
    ops = instr.operands
    p = _lanes2d(w.read(ops[1], T("pred")), w)
    act = mask.reshape(w.nwarps, WARP)
    mode = instr.modifiers["mode"]
    if mode == "ballot":
        bits = (1 << np.arange(WARP, dtype=np.uint64))[None, :]
        r = ((p & act) * bits).sum(axis=1).astype(np.uint32)
        w.write(ops[0], np.repeat(r, WARP), mask)
        return
    if mode == "all":
        r = (p | ~act).all(axis=1)
    elif mode == "any":
        r = (p & act).any(axis=1)
    else:
        r = (p | ~act).all(axis=1) | (~p | ~act).all(axis=1)
    w.write(ops[0], np.repeat(r, WARP), mask)


@semantic("match.sync")
def _match(w, instr, mask):
    """Lanes (of the active ones) holding the same value: .any gives the mask of equal lanes,
    .all the full mask when all are equal (else 0)."""
    collective_event(w, instr, mask)
    t = instr.modifiers["type"]
    ops = instr.operands
    a = _lanes2d(w.read(ops[1], T(t)), w)
    act = mask.reshape(w.nwarps, WARP)
    eq = (a[:, :, None] == a[:, None, :]) & act[:, None, :]
    bits = (1 << np.arange(WARP, dtype=np.uint64))[None, None, :]
    anym = (eq * bits).sum(axis=2).astype(np.uint32)
    if instr.modifiers["mode"] == "any":
        w.write(ops[0], anym.reshape(-1), mask)
    else:
        full = ((act * bits[0]).sum(axis=1)).astype(np.uint32)
        alleq = (anym == full[:, None])
        w.write(ops[0], np.where(alleq, full[:, None], 0).astype(np.uint32).reshape(-1), mask)


@semantic("redux.sync")
def _redux(w, instr, mask):
    """Warp reduction over the active lanes (add wraps)."""
    collective_event(w, instr, mask)
    t, op = instr.modifiers["type"], instr.modifiers["op"]
    ops = instr.operands
    a = _lanes2d(w.read(ops[1], T(t)), w)
    act = mask.reshape(w.nwarps, WARP)
    nd = storage(T(t))
    with np.errstate(over="ignore"):
        if op == "add":
            r = np.where(act, a, 0).astype(np.uint64).sum(axis=1).astype(np.uint32).view(nd)
        elif op in ("min", "max"):
            ident = np.iinfo(nd).max if op == "min" else np.iinfo(nd).min
            f = np.min if op == "min" else np.max
            r = f(np.where(act, a, ident), axis=1).astype(nd)
        else:
            ident = {"and": np.uint32(0xFFFFFFFF), "or": np.uint32(0), "xor": np.uint32(0)}[op]
            f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
            r = f.reduce(np.where(act, a.view(np.uint32), ident), axis=1).view(nd)
    w.write(ops[0], np.repeat(r, WARP), mask)


@semantic("activemask")
def _activemask(w, instr, mask):
    """The mask of currently executing lanes."""
    act = mask.reshape(w.nwarps, WARP)
    bits = (1 << np.arange(WARP, dtype=np.uint64))[None, :]
    r = (act * bits).sum(axis=1).astype(np.uint32)
    w.write(instr.operands[0], np.repeat(r, WARP), mask)


