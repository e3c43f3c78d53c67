"""T.iket in the language: annotations emit nothing in a normal build, print in the IR, and
reject bad labels."""

import re

import pytest

import tirxh.lang as T
from tirxh.api import ir


@T.kernel(grid=lambda n: T.cdiv(n, 256), block=256)
def plain(a: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 256 + T.tid.x
    with T.if_(i < n):
        x = T.ptx.ld.global_.f32(a.at(i))
        T.ptx.st.global_.f32(out.at(i), x + x)


@T.kernel(grid=lambda n: T.cdiv(n, 256), block=256)
def annotated(a: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 256 + T.tid.x
    with T.iket.range("body"):
        with T.if_(i < n):
            with T.iket.range("load"):
                x = T.ptx.ld.global_.f32(a.at(i))
            T.ptx.st.global_.f32(out.at(i), x + x)
            T.iket.mark("stored")


def _instructions(ptx: str) -> list:
    body = ptx.split("{", 1)[1]
    return [ln.strip() for ln in body.splitlines()
            if ln.strip() and not ln.strip().startswith(".loc")]


def test_normal_build_emits_nothing_for_annotations():
    assert _instructions(annotated.ptx("sm_90a")) == _instructions(plain.ptx("sm_90a"))


def test_annotations_are_ir_statements():
    k = annotated.specialize()
    anns = [s for s in k.walk() if isinstance(s, ir.Annotation)]
    assert [(a.kind, a.name) for a in anns] == [
        ("begin", "body"), ("begin", "load"), ("end", "load"), ("mark", "stored"),
        ("end", "body")]
    assert all(a.loc.file.endswith("test_annotations.py") and a.loc.line > 0 for a in anns)
    # both sides of a range point at the `with` line
    assert anns[1].loc == anns[2].loc
    text = annotated.ir
    assert re.search(r"@iket\.begin 'load'  # test_annotations\.py:\d+", text)
    assert "@iket.mark 'stored'" in text


def test_annotated_kernel_assembles():
    ck = annotated.compile("sm_90a")
    assert ck.cubin and ck.resources.registers > 0


@pytest.mark.parametrize("label", ["", "has space", "9lives", 42, "x" * 65])
def test_bad_label_is_a_trace_error(label):
    @T.kernel(block=32)
    def bad(out: T.gptr[T.u32]):
        with T.iket.range(label):
            T.ptx.st.global_.u32(out.at(0), 1)

    with pytest.raises(T.TraceError,
                       match=r"test_annotations\.py:\d+: .*T\.iket\.range expects a label"):
        bad.specialize()


def test_mark_outside_kernel_is_an_error():
    with pytest.raises(T.TraceError, match="only valid inside a @T.kernel"):
        T.iket.mark("nowhere")
