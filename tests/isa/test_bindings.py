"""Spelling matching, suggestions, operand checks and target legality of the built-in bindings.

Each user error is checked for its message and for pointing at the user's line (``# MARK``).
"""

import inspect

import pytest

import tirxh.lang as T
from tirxh.core.bindings import (
    SYNC_ROLES, Binding, InstructionSet, SpellingError, operands, opt, slot,
)
from tirxh.core.emit_ptx import CompileError, emit_ptx
from tirxh.core.legalize import legalize
from tirxh.core.lang.trace import TraceError
from tirxh.core.reference import builtin_toolset

ISA, TARGETS = builtin_toolset()
HERE = __file__


def _line_of(fn, needle: str = "# MARK") -> int:
    src, first = inspect.getsourcelines(fn)
    for i, line in enumerate(src):
        if needle in line:
            return first + i
    raise AssertionError(f"{needle!r} not in {fn.__name__}")


def _trace_error(kernel) -> TraceError:
    with pytest.raises(TraceError) as ei:
        kernel.specialize(isa=ISA)
    assert ei.value.loc.file == HERE
    assert ei.value.loc.line == _line_of(kernel.__wrapped__)
    return ei.value


def _compile_error(kernel, target: str) -> CompileError:
    k = kernel.specialize(isa=ISA)
    with pytest.raises(CompileError) as ei:
        legalize(k, TARGETS.get(target))  # the pipeline's legalize stage, before emission
    assert ei.value.loc.file == HERE
    assert ei.value.loc.line == _line_of(kernel.__wrapped__)
    return ei.value


def _instrs(kernel):
    return [i for i in kernel.specialize(isa=ISA).instructions() if i.opcode != "ld"
            and not i.spelling.startswith("cvta")]


# --- spelling matching --------------------------------------------------------------------------

@pytest.mark.parametrize("spelling,name,mods", [
    ("ld.global.v4.f32", "ld", {"ss": "global", "vec": "v4", "type": "f32", "nc": None}),
    ("ld.global.nc.L1::no_allocate.v2.b32", "ld", {"nc": "nc", "evict": "L1::no_allocate"}),
    ("add.rn.f16x2", "add.h", {"rnd": "rn", "type": "f16x2"}),
    ("add.f32", "add.f", {"type": "f32"}),
    ("add.s32", "add.int", {"type": "s32", "sat": None}),
    ("cvt.rn.satfinite.e4m3x2.f32", "cvt", {"sat": "satfinite", "dtype": "e4m3x2"}),
    ("mbarrier.arrive.expect_tx.shared::cta.b64", "mbarrier.arrive.expect_tx",
     {"ss": "shared::cta"}),
    ("mbarrier.arrive.shared::cta.b64", "mbarrier.arrive", {"ss": "shared::cta"}),
    ("mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.try_wait", {"parity": "parity"}),
    ("mbarrier.expect_tx.relaxed.cta.shared::cta.b64", "mbarrier.expect_tx", {"sem": "relaxed"}),
    ("setmaxnreg.dec.sync.aligned.u32", "setmaxnreg", {"action": "dec"}),
    ("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
     ".multicast::cluster", "cp.async.bulk.tensor", {"dim": "3d"}),
    ("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group", "cp.async.bulk.tensor.store",
     {"dim": "2d"}),
    ("cp.async.bulk.wait_group.read", "cp.async.bulk.wait_group", {"read": "read"}),
    ("cp.async.ca.shared.global", "cp.async", {"cop": "ca"}),
    ("fence.proxy.async.shared::cta", "fence.proxy.async", {"ss": "shared::cta"}),
    ("fence.acq_rel.gpu", "fence", {"sem": "acq_rel"}),
    ("barrier.cluster.arrive.release.aligned", "barrier.cluster.arrive", {"sem": "release"}),
    ("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", "wgmma.mma_async.ss",
     {"shape": "m64n256k16"}),
    ("tcgen05.wait::ld.sync.aligned", "tcgen05.wait", {"op": "wait::ld"}),
    ("min.xorsign.abs.f32", "min.f", {"xorsign": "xorsign", "abs": "abs"}),
])
def test_spelling_resolves_to_binding(spelling, name, mods):
    b, got = ISA.lookup(spelling)
    assert b.name == name
    for k, v in mods.items():
        assert got[k] == v


