"""docs/PTX_REFERENCE.md is generated from the bindings and must not go stale."""

import pytest

from tirxh.core import reference
from tirxh.core.lang.ptxns import _token


def test_reference_is_up_to_date():
    isa, targets = reference.builtin_toolset()
    expected = reference.render(isa, targets)
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
