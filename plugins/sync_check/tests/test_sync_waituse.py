"""`waituse.classify`: a try_wait is a wait only where control flow depends on its result."""

from __future__ import annotations

import numpy as np

import tirxh.lang as T
from tirxh_sync_check import check_kernel, waituse


@T.kernel(block=32)
def four_uses(out: T.gptr[T.u32]):
    bar = T.mbarrier(1)
    with T.if_(T.laneid() == 0):
        bar.init(1)
        bar.arrive()
    bar.wait(0)                                   # a loop that breaks on the result: a wait
    ok = bar.try_wait(0)                          # decides a branch: a probe
    with T.if_(ok):
        T.ptx.st.global_.u32(out.at(0), 1)
    bar.try_wait(0)                               # result unused: ignored
    both = bar.try_wait(0) & (T.laneid() < 4)    # only data (selp): ignored
    T.ptx.st.global_.u32(out.at(1), T.ptx.selp.u32(1, 0, both))
    guarded = bar.try_wait(0)                     # guards an instruction: a probe
    T.ptx.st.global_.u32(out.at(2), 3, pred=guarded)


def _lines(kir, ids):
    return sorted(i.loc.line for i in kir.instructions() if id(i) in ids)


def test_waits_probes_and_ignored_results_are_told_apart():
    kir = four_uses.specialize()
    probes, ignored = waituse.classify(kir)
    first = min(i.loc.line for i in kir.instructions()
                if i.binding.name == "mbarrier.try_wait")
    assert _lines(kir, probes) == [first + 1, first + 7]
    assert _lines(kir, ignored) == [first + 4, first + 5]


def test_no_kernel_or_no_waits():
    assert waituse.classify(None) == (set(), set())


def test_a_probe_that_succeeded_makes_synccheck_incomplete_not_clean():
    """The path the probe takes when it fails is not in numsim's trace."""
    sync, race = check_kernel(four_uses, dict(out=np.zeros(3, np.uint32)), grid=(1,))
    assert sync.verdict == "incomplete", sync.findings
    assert any("only picks a branch" in f.message for f in sync.findings)


def test_a_race_through_an_ignored_try_wait_names_it():
    from sync_check_testutil import CORPUS, load_module
    mod = load_module(CORPUS / "wait_ignored_producer.py")
    _, race = check_kernel(mod.buggy, mod.inputs(), grid=mod.GRID)
    (f,) = [f for f in race.findings if f.kind == "race.read-write"]
    assert any(r.label == "mbarrier try_wait" for r in f.related)
    assert any("not a wait" in w for w in f.witness)
