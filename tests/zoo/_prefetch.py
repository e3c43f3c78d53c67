"""Tracing helpers for the prefetch tests (kda_bwd_local_lg, kda_bwd_pieces_ld, kda_bwd_prep3g
PREFETCH): numsim's ``prefetch`` is a no-op and checks no address, so these record each lane's
prefetch address and compare the prefetched 128-byte lines with the lines a phase's global
loads read, CTA by CTA."""

import inspect

import numpy as np

LINE = 128


def recording(seen):
    """numsim's `prefetch` semantics (a no-op) that also records, per executing lane, its CTA,
    address and the buffer that address lies in (None: outside every tensor)."""
    def fn(w, instr, mask):
        lanes = np.flatnonzero(mask)
        a = np.asarray(w.address(instr.operands[0]), np.uint64)[lanes]
        bidx, _, ok = w.m.gmem.locate(a, 1)
        for ln, x, b, k in zip(lanes.tolist(), a.tolist(), bidx.tolist(), ok.tolist()):
            seen.append((w.cta(ln // 32).linear, x, w.m.gmem.buffers[b].name if k else None))
    return fn


def traced(monkeypatch, kernel, args, grid, outputs, consts, readers, tensors):
    """numsim of `kernel` on `args`, traced, with `recording`: (the recorded prefetches, per CTA
    the 128-byte lines (absolute address / 128) prefetched, per CTA the lines read by the
    global loads whose source lines lie in the functions `readers` (a generator expression's
    loads too), each of which must read one of `tensors`; `readers` None: every global load of
    `tensors`)."""
    import tirxh_numsim as ns
    from tirxh_numsim import semtable
    seen = []
    old = semtable.TABLE["prefetch"]
    monkeypatch.setitem(semtable.TABLE, "prefetch",
                        semtable.Semantic("prefetch", recording(seen), old.fidelity, old.note))
    res = ns.run(kernel, args, grid=grid, outputs=outputs, consts=consts, trace=True)
    assert res.verdict == "clean", res.summary()
    spans = [(inspect.getsourcefile(fn), _lines(fn)) for fn in readers or ()]
    got, want = {}, {}
    for c, a, _ in seen:
        got.setdefault(c, set()).add(a // LINE)
    for e in res.trace.events:
        if type(e).__name__ != "MemAccess" or e.space != "global" or e.access != "read":
            continue
        if readers is None:
            if e.buffer not in tensors:
                continue
        else:
            if e.loc is None or not any(e.loc.file == f and e.loc.line in body
                                        for f, body in spans):
                continue
            assert e.buffer in tensors, e.buffer
        for _, s, t in e.ranges:
            want.setdefault(e.cta, set()).update(range(s // LINE, (t - 1) // LINE + 1))
    return seen, got, want


def _lines(fn):
    """The source line numbers of function `fn`."""
    lines, first = inspect.getsourcelines(fn)
    return range(first, first + len(lines))
