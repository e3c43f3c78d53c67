"""synccheck: every interleaving of the warps' synchronizing steps, with each warp's path fixed.

The explorer runs breadth first over states made of every warp's position in its op list
(`model.Op`), every mbarrier's state (initialized, expected count, completed phases, pending
arrivals, pending transaction bytes), every named barrier's and cluster barrier's arrivals, and the
asynchronous completions in flight. Equivalent states are merged: a visited set keyed by the state
with interchangeable warps (same op shapes, e.g. the four warps of a consumer warpgroup) sorted, so
a permutation of identical warps is explored once. Breadth first order makes every witness a
shortest interleaving. The number of states is bounded (`max_states`); hitting the bound makes the
result ``incomplete``, never ``clean``.

Partial-order reduction (sound for this acyclic state graph): steps that only enable other steps
and commute with everything (barrier arrivals and waits, wgmma commit/wait, async issues, mbarrier
arrivals and transaction completions that leave the phase incomplete) are taken alone when
enabled. Enabled mbarrier waits are taken alone too when racecheck's clocks prove that no wait can
consume another generation than in numsim's run (`hbquery.waits_ordered`); otherwise waits are
interleaved so that a late waiter's overrun is found with its witness. Named barriers whose
generations could be formed by other warps (``bar.arrive``, more users than a generation holds)
are interleaved, unless racecheck's clocks prove every generation's arrivals happen-after the
previous generation's (`hbquery.bars_ordered`: FlashAttention-3's ping-pong hand-over).

Hardware rules modelled (PTX ISA 8.x, "Parallel Synchronization and Communication Instructions:
mbarrier", "bar/barrier", "barrier.cluster"):

- an mbarrier phase completes when its pending arrival count reaches zero and its tx-count is zero;
  the pending count is then reloaded with the init count; ``try_wait.parity P`` returns true when
  the number of completed phases has the other parity than P (the phase with parity P completed);
- ``bar.sync``/``barrier.sync a, b`` releases when b threads (all threads of the CTA without b)
  arrived; ``bar.arrive`` arrives without waiting;
- ``barrier.cluster.wait`` returns when every thread of the cluster has arrived in that phase.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field

from . import model
from .report import Issue, op_step

DEFAULT_MAX_STATES = 200_000

# mbarrier status
UNINIT, INIT = 0, 1


@dataclass
class ExploreResult:
    issues: list = field(default_factory=list)
    states: int = 0
    complete: bool = True
    notes: list = field(default_factory=list)
    explorer: object = None  # the `_Explorer` (its `formed` groupings and `path_through`)


class _Explorer:
    def __init__(self, cm: model.ClusterModel, max_states: int):
        self.cm = cm
        self.max_states = max_states
        self.warps = cm.warps
        self.ops = [w.ops for w in cm.warps]
        mkeys, bkeys, ckeys = [], [], []
        self.wg_members: dict = {}
        for i, ops in enumerate(self.ops):
            for op in ops:
                if op.obj[0] == "wg":
                    if i not in self.wg_members.setdefault(op.obj, []):
                        self.wg_members[op.obj].append(i)
                    continue
                lst = {"mbar": mkeys, "bar": bkeys, "cbar": ckeys}[op.obj[0]]
                if op.obj not in lst:
                    lst.append(op.obj)
        # commits[i][pc]: wgmma groups warp i committed before its op pc
        self.commits = []
        for ops in self.ops:
            c, pre = 0, [0]
            for op in ops:
                c += op.kind == "wg_commit"
                pre.append(c)
            self.commits.append(pre)
        for comps in cm.completions.values():
            for c in comps:
                if c.obj not in mkeys:
                    mkeys.append(c.obj)
        self.mindex = {k: i for i, k in enumerate(mkeys)}
        self.bindex = {k: i for i, k in enumerate(bkeys)}
        self.cindex = {k: i for i, k in enumerate(ckeys)}
        self.mkeys, self.bkeys = mkeys, bkeys
        # symmetry groups: warps whose op shapes are equal
        groups: dict = {}
        for i, ops in enumerate(self.ops):
            groups.setdefault(tuple(op.shape() for op in ops), []).append(i)
        self.groups = [g for g in groups.values()]
        # remaining arrivals per (warp, pc) on each mbarrier / barrier, for deadlock reasons
        self.issues: dict = {}
        self.notes: list = []
        # set by `explore`: waits cannot consume another generation, so an enabled wait (which
        # changes no shared state) is taken alone, like the other enabling-only steps
        self.eager_waits = False
        # named barriers whose generations can be formed by different sets of warps (issue 13
        # class 1): their arrivals are interleaved, the open generation's arrivals are part of
        # the state, and every generation formed is recorded with the step that formed it
        self.sensitive = _grouping_sensitive(self.ops)
        self.formed: dict = {}  # frozenset(arrival events' ids) -> (state key, step)
        self.parent: dict = {}
        self._cur_key = None
        self._quiet = False

    # -- state ----------------------------------------------------------------------------------
    def initial(self):
        warps = tuple((0, -1) for _ in self.ops)
        mbs = tuple((UNINIT, 0, 0, 0, 0) for _ in self.mkeys)
        bars = tuple((0, 0, 0, ()) if k in self.sensitive else (0, 0, 0) for k in self.bkeys)
        cbs = tuple((0, 0) for _ in self.cindex)
        return (warps, mbs, bars, cbs, ())

    def key(self, s):
        warps = s[0]
        wk = tuple(tuple(sorted(warps[i] for i in g)) for g in self.groups)
        ak = tuple(sorted(self._async_shape(a) for a in s[4]))
        return (wk, s[1], s[2], s[3], ak)

    def _async_shape(self, a):
        aid, idx = a
        return tuple((c.obj, c.tx) for c in self.cm.completions[aid][idx:])

    # -- findings --------------------------------------------------------------------------------
    def report(self, kind, op, message, path, related=(), extra=None):
        if self._quiet:
            return
        ev = op.event if op is not None else None
        line = (ev.loc.file, ev.loc.line) if ev is not None and ev.loc is not None else None
        k = (kind, line)
        if k in self.issues:
            return
        self.issues[k] = Issue(kind=kind, message=message, event=ev,
                               related=[r for r in related if r is not None],
                               witness=path, data=extra or {})

    # -- successors ------------------------------------------------------------------------------
    def successors(self, s, path_fn):
        warps, mbs, bars, cbs, pend = s
        out = []
        # partial-order reduction: a step that changes no state another warp reads except to
        # enable it (bar arrive/wait, wgmma commit/wait, an async issue) commutes with every
        # other step and cannot disable one, so taking it alone loses no behaviour (the state
        # graph is acyclic: every step advances a warp or retires an async op)
        # An arrival or an async complete_tx that leaves its phase incomplete only moves the
        # pending count / tx-count, which no wait reads and every order sums up the same: it is
        # taken alone as well. The arrival or completion that completes a phase is interleaved.
        for i, ops in enumerate(self.ops):
            pc = warps[i][0]
            if pc >= len(ops):
                continue
            op = ops[pc]
            if (op.kind in _EAGER and op.obj not in self.sensitive) or (
                    op.kind == "marrive" and self._partial(
                    mbs, op.obj, op.count, -op.tx)) or (op.kind == "mwait" and self.eager_waits):
                r = self.step_warp(s, i, op, path_fn)
                if r is not None:
                    return [(r, ("warp", i, pc))]
        for j, (aid, idx) in enumerate(pend):
            comp = self.cm.completions[aid][idx]
            if self._partial(mbs, comp.obj, 0, comp.tx):
                return [self._complete(s, j, path_fn)]
        for i, ops in enumerate(self.ops):
            pc, aux = warps[i]
            if pc >= len(ops):
                continue
            op = ops[pc]
            r = self.step_warp(s, i, op, path_fn)
            if r is not None:
                out.append((r, ("warp", i, pc)))
        for j in range(len(pend)):
            out.append(self._complete(s, j, path_fn))
        return out

    def _partial(self, mbs, obj, count: int, tx_done: int) -> bool:
        """Whether `count` arrivals and `tx_done` completed bytes leave the phase incomplete
        (and do not over-arrive) on an initialized barrier."""
        st, cnt, done, pendc, tx = mbs[self.mindex[obj]]
        if st != INIT or pendc - count < 0:
            return False
        return not (pendc - count == 0 and tx - tx_done == 0)

    def _complete(self, s, j, path_fn):
        """The async op `pend[j]` performs its next complete_tx."""
        warps, mbs, bars, cbs, pend = s
        aid, idx = pend[j]
        comp = self.cm.completions[aid][idx]
        mb = list(mbs)
        mi = self.mindex[comp.obj]
        st, cnt, done, pendc, tx = mb[mi]
        if st != INIT:
            issue = self._issue_op(aid)
            self.report("mbarrier.uninitialized", issue,
                        f"an asynchronous operation completes {comp.tx} bytes on mbarrier at "
                        f"{_addr(comp.obj)} before an initialization ordered before it (the init "
                        "needs fence.mbarrier_init and a barrier that orders it before the "
                        "operation's issue; for a peer CTA's mbarrier, a cluster barrier)",
                        path_fn(("async", aid, idx)), related=[self._init_event(comp.obj)])
        tx -= comp.tx
        if st == INIT and pendc == 0 and tx == 0:
            done, pendc = done + 1, cnt
        mb[mi] = (st, cnt, done, pendc, tx)
        rest = list(pend)
        if idx + 1 < len(self.cm.completions[aid]):
            rest[j] = (aid, idx + 1)
        else:
            del rest[j]
        return ((warps, tuple(mb), bars, cbs, tuple(sorted(rest))), ("async", aid, idx))

    def _advance(self, s, i, aux=-1, mbs=None, bars=None, cbs=None, pend=None):
        warps = list(s[0])
        warps[i] = (warps[i][0] + 1, aux)
        return (tuple(warps), s[1] if mbs is None else mbs, s[2] if bars is None else bars,
                s[3] if cbs is None else cbs, s[4] if pend is None else pend)

    def step_warp(self, s, i, op, path_fn):
        warps, mbs, bars, cbs, pend = s
        k = op.kind
        if k in ("minit", "marrive", "mexpect", "mcomplete", "mwait", "mprobe", "minval"):
            mi = self.mindex[op.obj]
            st, cnt, done, pendc, tx = mbs[mi]
            if k == "minit":
                busy = st == INIT and (pendc != cnt or tx != 0 or self._others_at(s, i, op.obj))
                if busy:
                    self.report("mbarrier.reinit-in-use", op,
                                f"mbarrier at {_addr(op.obj)} re-initialized while in use "
                                f"(phase {done}: {cnt - pendc} of {cnt} arrivals, "
                                f"{tx} tx bytes pending)", path_fn(("warp", i, warps[i][0])))
                    return None
                mb = _set(mbs, mi, (INIT, op.count, 0, op.count, 0))
                return self._advance(s, i, mbs=mb)
            if st != INIT:
                self.report("mbarrier.uninitialized", op,
                            f"mbarrier at {_addr(op.obj)} used ({_opname(op)}) before an "
                            "initialization ordered before it (the init is not followed by "
                            "fence.mbarrier_init or a barrier that orders it before this use)",
                            path_fn(("warp", i, warps[i][0])), related=[self._init_event(op.obj)])
                return None
            if k == "minval":
                return self._advance(s, i, mbs=_set(mbs, mi, (UNINIT, 0, 0, 0, 0)))
            if k == "mexpect":
                return self._advance(s, i, mbs=_set(mbs, mi, (st, cnt, done, pendc, tx + op.tx)))
            if k == "mcomplete":
                tx -= op.tx
                if pendc == 0 and tx == 0:
                    done, pendc = done + 1, cnt
                return self._advance(s, i, mbs=_set(mbs, mi, (st, cnt, done, pendc, tx)))
            if k == "marrive":
                tx += op.tx
                pendc -= op.count
                if pendc < 0:
                    self.report("mbarrier.arrival-count", op,
                                f"mbarrier at {_addr(op.obj)}: {op.count} arrival(s) when only "
                                f"{pendc + op.count} were pending in phase {done} (count {cnt}): "
                                "more arrivals than the phase expects",
                                path_fn(("warp", i, warps[i][0])),
                                related=[self._init_event(op.obj)])
                    return None
                if pendc == 0 and tx == 0:
                    done, pendc = done + 1, cnt
                return self._advance(s, i, mbs=_set(mbs, mi, (st, cnt, done, pendc, tx)))
            if k == "mprobe":
                if done % 2 != op.parity:
                    self.notes.append((op.event, "a try_wait that failed in the reference run "
                                                 "succeeds in another interleaving; the path "
                                                 "it would take was not explored"))
                return self._advance(s, i)
            # mwait
            if done % 2 == op.parity:
                return None  # blocked
            if op.ref_gen is not None and done != op.ref_gen:
                self.report("mbarrier.phase-overrun", op,
                            f"wait on mbarrier at {_addr(op.obj)} (parity {op.parity}) returns "
                            f"after {done} completed phases in this interleaving but after "
                            f"{op.ref_gen} in the reference run: the barrier advanced past the "
                            "phase this waiter was meant to consume (it waits on the wrong "
                            "generation)", path_fn(("warp", i, warps[i][0])),
                            extra={"generation": done, "reference_generation": op.ref_gen})
                return None
            return self._advance(s, i)
        if k == "bar_arrive":
            bi = self.bindex[op.obj]
            arrived, gen, exp = bars[bi][:3]
            if arrived and exp != op.expected:
                self.report("barrier.count-mismatch", op,
                            f"barrier {op.obj[2]} reached with thread count {op.expected} while "
                            f"other warps declared {exp}", path_fn(("warp", i, warps[i][0])))
                return None
            arrived += op.count
            my_gen = gen
            if arrived >= op.expected:
                if arrived > op.expected:
                    self.report("barrier.count-mismatch", op,
                                f"barrier {op.obj[2]} received {arrived} threads, more than the "
                                f"{op.expected} declared: it releases before every warp that "
                                "uses it arrived", path_fn(("warp", i, warps[i][0])))
                    return None
                arrived, gen = 0, gen + 1
            st = (arrived, gen, op.expected if arrived else 0)
            if op.obj in self.sensitive:
                members = bars[bi][3] + ((i, warps[i][0]),)
                if not arrived and not self._quiet:  # this arrival formed a generation
                    ids = frozenset(id(self.ops[j][pc].event) for j, pc in members)
                    self.formed.setdefault(ids, (self._cur_key, ("warp", i, warps[i][0])))
                st += (tuple(sorted(members)) if arrived else (),)
            return self._advance(s, i, aux=my_gen, bars=_set(bars, bi, st))
        if k == "bar_wait":
            bi = self.bindex[op.obj]
            if bars[bi][1] > warps[i][1]:
                return self._advance(s, i)
            return None
        if k == "carrive":  # counted per warp, as the hardware (and numsim) do
            ci = self.cindex[op.obj]
            arrived, gen = cbs[ci]
            arrived += 1
            my_gen = gen
            if arrived >= self._cluster_needed(s, i):
                arrived, gen = 0, gen + 1
            return self._advance(s, i, aux=my_gen, cbs=_set(cbs, ci, (arrived, gen)))
        if k == "cwait":
            ci = self.cindex[op.obj]
            if warps[i][1] < 0:
                self.report("cluster-barrier.mismatch", op,
                            "barrier.cluster.wait without a preceding barrier.cluster.arrive "
                            "by this warp", path_fn(("warp", i, warps[i][0])))
                return self._advance(s, i)
            arrived, gen = cbs[ci]
            if gen > warps[i][1]:
                return self._advance(s, i)
            if arrived and arrived >= self._cluster_needed(s, -1):  # the others exited
                return self._advance(s, i, cbs=_set(cbs, ci, (0, gen + 1)))
            return None
        if k == "wg_commit":
            return self._advance(s, i)
        if k == "wg_wait":
            if all(self.commits[j][warps[j][0]] >= op.count for j in self.wg_members[op.obj]):
                return self._advance(s, i)
            return None
        if k == "issue":
            if op.async_id in self.cm.completions:
                return self._advance(s, i, pend=tuple(sorted(pend + ((op.async_id, 0),))))
            return self._advance(s, i)
        raise AssertionError(f"unknown op kind {k!r}")

    def _cluster_needed(self, s, i) -> int:
        """Warps a cluster-barrier phase waits for: every warp of the cluster not exited."""
        return sum(1 for j, ops in enumerate(self.ops)
                   if j == i or s[0][j][0] < len(ops))

    def _others_at(self, s, i, obj) -> bool:
        for j, ops in enumerate(self.ops):
            pc = s[0][j][0]
            if j != i and pc < len(ops) and ops[pc].obj == obj and \
                    ops[pc].kind in ("mwait", "marrive", "mexpect"):
                return True
        return False

    def _first_op(self, pred):
        """The first op, warp by warp in program order, for which `pred` holds (or None)."""
        return next((op for ops in self.ops for op in ops if pred(op)), None)

    def _issue_op(self, aid):
        return self._first_op(lambda op: op.kind == "issue" and op.async_id == aid)

    def _init_event(self, obj):
        op = self._init_op(obj)
        return op.event if op is not None else None

    # -- terminal and blocked states -----------------------------------------------------------
    def check_waiters(self, s, path_fn) -> bool:
        """A waiter whose reference generation already passed can only consume a later one.
        True when that happened (the state's successors follow from a bug already reported)."""
        hit = False
        for i, ops in enumerate(self.ops):
            pc = s[0][i][0]
            if pc < len(ops) and ops[pc].kind == "mwait" and ops[pc].ref_gen is not None:
                op = ops[pc]
                st, cnt, done, pendc, tx = s[1][self.mindex[op.obj]]
                if st == INIT and done > op.ref_gen and done % 2 == op.parity:
                    self.report("mbarrier.phase-overrun", op,
                                f"mbarrier at {_addr(op.obj)} completed {done} phases before "
                                f"this wait (parity {op.parity}) ran; in the reference run it "
                                f"returned after phase {op.ref_gen}: the waiter missed its phase "
                                "and now waits on the wrong generation",
                                path_fn(("warp", i, pc)),
                                extra={"generation": done, "reference_generation": op.ref_gen})
                    hit = True
        return hit

    def check_end(self, s, path_fn):
        warps, mbs, bars, cbs, pend = s
        blocked = [(i, self.ops[i][warps[i][0]]) for i in range(len(self.ops))
                   if warps[i][0] < len(self.ops[i])]
        if blocked:
            kinds = [self._blocked_reason(s, i, op) for i, op in blocked]
            if len({op.obj for _, op in blocked}) > 1 and \
                    "mbarrier.phase-overrun" not in kinds:
                # warps blocked on different objects wait for each other (a cycle); a trace cut
                # short by numsim's own deadlock does not show their later arrivals
                kinds = ["deadlock"] * len(blocked)
            order = ["mbarrier.phase-overrun", "mbarrier.tx-mismatch", "mbarrier.arrival-count",
                     "mbarrier.parity-never", "barrier.count-mismatch",
                     "cluster-barrier.mismatch", "deadlock"]
            kind = min(kinds, key=order.index)
            i, op = blocked[kinds.index(kind)]
            # the line to fix: the count (init) for a wrong arrival count, the expect_tx for a
            # transaction mismatch; the blocked wait stays in `related`
            primary = op
            if kind == "mbarrier.arrival-count":
                primary = self._init_op(op.obj) or op
            elif kind == "mbarrier.tx-mismatch":
                primary = self._tx_op(op.obj) or op
            lines = [f"warp {self.warps[j].key[1]} (cta {self.warps[j].key[0]}) blocked at "
                     f"{_where(o)} {_opname(o)}: {r}" for (j, o), r in zip(blocked, kinds)]
            self.report(kind, primary, "no warp can make progress: " + "; ".join(lines),
                        path_fn(None),
                        related=[o.event for j, o in blocked if o is not primary],
                        extra={"blocked": [{"warp": self.warps[j].key[1],
                                            "cta": self.warps[j].key[0],
                                            "line": _where(o), "reason": r}
                                           for (j, o), r in zip(blocked, kinds)]})
            return
        for mi, (st, cnt, done, pendc, tx) in enumerate(mbs):
            if st != INIT:
                continue
            obj = self.mkeys[mi]
            init = self._init_op(obj)
            if tx != 0:
                self.report("mbarrier.tx-mismatch", self._tx_op(obj) or init,
                            f"mbarrier at {_addr(obj)}: the kernel ends with {tx} transaction "
                            f"bytes {'expected but never completed' if tx > 0 else 'completed '}"
                            f"{'' if tx > 0 else 'beyond what was expected'} in phase {done}",
                            path_fn(None), related=[init.event if init else None])
            elif pendc != cnt:
                # the arrival that opened the unfinished phase: the last one in the reference run
                self.report("mbarrier.arrival-count", self._last_arrive_op(obj) or init,
                            f"mbarrier at {_addr(obj)}: the kernel ends in the middle of phase "
                            f"{done} with {cnt - pendc} of {cnt} arrivals: the arrivals do not "
                            "match the count the barrier was initialized with",
                            path_fn(None), related=[init.event if init else None])
        for bi, (arrived, gen, exp, *_) in enumerate(bars):
            if arrived:
                obj = self.bkeys[bi]
                op = self._last_bar(obj)
                self.report("barrier.count-mismatch", op,
                            f"barrier {obj[2]} ends with {arrived} of {exp} threads arrived: "
                            "the set of warps reaching it does not match its count",
                            path_fn(None))

    def _blocked_reason(self, s, i, op) -> str:
        warps, mbs, bars, cbs, pend = s
        if op.kind == "mwait":
            st, cnt, done, pendc, tx = mbs[self.mindex[op.obj]]
            reached = self._done_when_reached(i, op)
            if reached is not None and done > reached:
                # phases completed while this warp waited and it saw none of them: it was
                # overrun (issue 13 class 6: not a parity that can never complete)
                return "mbarrier.phase-overrun"
            if tx != 0 and not any(c.obj == op.obj for a, idx in pend
                                   for c in self.cm.completions[a][idx:]):
                return "mbarrier.tx-mismatch"
            if pendc != cnt:
                return "mbarrier.arrival-count"
            if not self._remaining(s, op.obj, ("marrive",), i):
                return "mbarrier.parity-never"
            return "deadlock"
        if op.kind == "bar_wait":
            if not self._remaining(s, op.obj, ("bar_arrive",), i):
                return "barrier.count-mismatch"
            return "deadlock"
        if op.kind == "cwait":
            if not self._remaining(s, op.obj, ("carrive",), i):
                return "cluster-barrier.mismatch"
            return "deadlock"
        return "deadlock"

    def _done_when_reached(self, i: int, op):
        """The phases op's mbarrier had completed when warp `i` reached `op` on the path to the
        current state (None when unknown)."""
        key = self._cur_key
        if key not in self.parent:
            return None
        pc = self.parent[key][2][0][i][0]
        mi = self.mindex[op.obj]
        done = None
        while key is not None:
            pk, _, st = self.parent[key]
            if st[0][i][0] != pc or st[1][mi][0] != INIT:
                break
            done = st[1][mi][2]
            key = pk
        return done

    def _remaining(self, s, obj, kinds, blocked: int) -> bool:
        """Whether a warp other than the blocked one still has an op of `kinds` on `obj`."""
        for j, ops in enumerate(self.ops):
            if j == blocked:
                continue
            for op in ops[s[0][j][0]:]:
                if op.obj == obj and op.kind in kinds:
                    return True
        return False

    def _init_op(self, obj):
        return self._first_op(lambda op: op.kind == "minit" and op.obj == obj)

    def _tx_op(self, obj):
        return self._first_op(lambda op: op.obj == obj and op.tx and
                              op.kind in ("marrive", "mexpect", "mcomplete"))

    def _last_arrive_op(self, obj):
        arrives = [op for ops in self.ops for op in ops if op.kind == "marrive" and op.obj == obj]
        return max(arrives, key=lambda op: self.cm.order.get(id(op.event), -1), default=None)

    def _last_bar(self, obj):
        for ops in self.ops:
            for op in ops:
                if op.kind == "bar_arrive" and op.obj == obj:
                    return op
        return None

    # -- search -------------------------------------------------------------------------------
    def run(self) -> ExploreResult:
        s0 = self.initial()
        k0 = self.key(s0)
        parent = self.parent = {k0: (None, None, s0)}
        queue = deque([k0])
        complete = True

        def path_to(key, last=None):
            steps = []
            while key is not None:
                pk, step, st = parent[key]
                if step is not None:
                    steps.append((step, parent[pk][2]))
                key = pk
            steps.reverse()
            out = [op_step(self._step_text(step, st)) for step, st in steps]
            if last is not None:
                out.append(op_step(self._step_text(last, None) + "   <-- here"))
            return out

        while queue:
            key = queue.popleft()
            s = parent[key][2]
            self._cur_key = key
            if self.check_waiters(s, lambda last=None, key=key: path_to(key, last)):
                continue
            succ = self.successors(s, lambda last, key=key: path_to(key, last))
            if not succ:  # blocked (deadlock) or finished: check what is left over
                self.check_end(s, lambda last=None, key=key: path_to(key, last))
                continue
            for ns, step in succ:
                nk = self.key(ns)
                if nk in parent:
                    continue
                if len(parent) >= self.max_states:
                    complete = False
                    queue.clear()
                    break
                parent[nk] = (key, step, ns)
                queue.append(nk)
        return ExploreResult(list(self.issues.values()), len(parent), complete, self.notes, self)

    def path_through(self, key, step) -> list:
        """One whole interleaving (its steps, in order) that takes `step` from the state `key`:
        the explored prefix to `key`, then the first successor of each state to the end."""
        steps, k = [], key
        while k is not None:
            pk, st, _ = self.parent[k]
            if st is not None:
                steps.append(st)
            k = pk
        steps.reverse()
        s = self.parent[key][2]
        self._quiet = True
        try:
            nxt = [x for x in self.successors(s, lambda last: []) if x[1] == step]
            while nxt:
                s, st = nxt[0]
                steps.append(st)
                nxt = self.successors(s, lambda last: [])
        finally:
            self._quiet = False
        return steps

    def _step_text(self, step, st) -> str:
        if step[0] == "warp":
            i, pc = step[1], step[2]
            w = self.warps[i]
            op = self.ops[i][pc]
            return f"cta {w.key[0]} warp {w.key[1]}: {_opname(op)} @ {_where(op)}"
        aid, idx = step[1], step[2]
        c = self.cm.completions[aid][idx]
        return (f"async op {aid}: complete_tx {c.tx} bytes on mbarrier {_addr(c.obj)}"
                f" (issued @ {_evwhere(c.event)})")


# barrier.cluster arrive/wait commute like bar.sync's halves (an arrival only counts, a wait only
# advances its warp); interleaving them made a 2-CTA cluster GEMM (zoo gemm_sm90.py, 24 warps)
# exceed 200000 states instead of ~900 (issue 15)
_EAGER = ("bar_arrive", "bar_wait", "wg_commit", "wg_wait", "issue", "carrive", "cwait")


def _grouping_sensitive(ops: list) -> set:
    """Named barriers whose generations can be formed by different sets of warps: used by more
    warps than one generation holds, or arrived on without waiting (``bar.arrive``, which lets a
    warp arrive twice in one generation)."""
    users: dict = {}
    out = set()
    for i, wops in enumerate(ops):
        for pc, op in enumerate(wops):
            if op.kind != "bar_arrive":
                continue
            users.setdefault(op.obj, (set(), op.expected))[0].add(i)
            blocking = pc + 1 < len(wops) and wops[pc + 1].kind == "bar_wait" and \
                wops[pc + 1].event is op.event
            if not blocking:
                out.add(op.obj)
    out |= {obj for obj, (warps, expected) in users.items() if len(warps) > expected // 32}
    return out


def _set(t: tuple, i: int, v) -> tuple:
    return t[:i] + (v,) + t[i + 1:]


_NAMES: dict = {}


def _addr(obj) -> str:
    name = _NAMES.get(obj[2]) if obj[0] == "mbar" else None
    where = f"{name} @ 0x{obj[2]:x}" if name else f"0x{obj[2]:x}"
    return f"{where} (cta {obj[1]})"


def _where(op) -> str:
    return _evwhere(op.event)


def _evwhere(e) -> str:
    if e is None or e.loc is None:
        return "?"
    return f"{os.path.basename(e.loc.file)}:{e.loc.line}"


def _opname(op) -> str:
    k = op.kind
    if k == "mwait":
        return f"mbarrier wait parity {op.parity}"
    if k == "marrive":
        return f"mbarrier.arrive (count {op.count}{', tx ' + str(op.tx) if op.tx else ''})"
    if k == "minit":
        return f"mbarrier.init (count {op.count})"
    if k == "mexpect":
        return f"mbarrier.expect_tx {op.tx}"
    if k == "minval":
        return "mbarrier.inval"
    if k == "mprobe":
        return f"mbarrier.try_wait parity {op.parity} (failed)"
    if k == "bar_arrive":
        return f"barrier {op.obj[2]} arrive ({op.count} threads of {op.expected})"
    if k == "bar_wait":
        return f"barrier {op.obj[2]} wait"
    if k == "carrive":
        return "barrier.cluster.arrive"
    if k == "cwait":
        return "barrier.cluster.wait"
    if k == "wg_commit":
        return "wgmma.commit_group"
    if k == "wg_wait":
        return f"wgmma.wait_group (needs {op.count} groups from every warp of the warpgroup)"
    if k == "issue":
        return f"async issue (op {op.async_id}, {op.tx} bytes on mbarrier {_addr(op.obj)})"
    return k


def explore(cm: model.ClusterModel, max_states: int = DEFAULT_MAX_STATES,
            names: "dict | None" = None, eager_waits: bool = False,
            ordered_bars: "set | frozenset" = frozenset()) -> ExploreResult:
    """Explore one cluster's interleavings; see the module docstring. `names` maps shared
    addresses to variable names for messages; `eager_waits` (from `hbquery.waits_ordered`:
    no wait can consume another generation) lets an enabled wait be taken alone;
    `ordered_bars` (from `hbquery.bars_ordered`: named barriers whose generations no
    interleaving forms otherwise) are not grouping-sensitive, so their arrivals are too."""
    _NAMES.clear()
    _NAMES.update(names or {})
    ex = _Explorer(cm, max_states)
    ex.eager_waits = eager_waits
    ex.sensitive -= set(ordered_bars)
    return ex.run()
