"""The PTX emitter's shared window (`tirxh.core.emit_ptx`): variables spelled by their offsets,
the base rounded up at run time when a variable needs more than 16 bytes of alignment, generic
addresses of window variables, and the errors for uses the window cannot serve."""

import re

import pytest

import tirxh.lang as T
from tirxh.core.compiler import compile_kernel
from tirxh.core.emit_ptx import emit_ptx
from tirxh.core.errors import CompileError
from tirxh.core.registry import default_targets


@T.kernel(grid=1, block=32)
def rounded(out: T.gptr[T.u32]):
    """A 1024-aligned tile behind 2564 bytes of small variables (decode_attention's shape: the
    small ones are declared after the tile there, here before it)."""
    small = T.shared(T.u8, (2564,), name="small")
    tile = T.shared(T.bf16, (64, 64), align=1024, swizzle=128, name="tile")
    bar = T.mbarrier(1, name="bar")
    T.ptx.st.shared.u8(small.at(5), 1)
    T.ptx.mbarrier.init.b64(bar[0].addr, 1)  # a generic-space form: [bar] is its generic address
    T.ptx.st.global_.u32(out.at(0), tile.ptr())


def test_the_window_is_one_extern_declaration_rounded_up_at_run_time():
    ptx = rounded.ptx("sm_90a")
    assert "\t.shared" not in ptx and ".extern .shared .align 1024 .b8 tirx_dsmem[];" in ptx
    assert "//   tile: +0 (8192 bytes, align 1024, swizzle 128)" in ptx
    assert "//   small: +8192 (2564 bytes, align 16)" in ptx
    prologue = ("\tmov.u32 \t%tirx_smem, tirx_dsmem;\n\tadd.u32 \t%tirx_smem, %tirx_smem, 1023;\n"
                "\tand.b32 \t%tirx_smem, %tirx_smem, -1024;\n"
                "\tcvt.u64.u32 \t%tirx_gsmem, %tirx_smem;\n"
                "\tcvta.shared.u64 \t%tirx_gsmem, %tirx_gsmem;\n")
    assert prologue in ptx
    assert "st.shared.u8 \t[%tirx_smem+8197], 1;" in ptx
    assert "mbarrier.init.b64 \t[%tirx_gsmem+10760], 1;" in ptx
    assert re.search(r"mov\.u32 \t%ru\d+, %tirx_smem;", ptx)  # tile.ptr(): offset 0


def test_the_rounded_window_assembles_and_the_launch_pays_the_slack():
    ck = compile_kernel(rounded, "sm_90a")
    assert ck.cubin[:4] == b"\x7fELF" and ck.resources.smem_static == 0
    md = ck.launch_metadata()
    assert md["dynamic_smem"] == 8192 + 2564 + 4 + 8 + 1008  # bar at 10760 (8-aligned), slack
    # SASS: the base is masked to 1024 bytes at run time
    assert "0xfffffc00" in ck.sass


def test_a_window_variable_in_another_state_space_is_an_error():
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        b = T.shared(T.u32, (64,), align=1024, name="b")
        T.ptx.st.global_.u32(out.at(0), T.ptx.ld.global_.u32(b.at(1)))

    with pytest.raises(CompileError, match=r"in kernel 'k': ld\.global\.u32: shared variable 'b' "
                                           r"addressed in the \.global state space"):
        k.ptx("sm_90a")


def test_a_window_variable_as_a_value_other_than_mov_is_an_error():
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u64]):
        b = T.shared(T.bf16, (64, 64), align=1024, swizzle=128, name="b")
        T.ptx.st.global_.u64(out.at(0), T.ptx.cvta.shared.u64(b.sym))

    with pytest.raises(CompileError, match=r"cvta\.shared\.u64: the address of shared variable "
                                           r"'b' as an operand; take it with mov\.u32"):
        k.ptx("sm_90a")


def test_a_window_variable_in_an_operand_the_binding_does_not_describe_is_an_error():
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        b = T.shared(T.u32, (64,), align=1024, name="b")
        T.ptx.st.shared.u32(b.at(1), 0)

    kir = k.specialize()
    st = next(i for i in kir.body if getattr(i, "spelling", "") == "st.shared.u32")
    st.operands = st.operands + (st.operands[0],)  # a third operand: st has two specs

    with pytest.raises(CompileError, match=r"st\.shared\.u32: shared variable 'b' as operand 3, "
                                           r"which the binding does not describe"):
        emit_ptx(kir, default_targets().get("sm_90a"))
