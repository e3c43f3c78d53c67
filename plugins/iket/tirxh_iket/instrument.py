"""The profiling build: an IR pass that turns ``T.iket`` annotations into trace-recording code.

The pass never edits the kernel's cached IR: it returns a new `KernelIR` with one more parameter
(``iket_trace``, a global pointer appended after the user's parameters) and, in place of each
`ir.Annotation`, these instructions (all at the annotation's source line)::

    mov.u64      t, %globaltimer          ; read first: the closest to the annotated point
    mov.u64      c, %clock64
    activemask.b32 m                      ; the lowest active lane writes the record,
    mov.b32      lt, %lanemask_lt         ;   so divergent code still records one event
    and.b32      x, m, lt
    setp.eq.b32  lead, x, 0
    min.u32      slot, seq, CAPACITY-1    ; a full region keeps rewriting its last record
    mad.wide.u32 a, slot, 32, region
    @lead st.global.v2.u64 [a], {t, c}
    @lead st.global.v4.u32 [a+16], {VALID|site, seq, smid, hwwarp}
    add.u32      seq, seq, 1

and, once at kernel entry, a prologue that loads the buffer pointer, computes the warp's region
(``(cta_linear * warps_per_cta + warp_in_cta) * CAPACITY * 32``) and reads ``%smid``/``%warpid``.
No atomics: each warp owns its region. The sequence counter lives in a register of every lane, so
annotations must be warp-uniform (every lane passes them together); in divergent code the two sides
of a branch would write the same slots (the decoder then reports unmatched ranges).
"""

from __future__ import annotations

import dataclasses

from tirxh.api import (CompileError, Trace, TraceError, default_isa, dtype as as_dtype, emit,
                       ir, tracing)

from .layout import PARAM_NAME, RECORD_BYTES, VALID_BIT, Site, TraceLayout

DEFAULT_CAPACITY = 64


class InstrumentError(CompileError):
    """The kernel cannot be instrumented as asked (message names the kernel and the reason); a
    `CompileError`, so a profiling build fails like any other build of a bad kernel."""


def has_annotations(k: ir.KernelIR) -> bool:
    return any(isinstance(s, ir.Annotation) for s in k.walk())


def instrument(k: ir.KernelIR, capacity: int = DEFAULT_CAPACITY, isa=None,
               param: str = PARAM_NAME) -> "tuple[ir.KernelIR, TraceLayout]":
    """The profiling build of `k` and the layout of its trace buffer.

    `capacity`: records per warp (32 bytes each). Raises `InstrumentError` when the kernel has no
    annotations, when `param` clashes with a parameter, or when `capacity` is out of range.
    """
    if not isinstance(capacity, int) or not 1 <= capacity <= (1 << 20):
        raise InstrumentError(f"kernel {k.name!r}: iket capacity must be an int in 1..{1 << 20} "
                              f"records per warp, got {capacity!r}")
    if not has_annotations(k):
        raise InstrumentError(f"kernel {k.name!r} ({k.loc}) has no T.iket annotations; add "
                              "`with T.iket.range(\"name\"):` around the regions to time")
    if any(p.name == param for p in k.params):
        raise InstrumentError(f"kernel {k.name!r}: a parameter is already named {param!r}, the "
                              "name of iket's hidden trace-buffer parameter; rename it")
    if isa is None:
        isa = default_isa()
    return _Pass(k, capacity, isa, param).run()


