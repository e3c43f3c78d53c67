"""Semantics of asynchronous data movement and its synchronization: mbarriers (arrive, expect_tx,
complete_tx, try_wait/test_wait with parity or state), cp.async (sm_80), TMA bulk and tensor copies
(sm_90), cluster barriers, distributed shared memory (mapa), elect.sync and setmaxnreg.

Event trace: every copy records its memory accesses as async-proxy `events.MemAccess`es tagged
with the copy's op id, after the copy's ``issue`` event (racecheck starts the copy's clock
there): loads read global memory (one range per run of contiguous in-bounds bytes; box elements
out of bounds read nothing) and write shared memory; stores read shared memory and write global
memory (the in-bounds bytes).

Timing model: an asynchronous copy is performed when it is issued and completes its transaction
bytes on the mbarrier at once; waits (try_wait, cp.async.wait_group, bulk wait_group) therefore
never observe stale data in numsim. That ordering is a legal execution, not the only one: the
race and sync checkers (sync_check) reason about the others from the event trace.
"""

from __future__ import annotations

import numpy as np

from tirxh.api import DTYPES, ir

from . import events as ev
from .machine import SPLIT, WARP, MBar, Wait
from .memory import CLUSTER_SHIFT, SHARED_GENERIC, SHARED_GENERIC_END
from .sem_base import specs
from .sem_sync import _lanes2d, collective_event
from .semtable import semantic
from .values import BF16, E4M3, E5M2, Unsupported, dtype as T, uint_of

_ASYNC_NOTE = ("performed at issue; completion (complete_tx / group wait) is immediate, a legal "
               "but not the only ordering (sync_check explores the others)")


# --- mbarrier addressing --------------------------------------------------------------------------

def _space_of(instr, idx: int) -> str:
    sp = specs(instr)[idx].space if idx < len(specs(instr)) else None
    return sp or "generic"


