"""Questions asked of racecheck's clocks after its run, for synccheck.

`waits_ordered`: whether no mbarrier wait can consume another generation than in numsim's run
(synccheck may then take enabled waits eagerly, `synccheck.explore`).
"""

from __future__ import annotations


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
