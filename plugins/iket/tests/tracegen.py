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
