"""Co-residency: does a kernel whose CTAs wait on other CTAs fit on the GPU all at once?

numsim runs as many CTAs as it likes side by side; a GPU runs only what fits (CTAs per SM from
threads, registers, shared memory and the per-SM CTA cap, times the SMs) and starts the next CTA
only when a running one *finishes*. A CTA that spins until a CTA not yet started writes something
(a grid barrier, a wait on a later CTA) therefore hangs the GPU when the CTAs that must be running
together outnumber what fits (2026-12-01: split-K GEMMs that numsim passed hung on the H200).

What numsim sees (`tirxh_numsim.sched`): CTAs are admitted in launch order, and a further unit
is admitted early only when every admitted CTA is stuck and one of them spins on memory
(`Scheduler.note_forced_admission`). At that moment every live CTA waits, so on a GPU they would
all hold their SM slots while the next CTA must still start: the kernel needs at least
``live + 1`` resident CTAs, at most ``live + unit`` (numsim admits a batch of CTAs at once
without a trace, so which of them releases the waiters is not known). Patterns that only wait
on CTAs already started -- tiles handed out by an atomic ticket in start order, waiting on
earlier tickets (zoo/kernels/cumsum.py), or turnstiles on earlier CTAs -- never force an
admission and are never flagged.

Findings: ``numsim.co-residency`` (error) when even the lower bound exceeds what fits; review
when only the upper bound does; incomplete when the bound cannot be computed (registers unknown:
a kernel simulated without its compiled resources).
"""

from __future__ import annotations

from dataclasses import dataclass

from tirxh.api import Finding, SourceRef

# Per-SM limits of the H200 (compute capability 9.0; CUDA programming guide, "Technical
# Specifications per Compute Capability"; 132 SMs on the H200 SXM).
H200 = dict(sms=132, threads_per_sm=2048, ctas_per_sm=32, regs_per_sm=65536,
            smem_per_sm=233472, smem_reserved_per_cta=1024, reg_alloc_unit=256, warp=32)
MAX_REGS = 255  # registers per thread at most: the fewest CTAs that can fit


@dataclass
class Need:
    """How many CTAs must be resident together: `low` certainly, `high` at most (see module)."""

    low: int = 0
    high: int = 0


def ctas_per_sm(threads: int, regs: "int | None", smem: int, lim: dict = H200) -> int:
    """Resident CTAs per SM for a CTA of `threads` threads, `regs` registers per thread and `smem`
    bytes of shared memory (static + dynamic); with `regs` None, registers are not counted (an
    upper bound)."""
    warps = -(-threads // lim["warp"])
    by = [lim["ctas_per_sm"], lim["threads_per_sm"] // (warps * lim["warp"]),
          lim["smem_per_sm"] // (smem + lim["smem_reserved_per_cta"])]
    if regs is not None:
        per_warp = -(-max(regs, 1) * lim["warp"] // lim["reg_alloc_unit"]) * lim["reg_alloc_unit"]
        by.append(lim["regs_per_sm"] // (per_warp * warps))
    return max(0, min(by))


def fit(kir, regs: "int | None", lim: dict = H200) -> int:
    """CTAs of `kir` resident on the whole GPU at once (an upper bound with `regs` None).
    numsim admits no larger batch (`Machine.units`), so a grid that does not fit spans batches
    and a wait on a CTA not started shows as a forced admission."""
    return ctas_per_sm(kir.threads_per_block, regs, smem_of(kir), lim) * lim["sms"]


def smem_of(kir) -> int:
    """Shared bytes per CTA: the launch's dynamic window and any static declarations."""
    return kir.dynamic_smem + sum(v.nbytes for v in kir.shared if not v.dynamic)


def check(need: Need, kir, regs: "int | None", grid_ctas: int, lim: dict = H200) -> list:
    """Findings for a run that needed `need` co-resident CTAs (empty when none was forced)."""
    if need.low == 0:
        return []
    where = SourceRef(kir.loc.file, kir.loc.line)
    threads = kir.threads_per_block
    smem = smem_of(kir)
    said = (f"kernel {kir.name!r}: a CTA waits on a CTA that has not started (a grid barrier "
            f"or a wait on a later CTA), so {need.low}"
            f"{f'..{need.high}' if need.high > need.low else ''} of its {grid_ctas} CTAs must be "
            "resident at once")
    data = {"need_low": need.low, "need_high": need.high, "grid_ctas": grid_ctas}
    most = ctas_per_sm(threads, regs, smem, lim)  # registers unknown: not counted
    least = ctas_per_sm(threads, MAX_REGS if regs is None else regs, smem, lim)
    fit = most * lim["sms"]
    data.update(fit=fit, ctas_per_sm=most, regs=regs, threads=threads, smem=smem)
    why = (f"{most} CTA(s) per SM ({threads} threads, {regs if regs is not None else 'any'} "
           f"registers, {smem} B shared) x {lim['sms']} SMs = {fit}")
    if need.low > fit:
        return [Finding("numsim.co-residency", f"{said}, but only {why} fit on an H200: the GPU "
                        "hangs (the waiting CTAs never leave their SMs)", "error", where,
                        data=data)]
    if need.high <= least * lim["sms"]:
        return []
    if regs is None:
        return [Finding("numsim.co-residency", f"{said}; how many fit depends on the register "
                        f"count, unknown here (simulate the compiled kernel): {least * lim['sms']}"
                        f"..{fit}", "incomplete", where, data=data)]
    return [Finding("numsim.co-residency", f"{said}; {why} fit on an H200, so it may hang "
                    "(numsim admitted CTAs in batches: run with trace=True for the exact "
                    "count)", "review", where, data=data)]