@pytest.mark.parametrize("spelling,hint", [
    ("ld.globl.f32", "did you mean ld.global.f32"),
    ("mbarier.init.b64", "did you mean mbarrier"),
    ("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf61", "bf16"),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::byte",
     "mbarrier::complete_tx::bytes"),
])
def test_near_misspelling_gets_a_suggestion(spelling, hint):
    with pytest.raises(SpellingError) as ei:
        ISA.lookup(spelling)
    assert hint in str(ei.value)


@pytest.mark.parametrize("spelling,why", [
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f16", "accumulates in one type"),
    ("mma.sync.aligned.m16n8k16.row.col.f16.bf16.bf16.f16", "accumulates in .f32"),
    ("mma.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32", "takes shapes .m16n8k16, .m16n8k8"),
    ("wgmma.mma_async.sync.aligned.m64n128k32.f32.bf16.bf16", "K = 16"),
    ("wgmma.mma_async.sync.aligned.m64n40k32.s32.s8.s8", "takes N in"),
    ("wgmma.mma_async.sync.aligned.m64n64k16.f16.bf16.bf16", "accumulates in f32"),
    ("redux.sync.and.u32", "takes .b32"),
    ("tcgen05.ld.sync.aligned.16x256b.x64.b32", "at most 128"),
])
def test_cross_slot_rules_explain_themselves(spelling, why):
    with pytest.raises(SpellingError, match="no binding accepts") as ei:
        ISA.lookup(spelling)
    assert why in str(ei.value)


def test_bra_is_refused_with_the_structured_alternative():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        T.ptx.bra("somewhere")  # MARK

    e = _trace_error(k)
    assert "emitted only by structured control flow" in str(e) and "T.if_" in str(e)


# --- operand checks ----------------------------------------------------------------------------

def test_operand_count_error_lists_the_operands():
    @T.kernel(block=128)
    def k(out: T.gptr[T.u32]):
        bar = T.mbarrier(1)
        T.ptx.mbarrier.try_wait.parity.shared__cta.b64(bar[0])  # MARK

    e = _trace_error(k)
    assert ("takes 2-3 operands (m, parity, suspend_hint?) with the destination 'd' left out, "
            "or 3-4 operands (d, m, parity, suspend_hint?) with it; got 1") in str(e)


def test_operand_type_error_names_operand_and_types():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        x = T.reg(T.f32)
        T.ptx.shfl.sync.bfly.b64(x, 1, 31, -1)  # MARK

    with pytest.raises(TraceError, match="no binding accepts 'shfl.sync.bfly.b64'"):
        k.specialize(isa=ISA)

    @T.kernel(block=32)
    def k2(out: T.gptr[T.u32]):
        x = T.reg(T.f64)
        T.ptx.shfl.sync.bfly.b32(x, 1, 31, -1)  # MARK

    e = _trace_error(k2)
    assert "operand 'a' expects type .b32, got register of type .f64" in str(e)


def test_mma_fragment_counts_follow_the_shape():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        a = T.fragment(T.b32, 4)
        b = T.fragment(T.b32, 2)
        c = T.fragment(T.f32, 4)
        T.ptx.mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32(c, a, b, c)
        T.ptx.mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32(c, a, b, c)  # MARK

    e = _trace_error(k)
    assert "operand 'a' expects a vector of 2 elements (got 4)" in str(e)


def test_wgmma_forms_are_told_apart_by_operand_a():
    @T.kernel(block=128)
    def k(out: T.gptr[T.u32]):
        acc = T.fragment(T.f32, 64)
        da, db = T.reg(T.b64), T.reg(T.b64)
        p = T.reg(T.pred)
        frag = T.fragment(T.b32, 4)
        T.ptx.wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16(acc, da, db, p, 1, 1, 0, 0)
        T.ptx.wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16(acc, frag, db, p, 1, 1, 0)

    ss, rs = _instrs(k)
    assert (ss.binding.name, rs.binding.name) == ("wgmma.mma_async.ss", "wgmma.mma_async.rs")
    assert len(ss.operands[0]) == 64 and len(rs.operands[1]) == 4
    # accumulators are read and written; the callable operand list drives defs/uses
    acc0, frag0 = ss.operands[0].elems[0], rs.operands[1].elems[0]
    assert acc0 in ss.defs() and acc0 in ss.uses() and frag0 in rs.uses()
    assert frag0 not in rs.defs()


def test_wgmma_wrong_operands_list_each_form():
    @T.kernel(block=128)
    def k(out: T.gptr[T.u32]):
        acc = T.fragment(T.f32, 8)
        da = T.reg(T.b64)
        p = T.reg(T.pred)
        wg = T.ptx.wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
        wg(acc, da, da, p, 1, 1, 0, 0)  # MARK

    e = _trace_error(k)
    assert "no form of wgmma.mma_async" in str(e)
    assert "wgmma.mma_async.ss:" in str(e) and "wgmma.mma_async.rs:" in str(e)
    assert "a vector of 64 elements (got 8)" in str(e)


