"""Each class of user error is reported with its message at the user's file:line."""

import inspect

import pytest

import tirxh.lang as T
from tirxh.core.bindings import Binding, InstructionSet, operands
from tirxh.core.emit_ptx import CompileError
from tirxh.core.lang.trace import TraceError
from tirxh.core.registry import default_isa

HERE = __file__


def _line_of(fn, needle: str) -> int:
    src, first = inspect.getsourcelines(fn)
    for i, line in enumerate(src):
        if needle in line:
            return first + i
    raise AssertionError(f"{needle!r} not in {fn.__name__}")


def _trace_error(kernel, **consts) -> TraceError:
    with pytest.raises(TraceError) as ei:
        kernel.specialize(**consts)
    return ei.value


def test_unknown_opcode_suggests_near_name():
    @T.kernel(block=32)
    def k(out: T.gptr[T.f32]):
        T.ptx.lod.global_.f32(out.at(0))  # MARK

    e = _trace_error(k)
    assert e.loc.file == HERE and e.loc.line == _line_of(k.__wrapped__, "# MARK")
    assert "unknown PTX instruction 'lod.global.f32'" in str(e)
    assert "did you mean ld" in str(e)


def test_bad_modifier_names_slot_and_suggests_spelling():
    @T.kernel(block=32)
    def k(out: T.gptr[T.f32]):
        T.ptx.ld.globl.f32(out.at(0))  # MARK

    e = _trace_error(k)
    assert e.loc.line == _line_of(k.__wrapped__, "# MARK")
    assert "no binding accepts 'ld.globl.f32'" in str(e)
    assert "did you mean ld.global.f32" in str(e)


def test_wrong_operand_count():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        T.ptx.add.u32(T.tid.x)  # MARK

    e = _trace_error(k)
    assert e.loc.line == _line_of(k.__wrapped__, "# MARK")
    assert ("add.u32 takes 2 operands (a, b) with the destination 'd' left out, or 3 operands "
            "(d, a, b) with it; got 1") in str(e)


def test_operand_count_is_the_users_when_the_destination_is_left_out():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        x = T.ptx.ld.global_.f32(out.at(0))
        T.ptx.shfl.sync.bfly.b32(x, 1, 0x1F)  # MARK: the member mask is missing

    e = _trace_error(k)
    assert e.loc.line == _line_of(k.__wrapped__, "# MARK")
    assert ("shfl.sync.bfly.b32 takes 4 operands (a, b, c, membermask) with the destination 'd' "
            "left out, or 5 operands (d, a, b, c, membermask) with it; got 3") in str(e)


def test_operand_count_without_a_destination():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        T.ptx.st.global_.u32(out.at(0))  # MARK

    assert "st.global.u32 takes 2 operands (m, a); got 1" in str(_trace_error(k))


def test_wrong_operand_type():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32], x: T.f32):
        T.ptx.add.u32(T.tid.x, x)  # MARK

    e = _trace_error(k)
    assert e.loc.line == _line_of(k.__wrapped__, "# MARK")
    assert "expects type .u32, got register of type .f32" in str(e)


def test_mixed_types_in_operator():
    @T.kernel(block=32)
    def k(x: T.f32, n: T.u32):
        y = x + n  # MARK  # noqa: F841

    e = _trace_error(k)
    assert e.loc.line == _line_of(k.__wrapped__, "# MARK")
    assert "different types f32 and u32" in str(e)


def test_python_if_on_register():
    @T.kernel(block=32)
    def k(n: T.u32):
        if T.tid.x < n:  # MARK
            pass

    e = _trace_error(k)
    assert e.loc.line == _line_of(k.__wrapped__, "# MARK")
    assert "no Python truth value" in str(e) and "T.if_" in str(e)


def test_else_without_if():
    @T.kernel(block=32)
    def k(n: T.u32):
        with T.else_():  # MARK
            pass

    e = _trace_error(k)
    assert e.loc.line == _line_of(k.__wrapped__, "# MARK")
    assert "must directly follow" in str(e)


def test_break_outside_loop():
    @T.kernel(block=32)
    def k(n: T.u32):
        T.break_()  # MARK

    e = _trace_error(k)
    assert e.loc.line == _line_of(k.__wrapped__, "# MARK")
    assert "outside a device loop" in str(e)


