"""The persistent tile orders of zoo/kernels/attention.py (issue 16) and a scheduling model of
them: one copy of the order's arithmetic, run by the kernel on device registers and here on
Python integers, so the model's per-CTA tile lists are the kernel's own.

A tile is 128 query rows (query block mb) of one (b, h); causal, it walks mb + 1 KV blocks.
CTA c of G (the grid) takes, round by round, the tiles `TileOrder.tile(k)` names:

- ``"snake"`` (every variant before issue 16's causal study): a linear order of sections of HG
  heads, inside a section query block nm - 1 - i then the head; round k takes position
  k G + c, or k G + G - 1 - c in odd rounds. Even only where a section's cost ramp lines up
  with pairs of rounds: the causal costs fall from nm to 1 blocks inside each section and jump
  back at the next, so at B2 H16 S16384 (sections of 2 heads: 256 tiles against 264 positions
  a pair of rounds) CTA loads run from 1040 to 3023 blocks (mean 2002), at B4 H32 S2048 from
  104 to 219 (mean 132), while B4 H32 S8192 is within 3% (see `main`).
- ``"pairs"`` (causal): a unit is query blocks nm - 1 - p and p of one head (p < nm / 2, the
  middle block alone when nm is odd): nm + 1 KV blocks, the same for every unit. Units are in
  section order (HG heads, p, then the head) and CTA c takes unit j G + c in rounds 2j (the
  long tile) and 2j + 1 (the short one), so every CTA does the same work but for the last,
  partial round of R = U mod G units (F = U / G full rounds). Where 3 R <= 2 G that round is
  split: CTA c < R takes the long tile of unit F G + c, the CTAs without one short tiles, and
  when 2 R > G the short tiles left over (the cheapest) go to the CTAs with the cheapest long
  ones: the last units are those of the last section with the largest p (nearest the middle),
  so the tail costs about its longest tile (nm - p blocks), not a whole unit.

`ops` carries what integers and registers spell differently: `sel(a, b, p)` (a if p else b:
``selp.u32`` on the device), `umin` (``min.u32``), `grid()` and `cta()` (``%nctaid.x``,
``%ctaid.x``); everything else is ``//``, ``*``, ``+``, ``-``, ``&``, ``>>`` and comparisons,
which TIRx values overload. (The snake's instructions come out in the order the kernel emitted
them before this module existed, so its PTX is unchanged.)
"""

from __future__ import annotations

import argparse
import sys
from types import SimpleNamespace

ORDERS = ("snake", "pairs")
BM = 128                       # query rows per tile (attention.BM)
D = 128                        # head dimension
L2_WORKING_SET = 16 << 20      # the K and V bytes a schedule section keeps hot (H200 L2: 50 MB)


def host_ops(grid: int, cta: int) -> SimpleNamespace:
    """The integer `ops` of CTA `cta` of `grid` (the model's)."""
    return SimpleNamespace(sel=lambda a, b, p: a if p else b, umin=min, grid=lambda: grid,
                           cta=lambda: cta)


