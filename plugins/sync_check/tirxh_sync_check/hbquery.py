"""Questions asked of racecheck's clocks after its run, for synccheck.

`waits_ordered`: whether no mbarrier wait can consume another generation than in numsim's run
(synccheck may then take enabled waits eagerly, `synccheck.explore`). `bars_ordered`: the named
barriers whose generations no interleaving can form otherwise (their arrivals are then taken
eagerly too). `reinit_races`: mbarrier
re-initializations that some other operation on the barrier is not ordered with (issue 13
class 6: the finding belongs on the re-init, not on the hang it causes later).
"""

from __future__ import annotations

import os

from .report import Issue, describe_event


def waits_ordered(rc, models: list) -> bool:
    """Whether no mbarrier wait can consume another generation than in numsim's run.

    For every wait of generation g on barrier B (from `model`): the wait happens-before the
    completion of B's phase g+1 (so B cannot overrun it), and the completion of phase g-1
    happens-before the warp reaches the wait (so it cannot pass two phases early). If this holds
    for every wait, sync pairings are the same in every interleaving (induction on the first wait
    that would deviate) and synccheck may take enabled waits eagerly. Barriers initialized more
    than once, waits that never returned and failed try_wait probes disable the shortcut. A wait
    executed by several lane classes (`lanes`) must satisfy this for each of them.
    """
    if any(n > 1 for n in rc.inits.values()):
        return False
    for cm in models:
        for w in cm.warps:
            for op in w.ops:
                if op.kind == "mprobe" or (op.kind == "mwait" and op.ref_gen is None):
                    return False
                if op.kind != "mwait":
                    continue
                info = rc.waits.get(id(op.event))
                if info is None:
                    return False
                key, g = (op.obj[1], op.obj[2]), op.ref_gen
                nxt = rc.completions.get(key + (g + 1,))
                prev = rc.completions.get(key + (g - 1,)) if g >= 2 else None
                if g >= 2 and prev is None:
                    return False
                for t, pre in info:
                    if nxt is not None and nxt[1][t] < pre[t]:
                        return False
                    if prev is not None and any(pre[p] < prev[1][p] for p in prev[0]):
                        return False
    return True


def bars_ordered(rc) -> set:
    """The named barriers whose generations are formed by the same arrivals in every
    interleaving, as ``("bar", cta, id)`` keys (synccheck then takes their arrivals and waits
    alone instead of interleaving them, `synccheck.explore`).

    A barrier qualifies when every arrival of each generation n + 1 of numsim's run happens-after
    every arrival of generation n (racecheck's clocks). Then no interleaving can move an arrival
    into another generation: take the first generation (in completion time) formed otherwise in
    some interleaving; every synchronization on the happens-before paths into its arrivals
    completed earlier, so formed as in numsim's run, so those paths hold: generation n's members
    all arrive before any of generation n + 1's, and generation n - 1 completed with its own, so
    generation n completes with exactly its members. FlashAttention-3's ping-pong hand-over
    (``bar.arrive`` to the other warpgroup, ``bar.sync`` on its own turn) is ordered this way by
    the other barrier of the pair; a warp that arrives twice with nothing in between is not.
    Runs with an alternative grouping (`groupings`) record nothing and prove nothing."""
    if rc.bar_groups:
        return set()
    out = set()
    for key, gens in rc.bar_arrivals.items():
        ordered = True
        for n in sorted(gens):
            nxt = gens.get(n + 1)
            if nxt is None:
                continue
            for ta, pre in nxt:
                if any(pre[tm] < cm[tm] for tm, cm in gens[n] if tm != ta):
                    ordered = False
                    break
            if not ordered:
                break
        if ordered:
            out.add(("bar",) + tuple(key))
    return out


def reinit_races(rc) -> list:
    """``mbarrier.reinit-in-use`` for every re-initialization R of an mbarrier (an init after
    its first) and an operation X on the same barrier by another thread (an arrival, a wait, an
    async completion) with neither X happens-before R nor R happens-before X: X may belong to the
    barrier's previous life and land in the new one, or the reverse. The primary location is R."""
    out = []
    for key, uses in rc.mbar_uses.items():
        inits = [u for u in uses if u[0].op == "init"]
        for r, rclocks in inits[1:]:
            racing = []
            for x, xclocks in uses:
                if x is r:
                    continue
                if any(_ordered(xc, tx, rc_, tr) for tx, xc in xclocks for tr, rc_ in rclocks):
                    continue
                racing.append(x)
            if not racing:
                continue
            x = racing[0]
            out.append(Issue(
                "mbarrier.reinit-in-use",
                f"mbarrier at shared {hex(key[1])} (cta {key[0]}) is re-initialized at "
                f"{_where(r)} while {describe_event(x)} may still operate on it: nothing orders "
                "that operation before the re-init (or after it), so it can land in the "
                "barrier's previous or next life", event=r, related=racing[:3],
                witness=[f"re-init: {describe_event(r)}"] +
                [f"unordered with it: {describe_event(e)}" for e in racing[:8]],
                data={"mbarrier": list(key)}))
    return out


def _ordered(xc, tx: int, rc_, tr: int) -> bool:
    """Whether X (clock `xc` of thread `tx`) and R (clock `rc_` of thread `tr`) are ordered."""
    return rc_[tx] >= xc[tx] or xc[tr] >= rc_[tr]


def _where(e) -> str:
    return f"{os.path.basename(e.loc.file)}:{e.loc.line}" if e.loc is not None else "?"
