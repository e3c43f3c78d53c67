"""Test helper: write trace buffers the way the instrumented kernel does, from a schedule.

Independent of the decoder's numpy dtype on purpose (struct packing from the documented layout),
so a layout mistake on either side shows up as a test failure.
"""

import struct

RECORD = struct.Struct("<QQIIII")
VALID = 0x8000_0000


def site_index(layout, kind, name):
    for i, s in enumerate(layout.sites):
        if s.kind == kind and s.name == name:
            return i
    raise KeyError((kind, name))


def write(layout, nctas, warp_events, ghz=1.8, gt_step=1):
    """`warp_events`: {(cta, warp): (sm, hwwarp, [(kind, name, t_ns), ...])} -> bytes.

    clock64 = t * ghz + a per-SM origin; globaltimer = t rounded down to `gt_step` ns (a coarse
    global timer, as on some boards) + a fixed origin.
    """
    cap = layout.capacity
    buf = bytearray(nctas * layout.warps_per_cta * cap * RECORD.size)
    for (cta, warp), (sm, hw, events) in warp_events.items():
        region = (cta * layout.warps_per_cta + warp) * cap
        for seq, (kind, name, t) in enumerate(events):
            slot = min(seq, cap - 1)
            gt = 1_700_000_000_000 + int(t) // gt_step * gt_step
            clk = 10_000_000 * (sm + 1) + int(round(t * ghz))
            ev = VALID | site_index(layout, kind, name)
            RECORD.pack_into(buf, (region + slot) * RECORD.size, gt, clk, ev, seq, sm, hw)
    return bytes(buf)


def gemm_schedule(nsms=4, tiles_per_sm=3, k_iters=4, t_load=900.0, t_mma=1000.0,
                  t_epi=1500.0, straggler_sm=None):
    """A warp-specialized GEMM: warp 0 loads, warps 4 and 8 run mma then the epilogue per tile.

    Returns {(cta, warp): (sm, hwwarp, events)}; one persistent CTA per SM.
    """
    out = {}
    for sm in range(nsms):
        cta = sm
        extra = 4000.0 if sm == straggler_sm else 0.0
        prod, cons = [], {4: [], 8: []}
        t = 100.0 * sm
        for tile in range(tiles_per_sm):
            for k in range(k_iters):
                prod += [("begin", "load", t), ("end", "load", t + t_load)]
                for w in cons:
                    s = t + t_load + 20
                    cons[w] += [("begin", "mma", s), ("end", "mma", s + t_mma)]
                t += t_load + t_mma + 40
            for w in cons:
                cons[w] += [("begin", "epilogue", t), ("end", "epilogue", t + t_epi + extra),
                            ("mark", "tile_done", t + t_epi + extra)]
            t += t_epi + extra + 10
        out[(cta, 0)] = (sm, 0, prod)
        for w, evs in cons.items():
            out[(cta, w)] = (sm, w, evs)
    return out


def attention_schedule(nctas=132, tiles=2048, kv_blocks=16, consumers=range(4, 12)):
    """A persistent causal FA3-style attention kernel, shaped like zoo/kernels/attention.py's
    B4 H32 S2048 profile: CTA c takes tiles c, c + nctas, ...; tile i has (i % kv_blocks) + 1
    KV blocks. Warp 0 (the producer thread) waits for 2 free stages per block ("wait_empty");
    each consumer warp records wait_k, then (wait_k, wait_v, softmax) per further block, then
    wait_v and the epilogue. With the defaults: ~905,000 events, at most 960 per warp (a full
    --iket-capacity 1024 buffer). Returns {(cta, warp): (sm, hwwarp, events)}."""
    out = {}
    for cta in range(nctas):
        prod, cons = [], {w: [] for w in consumers}
        t = 50.0 * (cta % 7)
        for tile in range(cta, tiles, nctas):
            n = tile % kv_blocks + 1
            for j in range(2 * n):
                prod += [("begin", "wait_empty", t + 300 * j),
                         ("end", "wait_empty", t + 300 * j + 120)]
            for w, ev in cons.items():
                s = t + (w // 8) * 40
                ev += [("begin", "wait_k", s), ("end", "wait_k", s + 50)]
                s += 200
                for _ in range(1, n):
                    ev += [("begin", "wait_k", s), ("end", "wait_k", s + 30),
                           ("begin", "wait_v", s + 100), ("end", "wait_v", s + 130),
                           ("begin", "softmax", s + 200), ("end", "softmax", s + 500)]
                    s += 600
                ev += [("begin", "wait_v", s), ("end", "wait_v", s + 40),
                       ("begin", "epilogue", s + 100), ("end", "epilogue", s + 900)]
            t += 600 * n + 1000
        out[(cta, 0)] = (cta, 0, prod)
        for w, ev in cons.items():
            out[(cta, w)] = (cta, w, ev)
    return out