class _Pass:
    def __init__(self, k: ir.KernelIR, capacity: int, isa, param: str):
        self.k, self.capacity, self.param = k, capacity, param
        self.trace = Trace(k.name, isa)
        self.trace.regs = list(k.regs)  # new registers are numbered after the kernel's own
        self.sites: list[Site] = []
        self.site_ids: dict = {}
        self.per_event = 0
        self.warps_per_cta = -(-k.threads_per_block // 32)

    # -- emission helpers ----------------------------------------------------------------------
    def _emit_block(self, loc: ir.Loc, fn) -> list:
        """Run `fn` under the tracer with every instruction placed at `loc`; return the stmts."""
        t = self.trace
        saved_blocks, saved_loc = t.blocks, t.loc_override
        t.blocks, t.loc_override = [ir.Block()], loc
        try:
            with tracing(t):
                fn()
        except TraceError as e:  # a binding this pass relies on is missing: a plugin bug
            raise InstrumentError(f"kernel {self.k.name!r}: iket instrumentation failed: "
                                  f"{e.message}") from None
        finally:
            stmts = t.blocks[0].stmts
            t.blocks, t.loc_override = saved_blocks, saved_loc
        return stmts

    def _prologue(self) -> None:
        e, k = emit, self.k
        u32 = as_dtype("u32")

        def sreg(name):
            return e("mov.u32", ir.SReg(name, u32))

        raw = e("ld.param.u64", ir.Addr(ir.Sym(self.param, "param")))
        gbase = e("cvta.to.global.u64", raw)
        bx, by, bz = k.block
        tl = sreg("tid.x")
        if by * bz > 1:  # linear thread index: x + bx * (y + by * z)
            yz = sreg("tid.y")
            if bz > 1:
                yz = e("mad.lo.u32", sreg("tid.z"), by, yz)
            tl = e("mad.lo.u32", yz, bx, tl)
        warp = e("shr.u32", tl, 5)
        # linear CTA index: x + nx * (y + ny * z)
        cy = e("mad.lo.u32", sreg("ctaid.z"), sreg("nctaid.y"), sreg("ctaid.y"))
        cl = e("mad.lo.u32", cy, sreg("nctaid.x"), sreg("ctaid.x"))
        gw = e("mad.lo.u32", cl, self.warps_per_cta, warp)
        self.region = e("mad.wide.u32", gw, self.capacity * RECORD_BYTES, gbase)
        self.smid = sreg("smid")
        self.hwwarp = sreg("warpid")
        self.seq = self.trace.new_reg("u32", "iket_seq")
        self.seq.set(0)

    def _record(self, site_id: int) -> None:
        e = emit
        u64, b32 = as_dtype("u64"), as_dtype("b32")
        t = e("mov.u64", ir.SReg("globaltimer", u64))
        c = e("mov.u64", ir.SReg("clock64", u64))
        mask = e("activemask.b32")
        lower = e("mov.b32", ir.SReg("lanemask_lt", b32))
        below = e("and.b32", mask, lower)
        lead = e("setp.eq.b32", below, 0)
        slot = e("min.u32", self.seq, self.capacity - 1)
        addr = e("mad.wide.u32", slot, RECORD_BYTES, self.region)
        e("st.global.v2.u64", ir.Addr(addr, 0), [t, c], pred=lead)
        e("st.global.v4.u32", ir.Addr(addr, 16),
          [VALID_BIT | site_id, self.seq, self.smid, self.hwwarp], pred=lead)
        e("add.u32", self.seq, self.seq, 1)

    # -- the rewrite ---------------------------------------------------------------------------
    def _site(self, a: ir.Annotation) -> int:
        key = (a.kind, a.name, a.loc.file, a.loc.line)
        sid = self.site_ids.get(key)
        if sid is None:
            sid = self.site_ids[key] = len(self.sites)
            self.sites.append(Site(a.kind, a.name, a.loc.file, a.loc.line))
        return sid

    def _block(self, b: ir.Block) -> ir.Block:
        out = []
        for s in b.stmts:
            if isinstance(s, ir.Annotation):
                sid = self._site(s)
                code = self._emit_block(s.loc, lambda: self._record(sid))
                self.per_event = len(code)
                out.extend(code)
            elif isinstance(s, ir.If):
                out.append(dataclasses.replace(
                    s, then=self._block(s.then),
                    orelse=None if s.orelse is None else self._block(s.orelse)))
            elif isinstance(s, (ir.For, ir.Loop)):
                out.append(dataclasses.replace(s, body=self._block(s.body)))
            else:
                out.append(s)
        return ir.Block(out)

    def run(self) -> "tuple[ir.KernelIR, TraceLayout]":
        k = self.k
        prologue = self._emit_block(k.loc, self._prologue)
        body = self._block(k.body)
        body.stmts[:0] = prologue
        params = list(k.params) + [ir.ParamInfo(self.param, "ptr", as_dtype("u64"), 8, 8)]
        new = dataclasses.replace(k, params=params, body=body, regs=list(self.trace.regs))
        layout = TraceLayout(
            kernel=k.name, capacity=self.capacity, warps_per_cta=self.warps_per_cta,
            block=tuple(k.block), sites=list(self.sites), param=self.param,
            cost={"prologue_instructions": len(prologue),
                  "instructions_per_event": self.per_event,
                  "bytes_per_event": RECORD_BYTES})
        return new, layout
