"""SUPPORTED_OPS.md is generated from the bindings and the semantics table; stale is a failure."""

from pathlib import Path

from tirxh_numsim.semantics import lookup
from tirxh_numsim.semtable import FIDELITIES, TABLE
from tirxh_numsim.support import render, supported_ops

DOC = Path(__file__).resolve().parents[1] / "SUPPORTED_OPS.md"


def test_supported_ops_md_is_up_to_date():
    want = render()
    have = DOC.read_text() if DOC.exists() else ""
    assert have == want, ("plugins/numsim/SUPPORTED_OPS.md is stale; regenerate it with "
                          "`python -m tirxh_numsim.support > plugins/numsim/SUPPORTED_OPS.md`")


def test_every_binding_has_a_fidelity_class_and_rejections_say_why():
    rows = supported_ops()
    assert rows
    for name, iset, fid, note in rows:
        assert fid in FIDELITIES, name
        assert note, f"{name}: no note"
    lookup("add.int")
    for sem in TABLE.values():
        if sem.fidelity == "rejected":
            assert sem.fn is None and sem.note
        else:
            assert sem.fn is not None
