"""Generated assembly test: every example of every binding, for every target that claims it.

One kernel per (target, binding set) holds all its examples and is assembled by nvJitLink (ptxas
where nvJitLink is missing); a failure is bisected down to the examples responsible, so the
assertion message names the binding, the example and ptxas's complaint.
"""

import pytest

from tirxh.core.bindings import Binding, Effects, InstructionSet, operands, slot
from tirxh.core.isa_check import check_iset, examples_for, parse_example
from tirxh.core.reference import builtin_toolset
from tirxh.core.targets import Target
from tirxh.core.toolchain import find_tool, _nvjitlink
from tirxh.plugins import isa_base

ISA, TARGETS = builtin_toolset()
PAIRS = [(t.name, s) for t in TARGETS for s in t.isets]
NOT_CALLABLE = {"bra"}  # bound only to explain that structured control flow emits it

TARGET_T = Target("sm_90a", 90, (8, 4), ("t", "base"))


def _isa(*bindings) -> InstructionSet:
    """The test bindings first (they win their spellings), then base for the kernel's prologue."""
    isa = InstructionSet()
    isa.extend(bindings)
    isa.extend(isa_base.BINDINGS)
    return isa


needs_assembler = pytest.mark.skipif(
    _nvjitlink() is None and find_tool("ptxas") is None,
    reason="no PTX assembler: pip install nvidia-nvjitlink cuda-bindings (or put ptxas on PATH)")


@needs_assembler
@pytest.mark.parametrize("target,iset", PAIRS, ids=[f"{t}-{s}" for t, s in PAIRS])
def test_binding_set_assembles(target, iset):
    t = TARGETS.get(target)
    examples = examples_for(ISA, t, iset)
    assert examples, f"{target} accepts binding set {iset!r} but no example exercises it"
    failures = check_iset(ISA, t, iset)
    assert not failures, "\n".join(str(f) for f in failures)


def test_every_binding_has_examples_matching_itself():
    for b in ISA:
        if b.name in NOT_CALLABLE:
            assert not b.all_examples
            continue
        assert b.all_examples, f"binding {b.name!r} has no example"
        for text in b.all_examples:
            ex = parse_example(b, text)
            assert b.match(ex.spelling.split(".")[1:]) is not None, (b.name, text)


def test_every_callable_binding_is_assembled_on_some_target():
    covered = set()
    for t in TARGETS:
        for s in t.isets:
            covered.update(ex.binding.name for ex in examples_for(ISA, t, s))
    missing = {b.name for b in ISA} - covered - NOT_CALLABLE
    assert not missing, f"bindings no target assembles: {sorted(missing)}"


def test_every_target_is_exercised_for_the_sets_it_claims():
    assert {t.name for t in TARGETS} == {"sm_80", "sm_90a", "sm_100a", "sm_110a"}
    for t in TARGETS:
        assert "base" in t.isets
    assert ("sm_90a", "sm90a") in PAIRS and ("sm_100a", "sm100a") in PAIRS


@needs_assembler
def test_check_bisects_to_the_bad_example():
    """A binding ptxas rejects is named; its good neighbours are not."""
    good = Binding("t.add", "add", (slot("type", "u32"),), operands("d:$type a:$type b:$type"),
                   "ok", iset="t", example="add.u32", examples=("add.u32",) * 5)
    bad = Binding("t.mov", "mov", (slot("type", "f16"),), operands("d:$type a:$type"),
                  "mov has no .f16 type", iset="t", example="mov.f16")
    failures = check_iset(_isa(good, bad), TARGET_T, "t")
    assert [f.example.binding.name for f in failures] == ["t.mov"]
    assert "mov.f16" in str(failures[0]) and "sm_90a" in str(failures[0])


def test_example_naming_an_unknown_operand_is_reported():
    b = Binding("t.add", "add", (slot("type", "u32"),), operands("d:$type a:$type b:$type"),
                "ok", iset="t", example="add.u32 c=3")
    failures = check_iset(_isa(b), TARGET_T, "t")
    assert len(failures) == 1 and "names operands ['c']" in failures[0].message


def test_example_shadowed_by_an_earlier_binding_is_reported():
    first = Binding("t.first", "add", (slot("type", "u32"),), operands("d:$type a:$type b:$type"),
                    "first", iset="t")
    second = Binding("t.second", "add", (slot("type", "u32"),),
                     operands("d:$type a:$type b:$type"), "same shape", iset="t",
                     example="add.u32", effects=Effects(sync="warp"))
    failures = check_iset(_isa(first, second), TARGET_T, "t")
    assert len(failures) == 1 and "resolves to binding 't.first'" in failures[0].message


def test_malformed_example_is_a_clear_error():
    b = Binding("t.add", "add", (slot("type", "u32"),), operands("d:$type a:$type b:$type"),
                "ok", iset="t", example="add.u32 oops")
    with pytest.raises(ValueError, match="expected name=value, found 'oops'"):
        parse_example(b, b.example)
    b2 = Binding("t.add2", "add", (slot("type", "u32"),), operands("d:$type a:$type b:$type"),
                 "ok", iset="t", example="add.s32")
    with pytest.raises(ValueError, match="does not match its own slots"):
        examples_for(_isa(b2), TARGET_T, "t")


@needs_assembler
def test_examples_that_only_fail_together_are_reported_not_lost():
    """ptxas refuses .cta_group::1 and ::2 in one function: one kernel of all tcgen05 examples
    fails while every half assembles; the check must say so instead of passing."""
    from tirxh.core.isa_check import check_examples, kernel_groups
    t = TARGETS.get("sm_100a")
    examples = examples_for(ISA, t, "sm100a")
    assert len(kernel_groups(examples)) == 2
    failures = check_examples(examples, t, ISA)
    assert failures and "fail together but assemble apart" in failures[0].message
    assert "cta_group" in failures[0].message