def test_parameter_without_annotation():
    with pytest.raises(TraceError, match="needs a TIRx annotation") as ei:
        @T.kernel(block=32)
        def k(n: int):
            pass
    assert ei.value.loc.file == HERE


def test_missing_constant():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32], N: T.const):
        pass

    with pytest.raises(TraceError, match="needs a value for constant 'N'"):
        k.specialize()


def test_a_constant_outside_its_declared_values_is_refused_at_the_kernels_line():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32], ROLL: T.const.one_of(0, 1, 2) = 0):
        T.ptx.st.global_.u32(out.at(0), ROLL)

    assert k.resolve_consts({"ROLL": 2}) == {"ROLL": 2}
    assert ".visible .entry k" in k.ptx("sm_90a", ROLL=1)   # a declared value builds
    for strict in (True, False):   # the plans resolve non-strictly: refused there too
        with pytest.raises(TraceError, match=r"kernel 'k': constant ROLL=3 is not one of the "
                           r"values the kernel has code for: 0, 1, 2") as ei:
            k.resolve_consts({"ROLL": 3}, strict=strict)
        assert ei.value.loc.file == HERE
    with pytest.raises(TraceError, match="ROLL=4 is not one of"):
        k.ptx("sm_90a", ROLL=4)
    assert repr(T.const.one_of(0, 1)) == "T.const.one_of(0, 1)"


def test_a_default_outside_the_declared_values_is_refused_where_the_kernel_is_defined():
    with pytest.raises(TraceError, match=r"the default of constant N=5 is not one of") as ei:
        @T.kernel(block=32)
        def k(out: T.gptr[T.u32], N: T.const.one_of(1, 2) = 5):
            pass
    assert ei.value.loc.file == HERE
    with pytest.raises(ValueError, match="at least one value"):
        T.const.one_of()


def test_block_too_large_for_target():
    @T.kernel(block=2048)
    def k(out: T.gptr[T.u32]):
        pass

    with pytest.raises(CompileError, match="2048 threads; sm_90a allows 1024") as ei:
        k.ptx("sm_90a")
    assert ei.value.loc.file == HERE


def test_instruction_the_target_lacks_is_an_error_at_its_line():
    isa = InstructionSet()
    for b in default_isa():
        isa.add(b)
    isa.add(Binding("future.op", "futureop", (), operands("d:u32"), "an sm_100+ instruction",
                    min_sm=100))

    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        v = T.ptx.futureop()  # MARK
        T.ptx.st.global_.u32(out.at(0), v)

    from tirxh.core.compiler import emit_ptx_for
    with pytest.raises(CompileError, match="needs sm_100 or newer; target is sm_90a") as ei:
        emit_ptx_for(k, "sm_90a", {}, isa=isa)
    assert ei.value.loc.line == _line_of(k.__wrapped__, "# MARK")
    assert "futureop" in emit_ptx_for(k, "sm_100a", {}, isa=isa)


def test_ptxas_error_maps_back_to_python_line():
    # a special register read with the wrong width passes the tracer (special registers are
    # operands the bindings do not type) but ptxas rejects it; the error names the Python line
    from tirxh.core import ir

    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        v = T.ptx.mov.u32(ir.SReg("clock64", T.u64))  # MARK
        T.ptx.st.global_.u32(out.at(0), v)

    with pytest.raises(CompileError) as ei:
        k.compile("sm_90a")
    line = _line_of(k.__wrapped__, "# MARK")
    assert f"comes from {HERE}:{line}" in str(ei.value)


def test_kernel_is_not_callable_on_host():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        pass

    with pytest.raises(TypeError, match="runs on a device"):
        k(1)


def test_language_call_outside_a_kernel():
    with pytest.raises(TraceError, match="only valid inside a @T.kernel body"):
        T.ptx.add.u32(1, 2)


def test_unroll_other_than_one_is_refused():
    @T.kernel(block=32)
    def k(n: T.u32):
        with T.range(n, unroll=4):  # MARK
            pass

    e = _trace_error(k)
    assert e.loc.line == _line_of(k.__wrapped__, "# MARK")
    assert "only unroll=1" in str(e)

    @T.kernel(block=32)
    def ok(n: T.u32):
        with T.range(n, unroll=1):
            pass

    assert '.pragma "nounroll";' in ok.ptx("sm_90a")
