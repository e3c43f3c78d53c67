"""`structure.Structure`: the constructs enclosing an instruction, and where warps parted."""

from __future__ import annotations

from types import SimpleNamespace

import tirxh.lang as T
from tirxh_sync_check.structure import Structure, construct_label


@T.kernel(block=64)
def nested(out: T.gptr[T.u32]):
    w = T.warp_index()
    T.ptx.st.global_.u32(out.at(T.tid.x), 0)               # top level
    with T.if_(w == 0, uniform=True):
        with T.range(2) as i:
            T.ptx.st.global_.u32(out.at(T.tid.x), i)       # if > for
    with T.else_():
        T.ptx.st.global_.u32(out.at(T.tid.x), 7)           # else side


def _stores(kir):
    return [i for i in kir.instructions() if i.binding.name == "st"]


def test_chain_lists_the_enclosing_constructs_outermost_first():
    kir = nested.specialize()
    top, inner, other = _stores(kir)
    s = Structure(kir)
    assert s.chain(top) == ()
    (st_if, part_if), (st_for, part_for) = s.chain(inner)
    assert (type(st_if).__name__, part_if, type(st_for).__name__, part_for) == \
        ("If", "then", "For", "body")
    assert s.chain(other) == ((st_if, "else"),)
    assert s.innermost_branch(inner) is st_for and s.innermost_loop(inner) is st_for
    assert s.innermost_branch(top) is None and s.innermost_loop(other) is None
    assert construct_label(st_if) == "the branch (uniform)" and construct_label(st_for) == \
        "the loop"


def test_split_point_is_the_first_construct_the_others_did_not_enter():
    kir = nested.specialize()
    top, inner, other = _stores(kir)
    s = Structure(kir)
    st_if = s.chain(inner)[0][0]
    ev = SimpleNamespace
    assert s.split_point(inner, [ev(instr=other)]) is st_if      # took the else side
    assert s.split_point(inner, [ev(instr=top)]) is st_if        # never got past the top
    assert s.split_point(inner, [ev(instr=inner)]) is None       # went the same way
    assert s.split_point(inner, [ev(instr=None)]) is st_if       # engine events name nothing
