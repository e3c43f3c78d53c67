"""The tracer: what each language construct records in the IR."""

import pytest

import tirxh.lang as T
from tirxh.core import ir
from tirxh.core.errors import TraceError
from tirxh.core.irprint import format_kernel


def _instrs(k, **consts):
    return [i.spelling for i in k.specialize(**consts).instructions()]


def test_operators_are_one_instruction_each():
    @T.kernel(block=32)
    def k(x: T.f32, n: T.u32, s: T.s32):
        a = n * 3 + 1
        b = a >> 2
        c = s >> 1
        d = (n & 7) ^ 1
        e = x / 2.0
        f = n % 5
        g = -s
        p = (a < n) | (b >= 4)

    body = _instrs(k)[3:]  # after the three ld.param
    assert body == ["mul.lo.u32", "add.u32", "shr.u32", "shr.s32", "and.b32", "xor.b32",
                    "div.rn.f32", "rem.u32", "neg.s32", "setp.lt.u32", "setp.ge.u32", "or.pred"]


def test_omitted_destination_returns_fresh_register_and_explicit_one_is_used():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        r = T.reg(T.u32)
        got = T.ptx.add.u32(r, T.tid.x, 1)
        assert got is None
        fresh = T.ptx.add.u32(r, 2)
        assert isinstance(fresh, T.Register) and fresh is not r and fresh.dtype == T.u32
        v4 = T.ptx.ld.global_.v4.u32(out.at(0))
        assert len(v4) == 4 and all(x.dtype == T.u32 for x in v4)

    k.specialize()


def test_guard_and_negated_guard():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        p = T.tid.x < 4
        T.ptx.st.global_.u32(out.at(0), 1, pred=p)
        T.ptx.st.global_.u32(out.at(1), 2, pred=~p)

    stores = [i for i in k.specialize().instructions() if i.opcode == "st"]
    assert stores[0].guard[1] is False and stores[1].guard[1] is True
    assert stores[0].guard[0] is stores[1].guard[0]
    ptx = k.ptx("sm_90a")
    assert "@%p1 st.global.u32" in ptx and "@!%p1 st.global.u32" in ptx


def test_structured_control_flow_is_kept():
    @T.kernel(block=32)
    def k(n: T.u32):
        with T.range(0, n, 2) as i:
            with T.if_(i == 4):
                T.break_()
        with T.while_(lambda: T.tid.x < n):
            T.break_()
        with T.loop():
            T.break_(T.tid.x == 0)

    body = k.specialize().body.stmts
    loops = [s for s in body if isinstance(s, (ir.For, ir.Loop))]
    assert isinstance(loops[0], ir.For) and isinstance(loops[0].step, ir.Imm)
    assert isinstance(loops[0].body.stmts[1], ir.If)
    assert isinstance(loops[1], ir.Loop) and isinstance(loops[1].body.stmts[-2], ir.Break)
    assert loops[1].body.stmts[-2].negate  # while: leave when the condition does not hold
    assert isinstance(loops[2], ir.Loop)


def test_python_loops_unroll_at_trace_time():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32], N: T.const = 3):
        for j in range(N):
            T.ptx.st.global_.u32(out.at(j), j)

    assert _instrs(k, N=5).count("st.global.u32") == 5
    assert _instrs(k).count("st.global.u32") == 3


def test_specializations_are_cached_per_constants():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32], N: T.const = 3):
        T.ptx.st.global_.u32(out.at(0), N)

    assert k.specialize(N=1) is k.specialize(N=1)
    assert k.specialize(N=1) is not k.specialize(N=2)


def test_specialize_once_traces_the_same_ir_and_keeps_none():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32], N: T.const = 3):
        for i in range(N):
            T.ptx.st.global_.u32(out.at(i), N)

    once = k.specialize_once(N=2)
    assert once is not k.specialize_once(N=2) and k._cache == {}
    assert format_kernel(once) == format_kernel(k.specialize(N=2))
    assert format_kernel(k.specialize_once()) == format_kernel(k.specialize())


def test_shared_variables_share_one_window():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        s = T.shared(T.u32, (4, 8), align=16, name="tile")
        d1 = T.shared(T.f32, (100,), dynamic=True)
        d2 = T.shared(T.bf16, (64, 64), align=1024, dynamic=True)
        assert s.at(1, 2) == ir.Addr(ir.Sym("tile", "shared"), 40)  # the variable's own symbol
        assert d2.at(1, 0) == ir.Addr(ir.Sym(d2.var.name, "shared"), 128)
        T.ptx.st.shared.u32(s.at(T.tid.x, 1), 0)
        T.ptx.st.shared.f32(d1.at(3), 1.0)

    kir = k.specialize()
    # every variable in the window, the largest alignment first: d2, then tile and d1 in order
    assert [(v.name, v.dynamic, v.offset) for v in kir.shared] == [
        ("tile", True, 8192), ("d1", True, 8192 + 128), ("d2", True, 0)]
    assert kir.dynamic_align == 1024 and kir.smem_base_align == 1024 and kir.smem_slack == 1008
    assert kir.dynamic_smem == 8192 + 128 + 400 + 1008  # the slack rounds the base up
    ptx = k.ptx("sm_90a")
    assert "\t.shared" not in ptx  # no static variable in front of the window
    assert ".extern .shared .align 1024 .b8 tirx_dsmem[];" in ptx
    assert "mov.u32 \t%tirx_smem, tirx_dsmem;\n\tadd.u32 \t%tirx_smem, %tirx_smem, 1023;\n" \
           "\tand.b32 \t%tirx_smem, %tirx_smem, -1024;" in ptx
    assert "add.u32 \t%ru2, %tirx_smem, 8192;\n\tmad.lo.u32 \t%ru3, %ru1, 32, %ru2;" in ptx
    assert "[%ru3+4]" in ptx and "[%tirx_smem+8332]" in ptx
    assert "//   d2: +0 (8192 bytes, align 1024)" in ptx and "//   tile: +8192 (128 bytes" in ptx


