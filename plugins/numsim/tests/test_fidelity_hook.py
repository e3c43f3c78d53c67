"""numsim answers `tirxh_binding_fidelity` from its semantics table (the one source of
fidelity), for every binding, exactly as SUPPORTED_OPS.md lists it."""

from tirxh.api import default_isa

from tirxh_numsim.plugin import tirxh_binding_fidelity
from tirxh_numsim.support import supported_ops


def test_every_binding_gets_the_tables_class_and_note():
    isa = default_isa()
    rows = supported_ops(isa)
    assert rows
    for name, _, fidelity, note in rows:
        assert tirxh_binding_fidelity(binding=isa.by_name[name]) == (fidelity, note), name


def test_a_binding_without_semantics_is_rejected():
    class Unknown:
        name = "no.such.binding"
    assert tirxh_binding_fidelity(binding=Unknown()) == ("rejected",
                                                         "no numsim semantics yet (incomplete)")
