"""A replay order of numsim's events that respects every synchronization the hardware enforces.

numsim runs warps cooperatively and records events in that one schedule. One dependency of the
hardware is not visible in it: a warpgroup's ``wgmma.wait_group`` returns only once every warp of
the warpgroup issued the retired groups (wgmma is warpgroup-collective), but numsim lets a warp
run ahead of the other three. `replay_order` re-sequences the events, warp by warp in program
order, holding back each event until what it waits for has been replayed:

- a successful mbarrier wait until the barrier completed the phase it observed;
- an mbarrier arrival (``arrive``, an async op's ``complete_tx``) until the barrier completed
  the phases before the one it counted in numsim's run, and the arrival that completed a phase
  until every other arrival of that phase was replayed: racecheck snapshots a phase's clock at
  the completing event, so each phase must hold exactly numsim's arrivals. Holding only the
  waits had let another CTA's arrivals (each behind its own warpgroup's wgmma wait) complete a
  phase of a 2-CTA cluster's `empty` barrier before this CTA's, whose releases then fell into the
  next phase: the producer's wait acquired nothing and racecheck reported the stage's reuse as
  a race (zoo gemm_sm90's cluster GEMM on two clusters, 2026-12-02);
- a released ``bar.sync`` until its generation released; a ``barrier.cluster.wait`` until every
  warp of the cluster made the matching arrival;
- a wgmma ``wait_group`` until every warp of its warpgroup committed the groups it retires;
- a synchronizing memory access (an atomic or reduction, a ``.acquire``/``.release`` load or
  store) until every synchronizing access to the same words that numsim executed before it was
  replayed: an acquire then reads from the release it read in numsim's run (a split-K
  counter's last increment, read by another CTA). Replaying warp by warp had let a CTA's
  acquire run before the other CTA's increment it had observed, and racecheck reported the
  accesses that counter orders as races (zoo gemm_sm90's stream-K and 3-way split-K, 2026-12-01).

Happens-before computed along this order includes the collective edges. When nothing is ready
(a deadlocked reference run) the remaining events follow numsim's order.

`bar_groups` replaces numsim's grouping of named-barrier arrivals into generations by another
one the hardware may form (``{id(arrival event): generation key}``, from `groupings`): a released
``bar.sync`` is then held until every arrival of its generation in that grouping was replayed.
"""

from __future__ import annotations

from tirxh_numsim import events as ev


def replay_order(trace, bar_groups: "dict | None" = None,
                 stuck: "list | None" = None) -> list:
    """The replay order (event indices). `stuck`, when given, receives the mbarrier arrivals
    the phase rule still held back when nothing else could move (numsim's order then follows
    for the rest, and the phases' clocks may be wrong: the caller says `incomplete`)."""
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
    # synchronizing accesses per word, in numsim's order: each waits to be at every front
    sync_words = {i: _sync_words(e) for i, e in enumerate(events) if _is_sync_access(e)}
    word_queue: dict = {}
    for i, words in sync_words.items():  # ascending i: numsim's order
        for wd in words:
            word_queue.setdefault(wd, []).append(i)
    word_head = {wd: 0 for wd in word_queue}
    arrivals = _mbarrier_phases(events)
    group_left = {}  # (barrier, init epoch, phase) -> its arrivals not replayed yet
    for g in arrivals.values():
        group_left[g[0]] = group_left.get(g[0], 0) + 1
    inits_done: dict = {}  # (space_cta, addr) -> inits replayed
    order: list = []

    def ready(w, e, i) -> bool:
        if i in sync_words:
            return all(word_queue[wd][word_head[wd]] == i for wd in sync_words[i])
        if i in arrivals:
            (key, epoch, ph), completes = arrivals[i]
            inits = inits_done.get(key, 0)
            if inits < epoch or (inits == epoch and done.get(key, 0) < ph):
                return False
            return not completes or group_left[(key, epoch, ph)] == 1
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

    def apply(w, e, i) -> None:
        for wd in sync_words.get(i, ()):
            word_head[wd] += 1
        if i in arrivals:
            group_left[arrivals[i][0]] -= 1
        if isinstance(e, ev.MBarrierEvent):
            if e.op == "init":
                done[(e.space_cta, e.addr)] = 0
                inits_done[(e.space_cta, e.addr)] = inits_done.get((e.space_cta, e.addr), 0) + 1
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
                if not ready(w, e, idx[pos[w]]):
                    break
                apply(w, e, idx[pos[w]])
                order.append(idx[pos[w]])
                pos[w] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # blocked in the reference run too: keep numsim's order
            left = sorted(i for w in warps for i in by_warp[w][pos[w]:])
            if stuck is not None:
                stuck.extend(by_warp[w][pos[w]] for w in warps
                             if pos[w] < len(by_warp[w]) and by_warp[w][pos[w]] in arrivals)
            order.extend(left)
            break
    return order


SYNC_SEMS = ("acquire", "release", "acq_rel")


def _mbarrier_phases(events) -> dict:
    """Every mbarrier arrival (``arrive``, ``complete_tx``) -> ((barrier, init epoch, phase it
    counted in), whether it completed that phase), along numsim's order: the phase is the
    number of phases the barrier completed since its latest init before the arrival."""
    out: dict = {}
    epoch: dict = {}
    phase: dict = {}
    for i, e in enumerate(events):
        if not isinstance(e, ev.MBarrierEvent):
            continue
        key = (e.space_cta, e.addr)
        if e.op == "init":
            epoch[key] = epoch.get(key, 0) + 1
            phase[key] = 0
        elif e.op in ("arrive", "complete_tx"):
            ph = phase.get(key, 0)
            out[i] = ((key, epoch.get(key, 0), ph), bool(e.completed_phase))
            if e.completed_phase:
                phase[key] = ph + 1
    return out


def _is_sync_access(e) -> bool:
    """An access whose order against others on its words carries synchronization: a generic
    atomic or reduction, or a load/store with acquire/release semantics."""
    if not isinstance(e, ev.MemAccess) or e.proxy != ev.GENERIC or e.async_id is not None:
        return False
    mods = getattr(e.instr, "modifiers", None) or {}
    return bool(e.atomic) or mods.get("sem") in SYNC_SEMS


def _sync_words(e) -> frozenset:
    """The 4-byte words `e` touches, keyed by state space (and the CTA whose shared memory it
    addresses) and buffer: accesses to one word are replayed in numsim's order."""
    where = (e.space, e.space_cta if e.space == "shared" else None, e.buffer)
    return frozenset(where + (a,) for _, start, end in e.ranges
                     for a in range(start // 4, max(start // 4 + 1, -(-end // 4))))


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