def test_mov_packs_and_unpacks_by_operand_shape():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        lo, hi = T.reg(T.b32), T.reg(T.b32)
        d = T.ptx.mov.b64([lo, hi])
        T.ptx.mov.b64([lo, hi], d)
        T.ptx.mov.b64(d, d)
        h = [T.reg(T.b16) for _ in range(4)]
        T.ptx.mov.b64(h)

    names = [i.binding.name for i in _instrs(k)]
    assert names == ["mov.pack", "mov.unpack", "mov", "mov.pack4"]
    ptx = emit_ptx(k.specialize(isa=ISA), TARGETS.get("sm_90a"))
    assert "mov.b64 \t%rd1, {%r1, %r2};" in ptx.replace("  ", " ")


def test_memory_operand_spaces_resolve_from_modifiers():
    b, mods = ISA.lookup("ld.shared::cta.v4.b32")
    assert [o.space for o in b.operand_specs(mods)] == [None, "shared::cta"]
    b, mods = ISA.lookup("ld.f32")
    assert b.operand_specs(mods)[1].space == "generic"
    b, mods = ISA.lookup("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes")
    assert [o.space for o in b.operand_specs(mods) if o.kind == "m"] == \
        ["shared::cluster", "global", "shared::cta"]
    assert b.effects_for(mods).async_proxy


def test_cache_hint_adds_the_policy_operand():
    b, mods = ISA.lookup("ld.global.L2::cache_hint.f32")
    assert [o.name for o in b.operand_specs(mods)] == ["d", "m", "cache_policy"]
    b, mods = ISA.lookup("ld.global.f32")
    assert [o.name for o in b.operand_specs(mods)] == ["d", "m"]


def test_remembered_operand_specs_follow_the_modifiers():
    """operand_specs remembers each modifiers' answer (tracing asks at every call): asking for
    one form after another, in either order, still gives each form its own operands."""
    b, v4 = ISA.lookup("ld.global.v4.f32")
    b2, v2 = ISA.lookup("ld.global.v2.f32")
    assert b is b2
    for _ in range(2):
        assert b.operand_specs(v4)[0].count == 4 and b.operand_specs(v2)[0].count == 2
    assert b.operand_specs(dict(v4)) == b.operand_specs(v4)


def test_remembered_candidates_are_fresh_and_forgotten_when_a_binding_is_added():
    """candidates remembers each spelling's match (tracing asks at every call), hands every
    caller its own modifier dicts, and a binding added later is seen."""
    isa = InstructionSet()
    isa.add(Binding("toy", "toy", (slot("t", "u32 f32"),), operands("d:$t a:$t"), "a toy"))
    first = isa.candidates("toy.u32")
    first[0][1]["t"] = "mangled"
    assert [(b.name, m) for b, m in isa.candidates("toy.u32")] == [("toy", {"t": "u32"})]
    with pytest.raises(SpellingError):
        isa.candidates("toy.s32")
    isa.add(Binding("toy.s", "toy", (slot("t", "s32"),), operands("d:$t a:$t"), "signed"))
    assert [b.name for b, _ in isa.candidates("toy.s32")] == ["toy.s"]
    assert [b.name for b, _ in isa.candidates("toy.u32")] == ["toy"]


# --- target legality -----------------------------------------------------------------------------

def _wgmma_kernel():
    @T.kernel(block=128)
    def k(out: T.gptr[T.u32]):
        acc = T.fragment(T.f32, 4)
        da = T.reg(T.b64)
        wg = T.ptx.wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16
        wg(acc, da, da, T.reg(T.pred), 1, 1, 0, 0)  # MARK
    return k


@pytest.mark.parametrize("target", ["sm_80", "sm_100a", "sm_110a"])
def test_wgmma_is_rejected_off_sm90a_at_the_users_line(target):
    e = _compile_error(_wgmma_kernel(), target)
    assert "wgmma" in str(e) and target in str(e)
    assert ("binding set 'sm90a'" in str(e)) or ("exists only on sm_90a" in str(e))


def test_wgmma_is_accepted_on_sm90a():
    ptx = emit_ptx(_wgmma_kernel().specialize(isa=ISA), TARGETS.get("sm_90a"))
    assert "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16" in ptx