def heads_per_section(H: int, HKV: int, S: int) -> int:
    """Query heads per schedule section (HG): as many KV heads as keep ~16 MB of K and V in L2
    (S * 512 bytes each), times the query heads that share each; at most every head."""
    kv = max(1, min(HKV, L2_WORKING_SET // (S * D * 2 * 2)))
    return min(H, kv * (H // HKV))


class TileOrder:
    """The tile order of one launch: `tile(k)` -> (idx, half) of round k for this CTA,
    `valid(idx)`, `coords(idx, half)` -> (b, h, mb, keep): keep is False (a Python bool for
    "snake") only for the missing short half of an odd nm's middle unit."""

    def __init__(self, order: str, bh, H: int, HG: int, nm, ops):
        if order not in ORDERS:
            raise ValueError(f"attention_fwd: ORDER = {order!r}: expected one of {ORDERS}")
        self.order, self.H, self.HG, self.ops, self.nm, self.bh = order, H, HG, ops, nm, bh
        if order == "snake":
            self.count = bh * nm                       # tiles
            self.span = nm * HG
        else:
            self.npair = (nm + 1) >> 1
            self.count = bh * self.npair               # units
            self.span = self.npair * HG
        self.grid = grid = ops.grid()
        self.cta = ops.cta()
        if order == "snake":
            self.rounds = (self.count + (grid - 1)) // grid
        else:
            self.full = self.count // grid             # F: rounds of units every CTA runs
            self.rest = self.count - self.full * grid  # R: units of the last, partial round
            self.rounds = ((self.count + (grid - 1)) // grid) * 2

    def tile(self, k):
        """(idx, half) of round k: the snake's linear tile index (half 0), or the pair order's
        unit and which of its tiles (0: the long one, 1: the short one); idx == count (never
        valid) where a split tail round gives this CTA nothing."""
        sel, g, c = self.ops.sel, self.grid, self.cta
        if self.order == "snake":
            odd = (k & 1) == 1
            idx = sel(g - 1 - c, c, odd)
            return k * g + idx, 0
        j, half = k >> 1, k & 1
        base, rest, none = self.full * g, self.rest, self.count
        # the split tail round (j == F, where 3 R <= 2 G): in round 2F CTA c < R runs the long
        # tile of unit F G + c, CTA c >= R the short tile of unit F G + c + R - G (if >= 0);
        # in round 2F + 1 CTA c in [G - R, R) (only when 2 R > G) the short tile of unit
        # F G + R - 1 - c: the cheapest short tiles beside the cheapest long ones. `none`
        # (the count): no tile.
        u_even = sel(base + c, sel(base + (c + rest - g), none, c + rest >= g), c < rest)
        u_odd = sel(base + (rest - 1 - c), none, (c + rest >= g) & (c < rest))
        u_tail = sel(u_odd, u_even, half == 1)
        h_tail = sel(1, sel(0, 1, c < rest), half == 1)
        tail = (j == self.full) & (rest * 3 <= (g << 1))
        return sel(u_tail, j * g + c, tail), sel(h_tail, half, tail)

    def valid(self, idx):
        return idx < self.count

    def coords(self, idx, half):
        """(b, h, mb, keep) of a valid idx."""
        sec = idx // self.span
        r = idx - sec * self.span
        first = sec * self.HG
        width = self.ops.umin(self.bh - first, self.HG)
        i = r // width
        bh = first + (r - i * width)
        b = bh // self.H
        if self.order == "snake":
            return b, bh - b * self.H, self.nm - 1 - i, True
        mb = self.ops.sel(i, self.nm - 1 - i, half == 1)
        return b, bh - b * self.H, mb, (half == 0) | ((i << 1) + 1 < self.nm)


# --- the model -----------------------------------------------------------------------------------

def per_cta(order: str, B: int, S: int, H: int, HG: int, grid: int) -> list:
    """[(b, h, mb), ...] for each CTA, in the order it runs them: the kernel's own arithmetic
    on integers."""
    nm = -(-S // BM)
    grid = min(grid, B * H * nm)
    out = []
    for c in range(grid):
        tiles = TileOrder(order, B * H, H, HG, nm, host_ops(grid, c))
        mine = []
        for k in range(tiles.rounds):
            idx, half = tiles.tile(k)
            if tiles.valid(idx):
                b, h, mb, keep = tiles.coords(idx, half)
                if keep:
                    mine.append((b, h, mb))
        out.append(mine)
    return out


def makespan(per: list, causal: bool = True, nkv: int = 0, overhead: float = 0.0) -> dict:
    """Each CTA's load in KV-block times (a tile: mb + 1 blocks causal, nkv otherwise, plus
    `overhead` blocks per tile), the largest (the kernel's time if a block costs the same
    everywhere), the mean (a perfect balance) and their ratio."""
    loads = [sum((mb + 1 if causal else nkv) + overhead for _, _, mb in tiles) for tiles in per]
    mean = sum(loads) / len(loads)
    return {"max": max(loads), "min": min(loads), "mean": mean, "efficiency": mean / max(loads)}


def kv_heads_in_flight(order: str, per: list, H: int, HKV: int) -> int:
    """The most distinct (b, KV head) pairs whose K and V one round of the order reads at once
    (a round of units for "pairs": two tiles a CTA), what the sections keep within the L2."""
    step = 2 if order == "pairs" else 1
    rounds = max(len(tiles) for tiles in per)
    return max(len({(b, h // (H // HKV)) for tiles in per for b, h, _ in tiles[k:k + 1]})
               for k in range(0, rounds, step))


def check_cover(per: list, B: int, S: int, H: int) -> None:
    """Every tile exactly once (ValueError naming the first tile run twice or never)."""
    seen = {}
    for c, tiles in enumerate(per):
        for t in tiles:
            if t in seen:
                raise ValueError(f"tile {t} run by CTAs {seen[t]} and {c}")
            seen[t] = c
    want = {(b, h, mb) for b in range(B) for h in range(H) for mb in range(-(-S // BM))}
    if set(seen) != want:
        raise ValueError(f"tiles never run: {sorted(want - set(seen))[:4]}")


def predict(shapes, grid: int, hg, block_us: dict, overhead: float = 0.0) -> list:
    """Rows (shape, order, model dict, predicted us, TFLOP/s) for causal `shapes` (B, H, HKV,
    S): the makespan in blocks times a block's time, `block_us[shape]` (taken from a measured
    run of one order, so the prediction for another order is a ratio of makespans)."""
    rows = []
    for B, H, HKV, S in shapes:
        flops = 2 * B * H * S * S * 128
        for order in ORDERS:
            m = makespan(per_cta(order, B, S, H, hg(H, HKV, S), grid), overhead=overhead)
            us = m["max"] * block_us[(B, H, HKV, S)]
            rows.append(((B, H, HKV, S), order, m, us, flops / us / 1e6))
    return rows


def _shape(text: str) -> tuple:
    try:
        B, H, HKV, S = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shape {text!r}: expected B,H,HKV,S (four integers)")
    return B, H, HKV, S


def main(argv=None) -> int:
    """Print the model's table (markdown) for causal shapes: per order the largest and mean CTA
    load in KV blocks, the balance, and the time predicted from one block's time."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", type=_shape, action="append", required=True,
                   help="B,H,HKV,S (repeat for several)")
    p.add_argument("--grid", type=int, default=132)
    p.add_argument("--block-us", type=float, default=3312.99 / 2079,
                   help="one KV block's time on one SM (default: B4 H32 S8192 causal_lazy8, "
                        "3312.99 us measured over the snake's 2079-block makespan)")
    p.add_argument("--overhead", type=float, default=0.0, help="extra blocks per tile")
    a = p.parse_args(argv)
    print("| shape (B, H, HKV, S) | order | max / mean CTA load (blocks) | balance | predicted "
          "us | TFLOP/s |\n| --- | --- | --- | --- | --- | --- |")
    for shape, order, m, us, tf in predict(a.shape, a.grid, heads_per_section,
                                           {s: a.block_us for s in a.shape}, a.overhead):
        print(f"| {shape} | {order} | {m['max']:.0f} / {m['mean']:.1f} | "
              f"{m['efficiency']:.3f} | {us:.0f} | {tf:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
