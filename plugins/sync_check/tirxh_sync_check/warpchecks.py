"""Per-warp and per-warpgroup protocol rules that need no interleaving, read from the trace.

- aligned barriers (``bar.sync``, ``barrier.sync.aligned``, ``barrier.cluster.*.aligned``) must be
  executed by every thread of the warp: a partial lane mask means the barrier sits under divergent
  control flow (PTX ISA "bar, barrier": the .aligned form requires all threads of the warp to
  execute the same barrier instruction);
- ``setmaxnreg`` must be executed by all threads of all four warps of a warpgroup, with the same
  action and count (PTX ISA "setmaxnreg": ".sync.aligned ... all threads in the warpgroup");
  and the counts the warps end with must fit the CTA's register pool, which holds what the CTA
  got at launch (the compiled per-thread count x threads): ``setmaxnreg.inc`` "blocks the
  execution until enough registers are available in the CTA's register pool", so a request the
  pool can never satisfy hangs (``setmaxnreg.pool-exhausted``; a GEMM whose producer released 48
  instead of 40 registers hung on every launch on the H200, 2026-12-01). Without the compiled
  register count (an IR-only run) this rule is not checked, and the result says so;
- each thread alternates ``barrier.cluster.arrive`` and ``barrier.cluster.wait``
  (PTX ISA "barrier.cluster": a wait must follow the thread's own arrive of the same phase);
- a warp collective with a member mask (``shfl.sync``, ``vote.sync``, ``match.sync``,
  ``redux.sync``, ``bar.warp.sync``, ``elect.sync``) is executed by exactly the non-exited lanes its
  mask names (PTX ISA: the executing thread waits until all non-exited threads of membermask
  executed the same instruction; the behaviour is undefined when the executing thread is not in
  membermask): ``warp.membermask`` (issue 13 class 3). numsim runs the lanes of one divergent
  branch together, so lanes of the mask sitting in another branch, even at a matching
  instruction, count as not executing it;
- every other ``.aligned`` instruction (wgmma, mma.sync, movmatrix, ldmatrix/stmatrix, ...) is
  executed by every non-exited lane of the warp: ``warp.aligned-divergent``.

A finding's primary line is the instruction; the branch that split the warp (the innermost
construct around it) is a related location.
"""

from __future__ import annotations

from tirxh_numsim import events as ev

from .model import popcount, warp_mask
from .report import Issue, describe_event
from .structure import Structure, construct_label

# warp collectives whose last operand is a member mask (numsim records them as WarpSync)
MEMBERMASK_OPS = ("shfl.sync", "shfl.sync.pred", "vote.sync", "vote.ballot", "match.sync",
                  "redux.sync", "bar.warp.sync", "elect.sync")


def _aligned(e) -> bool:
    spelling = getattr(e.instr, "spelling", "") if e.instr is not None else ""
    if not spelling:
        return True
    first = spelling.split(".")[0]
    return first == "bar" or ".aligned" in spelling


