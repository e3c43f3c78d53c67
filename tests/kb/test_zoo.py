"""The zoo as data: loading modules, tags, cases, traced instructions, figures, find and search."""

from pathlib import Path

import pytest

from tirxh.core.errors import UsageError
from tirxh.kb.zoo import installed_zoo, load_zoo, readme_figures, zoo_root

from .conftest import ODD, PAIR

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_zoo_is_the_checkouts_in_an_editable_install(isa):
    assert installed_zoo() == REPO / "zoo"
    zoo = load_zoo()
    names = {k.name for k in zoo.kernels}
    assert {"vadd", "reduce_rows", "gemm_mma", "gemm_wgmma", "gemm_tcgen05"} <= names
    assert zoo.problems == [] and zoo.warnings == []  # the zoo's own declarations agree
    vadd = zoo.find("vadd")
    assert vadd.figures and "99%" in vadd.figures[0]["H200 (largest case)"]
    assert "ld.global.v4.f32" in vadd.instructions(isa).bindings["ld"]


def test_zoo_root_must_be_a_project(tmp_path):
    with pytest.raises(UsageError, match=r"not a zoo \(a tirx.toml project\); no tirx.toml"):
        zoo_root(tmp_path)


def test_module_header_tags_cases_and_work(make_zoo):
    zoo = load_zoo(make_zoo(pair=PAIR))
    relu, square = zoo.find("relu"), zoo.find("square")
    assert relu.module is square.module
    assert relu.module.tags == ("elementwise", "tail-handling") and relu.module.warnings == []
    assert relu.summary == "out = max(x, 0)"  # the kernel's own docstring first
    assert square.summary == "Two activations: relu and square (f32)."
    cases = relu.cases()
    assert [(c["name"], c["small"], c["flops"], c["bytes"]) for c in cases] == [
        ("n100", True, 100, 800), ("n1M", False, 1 << 20, 8 << 20)]
    assert cases[0]["suite"] == "RELU" and cases[0]["params"] == {"n": 100}
    assert "flops" in square.cases()[0] and square.cases()[0]["flops"] is None
    assert relu.checking()[0]["tolerance"] == {"rtol": 0.0, "atol": 0.0, "rms": None}
    assert relu.ident == "kernels/pair.py::relu"


def test_instructions_are_traced_per_distinct_specialization(make_zoo, isa):
    zoo = load_zoo(make_zoo(pair=PAIR, odd=ODD))
    use = zoo.find("relu").instructions(isa)
    assert use.complete and use.specializations == 1  # two cases, the same constants
    assert use.bindings["max.f"] == ["max.f32"] and "st.global.f32" in use.spellings()
    fill = zoo.find("fill").instructions(isa)  # no suite: the default constants
    assert fill.complete and fill.specializations == 1
    broken = zoo.find("broken").instructions(isa)
    assert not broken.complete and broken.specializations == 0
    assert "kernels/odd.py::broken: TraceError" in broken.errors[0]
    assert "st.globl.f32" in broken.errors[0]
    assert broken.to_json()["complete"] is False


def test_a_tags_line_may_wrap(make_zoo):
    wrapped = PAIR.replace("Tags: elementwise, tail-handling\n",
                           "Tags: elementwise,\n  tail-handling\nWork: n bytes\n")
    zoo = load_zoo(make_zoo(pair=wrapped.replace('TAGS = ("elementwise", "tail-handling")',
                                                 "")))
    assert zoo.find("relu").module.tags == ("elementwise", "tail-handling")


def test_tags_warnings_are_recorded(make_zoo):
    bad = PAIR.replace('TAGS = ("elementwise", "tail-handling")', 'TAGS = "elementwise"')
    zoo = load_zoo(make_zoo(pair=bad))
    assert zoo.find("relu").module.tags == ("elementwise", "tail-handling")  # the docstring's
    assert zoo.warnings == ["kernels/pair.py: TAGS must be a tuple of strings, got 'elementwise'"]
    assert zoo.problems == []
    differ = PAIR.replace('TAGS = ("elementwise", "tail-handling")', 'TAGS = ("vectorized",)')
    zoo = load_zoo(make_zoo(pair=differ))
    assert zoo.find("relu").module.tags == ("vectorized",)
    assert "and the docstring's Tags: line" in zoo.warnings[0]


