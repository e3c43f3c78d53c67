"""A replay order of numsim's events that respects every synchronization the hardware enforces.

numsim runs warps cooperatively and records events in that one schedule. One dependency of the
hardware is not visible in it: a warpgroup's ``wgmma.wait_group`` returns only once every warp of
the warpgroup issued the retired groups (wgmma is warpgroup-collective), but numsim lets a warp
run ahead of the other three. `replay_order` re-sequences the events, warp by warp in program
order, holding back each event until what it waits for has been replayed:

- a successful mbarrier wait until the barrier completed the phase it observed;
- a released ``bar.sync`` until its generation released; a ``barrier.cluster.wait`` until every
  warp of the cluster made the matching arrival;
- a wgmma ``wait_group`` until every warp of its warpgroup committed the groups it retires.

Happens-before computed along this order includes the collective edges. When nothing is ready
(a deadlocked reference run) the remaining events follow numsim's order.

`bar_groups` replaces numsim's grouping of named-barrier arrivals into generations by another
one the hardware may form (``{id(arrival event): generation key}``, from `groupings`): a released
``bar.sync`` is then held until every arrival of its generation in that grouping was replayed.
"""

from __future__ import annotations

from tirxh_numsim import events as ev


def replay_order(trace, bar_groups: "dict | None" = None) -> list:
    events = trace.events
    bar_groups = bar_groups or {}
    group_size: dict = {}
    for g in bar_groups.values():
        group_size[g] = group_size.get(g, 0) + 1
    alt_replayed: dict = {}  # generation key -> its arrivals replayed so far
    by_warp: dict = {}
    for i, e in enumerate(events):
        by_warp.setdefault((e.cta, e.warp), []).append(i)
    warps = sorted(by_warp)
    pos = {w: 0 for w in warps}
    members: dict = {}  # (cta, warpgroup) -> warps
    for c, w in warps:
        members.setdefault((c, w // 4), []).append((c, w))
    cluster_of = {(e.cta, e.warp): e.cluster for e in events}
    cluster_warps: dict = {}
    for w in warps:
        cluster_warps.setdefault(cluster_of[w], []).append(w)
    expected_bar = -(-_threads(trace.block) // 32) * 32

    done: dict = {}  # (space_cta, addr) -> phases completed so far
    bar_arrived: dict = {}  # (cta, id) -> [threads in the open generation, generation]
    bar_gen: dict = {}  # (warp, (cta, id)) -> generation the warp arrived in
    carrivals: dict = {}  # warp -> cluster-barrier arrivals so far
    cwaits: dict = {}  # warp -> cluster-barrier waits so far
    commits: dict = {}  # warp -> wgmma groups committed so far
    order: list = []

    def ready(w, e) -> bool:
        if isinstance(e, ev.MBarrierEvent) and e.op in ("try_wait", "test_wait") and e.success:
            return done.get((e.space_cta, e.addr), 0) >= e.phase
        if isinstance(e, ev.BarrierEvent) and e.op == "sync" and e.released:
            key = (e.cta, e.barrier)
            g = bar_gen.get((w, key), -1)
            if g in group_size:
                return alt_replayed.get(g, 0) >= group_size[g]
            return bar_arrived.get(key, [0, 0])[1] > g
        if isinstance(e, ev.ClusterBarrierEvent) and e.op == "wait":
            k = cwaits.get(w, 0) + 1
            return all(carrivals.get(x, 0) >= k for x in cluster_warps[cluster_of[w]])
        if isinstance(e, ev.AsyncOp) and e.engine == "wgmma" and e.stage == "wait":
            need = commits.get(w, 0) - _keep(e)
            return all(commits.get(x, 0) >= need for x in members[(w[0], w[1] // 4)])
        return True

    def apply(w, e) -> None:
        if isinstance(e, ev.MBarrierEvent):
            if e.op == "init":
                done[(e.space_cta, e.addr)] = 0
            elif e.completed_phase:
                key = (e.space_cta, e.addr)
                done[key] = done.get(key, 0) + 1
        elif isinstance(e, ev.BarrierEvent) and id(e) in bar_groups:
            g = bar_gen[(w, (e.cta, e.barrier))] = bar_groups[id(e)]
            alt_replayed[g] = alt_replayed.get(g, 0) + 1
        elif isinstance(e, ev.BarrierEvent) and e.op in ("sync", "arrive") and not e.released:
            key = (e.cta, e.barrier)
            st = bar_arrived.setdefault(key, [0, 0])
            bar_gen[(w, key)] = st[1]
            st[0] += 32
            if st[0] >= (e.count if e.count is not None else expected_bar):
                st[0], st[1] = 0, st[1] + 1
        elif isinstance(e, ev.ClusterBarrierEvent):
            if e.op == "arrive":
                carrivals[w] = carrivals.get(w, 0) + 1
            else:
                cwaits[w] = cwaits.get(w, 0) + 1
        elif isinstance(e, ev.AsyncOp) and e.engine == "wgmma" and e.stage == "commit":
            commits[w] = commits.get(w, 0) + 1

    remaining = len(events)
    while remaining:
        progressed = False
        for w in warps:
            idx = by_warp[w]
            while pos[w] < len(idx):
                e = events[idx[pos[w]]]
                if not ready(w, e):
                    break
                apply(w, e)
                order.append(idx[pos[w]])
                pos[w] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # blocked in the reference run too: keep numsim's order
            left = sorted(i for w in warps for i in by_warp[w][pos[w]:])
            order.extend(left)
            break
    return order


def _threads(block) -> int:
    n = 1
    for d in block:
        n *= d
    return n


def _keep(e) -> int:
    for o in getattr(e.instr, "operands", None) or ():
        if hasattr(o, "value"):
            return int(o.value)
    return 0