def check(trace, kir=None, launch_regs: "int | None" = None) -> list:
    issues: list = []
    seen: set = set()

    def add(issue: Issue):
        e = issue.event
        key = (issue.kind, (e.loc.file, e.loc.line) if e is not None and e.loc else None)
        if key not in seen:
            seen.add(key)
            issues.append(issue)

    block = tuple(trace.block)
    by_warp = trace.by_warp()
    for (cta, warp), evs in sorted(by_warp.items()):
        full = warp_mask(block, warp)
        arrived = False
        last_arrive = None
        for e in evs:
            if isinstance(e, ev.BarrierEvent) and e.op in ("sync", "arrive") and not e.released:
                if _aligned(e) and e.lanes != full:
                    add(Issue("barrier.divergent",
                              f"aligned barrier {e.barrier} executed by {popcount(e.lanes)} of "
                              f"{popcount(full)} threads of warp {warp} (lanes {e.lanes:#010x}): "
                              "the barrier is under divergent control flow",
                              event=e, lanes=ev.lanes_of(e.lanes),
                              witness=[f"warp {warp} reaches the barrier with lanes "
                                       f"{e.lanes:#010x}; its live lanes are {full:#010x}"]))
            elif isinstance(e, ev.ClusterBarrierEvent):
                if e.op == "arrive":
                    if arrived:
                        add(Issue("cluster-barrier.mismatch",
                                  "barrier.cluster.arrive twice without a barrier.cluster.wait "
                                  "in between", event=e, related=[last_arrive],
                                  witness=[f"1. {describe_event(last_arrive)}",
                                           f"2. {describe_event(e)} (no wait in between)"]))
                    arrived, last_arrive = True, e
                else:
                    if not arrived:
                        add(Issue("cluster-barrier.mismatch",
                                  "barrier.cluster.wait without a preceding "
                                  "barrier.cluster.arrive by this warp", event=e,
                                  witness=[f"{describe_event(e)} (no arrive before it)"]))
                    arrived = False
                if _aligned(e) and e.lanes != full:
                    add(Issue("cluster-barrier.mismatch",
                              f"aligned barrier.cluster.{e.op} executed by part of warp {warp} "
                              f"(lanes {e.lanes:#010x})", event=e,
                              witness=[describe_event(e)]))
    _setmaxnreg(trace, by_warp, block, add)
    _register_pool(by_warp, block, launch_regs, add)
    _collectives(trace, by_warp, block, Structure(kir), add)
    return issues