def test_a_module_that_fails_to_import_is_a_problem_not_a_gap(make_zoo):
    zoo = load_zoo(make_zoo(pair=PAIR, sick="import numpy\nraise RuntimeError('no GPU here')\n"))
    assert {k.name for k in zoo.kernels} == {"relu", "square"}
    assert zoo.problems == ["kernels/sick.py: failed to import:\nRuntimeError: no GPU here"]
    with pytest.raises(UsageError, match=r"no kernel named 'sick_kernel'.*\(kernels/sick.py "
                                         r"failed to import\)"):
        zoo.find("sick_kernel")


def test_find_by_name_module_and_qualified_name(make_zoo):
    zoo = load_zoo(make_zoo(pair=PAIR, odd=ODD, other=ODD.replace("def fill", "def fill2")))
    assert zoo.find("kernels/pair.py::square").name == "square"
    assert zoo.find("pair.py::relu").name == "relu"
    with pytest.raises(UsageError, match=r"'broken' is ambiguous: kernels/odd.py::broken, "
                                         r"kernels/other.py::broken"):
        zoo.find("broken")
    assert zoo.find("kernels/other.py::broken").module.relpath == "kernels/other.py"
    with pytest.raises(UsageError, match=r"'pair' is ambiguous"):  # a module of two kernels
        zoo.find("pair")
    with pytest.raises(UsageError, match=r"no kernel named 'squar'; did you mean square"):
        zoo.find("squar")


def test_search_needs_every_term_and_ranks_names_first(make_zoo, isa):
    zoo = load_zoo(make_zoo(pair=PAIR, odd=ODD))
    hits = zoo.search("max.f32", isa)
    assert [h.kernel.name for h in hits] == ["relu"]
    assert hits[0].matched == {"instructions": ["max.f32"]}
    hits = zoo.search("SQUARE tail", isa)  # case-insensitive; both terms must match
    assert [(h.kernel.name, h.score) for h in hits] == [("square", 8 + 6), ("relu", 1 + 6)]
    assert hits[0].matched["tags"] == ["tail-handling"]  # relu: 'square' is in its header
    hits = zoo.search("activations", isa)  # header words
    assert {h.kernel.name for h in hits} == {"relu", "square"}
    assert hits[0].matched == {"header": ["activations"]}
    assert zoo.search("relu nosuchword", isa) == []
    with pytest.raises(UsageError, match="zoo search: the query is empty"):
        zoo.search("   ", isa)


def test_users_of_a_binding(make_zoo, isa):
    zoo = load_zoo(make_zoo(pair=PAIR, odd=ODD))
    users = {k.name: ss for k, ss in zoo.users_of(["st"], isa)}
    assert users == {"relu": ["st.global.f32"], "square": ["st.global.f32"],
                     "fill": ["st.global.f32"]}  # broken does not trace: not known


def test_readme_figures_by_module():
    text = ("| module | what | H200 |\n| --- | --- | --- |\n"
            "| `kernels/a.py` | x \\| y | 1 ms |\n| plain | no module | - |\n\n"
            "| kernel | module | rate |\n|---|:-:|---|\n| k | `kernels/a.py` | 2 TB/s |\n")
    assert readme_figures(text) == {"kernels/a.py": [
        {"what": "x \\| y", "H200": "1 ms"}, {"kernel": "k", "rate": "2 TB/s"}]}
    assert readme_figures("no tables\n") == {}


def test_traced_instructions_are_cached_on_disk(make_zoo, isa, tmp_path, monkeypatch):
    """Tracing the whole zoo takes minutes, paid by every `tirxh zoo search` and `ptx show`
    (what the key holds: tests/kb/test_zooindex.py)."""
    monkeypatch.setenv("TIRXH_CACHE_DIR", str(tmp_path / "cache"))
    root = make_zoo(pair=PAIR, odd=ODD)
    first = load_zoo(root).find("relu").instructions(isa)
    assert len(list((tmp_path / "cache" / "zoo-instructions").glob("*.json"))) >= 1

    traced = []
    monkeypatch.setattr("tirxh.kb.zoo.ZooKernel._trace",
                        lambda self, isa: traced.append(self.name) or first)
    again = load_zoo(root).find("relu").instructions(isa)
    assert traced == [] and again.bindings == first.bindings
    assert again.specializations == first.specializations and again.complete
    load_zoo(root).find("broken").instructions(isa)  # a failed trace is never stored
    assert traced == ["broken"]

    (Path(root) / "kernels" / "pair.py").write_text(PAIR.lstrip("\n") + "\nX = 1\n")
    load_zoo(root).find("relu").instructions(isa)  # its module changed
    assert traced == ["broken", "relu"]
