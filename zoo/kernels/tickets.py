"""A self-resetting work counter: persistent kernels that take their items from a counter
(`kda_decode_cols` DYN = 1's heads, `topk_warp` DYN = 1's rows) instead of a static walk.

A launch of G workers over N items takes exactly N + G tickets from one u64 counter with
``atom.add``: one an item, then one END a worker (a worker that gets END takes no more). So the
item of a ticket is the ticket mod N + G, and the counter never needs clearing between launches
(KCoral's guards leave an all-zero input buffer alone, and a timing loop relaunches on it). Why
a counter: the H200's SMs stream at rates up to 35% apart (docs/TUNING.md), and a static walk
of equal item counts ends with the slowest.

`ask_ticket` / `ticket_item32` (session 26, `topk_warp` TAKE) ask the next ticket early and
read it later, so that the atomic's round trip (microseconds with HBM busy: 20.7% of f32 8192
top-k's stall samples sat on the first use of a ticket asked and read at once) runs under a
row's work. They count on the counter's low 32-bit word: a u64 result held across a loop was
split by ptxas into two unaligned registers, copied out right after the atomic (a MOV that
waits for it); a u32 lands where it is held. A u32 counter would wrap, so the holder of a
launch's last ticket (P - 1 mod P, when every other ticket is taken and no warp asks again)
sets it back to 0 with an atomic exchange. Tickets are read mod P, so a counter left at a
multiple of P by `take_item` (a variant sharing the inputs) works too.
"""

from __future__ import annotations

import tirxh.lang as T


def take_item(sched, per_launch, end):
    """The next item from the counter at ``sched[0]`` (``atom.relaxed.gpu.add.u64``): the ticket
    mod `per_launch` (N + G), clamped to `end` (N: no item left). The first 2^32 tickets take a
    32-bit remainder (a 64-bit division is a ~70-instruction subroutine), later ones a 64-bit
    one. Called by one lane; ~25 instructions an item."""
    ticket = T.ptx.atom.relaxed.gpu.global_.add.u64(sched.at(0), 1)
    lo, hi = T.reg(T.u32), T.reg(T.u32)
    T.ptx.mov.b64([lo, hi], ticket)
    local = T.reg(T.u32, init=0)
    with T.if_(hi == 0):
        local.set(lo - (lo / per_launch) * per_launch)
    with T.else_():
        n64 = T.ptx.cvt.u64.u32(per_launch)
        local.set(T.ptx.cvt.u32.u64(T.ptx.sub.u64(
            ticket, T.ptx.mul.lo.u64(T.ptx.div.u64(ticket, n64), n64))))
    return T.ptx.min.u32(local, end)


def ask_ticket(counter, ticket, pred=None):
    """Ask the u32 counter at address `counter` (a u64 counter's low word) for a ticket into the
    u32 `ticket` (``atom.relaxed.gpu.add.u32``, under `pred`: one lane, or none when the caller
    is one lane already), unread: nothing waits for the round trip until `ticket_item32` reads
    it."""
    T.ptx.atom.relaxed.gpu.global_.add.u32(ticket, counter, 1,
                                            **({} if pred is None else {"pred": pred}))


def ticket_item32(counter, ticket, per_launch, end):
    """The item of a ticket from `ask_ticket`: its remainder mod `per_launch` (N + G), clamped
    to `end` (N); the launch's last ticket (remainder N + G - 1) sets the counter back to 0.
    Called by the lane that asked."""
    local = T.ptx.rem.u32(ticket, per_launch)
    with T.if_(local == per_launch - 1):
        T.ptx.atom.relaxed.gpu.global_.exch.b32(counter, 0)
    return T.ptx.min.u32(local, end)