def _targets(w, instr, mask, idx: int):
    """[(cta_local, shared addr, lanes mask)] for the mbarrier operand at index `idx`.

    In a traced run each warp's lanes are a target of their own, in warp order: the warps of a
    group then act on an mbarrier one after the other, as they would alone, and each warp's
    event records the barrier state its own operation left."""
    space = _space_of(instr, idx)
    addrs = w.address(instr.operands[idx]).astype(np.int64)
    per_warp = w.m.trace is not None and w.nwarps > 1
    out = {}
    for lane in np.flatnonzero(mask):
        a = int(addrs[lane])
        cta = int(w.cta_local[lane])
        if space == "generic":
            if not SHARED_GENERIC <= a < SHARED_GENERIC_END:
                raise Unsupported(f"{instr.spelling}: generic mbarrier address {hex(a)} is not in "
                                  "the shared window")
            a -= SHARED_GENERIC
        if space == "shared::cluster" and a >> CLUSTER_SHIFT:
            cta = int(w.m.cta_of_rank(w, (a >> CLUSTER_SHIFT) - 1))
            a &= (1 << CLUSTER_SHIFT) - 1
        key = (cta, a, lane // WARP if per_warp else 0)
        if key not in out:
            out[key] = np.zeros(w.L, bool)
        out[key][lane] = True
    return [(c, a, m) for (c, a, _), m in out.items()]


def _mbar(w, instr, cta, addr) -> "MBar | None":
    mb = w.group.mbars.get((cta, addr))
    if mb is None or not mb.valid:
        w.m.finding("numsim.mbarrier-uninitialized", f"{instr.spelling} on shared address "
                    f"{hex(addr)} ({w.group.shared.layout.name_of(addr)}), which holds no "
                    f"initialized mbarrier ({w.where()})", instr, w=w, addresses=[addr])
        return None
    if addr % 8:
        w.m.finding("numsim.misaligned", f"mbarrier at {hex(addr)} is not 8-byte aligned",
                    instr, w=w, addresses=[addr])
    return mb


def _complete_phase_if_done(mb: MBar) -> bool:
    if mb.pending <= 0 and mb.tx == 0:
        mb.phase += 1
        mb.pending = mb.expected
        mb.tx = 0
        return True
    return False


def _mb_event(w, instr, mask, op, cta, addr, mb, **kw):
    w.event(ev.MBarrierEvent, instr, mask, op=op, addr=addr,
            space_cta=w.group.ctas[cta].linear, phase=mb.phase if mb else 0,
            pending=mb.pending if mb else 0, tx_pending=mb.tx if mb else 0, **kw)


@semantic("mbarrier.init")
def _mb_init(w, instr, mask):
    """Initialize: expected = pending = count, tx 0, phase 0."""
    count = np.broadcast_to(w.read(instr.operands[1], T("u32")), (w.L,))
    for cta, addr, m in _targets(w, instr, mask, 0):
        n = int(count[np.flatnonzero(m)[0]])
        if not 1 <= n < (1 << 20):
            w.m.finding("numsim.mbarrier-count", f"mbarrier.init count {n} is outside 1..2^20-1",
                        instr, w=w)
        mb = w.group.mbars[(cta, addr)] = MBar(n, n)
        w.group.shared.init[cta, addr: addr + 8] = True
        _mb_event(w, instr, m, "init", cta, addr, mb, count=n)


@semantic("mbarrier.inval")
def _mb_inval(w, instr, mask):
    """Invalidate: later operations on it are diagnosed until it is initialized again."""
    for cta, addr, m in _targets(w, instr, mask, 0):
        mb = _mbar(w, instr, cta, addr)
        if mb is not None:
            mb.valid = False
        _mb_event(w, instr, m, "inval", cta, addr, mb)


def _arrive(w, instr, mask, idx, count_op=None, tx_op=None, drop=False, op="arrive"):
    counts = np.broadcast_to(w.read(count_op, T("u32")), (w.L,)) if count_op is not None \
        else np.ones(w.L, np.uint32)
    txs = np.broadcast_to(w.read(tx_op, T("u32")), (w.L,)) if tx_op is not None else None
    tokens = np.zeros(w.L, np.uint64)
    for cta, addr, m in _targets(w, instr, mask, idx):
        mb = _mbar(w, instr, cta, addr)
        if mb is None:
            continue
        lanes = np.flatnonzero(m)
        if txs is not None:
            mb.tx += int(txs[lanes].astype(np.int64).sum())
        n = int(counts[lanes].astype(np.int64).sum())
        tokens[lanes] = mb.phase
        if n > mb.pending:
            w.m.finding("numsim.mbarrier-overflow", f"{instr.spelling}: {n} arrivals on an "
                        f"mbarrier with {mb.pending} pending in phase {mb.phase} ({w.where()}); "
                        "the phase completed early", instr, w=w, addresses=[addr])
        mb.pending -= n
        if drop:
            mb.expected -= n
        done = _complete_phase_if_done(mb)
        _mb_event(w, instr, m, op, cta, addr, mb, count=n,
                  tx_bytes=int(txs[lanes].sum()) if txs is not None else 0, completed_phase=done)
    return tokens


@semantic("mbarrier.arrive", "mbarrier.arrive_drop")
def _mb_arrive(w, instr, mask):
    """Arrive (count arrivals per lane, default 1); returns the phase as the state token."""
    ops = instr.operands
    count = ops[2] if len(ops) > 2 and ops[2] is not None else None
    tok = _arrive(w, instr, mask, 1, count, drop=instr.binding.name.endswith("drop"))
    w.write(ops[0], tok, mask)


@semantic("mbarrier.arrive.expect_tx")
def _mb_arrive_tx(w, instr, mask):
    """expect_tx(tx) then one arrival, atomically."""
    ops = instr.operands
    tok = _arrive(w, instr, mask, 1, None, tx_op=ops[2], op="arrive")
    w.write(ops[0], tok, mask)


@semantic("mbarrier.expect_tx", "mbarrier.complete_tx")
def _mb_tx(w, instr, mask):
    """Raise (expect_tx) or lower (complete_tx) the current phase's pending transaction bytes."""
    txs = np.broadcast_to(w.read(instr.operands[1], T("u32")), (w.L,))
    sign = 1 if instr.binding.name == "mbarrier.expect_tx" else -1
    for cta, addr, m in _targets(w, instr, mask, 0):
        mb = _mbar(w, instr, cta, addr)
        if mb is None:
            continue
        n = int(txs[np.flatnonzero(m)].astype(np.int64).sum())
        mb.tx += sign * n
        done = _complete_phase_if_done(mb) if sign < 0 else False
        _mb_event(w, instr, m, "expect_tx" if sign > 0 else "complete_tx", cta, addr, mb,
                  tx_bytes=n, completed_phase=done)


def complete_tx(w, instr, mask, cta, addr, nbytes, async_id):
    """An async copy landed `nbytes` on the mbarrier at (cta, addr)."""
    mb = _mbar(w, instr, cta, addr)
    if mb is None:
        return
    mb.tx -= nbytes
    done = _complete_phase_if_done(mb)
    _mb_event(w, instr, mask, "complete_tx", cta, addr, mb, tx_bytes=nbytes, by_async=async_id,
              completed_phase=done)


def _wait_ok(mb: MBar, want: int, parity: bool) -> bool:
    if parity:
        return (mb.phase & 1) != (want & 1)
    return mb.phase != want


@semantic("mbarrier.test_wait", "mbarrier.try_wait")
def _mb_wait(w, instr, mask):
    """Test whether the phase (by .parity or by the state token of an arrive) completed.

    try_wait blocks the warp (yields to the others) until it holds; test_wait returns at once
    and yields softly so that a polling loop lets the other warps run.
    """
    ops = instr.operands
    parity = bool(instr.modifiers.get("parity"))
    want = np.broadcast_to(w.read(ops[2], T("u32") if parity else T("b64")), (w.L,))
    tg = _targets(w, instr, mask, 1)

    def check():
        res = np.zeros(w.L, bool)
        for cta, addr, m in tg:
            mb = _mbar(w, instr, cta, addr)
            if mb is None:
                res |= m
                continue
            lanes = np.flatnonzero(m)
            res[lanes] = [_wait_ok(mb, int(want[i]), parity) for i in lanes]
        return res

    def record(res):
        for cta, addr, m in tg:
            mb = w.group.mbars.get((cta, addr))
            _mb_event(w, instr, m, instr.binding.name.split(".")[1], cta, addr, mb,
                      parity=int(want[np.flatnonzero(m)[0]]) if parity else None,
                      success=bool(res[m].all()))

    res = check()
    if w.nwarps > 1 and not (res | ~mask).all():
        return SPLIT  # warps that pass go on, the others wait (or poll) one by one
    record(res)
    if (res | ~mask).all() or instr.binding.name == "mbarrier.test_wait":
        w.write(ops[0], res, mask)
        if instr.binding.name == "mbarrier.test_wait" and not (res | ~mask).all():
            return Wait(lambda: bool((check() | ~mask).all()), f"{instr.spelling} (polling) at "
                        f"{instr.loc}", None, soft=True)
        return None

    def resume():
        r = check()
        record(r)
        w.write(ops[0], r, mask)
    desc = ", ".join(f"{w.group.shared.layout.name_of(a)}" for _, a, _ in tg)
    return Wait(lambda: bool((check() | ~mask).all()), f"{instr.spelling} on {desc} at "
                f"{instr.loc}", resume)


@semantic("mbarrier.pending_count")
def _mb_pending(w, instr, mask):
    """Pending count from a state token: numsim tokens carry only the phase, so this is
    reported as not modeled."""
    raise Unsupported("mbarrier.pending_count (numsim state tokens carry the phase only)")


# --- cp.async (sm_80) -----------------------------------------------------------------------------

@semantic("cp.async", note="Global -> shared copy of 4/8/16 bytes (src_size zero-fills); "
                           + _ASYNC_NOTE)
def _cp_async(w, instr, mask):
    ops = instr.operands
    size = int(ops[2].value)
    src_size = np.broadcast_to(w.read(ops[3], T("u32")), (w.L,)) if len(ops) > 3 and \
        ops[3] is not None else np.full(w.L, size, np.uint32)
    dst = w.address(ops[0])
    src = w.address(ops[1])
    w.m.check_aligned(w, instr, dst, mask, size, f"{size}-byte cp.async shared destination")
    w.m.check_aligned(w, instr, src, mask, size, f"{size}-byte cp.async global source")
    # byte by byte keeps zero-fill exact for any src_size
    unit = 4 if size >= 4 else size
    for k in range(0, size, unit):
        live = mask & (src_size.astype(np.int64) >= k + unit)
        words = w.m.load(w, instr, "global", src + np.uint64(k), live, unit)
        words = np.where(live, words, 0)
        w.m.store(w, instr, "shared", dst + np.uint64(k), mask, unit, words)
    for one in w.each_warp(mask) if w.m.trace is not None else ():  # an op id per warp
        w.event(ev.AsyncOp, instr, one, engine="cp.async", stage="issue", op_id=new_async_id(w),
                group=w.cpasync_groups, direction="load", nbytes=size)


def _global_runs(base: int, offsets: np.ndarray, width: int) -> list:
    """Engine byte ranges ``(-1, start, end)`` covering the `width`-byte items at `offsets`
    (relative to `base`), adjacent items merged: a box row is one range, not one per element."""
    s = np.unique(np.asarray(offsets, np.int64))
    if s.size == 0:
        return []
    brk = np.flatnonzero(s[1:] != s[:-1] + width) + 1
    first = np.concatenate(([0], brk))
    last = np.concatenate((brk - 1, [s.size - 1]))
    return [(-1, base + int(s[a]), base + int(s[b]) + width) for a, b in zip(first, last)]


def _trace_global(w, instr, lm, buf, ranges, aid, access: str = "read") -> None:
    """The async-proxy global read of a TMA/bulk load, or write of a store (see the module
    docstring)."""
    if ranges:
        w.event(ev.MemAccess, instr, lm, space="global", access=access, ranges=ranges,
                proxy=ev.ASYNC, space_cta=w.cta(int(np.argmax(lm)) // WARP).linear,
                buffer=buf.name, async_id=aid)


def new_async_id(w) -> int:
    w.m.async_ids += 1
    return w.m.async_ids


@semantic("cp.async.commit_group", "cp.async.wait_group", "cp.async.wait_all",
          note="Group bookkeeping; copies already landed at issue (" + _ASYNC_NOTE + ").")
def _cp_async_group(w, instr, mask):
    name = instr.binding.name
    if name == "cp.async.commit_group":
        w.event(ev.AsyncOp, instr, mask, engine="cp.async", stage="commit",
                group=w.cpasync_groups)
        w.cpasync_groups += 1
    else:
        w.event(ev.AsyncOp, instr, mask, engine="cp.async", stage="wait",
                group=int(instr.operands[0].value) if name.endswith("wait_group") else 0)


@semantic("cp.async.mbarrier.arrive", note="Arrive when prior cp.async complete (at once in "
                                           "numsim); without .noinc the pending count is raised "
                                           "first, so the net effect on the phase is none.")
def _cp_async_mbar(w, instr, mask):
    if instr.modifiers.get("noinc"):
        _arrive(w, instr, mask, 0)
    else:
        for cta, addr, m in _targets(w, instr, mask, 0):
            mb = _mbar(w, instr, cta, addr)
            _mb_event(w, instr, m, "arrive", cta, addr, mb, count=0)


# --- TMA (sm_90) ----------------------------------------------------------------------------------

_FILL = {"zero": 0}


def _swizzle(addr: np.ndarray, span: int) -> np.ndarray:
    """The TMA/wgmma shared-memory swizzle on absolute addresses: 16-byte chunk bits [4, 4+b)
    XOR the 128-byte row bits [7, 7+b), b = log2(span / 16) (span 32, 64 or 128 bytes)."""
    if span == 0:
        return addr
    b = {32: 1, 64: 2, 128: 3}[span]
    m = (1 << b) - 1
    return addr ^ (((addr >> 7) & m) << 4)


def _box_geometry(tm: dict, coords: list):
    """Global byte offsets, in-bounds mask and element size of a box at `coords` (innermost
    first), elements in shared-memory order (row-major, innermost contiguous)."""
    esize = DTYPES[tm["dtype"]].nbytes
    box, dims = tm["box"], tm["dims"]
    strides = [esize] + list(tm["strides"])
    if any(s != 1 for s in tm.get("elem_strides", [1] * len(box))):
        raise Unsupported("TMA element strides other than 1")
    if len(coords) != len(dims):
        raise Unsupported(f"TMA with {len(coords)} coordinates for a {len(dims)}-d tensor map")
    grids = np.meshgrid(*[np.arange(b) for b in reversed(box)], indexing="ij")
    off = np.zeros(grids[0].shape, np.int64)
    ok = np.ones(grids[0].shape, bool)
    for d in range(len(box)):
        g = grids[len(box) - 1 - d] + int(coords[d])
        ok &= (g >= 0) & (g < dims[d])
        off += g * strides[d]
    return off.reshape(-1), ok.reshape(-1), esize


def _check_inner_coord(w, instr, tm, c0: int, esize: int) -> None:
    if (c0 * esize) % 16:
        w.m.finding("numsim.tma-misaligned", f"TMA box starts at inner coordinate {c0} "
                    f"({c0 * esize} bytes into the row), not a multiple of 16 bytes: an H200 "
                    f"faults with an illegal instruction (seen with benchmarks/h200_compare.py)",
                    instr, w=w, data={"tensormap": tm["source"], "coordinate": c0})


def _tmap(w, tref: ir.TensorRef, lane: int = 0) -> dict:
    """The tensor map a TMA operand names: a parameter symbol, or a register holding the
    parameter's (generic) address."""
    if isinstance(tref.base, ir.Sym):
        name = tref.base.name
    else:
        addr = int(np.broadcast_to(w.reg(tref.base), (w.L,))[lane])
        name = w.m.param_at.get(addr)
        if name is None:
            raise Unsupported(f"TMA tensor-map address {hex(addr)} is not a tensor-map parameter "
                              "(tensor maps in global memory are not modeled)")
    tm = w.m.params.tensormaps.get(name)
    if tm is None:
        raise Unsupported(f"no tensor map bound for parameter {name!r}")
    return tm


def _fill_bytes(tm: dict, esize: int) -> np.ndarray:
    """Bytes of one out-of-bounds element. The NaN fill is the pattern an H200 writes (read off
    the hardware with benchmarks/h200_compare.py): 0x7FF7 in every 16-bit half of the element
    (f32 0x7FF77FF7, bf16/f16 0x7FF7)."""
    if tm.get("oob_fill", "zero") == "nan":
        dt = DTYPES[tm["dtype"]]
        if not dt.is_float:
            raise Unsupported("TMA NaN fill of a non-float tensor")
        if esize < 2:
            raise Unsupported("TMA NaN fill of 8-bit floats (the hardware pattern is not "
                              "recorded)")
        return np.tile(np.array([0xF7, 0x7F], np.uint8), esize // 2)
    return np.zeros(esize, np.uint8)


def check_tensormap(tm: dict) -> list:
    """What ``cuTensorMapEncodeTiled`` would refuse about a tensor map (empty when valid)."""
    esize = DTYPES[tm["dtype"]].nbytes
    out = []
    for i, st in enumerate(tm["strides"]):
        if st % 16:
            out.append(f"global stride of dimension {i + 1} is {st} bytes, not a multiple of 16")
    if tm.get("base", 0) % 16:
        out.append("global address is not 16-byte aligned")
    inner = tm["box"][0] * esize
    if inner % 16:
        out.append(f"the inner box dimension is {inner} bytes, not a multiple of 16")
    if any(b > 256 or b < 1 for b in tm["box"]):
        out.append(f"box {tm['box']} has a dimension outside 1..256")
    span = int(tm.get("swizzle", 0))
    if span and inner > span:
        out.append(f"the inner box dimension ({inner} bytes) exceeds the {span}B swizzle span")
    return out


def _smem_offsets(tm: dict, n: int, esize: int, dst: int) -> np.ndarray:
    """Shared byte addresses of the box's bytes (swizzled)."""
    span = int(tm.get("swizzle", 0))
    inner = tm["box"][0] * esize
    if span and inner != span:
        raise Unsupported(f"TMA {span}B swizzle with an inner box of {inner} bytes (numsim models "
                          "inner box == swizzle span)")
    lin = dst + np.arange(n * esize, dtype=np.int64)
    return _swizzle(lin, span)


def _box_aligned(w, instr, tm: dict, addr: int, lane) -> bool:
    """The shared end of a TMA box must be 128-byte aligned, and a swizzled box aligned to its
    pattern's period (8 rows of the span: 1024 bytes for 128B): the hardware faults otherwise
    (CUDA_ERROR_MISALIGNED_ADDRESS, decode_attention on the H200, 2026-12-01). Reports a
    ``numsim.misaligned`` finding and returns False for a misaligned box."""
    span = int(tm.get("swizzle", 0))
    align = 8 * span if span else 128
    lm = np.zeros(w.L, bool)
    lm[lane] = True
    what = f"TMA box in shared memory ({f'{span}B swizzle' if span else 'no swizzle'})"
    return w.m.check_aligned(w, instr, np.full(w.L, addr, np.uint64), lm, align, what)


def _dst_ctas(w, instr, lane, dst_addr, cta_mask_op):
    """(group-local CTA, shared offset) pairs a TMA load writes: the addressed CTA, or every CTA
    of cta_mask with .multicast::cluster."""
    a = int(dst_addr)
    cta = int(w.cta_local[lane])
    if a >> CLUSTER_SHIFT:
        cta = int(w.m.cta_of_rank(w, (a >> CLUSTER_SHIFT) - 1))
        a &= (1 << CLUSTER_SHIFT) - 1
    if instr.modifiers.get("multicast") and cta_mask_op is not None:
        cm = int(np.broadcast_to(w.read(cta_mask_op, T("u16")), (w.L,))[lane])
        return [(int(w.m.cta_of_rank(w, r)), a) for r in range(16) if cm >> r & 1]
    return [(cta, a)]


@semantic("cp.async.bulk.tensor", note="TMA tile load with tensor-map box, swizzle 0/32/64/128 "
                                       "and OOB fill (zero or NaN), .multicast::cluster; "
                                       + _ASYNC_NOTE)
def _tma_load(w, instr, mask):
    ops = instr.operands
    dst_op, tref, mbar_op = ops[0], ops[1], ops[2]
    cta_mask_op = ops[3] if instr.modifiers.get("multicast") else None
    dsts = w.address(dst_op)
    mbars = w.address(mbar_op)
    coords = [np.broadcast_to(w.read(c, T("s32")), (w.L,)) for c in tref.coords]
    for lane in np.flatnonzero(mask):
        tm = _tmap(w, tref, lane)
        buf = w.m.gmem.by_name[tm["source"]]
        off, ok, esize = _box_geometry(tm, [int(c[lane]) for c in coords])
        _check_inner_coord(w, instr, tm, int(coords[0][lane]), esize)
        n = off.size
        raw = np.tile(_fill_bytes(tm, esize), n).reshape(n, esize)
        if ok.any():
            idx = off[ok][:, None] + np.arange(esize)
            raw[ok] = buf.data[idx]
        aid = new_async_id(w)
        lm = np.zeros(w.L, bool)
        lm[lane] = True
        read_traced = False
        for cta, a in _dst_ctas(w, instr, lane, dsts[lane], cta_mask_op):
            sm = w.group.shared
            if not _box_aligned(w, instr, tm, a, lane):
                continue
            addrs = _smem_offsets(tm, n, esize, a)
            if addrs.max(initial=0) >= sm.size or a < 0:
                w.m.finding("numsim.out-of-bounds", f"TMA box of {n * esize} bytes at shared "
                            f"{hex(a)} overruns the {sm.size}-byte shared window", instr, w=w)
                continue
            sm.write_bytes(cta, addrs, raw.reshape(-1))
            w.event(ev.AsyncOp, instr, lm, engine="tma", stage="issue", op_id=aid,
                    direction="load", mbarrier=int(mbars[lane]),
                    space_cta=w.group.ctas[cta].linear, nbytes=n * esize)
            if not read_traced and w.m.trace is not None:  # one read, however many CTAs
                _trace_global(w, instr, lm, buf, _global_runs(buf.base, off[ok], esize),
                                   aid)
                read_traced = True
            w.event(ev.MemAccess, instr, lm, space="shared", access="write",
                    ranges=[(-1, int(addrs.min()), int(addrs.max()) + 1)], proxy=ev.ASYNC,
                    space_cta=w.group.ctas[cta].linear, async_id=aid)
            w.event(ev.AsyncOp, instr, lm, engine="tma", stage="complete", op_id=aid,
                    direction="load", mbarrier=int(mbars[lane]),
                    space_cta=w.group.ctas[cta].linear, nbytes=n * esize)
            complete_tx(w, instr, lm, cta, int(mbars[lane]), n * esize, aid)


@semantic("cp.async.bulk.tensor.store", note="TMA tile store (in-bounds elements only), "
                                             "swizzled source; " + _ASYNC_NOTE)
def _tma_store(w, instr, mask):
    ops = instr.operands
    tref, src_op = ops[0], ops[1]
    srcs = w.address(src_op)
    coords = [np.broadcast_to(w.read(c, T("s32")), (w.L,)) for c in tref.coords]
    for lane in np.flatnonzero(mask):
        tm = _tmap(w, tref, lane)
        buf = w.m.gmem.by_name[tm["source"]]
        off, ok, esize = _box_geometry(tm, [int(c[lane]) for c in coords])
        _check_inner_coord(w, instr, tm, int(coords[0][lane]), esize)
        n = off.size
        a = int(srcs[lane])
        if not _box_aligned(w, instr, tm, a, lane):
            continue
        addrs = _smem_offsets(tm, n, esize, a)
        cta = int(w.cta_local[lane])
        raw, init = w.group.shared.read_bytes(cta, addrs)
        if not init.all():
            w.m.finding("numsim.uninitialized-shared", f"TMA store reads uninitialized shared "
                        f"memory at {w.group.shared.layout.name_of(int(addrs[~init][0]))}",
                        instr, severity="review", w=w)
        raw = raw.reshape(n, esize)
        if ok.any():
            idx = off[ok][:, None] + np.arange(esize)
            buf.data[idx] = raw[ok]
            buf.written[idx] = True
            w.m.wrote("global")
        lm = np.zeros(w.L, bool)
        lm[lane] = True
        aid = new_async_id(w)
        w.event(ev.AsyncOp, instr, lm, engine="tma", stage="issue", op_id=aid,
                direction="store", group=w.bulk_groups, nbytes=n * esize)
        w.event(ev.MemAccess, instr, lm, space="shared", access="read",
                ranges=[(-1, int(addrs.min()), int(addrs.max()) + 1)], proxy=ev.ASYNC,
                space_cta=w.group.ctas[cta].linear, async_id=aid)
        if w.m.trace is not None:
            _trace_global(w, instr, lm, buf, _global_runs(buf.base, off[ok], esize), aid,
                          "write")


@semantic("cp.async.bulk", note="Bulk copy global -> shared::cluster completing tx bytes on "
                                "the mbarrier (.multicast::cluster); " + _ASYNC_NOTE)
def _bulk_load(w, instr, mask):
    ops = instr.operands
    dsts, srcs, mbars = w.address(ops[0]), w.address(ops[1]), w.address(ops[3])
    sizes = np.broadcast_to(w.read(ops[2], T("u32")), (w.L,))
    cta_mask_op = ops[4] if instr.modifiers.get("multicast") else None
    for lane in np.flatnonzero(mask):
        size = int(sizes[lane])
        if size % 16 or int(srcs[lane]) % 16 or int(dsts[lane]) % 16:
            w.m.finding("numsim.misaligned", f"cp.async.bulk of {size} bytes from "
                        f"{hex(int(srcs[lane]))} to {hex(int(dsts[lane]))}: size and addresses "
                        "must be multiples of 16", instr, w=w)
        lm = np.zeros(w.L, bool)
        lm[lane] = True
        gb, goff, gok = w.m.gmem.locate(np.array([int(srcs[lane])], np.uint64), size)
        if not gok[0]:
            w.m.finding("numsim.out-of-bounds", f"cp.async.bulk reads {size} bytes at "
                        f"{hex(int(srcs[lane]))} ({w.m.gmem.name_of(int(srcs[lane]))}) past "
                        "its allocation", instr, w=w)
            continue
        gbuf = w.m.gmem.buffers[gb[0]]
        data = gbuf.data[goff[0]: goff[0] + size]
        aid = new_async_id(w)
        read_traced = False
        for cta, a in _dst_ctas(w, instr, lane, dsts[lane], cta_mask_op):
            w.group.shared.write_bytes(cta, np.arange(a, a + size), data)
            w.event(ev.AsyncOp, instr, lm, engine="bulk", stage="issue", op_id=aid,
                    direction="load", mbarrier=int(mbars[lane]),
                    space_cta=w.group.ctas[cta].linear, nbytes=size)
            if not read_traced:
                _trace_global(w, instr, lm, gbuf,
                                   [(-1, int(srcs[lane]), int(srcs[lane]) + size)], aid)
                read_traced = True
            w.event(ev.MemAccess, instr, lm, space="shared", access="write",
                    ranges=[(-1, a, a + size)], proxy=ev.ASYNC,
                    space_cta=w.group.ctas[cta].linear, async_id=aid)
            complete_tx(w, instr, lm, cta, int(mbars[lane]), size, aid)


@semantic("cp.async.bulk.store", note="Bulk copy shared -> global; " + _ASYNC_NOTE)
def _bulk_store(w, instr, mask):
    ops = instr.operands
    dsts, srcs = w.address(ops[0]), w.address(ops[1])
    sizes = np.broadcast_to(w.read(ops[2], T("u32")), (w.L,))
    for lane in np.flatnonzero(mask):
        size = int(sizes[lane])
        gb, goff, gok = w.m.gmem.locate(np.array([int(dsts[lane])], np.uint64), size)
        if not gok[0]:
            w.m.finding("numsim.out-of-bounds", f"cp.async.bulk writes {size} bytes at "
                        f"{hex(int(dsts[lane]))} past its allocation", instr, w=w)
            continue
        a = int(srcs[lane])
        cta = int(w.cta_local[lane])
        sm = w.group.shared
        if a < 0 or a + size > sm.size:
            w.m.finding("numsim.out-of-bounds", f"cp.async.bulk store reads {size} bytes at "
                        f"shared {hex(a)}, past the {sm.size}-byte shared window", instr, w=w)
            continue
        raw, init = sm.read_bytes(cta, np.arange(a, a + size))
        if not init.all():
            w.m.finding("numsim.uninitialized-shared", f"bulk store reads uninitialized shared "
                        f"memory at {sm.layout.name_of(a + int(np.argmin(init)))}", instr,
                        severity="review", w=w)
        w.m.gmem.buffers[gb[0]].data[goff[0]: goff[0] + size] = raw
        w.m.gmem.buffers[gb[0]].written[goff[0]: goff[0] + size] = True
        w.m.wrote("global")
        lm = np.zeros(w.L, bool)
        lm[lane] = True
        aid = new_async_id(w)
        w.event(ev.AsyncOp, instr, lm, engine="bulk", stage="issue", op_id=aid,
                direction="store", group=w.bulk_groups, nbytes=size)
        w.event(ev.MemAccess, instr, lm, space="shared", access="read", ranges=[(-1, a, a + size)],
                proxy=ev.ASYNC, space_cta=w.group.ctas[cta].linear, async_id=aid)
        _trace_global(w, instr, lm, w.m.gmem.buffers[gb[0]],
                      [(-1, int(dsts[lane]), int(dsts[lane]) + size)], aid, "write")


@semantic("cp.async.bulk.commit_group", "cp.async.bulk.wait_group",
          note="Bulk async-group bookkeeping; stores already landed at issue.")
def _bulk_group(w, instr, mask):
    if instr.binding.name.endswith("commit_group"):
        w.event(ev.AsyncOp, instr, mask, engine="bulk", stage="commit", group=w.bulk_groups)
        w.bulk_groups += 1
    else:
        w.event(ev.AsyncOp, instr, mask, engine="bulk", stage="wait",
                group=int(instr.operands[0].value))


def _fence_event(w, instr, mask):
    w.event(ev.FenceEvent, instr, mask,
            fence=instr.binding.effects_for(instr.modifiers).sync or instr.binding.name,
            scope=instr.modifiers.get("scope"), spelling=instr.spelling,
            space=instr.modifiers.get("ss") if instr.binding.name == "fence.proxy.async"
            else None)


semantic("fence.proxy.async", "fence.mbarrier_init", "fence.proxy.tensormap",
         "prefetch.tensormap", "griddepcontrol", fidelity="ordering_only",
         note="No data effect in numsim's sequential model (recorded for sync_check); "
              "griddepcontrol: one launch at a time.")(_fence_event)


# --- cluster, elect, mapa, setmaxnreg ------------------------------------------------------------

@semantic("barrier.cluster.arrive", "barrier.cluster.wait")
def _cluster_bar(w, instr, mask):
    """Cluster barrier: every non-exited warp of the cluster arrives; wait blocks until the phase
    this warp arrived in completes."""
    if w.nwarps > 1:
        return SPLIT  # arrivals and waits are per warp
    g = w.group
    key = (w.ctas_local[0], w.warp_ids[0])
    if instr.binding.name.endswith("arrive"):
        if key in g.cluster_arrived:
            w.m.finding("numsim.cluster-barrier", "barrier.cluster.arrive twice without a wait "
                        f"({w.where()})", instr, w=w)
        g.cluster_arrived[key] = g.cluster_bar[1]
        g.cluster_bar[0] += 1
        _cluster_try_release(g)
        w.event(ev.ClusterBarrierEvent, instr, mask, op="arrive", phase=g.cluster_bar[1],
                relaxed=instr.modifiers.get("sem") == "relaxed")
        return None
    if key not in g.cluster_arrived:
        w.m.finding("numsim.cluster-barrier", "barrier.cluster.wait without a prior arrive "
                    f"({w.where()})", instr, w=w)
        return None
    p = g.cluster_arrived.pop(key)

    def ready():
        _cluster_try_release(g)
        return g.cluster_bar[1] > p

    def resume():
        w.event(ev.ClusterBarrierEvent, instr, mask, op="wait", phase=g.cluster_bar[1])
    if ready():
        resume()
        return None
    return Wait(ready, f"barrier.cluster.wait at {instr.loc}", resume)


def _cluster_try_release(g) -> None:
    need = g.nwarps_total - sum(g.exited_warps.values())
    if g.cluster_bar[0] >= need > 0 or (need <= 0 and g.cluster_bar[0]):
        g.cluster_bar[0] = 0
        g.cluster_bar[1] += 1


@semantic("elect.sync")
def _elect(w, instr, mask):
    """The lowest active lane of membermask is the leader: d = its lane id, p true there."""
    ops = instr.operands
    mm = _lanes2d(w.read(ops[1], T("b32")), w).astype(np.uint64)
    act = mask.reshape(w.nwarps, WARP) & (((mm >> np.arange(WARP, dtype=np.uint64)) & 1)
                                          .astype(bool))
    leader = np.where(act.any(axis=1), act.argmax(axis=1), 0)
    d, p = ops[0].elems
    if isinstance(d, ir.Reg):
        w.write(d, np.repeat(leader.astype(np.uint32), WARP), mask)
    if isinstance(p, ir.Reg):
        isl = (np.arange(WARP)[None, :] == leader[:, None]) & act
        w.write(p, isl.reshape(-1), mask)
    collective_event(w, instr, mask)


@semantic("mapa")
def _mapa(w, instr, mask):
    """Map a shared address to the same offset in CTA `cta` of the cluster (numsim encodes
    rank + 1 above bit 24 of the shared::cluster address)."""
    t = instr.modifiers["type"]
    a = np.broadcast_to(w.read(instr.operands[1], T(t)), (w.L,)).astype(np.int64)
    r = np.broadcast_to(w.read(instr.operands[2], T("u32")), (w.L,)).astype(np.int64)
    n = len(w.group.ctas)
    if np.any(r[mask] >= n):
        w.m.finding("numsim.mapa-rank", f"mapa to CTA rank {int(r[mask].max())} in a cluster of "
                    f"{n}", instr, w=w)
    if instr.modifiers.get("ss") is None and np.any((a[mask] >= SHARED_GENERIC)):
        a = np.where(a >= SHARED_GENERIC, a - SHARED_GENERIC, a)
    out = ((r + 1) << CLUSTER_SHIFT) | (a & ((1 << CLUSTER_SHIFT) - 1))
    w.write(instr.operands[0], out.astype(uint_of(T(t).nbytes)), mask)


@semantic("setmaxnreg", note="Checks the register count (24..256, a multiple of 8) and records "
                             "the request; no register-file model.")
def _setmaxnreg(w, instr, mask):
    n = int(instr.operands[0].value)
    if not (24 <= n <= 256 and n % 8 == 0):
        w.m.finding("numsim.setmaxnreg", f"setmaxnreg {n}: the count must be in 24..256 and a "
                    "multiple of 8", instr, w=w)
    if not mask.reshape(w.nwarps, WARP)[w.warps_of(mask)].all():
        w.m.finding("numsim.setmaxnreg", "setmaxnreg executed by a partial warp (.sync.aligned "
                    "needs every thread of the warpgroup)", instr, w=w)
    w.maxnreg = n
    w.event(ev.SetMaxNReg, instr, mask, action=instr.modifiers["action"], count=n)


__all__ = ["complete_tx", "new_async_id", "_swizzle", "BF16", "E4M3", "E5M2"]
