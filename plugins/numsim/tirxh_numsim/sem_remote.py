"""Semantics of ``st.async`` and ``red.async``: a store or a reduction into a peer CTA's shared
memory that completes as ``complete_tx`` of its bytes on an mbarrier in that CTA (issue 13
class 5, issue 19).

PTX ISA 9.7.9.12 (st.async) and the red.async section: both are performed in the generic proxy
(a weak store, a relaxed reduction); their completion is observed only through the complete-tx on
the destination mbarrier, which has release semantics at cluster scope. The destination address
and the mbarrier must belong to the same CTA of the executing thread's cluster (for red.async a
CTA other than the executing one), and the cluster must have more than one CTA; numsim reports
each violation as a ``numsim.async-remote`` error and skips the lane.

Timing model (as for TMA, `sem_async`): the data lands at issue and every lane's bytes complete on
the mbarrier at once, lane by lane. Event trace, per destination (CTA, mbarrier) of one executed
instruction: an `events.AsyncOp` ``issue`` (engine ``st.async`` / ``red.async``, one op id,
`nbytes` the lanes' total), the generic-proxy `events.MemAccess` of every lane's bytes tagged with
that op id (``write``, or ``rmw`` for reductions), the ``complete`` AsyncOp, then one
``complete_tx`` `events.MBarrierEvent` per lane (``by_async`` the op id): sync_check fires them in
any order after the issue.
"""

from __future__ import annotations

import numpy as np

from tirxh.api import ir

from . import events as ev
from .memory import CLUSTER_SHIFT
from .sem_async import complete_tx, new_async_id
from .sem_sync import _atomic_op
from .semtable import semantic
from .values import dtype as T, uint_of

_NOTE = ("performed at issue; each lane's bytes complete on the peer mbarrier at once (one legal "
         "ordering: sync_check explores the others)")


def _peer(w, instr, addrs: np.ndarray, lane: int) -> "tuple[int, int]":
    """(group-local CTA, shared offset) a shared::cluster address of `lane` names."""
    a = int(addrs[lane])
    cta = int(w.cta_local[lane])
    if a >> CLUSTER_SHIFT:
        cta = int(w.m.cta_of_rank(w, (a >> CLUSTER_SHIFT) - 1))
        a &= (1 << CLUSTER_SHIFT) - 1
    return cta, a


def _lane_targets(w, instr, mask, nbytes: int, remote_only: bool) -> dict:
    """``{(dest cta, mbarrier offset): [(lane, data offset)]}`` for the executing lanes; lanes
    that break the PTX ISA's conditions are reported and left out."""
    ops = instr.operands
    dst, mbar = w.address(ops[0]), w.address(ops[2])
    out: dict = {}
    nctas = len(w.group.ctas)
    for lane in np.flatnonzero(mask):
        cta, off = _peer(w, instr, dst, lane)
        mcta, moff = _peer(w, instr, mbar, lane)
        why = None
        if nctas < 2:
            why = "the cluster has one CTA (%cluster_nctarank must be > 1)"
        elif cta != mcta:
            why = (f"the destination (CTA rank {w.group.ctas[cta].rank}) and the mbarrier (CTA "
                   f"rank {w.group.ctas[mcta].rank}) are in different CTAs")
        elif remote_only and cta == int(w.cta_local[lane]):
            why = "the destination is the executing CTA's own shared memory"
        elif off % nbytes or off < 0 or off + nbytes > w.group.shared.size:
            why = (f"destination offset {hex(off)} is misaligned or outside the "
                   f"{w.group.shared.size}-byte shared window")
        if why is not None:
            w.m.finding("numsim.async-remote", f"{instr.spelling}: {why} (lane {int(lane)}, "
                        f"{w.where()}); the PTX ISA leaves this undefined", instr, w=w,
                        lanes=[int(lane)])
            continue
        out.setdefault((cta, moff), []).append((int(lane), off))
    return out


def _values(w, instr, t: str) -> list:
    """The per-lane raw words of operand b (one array per vector element)."""
    b = instr.operands[1]
    elems = b.elems if isinstance(b, ir.Vec) else (b,)
    n = T(t).nbytes
    return [np.ascontiguousarray(np.broadcast_to(w.read(e, T(t)), (w.L,))).view(uint_of(n))
            for e in elems]


def _record(w, instr, engine: str, cta: int, moff: int, lanes: list, width: int,
            access: str) -> None:
    """The issue, the data access, the completion and each lane's complete_tx (module doc)."""
    lm = np.zeros(w.L, bool)
    lm[[ln for ln, _ in lanes]] = True
    aid = new_async_id(w)
    dest = w.group.ctas[cta].linear
    w.event(ev.AsyncOp, instr, lm, engine=engine, stage="issue", op_id=aid, direction="store",
            mbarrier=moff, space_cta=dest, nbytes=width * len(lanes))
    w.event(ev.MemAccess, instr, lm, space="shared::cluster", access=access,
            ranges=[(ln, off, off + width) for ln, off in lanes], atomic=access == "rmw",
            proxy=ev.GENERIC, space_cta=dest, async_id=aid)
    w.event(ev.AsyncOp, instr, lm, engine=engine, stage="complete", op_id=aid,
            direction="store", mbarrier=moff, space_cta=dest, nbytes=width * len(lanes))
    for ln, _ in lanes:
        one = np.zeros(w.L, bool)
        one[ln] = True
        complete_tx(w, instr, one, cta, moff, width, aid)


@semantic("st.async", note="Store (scalar or .v2/.v4) into a peer CTA's shared memory completing "
                           "its bytes on that CTA's mbarrier; " + _NOTE)
def _st_async(w, instr, mask):
    t = instr.modifiers["type"]
    n = T(t).nbytes
    vals = _values(w, instr, t)
    width = n * len(vals)
    sm = w.group.shared
    for (cta, moff), lanes in _lane_targets(w, instr, mask, n, remote_only=False).items():
        for ln, off in lanes:
            for k, v in enumerate(vals):
                sm.write(np.array([cta]), np.array([off + k * n]), n, v[ln:ln + 1])
        _record(w, instr, "st.async", cta, moff, lanes, width, "write")


@semantic("red.async", note="Relaxed reduction (inc/dec/min/max/add/and/or/xor) on a peer CTA's "
                            "shared memory, lanes applied in lane order, completing its bytes on "
                            "that CTA's mbarrier; " + _NOTE)
def _red_async(w, instr, mask):
    t, op = instr.modifiers["type"], instr.modifiers["op"]
    n = T(t).nbytes
    b = np.broadcast_to(w.read(instr.operands[1], T(t)), (w.L,))
    f, _, _ = _atomic_op(op, t, b)
    sm = w.group.shared
    for (cta, moff), lanes in _lane_targets(w, instr, mask, n, remote_only=True).items():
        rows = np.array([cta])
        for ln, off in lanes:
            cur, _ = sm.read(rows, np.array([off]), n)
            sm.write(rows, np.array([off]), n, np.array([f(int(cur[0]), ln)], uint_of(n)))
        _record(w, instr, "red.async", cta, moff, lanes, n, "rmw")
