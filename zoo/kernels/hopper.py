"""Hopper (sm_90a) building blocks shared by the zoo's warp-specialized kernels (gemm_sm90.py,
attention.py): wgmma shared-memory descriptors, bf16 packing of f32 accumulators, and the
store of a 64 x 64 block of a wgmma accumulator into a 128B-swizzled shared-memory chunk with
``stmatrix`` (what a TMA store then reads).

Every helper is a few PTX instructions, listed in its docstring; nothing here keeps state.

Descriptors (PTX ISA 9.7.15.5.1, "Matrix Descriptor Format"): start >> 4 (bits 0-13), leading
byte offset >> 4 (16-29), stride byte offset >> 4 (32-45), 128B swizzle (bits 62-63). K-major
operands in 128-byte rows: SBO = 1024 (8 rows), LBO unused (16); a K step of 16 bf16 adds 32
bytes. MN-major operands in boxes of 64 columns: LBO = the bytes of one box (the next 64 columns),
SBO = 1024 (the next 8 rows of K); a K step of 16 adds 16 rows = 2048 bytes.

Accumulator layout (wgmma D, per warp w of a warpgroup): rows 16w + g (+8) with g = lane / 4,
register 4j + {0, 1} at columns 8j + 2t + {0, 1} (t = lane % 4), 4j + {2, 3} the same columns 8
rows down: exactly ``stmatrix``'s fragment of the 8 x 8 matrices (rows 16w..+7 | +8..+15) x
(columns 8j..8j+7), and exactly wgmma's register-A fragment of the k16 slice 16i..16i+15 in
registers 8i..8i+7 packed pairwise (the FlashAttention-3 observation: P = softmax(S) feeds the
next MMA without a shuffle).
"""

from __future__ import annotations

import tirxh.lang as T

WG = 128                 # threads per warpgroup
CHUNK = 64               # columns of one staging chunk (128 bytes of bf16 = the swizzle span)
CHUNK_BYTES = 64 * 64 * 2


def log2(n: int) -> int:
    """log2 of a power of two (ValueError otherwise): tile sizes become shifts."""
    if n & (n - 1) or n < 1:
        raise ValueError(f"expected a power of two, got {n}")
    return n.bit_length() - 1


def desc(addr, lbo: int, sbo: int):
    """A 128B-swizzled wgmma matrix descriptor for the shared address `addr` (bytes): emits
    ``and.b32``, ``shr.u32``, ``cvt.u64.u32``, ``or.b64``."""
    enc = T.ptx.shr.u32(T.ptx.and_.b32(addr, 0x3FFFF), 4)
    return T.ptx.or_.b64(T.ptx.cvt.u64.u32(enc), ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | 1 << 62)


def bf16x2(lo, hi, dst=None):
    """Two f32 registers as one bf16x2 (`lo` in the low half, the even column), into `dst` or a
    fresh register: ``cvt.rn.bf16x2.f32`` (its first source goes to the upper half)."""
    if dst is None:
        return T.ptx.cvt.rn.bf16x2.f32(hi, lo)
    return T.ptx.cvt.rn.bf16x2.f32(dst, hi, lo)


def stmatrix_lanes(base, tid):
    """Per-lane shared addresses for `stmatrix_chunk`: lane l of warp w of the warpgroup addresses
    row 16w + 8 * (l / 8 % 2) + l % 8 of a chunk at `base` and its 16-byte column group
    2s + l / 16 (s = the stmatrix of the chunk), swizzled by XOR with the row % 8. Returns the
    four addresses (s = 0..3); emits ~12 integer instructions."""
    lane = T.laneid()
    w = (tid >> 5) & 3
    rr = lane & 7
    q = lane >> 3
    row = (w << 4) + ((q & 1) << 3) + rr
    lane_base = base + (row << 7) + ((((q >> 1) ^ rr) & 1) << 4)
    return [lane_base + (((rr & 6) ^ (2 * s)) << 4) for s in range(4)]


def stmatrix_chunk(acc, ci: int, col_off: list, buf_off: int = 0, value=None, packed=None):
    """Columns 64ci..64ci+63 of a 64-row wgmma accumulator `acc` (f32) as bf16 into one
    128B-swizzled 64 x 64 chunk: four ``stmatrix.sync.aligned.m8n8.x4.shared.b16`` at the lane
    addresses `col_off` (`stmatrix_lanes`) + `buf_off`, after 16 ``cvt.rn.bf16x2.f32``.
    `value(i)` (optional) gives the f32 register to store for accumulator register i (a scaled
    copy, say); by default acc[i] itself. `packed` (instead of `acc`): the accumulator already
    converted, register i / 2 holding bf16x2 of registers i, i + 1 (no cvt here)."""
    get = value or (lambda i: acc[i])

    def pair(i):
        if packed is not None:
            return packed[i // 2]
        hi = get(i + 1)
        return bf16x2(get(i), hi)
    for s in range(4):
        j = 8 * ci + 2 * s   # column groups j, j + 1; rows g and g + 8
        regs = [pair(4 * j + 2 * x) for x in range(4)]
        T.ptx.stmatrix.sync.aligned.m8n8.x4.shared.b16(col_off[s] + buf_off, regs)