def test_a_window_of_16_byte_alignment_needs_no_rounding():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        a = T.shared(T.u32, (8,), name="a")
        b = T.shared(T.u32, (8,), align=8, name="b")
        T.ptx.st.shared.u32(b.at(T.tid.x), 0)
        T.ptx.st.global_.u32(out.at(0), a.ptr())

    kir = k.specialize()
    assert kir.smem_base_align == 0 and kir.smem_slack == 0 and kir.dynamic_smem == 64
    ptx = k.ptx("sm_90a")
    assert "%tirx_smem" not in ptx and ".extern .shared .align 16 .b8 tirx_dsmem[];" in ptx
    assert "mov.u32 \t%ru2, tirx_dsmem+32;" in ptx and "mov.u32 \t%ru4, tirx_dsmem;" in ptx


def test_the_split_layout_keeps_static_declarations_before_the_window():
    @T.kernel(block=32, smem_layout="split")
    def k(out: T.gptr[T.u32]):
        s = T.shared(T.u8, (2564,), name="pad")
        w = T.shared(T.u32, (256,), align=1024, dynamic=True, name="win")
        T.ptx.st.shared.u8(s.at(7), 1)
        T.ptx.st.shared.u32(w.at(2), 0)

    kir = k.specialize()
    assert [(v.name, v.dynamic, v.offset) for v in kir.shared] == [("pad", False, 0),
                                                                    ("win", True, 0)]
    assert kir.smem_base_align == 0 and kir.dynamic_smem == 1024
    ptx = k.ptx("sm_90a")
    assert ".shared .align 16 .b8 pad[2564];" in ptx and "[pad+7]" in ptx
    assert "[tirx_dsmem+8]" in ptx and "%tirx_smem" not in ptx


def test_bad_shared_layout_options_are_errors():
    with pytest.raises(TraceError, match=r"kernel 'k': smem_layout='packed'; expected one of "
                                         r"'window', 'split'"):
        @T.kernel(block=32, smem_layout="packed")
        def k(out: T.gptr[T.u32]):
            pass

    @T.kernel(block=32)
    def sw(out: T.gptr[T.u32]):
        T.shared(T.bf16, (64, 64), align=512, swizzle=128)

    with pytest.raises(TraceError, match=r"swizzle=128, align=512\): a 128-byte swizzle repeats "
                                         r"every 1024 bytes .* needs align=1024 or more"):
        sw.specialize()


def test_immediates_are_exact():
    @T.kernel(block=32)
    def k(out: T.gptr[T.f32], x: T.f32):
        T.ptx.st.global_.f32(out.at(0), x * 0.1)
        T.ptx.st.global_.f32(out.at(1), x + (-2.5))

    ptx = k.ptx("sm_90a")
    assert "0f3DCCCCCD" in ptx and "0fC0200000" in ptx


def test_pipeline_cursor_emits_documented_instructions():
    @T.kernel(block=32)
    def k(n: T.u32):
        ring = T.pipeline(3)
        ring.advance()

    assert _instrs(k)[1:] == ["mov.u32", "mov.u32", "add.u32", "setp.eq.u32", "mov.u32",
                              "xor.b32"]
    guarded = [i for i in k.specialize().instructions() if i.guard is not None]
    assert [i.spelling for i in guarded] == ["mov.u32", "xor.b32"]


def test_ir_text_names_source_lines():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        T.ptx.st.global_.u32(out.at(0), 7)

    text = k.ir
    assert text.startswith("kernel k(out: ptr<u32>)")
    assert "st.global.u32" in text and "test_tracer.py:" in text


def test_string_spelling_form():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        v = T.ptx["add.u32"](T.tid.x, 1)
        T.ptx["st.global.u32"](out.at(0), v)

    assert _instrs(k)[-2:] == ["add.u32", "st.global.u32"]


def test_mma_fragment_operands_are_checked_for_length():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        acc = T.fragment(T.f32, 3, init=0.0)
        T.ptx.mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32(
            acc, [T.reg(T.b32)] * 4, [T.reg(T.b32)] * 2, acc)

    with pytest.raises(T.TraceError, match="a vector of 4 elements"):
        k.specialize()


def test_launch_bound_directives():
    @T.kernel(block=128, max_threads=256, min_blocks=2, maxnreg=64)
    def k(out: T.gptr[T.u32]):
        T.ptx.st.global_.u32(out.at(0), 1)

    ptx = k.ptx("sm_90a")
    assert ".maxntid 256, 1, 1" in ptx and ".minnctapersm 2" in ptx and ".maxnreg 64" in ptx
    assert k.compile("sm_90a").resources.registers <= 64

    @T.kernel(block=lambda B: B, min_blocks=lambda B: 2048 // B, maxnreg=lambda B: 65536 // 2048)
    def per_case(out: T.gptr[T.u32], B: T.const = 128):
        T.ptx.st.global_.u32(out.at(0), 1)

    for b in (128, 512):  # launch bounds follow the constants, like the block
        ptx = per_case.ptx("sm_90a", B=b)
        assert f".minnctapersm {2048 // b}" in ptx and ".maxnreg 32" in ptx

    @T.kernel(block=256, max_threads=128)
    def bad(out: T.gptr[T.u32]):
        pass

    from tirxh.core.emit_ptx import CompileError
    with pytest.raises(CompileError, match="max_threads=128 is below the block's 256 threads"):
        bad.ptx("sm_90a")
