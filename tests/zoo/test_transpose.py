"""zoo/kernels/transpose.py: shared-memory transpose with an XOR swizzle."""

import importlib.util
from collections import defaultdict
from types import SimpleNamespace

import pytest

import tirxh.lang as T

from ._zoo import ZOO, check, load, small_cases, sync_race

tp = load("transpose")


@pytest.mark.parametrize("suite,case", small_cases(tp.SUITE))
def test_small_cases_match_the_reference_in_numsim(suite, case):
    res = check(suite, case)
    assert res.verdict == "clean", [f.message for f in res.findings]


def _worst_conflict(ev) -> int:
    """Shared-memory wavefronts beyond one for one warp instruction: lanes are served in phases
    (32 lanes for 4-byte accesses, 8 lanes per phase for 16-byte ones); within a phase, distinct
    4-byte words on the same bank (word mod 32) serialize."""
    width = max(end - start for _, start, end in ev.ranges)
    per_phase = 32 * 4 // max(width, 4)
    worst = 1
    phases = defaultdict(lambda: defaultdict(set))
    for lane, start, end in ev.ranges:
        for word in range(start // 4, (end + 3) // 4):
            phases[lane // per_phase][word % 32].add(word)
    for banks in phases.values():
        worst = max([worst] + [len(words) for words in banks.values()])
    return worst


@pytest.mark.parametrize("name", ["r72_c136", "r200_c96_tr64"])
def test_shared_memory_accesses_are_bank_conflict_free(name):
    numsim = pytest.importorskip("tirxh_numsim")
    case = next(c for c in tp.SUITE.cases if c.name == name)
    res = numsim.run(tp.transpose, tp.SUITE.make_inputs(case), consts=tp.SUITE.consts(case),
                     grid=tp.SUITE.grid(case), outputs=["out"], trace=True)
    shared = [a for events in res.trace.by_warp().values()
              for a in _instructions([e for e in events if getattr(e, "space", None) == "shared"])]
    assert {e.access for e in shared} == {"read", "write"}
    assert max(_worst_conflict(e) for e in shared) == 1


def _instructions(events) -> list:
    """numsim records a vector access as one event per element (consecutive in the warp's
    program order, same instruction): merge them back into one access per warp instruction, one
    byte range per lane. `events`: one warp's, in its program order (`Trace.by_warp`: a traced
    run executes a CTA's warps together, so the trace interleaves their events)."""
    out = []
    for e in events:
        last = out[-1] if out else None
        if last is not None and (last.cta, last.warp, last.instr) == (e.cta, e.warp, e.instr) \
                and e.seq == last.seq + 1:
            span = {lane: (s, t) for lane, s, t in last.ranges}
            for lane, s, t in e.ranges:
                a, b = span.get(lane, (s, t))
                span[lane] = (min(a, s), max(b, t))
            last.ranges = [(lane, a, b) for lane, (a, b) in sorted(span.items())]
            last.seq = e.seq
        else:
            out.append(SimpleNamespace(cta=e.cta, warp=e.warp, instr=e.instr, seq=e.seq,
                                       access=e.access, ranges=list(e.ranges)))
    return out


def test_the_conflict_count_sees_an_unswizzled_column_read():
    """The measure itself: 8 lanes reading one column of a 32-word-stride tile conflict 8-way."""
    class Ev:
        ranges = [(lane, lane * 128, lane * 128 + 4) for lane in range(8)]
    assert _worst_conflict(Ev) == 8


def test_shapes_the_kernel_cannot_run_are_refused_when_declared():
    with pytest.raises(ValueError, match=r"case 'odd': R=12 and C=64 must be positive multiples "
                                         r"of 8"):
        T.suite(tp.transpose, inputs=tp.inputs, constraints=tp.constraints,
                cases=[T.case("odd", R=12, C=64)])
    with pytest.raises(ValueError, match=r"case 'tile': TR=32 must be 64 or 128"):
        T.suite(tp.transpose, inputs=tp.inputs, constraints=tp.constraints,
                cases=[T.case("tile", R=64, C=64, TR=32)])


def test_the_tile_barrier_orders_writes_before_reads():
    case = next(c for c in tp.SUITE.cases if c.name == "r72_c136")
    sync, race = sync_race(tp.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


def test_persistent_tiles_are_sync_clean_and_need_the_second_barrier(tmp_path):
    """The persistent grid stashes the next tile over the one just emitted: the barrier after
    `emit` is what orders them (racecheck finds the overlap without it)."""
    case = next(c for c in tp.SUITE.cases if c.name == "r200_c136_tr64_p3")
    sync, race = sync_race(tp.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings
    src = (ZOO / "transpose.py").read_text()
    old = "        emit(r0, c0)\n        T.ptx.bar.sync(0)                     # the tile read"
    assert src.count(old) == 1
    path = tmp_path / "transpose_mut.py"
    path.write_text(src.replace(old, "        emit(r0, c0)\n        pass  # the tile read"))
    spec = importlib.util.spec_from_file_location("transpose_mut", path)
    mut = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mut)
    sync, race = sync_race(mut.SUITE, case)
    assert any(f.kind.startswith("race") for f in race.findings), race.findings