def test_tcgen05_is_rejected_on_sm90a_and_sm80():
    @T.kernel(block=128)
    def k(out: T.gptr[T.u32]):
        T.ptx.tcgen05.fence__before_thread_sync()  # MARK

    for target in ("sm_90a", "sm_80"):
        e = _compile_error(k, target)
        assert "binding set 'sm100a'" in str(e)
    assert "tcgen05.fence::before_thread_sync" in emit_ptx(k.specialize(isa=ISA),
                                                           TARGETS.get("sm_100a"))


def test_setmaxnreg_needs_an_arch_specific_hopper_or_blackwell():
    @T.kernel(block=128)
    def k(out: T.gptr[T.u32]):
        T.ptx.setmaxnreg.inc.sync.aligned.u32(240)  # MARK

    e = _compile_error(k, "sm_80")
    assert "setmaxnreg" in str(e)
    for target in ("sm_90a", "sm_100a", "sm_110a"):
        assert "setmaxnreg.inc.sync.aligned.u32" in emit_ptx(k.specialize(isa=ISA),
                                                             TARGETS.get(target))


def test_newer_modifier_is_rejected_on_an_older_target():
    @T.kernel(block=32)
    def k(out: T.gptr[T.s32]):
        x = T.reg(T.s32)
        T.ptx.min.relu.s32(x, x)  # MARK

    e = _compile_error(k, "sm_80")
    assert "min.int with .relu needs sm_90 or newer; target is sm_80" in str(e)


def test_newer_ptx_isa_modifier_is_rejected_on_an_older_target():
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        T.ptx.ld.global_.b128(out.at(0))  # MARK

    e = _compile_error(k, "sm_80")
    assert "ld with .b128 needs PTX ISA 8.3; target sm_80 emits 8.0" in str(e)


def test_language_helper_spellings_stay_valid():
    """The mbarrier / role helpers of the language emit spellings these tables must accept."""
    @T.kernel(block=128)
    def k(out: T.gptr[T.u32]):
        bar = T.mbarrier(2)
        bar[0].init(1)
        bar[0].arrive()
        bar[1].arrive_expect_tx(1024)
        bar[1].expect_tx(64)
        bar[0].wait(0)
        bar[1].inval()
        with T.role(T.warpgroup_index() == 0, dec=40):
            pass

    names = {i.binding.name for i in k.specialize(isa=ISA).instructions()}
    assert {"mbarrier.init", "mbarrier.arrive", "mbarrier.arrive.expect_tx", "mbarrier.expect_tx",
            "mbarrier.try_wait", "mbarrier.inval", "setmaxnreg"} <= names
    emit_ptx(k.specialize(isa=ISA), TARGETS.get("sm_90a"))


# --- the tables themselves ------------------------------------------------------------------------

def test_effects_use_documented_roles():
    for b in ISA:
        assert b.effects.sync is None or b.effects.sync in SYNC_ROLES, (b.name, b.effects.sync)
        assert b.doc and len(b.doc) < 400, b.name


def test_async_proxy_is_declared_for_tma_wgmma_and_tcgen05_mma():
    for name in ("cp.async.bulk", "cp.async.bulk.store", "cp.async.bulk.tensor",
                 "cp.async.bulk.tensor.store", "wgmma.mma_async.ss", "wgmma.mma_async.rs",
                 "tcgen05.mma", "tcgen05.mma.ts"):
        assert ISA.by_name[name].effects.async_proxy, name
    assert not ISA.by_name["cp.async"].effects.async_proxy  # non-bulk cp.async: generic proxy


def test_binding_names_are_unique_and_owned():
    isa = InstructionSet()
    b = Binding("x", "x", (), (), "doc")
    isa.add(b, owner="a")
    with pytest.raises(ValueError, match="registered twice \\(by 'a' and 'b'\\)"):
        isa.add(b, owner="b")


def test_operand_parser_reads_spaces_and_counts():
    ops = operands("dst=m@shared::cta tmap=tref::$dim d=dv:b32:4 c:u32? e=dpair:b32|pred")
    assert [(o.name, o.kind, o.type, o.count, o.optional, o.space) for o in ops] == [
        ("dst", "m", None, None, False, "shared::cta"),
        ("tmap", "tref", None, "$dim", False, None),
        ("d", "dv", "b32", 4, False, None),
        ("c", "a", "u32", None, True, None),
        ("e", "dpair", "b32|pred", None, False, None),
    ]
    b = Binding("t", "t", (slot("dim", "1d 2d 3d"), opt("ss", "shared")), ops, "doc")
    specs = b.operand_specs(b.match(["3d"]))
    assert specs[1].count == 3
