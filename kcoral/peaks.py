"""Physical peaks per device: the floor a measured time is held against, with the source of each
figure.

A time below ``max(flops / peak FLOP/s, bytes / peak bandwidth)`` is impossible on that device,
so such a result is flagged ``suspect`` (the declared work or the kernel's output is wrong), never
celebrated. The floor must come from the device the job ran on: before issue 17 every device that
was not an H100 silently got the H200's figures. A device that is not in `TABLE` gets no floor
and the result says so (``floor_note``); an operator sets ``[boards.cuda] peak_flops_per_s`` and
``peak_bytes_per_s`` for it.

The figures are the vendor's datasheet peaks -- dense BF16 tensor-core FLOP/s (the sparse figure
halved) and DRAM bandwidth -- because a floor may only flag what is physically impossible: an
achievable figure (the H200's 4.25 TB/s device copy, 740 TFLOP/s cuBLAS GEMM in
shared/ANCHORS.md) would flag a kernel that does better than cuBLAS. Where the datasheet leaves
room for doubt the larger reading is taken (a floor too low misses a cheat; one too high would
accuse an honest kernel), and the source says so. ``match`` is a regular expression searched in the
device name the CUDA driver reports (``cuDeviceGetName``); rows are tried in order, so a
specific name (``H100 PCIe``) comes before the general one (``H100``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

T, G = 1e12, 1e9

#: Tensor-core input types a suite may declare its FLOPs in (`Work.flops_dtype`). 8-bit types
#: run at the FP8/INT8 rate where the device has one; every other type (f16, tf32, f32 on FMA
#: pipes) is at most the BF16 rate, so the BF16 peak stays a valid floor for them.
FLOPS_DTYPES = ("bf16", "f16", "tf32", "f32", "fp8", "int8")
EIGHT_BIT = ("fp8", "int8")


@dataclass(frozen=True)
class Peak:
    device: str
    match: str
    flops_per_s: float   # dense BF16 tensor-core
    bytes_per_s: float   # DRAM bandwidth
    source: str
    fp8_flops_per_s: "float | None" = None  # dense FP8 tensor-core (None: no FP8 pipe)


_A100 = "NVIDIA A100 Tensor Core GPU datasheet (BF16 312 TFLOPS dense, 624 with sparsity)"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet"
_BW = "NVIDIA Blackwell datasheets"

TABLE = (
    Peak("A100 SXM4 80GB", r"A100[- ]SXM4?[- ]80GB|A100-SXM-80GB", 312 * T, 2039 * G,
         _A100 + "; HBM2e 2,039 GB/s"),
    Peak("A100 SXM4 40GB", r"A100[- ]SXM", 312 * T, 1555 * G, _A100 + "; HBM2 1,555 GB/s"),
    Peak("A100 PCIe 80GB", r"A100 80GB PCIe", 312 * T, 1935 * G, _A100 + "; HBM2e 1,935 GB/s"),
    Peak("A100 PCIe 40GB", r"A100[- ]PCIE", 312 * T, 1555 * G, _A100 + "; HBM2 1,555 GB/s"),
    Peak("H100 PCIe", r"H100 PCIe", 756 * T, 2000 * G,
         _H100 + " (PCIe: BF16 1,513 TFLOPS with sparsity; FP8 3,026; HBM2e 2 TB/s)", 1513 * T),
    Peak("H100 NVL", r"H100 NVL", 835 * T, 3900 * G,
         _H100 + " (NVL: BF16 1,671 TFLOPS with sparsity; FP8 3,341; HBM3 3.9 TB/s)", 1670.5 * T),
    Peak("H100 SXM", r"H100", 989.4 * T, 3350 * G,
         _H100 + " (SXM: BF16 1,979 TFLOPS with sparsity; FP8 3,958; HBM3 3.35 TB/s)", 1979 * T),
    Peak("H200 NVL", r"H200 NVL", 835.5 * T, 4800 * G,
         _H200 + " (NVL: BF16 1,671 TFLOPS with sparsity; FP8 3,341; HBM3e 4.8 TB/s)", 1670.5 * T),
    Peak("H200 SXM", r"H200", 989.4 * T, 4800 * G,
         _H200 + " (SXM: BF16 1,979 TFLOPS with sparsity; FP8 3,958; HBM3e 4.8 TB/s)", 1979 * T),
    Peak("GB200", r"GB200", 2500 * T, 8000 * G,
         _BW + " (GB200 NVL72, per GPU: BF16 5 PFLOPS with sparsity; FP8 10; HBM3e 8 TB/s)",
         5000 * T),
    Peak("B200", r"\bB200", 2250 * T, 8000 * G,
         _BW + " (HGX B200, per GPU: BF16 4.5 PFLOPS with sparsity; FP8 9; HBM3e 8 TB/s)",
         4500 * T),
    Peak("Jetson AGX Thor (T5000)", r"\bThor\b", 517.5 * T, 273 * G,
         "NVIDIA Jetson AGX Thor datasheet: 1,035 FP8 TFLOPS, LPDDR5X 273 GB/s; BF16 taken as "
         "half the FP8 figure read as dense (the larger reading: a floor must not accuse)",
         1035 * T),
)


def peak_for(device_name: str) -> "Peak | None":
    """The table's row for a device name as the driver reports it, or None."""
    for p in TABLE:
        if re.search(p.match, device_name or ""):
            return p
    return None


def peak_info(device_name: str, overrides: "dict | None" = None) -> dict:
    """The peak fields of a board's ``info()``: ``peak_flops_per_s``, ``peak_bytes_per_s`` and
    ``peak_source``; for a device not in the table (and not set by the operator) only
    ``peak_unknown``, saying so. `overrides` are ``[boards.cuda] peak_flops_per_s`` /
    ``peak_bytes_per_s``, which win over the table."""
    o = {k: float(v) for k, v in (overrides or {}).items()
         if k in ("peak_flops_per_s", "peak_bytes_per_s", "peak_fp8_flops_per_s")
         and v is not None}
    p = peak_for(device_name)
    if p is None and len(o) < 2:
        return {"peak_unknown": f"device {device_name!r} is not in kcoral's peak table "
                                f"(kcoral/peaks.py: {', '.join(x.device for x in TABLE)}): no "
                                f"floor; set [boards.cuda] peak_flops_per_s and "
                                f"peak_bytes_per_s for it"}
    out = {"peak_flops_per_s": p.flops_per_s if p else None,
           "peak_bytes_per_s": p.bytes_per_s if p else None,
           "peak_source": f"{p.device}: {p.source}" if p else "operator"}
    if p is not None and p.fp8_flops_per_s:
        out["peak_fp8_flops_per_s"] = p.fp8_flops_per_s
    if o:
        out.update(o)
        out["peak_source"] = f"operator ([boards.cuda] {', '.join(sorted(o))})" + (
            f"; table: {out['peak_source']}" if p else "")
    return out


def flops_peak(info: dict, flops_dtype: "str | None") -> "float | None":
    """The FLOP/s peak a board's `info` holds work of `flops_dtype` against: the 8-bit rate for
    fp8/int8 (None where the board has no 8-bit figure: then only the bytes give a floor, since
    the BF16 figure would accuse an honest fp8 kernel), the BF16 rate for every other type."""
    if flops_dtype in EIGHT_BIT:
        return info.get("peak_fp8_flops_per_s")
    return info.get("peak_flops_per_s")