def _setmaxnreg(trace, by_warp, block, add) -> None:
    threads = 1
    for d in block:
        threads *= d
    ctas = sorted({c for c, _ in by_warp})
    for cta in ctas:
        nwarps = -(-threads // 32)
        for g in range(-(-nwarps // 4)):
            members = [w for w in range(4 * g, 4 * g + 4)]
            seqs = {w: [e for e in by_warp.get((cta, w), []) if isinstance(e, ev.SetMaxNReg)]
                    for w in members}
            if not any(seqs.values()):
                continue
            longest = max(seqs.values(), key=len)
            for w in members:
                s = seqs[w]
                if w >= nwarps:
                    add(Issue("setmaxnreg.partial-warpgroup",
                              f"setmaxnreg in warpgroup {g}, which has only {nwarps - 4 * g} "
                              "warps in this block", event=longest[0],
                              witness=[describe_event(longest[0])]))
                    continue
                for k, ref in enumerate(longest):
                    mine = s[k] if k < len(s) else None
                    if mine is None or (mine.action, mine.count) != (ref.action, ref.count):
                        others = [x for x in members if x < nwarps and len(seqs[x]) > k]
                        add(Issue("setmaxnreg.partial-warpgroup",
                                  f"setmaxnreg.{ref.action} {ref.count} executed by warps "
                                  f"{others} of warpgroup {g} but not by warp {w}"
                                  + ("" if mine is None else
                                     f" (it executed setmaxnreg.{mine.action} {mine.count})"),
                                  event=ref, witness=[
                                      f"warp {x}: " + ", ".join(
                                          f"setmaxnreg.{y.action} {y.count}" for y in seqs[x])
                                      for x in members if x < nwarps]))
                        break
                    if mine.lanes != warp_mask(block, w):
                        add(Issue("setmaxnreg.partial-warpgroup",
                                  f"setmaxnreg executed by part of warp {w} (lanes "
                                  f"{mine.lanes:#010x})", event=mine,
                                  witness=[describe_event(mine)]))


def _register_pool(by_warp, block, launch_regs, add) -> None:
    """Per CTA: the registers its warps hold after their last setmaxnreg, against the pool the
    CTA got at launch (`launch_regs` per thread for every thread of the block)."""
    if not launch_regs:
        return
    threads = block[0] * block[1] * block[2]
    nwarps = -(-threads // 32)
    for cta in sorted({c for c, _ in by_warp}):
        final, incs, decs = {}, [], []
        for w in range(nwarps):
            for e in by_warp.get((cta, w), []):
                if isinstance(e, ev.SetMaxNReg):
                    final[w] = e.count
                    (incs if e.action == "inc" else decs).append(e)
        if not incs:
            continue
        held = sum(final.get(w, launch_regs) * 32 for w in range(nwarps))
        pool = launch_regs * 32 * nwarps
        if held > pool:
            first = incs[0]
            add(Issue("setmaxnreg.pool-exhausted",
                      f"setmaxnreg.inc {first.count} can never complete: after every setmaxnreg "
                      f"the warps of CTA {cta} would hold {held} registers, but the CTA's pool "
                      f"is the {pool} it got at launch ({launch_regs} per thread x {threads} "
                      f"threads); {held - pool} more must be released (a smaller count in a "
                      "setmaxnreg.dec, or a smaller .inc)", event=first, related=decs[:1],
                      witness=[f"warp {w}: {final.get(w, launch_regs)} registers at the end"
                               for w in range(nwarps)][:16]))


def _collectives(trace, by_warp, block, structure, add) -> None:
    """The member-mask and ``.aligned`` rules of the module docstring."""
    for (cta, warp), evs in sorted(by_warp.items()):
        live = warp_mask(block, warp)
        for e in evs:
            spelling = getattr(e.instr, "spelling", "") if e.instr is not None else ""
            exited = getattr(e, "exited", 0)
            if isinstance(e, ev.WarpSync) and e.op in MEMBERMASK_OPS:
                need = e.membermask & live & ~exited
                missing, outside = need & ~e.lanes, e.lanes & ~e.membermask
                if missing or outside:
                    what = []
                    if missing:
                        what.append(f"{_lanes(missing)} named in its member mask "
                                    f"{e.membermask:#010x} did not execute it")
                    if outside:
                        what.append(f"{_lanes(outside)} executed it without being in the "
                                    "member mask")
                    add(_divergent("warp.membermask", e, structure,
                                   f"{e.op} in warp {warp} (cta {cta}): " + " and ".join(what) +
                                   " (the collective is under divergent control flow or its "
                                   "mask is wrong: the result, and any exchange, is undefined)"))
            elif ".aligned" in spelling and _executing(e):
                need = live & ~exited
                if e.lanes & live != need and e.lanes:
                    add(_divergent("warp.aligned-divergent", e, structure,
                                   f"{spelling.split()[0]} (.aligned) executed by "
                                   f"{_lanes(e.lanes)} of warp {warp} (cta {cta}), whose live "
                                   f"lanes are {_lanes(need)[6:]}: an .aligned instruction must be "
                                   "executed by every thread of the warp (warp-uniform control "
                                   "flow and guard)"))


def _executing(e) -> bool:
    """Whether `e.lanes` are the lanes that executed the instruction: warp collectives, async
    issues and fences; not memory events (they name the lanes whose addresses were used), nor
    barriers and setmaxnreg (their own rules above)."""
    return isinstance(e, (ev.WarpSync, ev.FenceEvent)) or \
        (isinstance(e, ev.AsyncOp) and e.stage in ("issue", "commit", "wait"))


def _divergent(kind, e, structure, message) -> Issue:
    branch = structure.innermost_branch(e.instr)
    related = [(branch.loc, construct_label(branch))] if branch is not None else []
    return Issue(kind, message, event=e, lanes=ev.lanes_of(e.lanes), related_locs=related,
                 witness=[describe_event(e)] + [f"{construct_label(branch)} at {branch.loc} "
                                                "splits the warp" for _ in related])


def _lanes(mask: int) -> str:
    """``lanes 0-15`` / ``lanes 0, 3, 7-9`` / ``lane 4``: a lane mask as ranges."""
    out, lanes = [], ev.lanes_of(mask)
    i = 0
    while i < len(lanes):
        j = i
        while j + 1 < len(lanes) and lanes[j + 1] == lanes[j] + 1:
            j += 1
        out.append(str(lanes[i]) if i == j else f"{lanes[i]}-{lanes[j]}")
        i = j + 1
    return ("lane " if len(lanes) == 1 else "lanes ") + ", ".join(out)
