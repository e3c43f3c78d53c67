"""The zoo's instruction index on disk: what it lists equals a fresh trace, what its key holds,
which traces it refuses to store, and the lock between processes."""

import gc
import os
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from tirxh.core.bindings import Binding, InstructionSet, operands, slot
from tirxh.kb import zooindex
from tirxh.kb.zoo import load_zoo
from tirxh.kb.zooindex import IndexEntry, InstructionUse, ZooSources, lookup_or_trace

from .conftest import FACTORY, ODD, PAIR

HELPER = "SCALE = 2.0\n"

# a kernel whose module imports a zoo-local helper by name (as the zoo's kernels import hopper)
SCALED = '''
"""A store scaled by a helper module's constant."""

import tirxh.lang as T
from zoohelper import SCALE


@T.kernel(block=32)
def scaled(out: T.gptr[T.f32], V: T.const = 3):
    T.ptx.st.global_.f32(out.at(T.tid.x), float(V) * SCALE)
'''


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private artifact cache, and no `zoohelper` module left over from another test."""
    monkeypatch.setenv("TIRXH_CACHE_DIR", str(tmp_path / "cache"))
    sys.modules.pop("zoohelper", None)
    yield tmp_path / "cache" / zooindex.INDEX_DIR
    sys.modules.pop("zoohelper", None)


@pytest.fixture
def traced(monkeypatch):
    """The kernels traced from now on (by name), the traces themselves still running."""
    names = []
    real = zooindex.trace_use

    def spy(kernel, params, ident, isa):
        names.append(ident.split("::")[1])
        return real(kernel, params, ident, isa)
    monkeypatch.setattr("tirxh.kb.zoo.trace_use", spy)
    return names


def _entry(zoo, name, isa) -> IndexEntry:
    k = zoo.find(name)
    return IndexEntry(k.module.sources, k.module.path, k.module.relpath, k.name, isa)


def _fresh(k, isa) -> dict:
    """A kernel's use computed without the index: every distinct specialization its cases ask
    for, traced through `Kernel.specialize`, binding -> sorted spellings."""
    params = [c.params for _, s in k.suites for c in s.cases] or [{}]
    consts = {tuple(sorted((n, repr(v)) for n, v in k.kernel.resolve_consts(p).items())):
              k.kernel.resolve_consts(p) for p in params}
    found = {}
    for values in consts.values():
        for ins in k.kernel.specialize(isa=isa, **values).instructions():
            found.setdefault(ins.binding.name, set()).add(ins.spelling)
    return {"complete": True, "specializations": len(consts),
            "bindings": [{"binding": b, "spellings": sorted(ss)} for b, ss in sorted(found.items())],
            "errors": []}


def test_every_listing_from_the_index_equals_a_fresh_trace(make_zoo, isa, cache, monkeypatch):
    root = make_zoo(pair=PAIR, odd=ODD, factory=FACTORY, scaled=SCALED, zoohelper=HELPER)
    cold = load_zoo(root)
    uses = {k.ident: k.instructions(isa).to_json() for k in cold.kernels}  # traced and stored
    for k in cold.kernels:
        if k.name != "broken":
            assert uses[k.ident] == _fresh(k, isa), k.ident
    assert uses["kernels/odd.py::broken"]["complete"] is False

    def no_trace(self, isa):
        assert self.name == "broken", f"{self.name} was traced again"
        return InstructionUse(errors=["kernels/odd.py::broken: TraceError: not stored"])
    monkeypatch.setattr("tirxh.kb.zoo.ZooKernel._trace", no_trace)
    warm = load_zoo(root)  # from disk, but for the kernel that does not trace
    for k in warm.kernels:
        if k.name != "broken":
            assert k.instructions(isa).to_json() == uses[k.ident]
    for query in ("st.global.f32", "ld", "max.f32 tail", "mul", "scaled"):
        assert [h.to_json(["sm_90a"]) for h in warm.search(query, isa)] == \
            [h.to_json(["sm_90a"]) for h in cold.search(query, isa)]
    for names in (["st"], ["ld"], ["max.f"], ["mul.f"]):
        assert [(k.ident, ss) for k, ss in warm.users_of(names, isa)] == \
            [(k.ident, ss) for k, ss in cold.users_of(names, isa)]


def test_an_entry_is_keyed_by_its_module_and_what_it_imports(make_zoo, isa, cache, traced):
    root = make_zoo(pair=PAIR, odd=ODD, scaled=SCALED, zoohelper=HELPER)

    def trace_all():
        del traced[:]
        zoo = load_zoo(root)
        for name in ("relu", "square", "fill", "scaled"):
            zoo.find(name).instructions(isa)
        sys.modules.pop("zoohelper", None)  # as a fresh `tirxh` process would find it
        return sorted(traced)

    assert trace_all() == ["fill", "relu", "scaled", "square"]
    assert trace_all() == []
    (root / "kernels" / "zoohelper.py").write_text("SCALE = 3.0\n")
    assert trace_all() == ["scaled"]  # it imports the helper; the others do not
    (root / "kernels" / "odd.py").write_text(ODD.replace("float(V)", "float(V + 1)"))
    assert trace_all() == ["fill"]  # a sibling's edit leaves the kernels beside it alone
    (root / "README.md").write_text("# figures only\n")
    assert trace_all() == []


def test_the_closure_follows_every_import_to_zoo_local_files(tmp_path):
    root = tmp_path / "zoo"
    (root / "kernels" / "pkg").mkdir(parents=True)
    files = {"kernels/k.py": "import numpy as np\nimport a\nfrom pkg.sub import X\n"
                             "def f():\n    import later\n",
             "kernels/a.py": "from . import rel\nimport os\n", "kernels/rel.py": "",
             "kernels/later.py": "", "kernels/unused.py": "", "kernels/pkg/__init__.py": "",
             "kernels/pkg/sub.py": "from shared import Y\n", "shared.py": "Y = 1\n"}
    for rel, text in files.items():
        (root / rel).write_text(text)
    sources = ZooSources(root, [root, root / "kernels"])
    got, names = sources.closure(root / "kernels" / "k.py")
    assert sorted(p.relative_to(root).as_posix() for p in got) == [
        "kernels/a.py", "kernels/k.py", "kernels/later.py", "kernels/pkg/__init__.py",
        "kernels/pkg/sub.py", "kernels/rel.py", "shared.py"]
    assert {n: sorted(p.name for p in ps) for n, ps in names.items()} == {
        "a": ["a.py"], "pkg": ["__init__.py"], "pkg.sub": ["sub.py"], "later": ["later.py"],
        "shared": ["shared.py"]}


def test_another_tracer_or_instruction_set_is_another_key(make_zoo, isa, cache, traced,
                                                          monkeypatch):
    root = make_zoo(pair=PAIR)
    load_zoo(root).find("relu").instructions(isa)
    load_zoo(root).find("relu").instructions(isa)
    assert traced == ["relu"]
    monkeypatch.setattr(zooindex, "_tirxh_sources", lambda: "an edited tirxh")
    load_zoo(root).find("relu").instructions(isa)
    assert traced == ["relu", "relu"]

    more = InstructionSet()
    for b in isa:
        more.add(b, isa.owners[b.name])
    assert zooindex.tracer_fingerprint(more) == zooindex.tracer_fingerprint(isa)
    more.add(Binding("toy", "toy", (slot("t", "u32"),), operands("d:$t a:$t"), "a toy"), "me")
    assert zooindex.tracer_fingerprint(more) != zooindex.tracer_fingerprint(isa)
    load_zoo(root).find("relu").instructions(more)
    assert traced == ["relu", "relu", "relu"]


def test_a_trace_of_other_code_than_the_key_names_is_not_stored(make_zoo, isa, cache,
                                                                traced):
    root = make_zoo(pair=PAIR, scaled=SCALED, zoohelper=HELPER)
    helper = root / "kernels" / "zoohelper.py"
    # the module changed after load_zoo read it: the trace is of the old code
    zoo = load_zoo(root)
    (root / "kernels" / "pair.py").write_text(PAIR.lstrip("\n") + "\nX = 1\n")
    assert zoo.find("relu").instructions(isa).complete
    assert not _entry(zoo, "relu", isa).path.exists()

    # `import zoohelper` found a namesake from another directory
    sys.modules["zoohelper"] = types.ModuleType("zoohelper")
    sys.modules["zoohelper"].__file__ = str(root / "elsewhere" / "zoohelper.py")
    sys.modules["zoohelper"].SCALE = 5.0
    zoo = load_zoo(root)
    zoo.find("scaled").instructions(isa)
    assert traced == ["relu", "scaled"] and not _entry(zoo, "scaled", isa).path.exists()

    # a helper this process imported before, written since it started: maybe older code
    sys.modules.pop("zoohelper")
    load_zoo(root)
    helper.write_text("SCALE = 4.0\n")  # `zoohelper` (2.0) stays imported
    zoo = load_zoo(root)
    zoo.find("scaled").instructions(isa)
    assert not _entry(zoo, "scaled", isa).path.exists()
    # ... but one last written before the process started is what was imported
    past = time.time() - 10 * 24 * 3600
    sys.modules.pop("zoohelper")
    load_zoo(root)
    for f in (root / "kernels").glob("*.py"):
        os.utime(f, (past, past))
    zoo = load_zoo(root)
    zoo.find("scaled").instructions(isa)
    assert _entry(zoo, "scaled", isa).path.exists()


def test_a_process_that_waited_on_the_lock_reads_what_the_holder_stored(make_zoo, isa, cache):
    zoo = load_zoo(make_zoo(pair=PAIR))
    entry = _entry(zoo, "relu", isa)
    stored = InstructionUse({"st": ["st.global.f32"]}, [], 1)
    holding, waiting = threading.Event(), threading.Event()

    def holder():
        with entry.locked():
            holding.set()
            waiting.wait(5)
            time.sleep(0.2)  # the other side is blocked in flock by now
            entry.store(stored)
    t = threading.Thread(target=holder)
    t.start()
    holding.wait(5)
    waiting.set()
    got = lookup_or_trace(entry, lambda: pytest.fail("traced while another process held it"))
    t.join()
    assert got.bindings == stored.bindings and got.specializations == 1


def test_tracing_restores_the_collector_thresholds(make_zoo, isa, cache):
    before = gc.get_threshold()
    zoo = load_zoo(make_zoo(pair=PAIR, odd=ODD))
    assert zoo.find("relu").instructions(isa).complete
    assert not zoo.find("broken").instructions(isa).complete
    assert gc.get_threshold() == before
