"""docs/PTX_REFERENCE.md is generated from the bindings and must not go stale."""

import dataclasses

import pytest
from tirxh_numsim.support import fidelity_of

import tirxh
from tirxh.core import reference
from tirxh.core.bindings import Binding
from tirxh.core.lang.ptxns import _token
from tirxh.core.pluginmanager import build_plugin_manager


def test_reference_is_up_to_date():
    expected = reference.page()
    try:
        with open(reference.DEFAULT_PATH, encoding="utf-8") as f:
            current = f.read()
    except FileNotFoundError:
        pytest.fail(f"{reference.DEFAULT_PATH} is missing; run: python -m tirxh.core.reference")
    assert current == expected, ("docs/PTX_REFERENCE.md is stale; regenerate it with "
                                 "`python -m tirxh.core.reference`")


def test_reference_lists_every_binding_with_its_facts():
    isa, targets = reference.builtin_toolset()
    text = reference.render(isa, targets)
    for b in isa:
        assert f"### `{b.name}`" in text
    assert "- spelling: `cp.async.bulk.tensor.dim.shared::cluster.global{.tile}" in text
    assert "sync role `mbarrier.complete_tx`" in text
    assert "| sm_90a | 90 |" in text


def test_python_spellings_round_trip_through_the_language():
    isa, _ = reference.builtin_toolset()
    for b in isa:
        for text in b.all_examples:
            spelling = text.split()[0]
            py = reference.python_spelling(spelling)
            assert py.startswith("T.ptx.")
            tokens = [t for name in py[len("T.ptx."):].split(".") for t in _token(name)]
            assert ".".join(tokens) == spelling, (py, spelling)
            for name in py[len("T.ptx."):].split("."):
                assert name.isidentifier(), (py, name)


def test_check_mode_reports_a_stale_file(tmp_path, capsys):
    out = tmp_path / "ref.md"
    assert reference.main(["-o", str(out), "--check"]) == 1
    assert reference.main(["-o", str(out)]) == 0
    assert reference.main(["-o", str(out), "--check"]) == 0
    out.write_text(out.read_text() + "edited by hand\n")
    assert reference.main(["-o", str(out), "--check"]) == 1
    assert "is stale" in capsys.readouterr().err


def test_fidelity_comes_from_numsim_through_the_hook():
    isa, targets = reference.builtin_toolset()
    table = reference.fidelity_table(isa)
    assert table.keys() == {b.name for b in isa}
    assert all(table[b.name] == fidelity_of(b.name) for b in isa)
    text = reference.render(isa, targets, table)
    # the four bindings on which the old core field disagreed with numsim's table
    for name in ("tcgen05.fence", "cp.async.bulk.prefetch.tensor", "createpolicy",
                 "createpolicy.range"):
        section = text.split(f"### `{name}`", 1)[1].split("### ", 1)[0]
        assert f"- numsim fidelity: {fidelity_of(name)[0]}\n" in section, name


def test_bindings_carry_no_fidelity_of_their_own():
    assert "fidelity" not in {f.name for f in dataclasses.fields(Binding)}


def test_without_a_fidelity_plugin_the_page_says_so():
    isa, targets = reference.builtin_toolset()
    table = reference.fidelity_table(isa, build_plugin_manager(autoload=False))
    assert table == {}
    assert "- numsim fidelity: not known (no installed plugin answered" in \
        reference.render(isa, targets, table)


class _Wrong:
    @tirxh.hookimpl
    def tirxh_binding_fidelity(self, binding):
        return "exact", "made up"


def test_an_unknown_fidelity_class_names_the_binding():
    pm = build_plugin_manager(autoload=False)
    pm.register(_Wrong(), name="wrong")
    isa, _ = reference.builtin_toolset()
    with pytest.raises(ValueError, match=r"tirxh_binding_fidelity answered 'exact' for binding "
                                         r"'\S+'; expected one of modeled, representative"):
        reference.fidelity_table(isa, pm)
