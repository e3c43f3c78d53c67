"""Helpers for the zoo kernel tests: import a zoo module by path, and run one of its cases
through numsim exactly as ``tirxh check`` does (the numsim plugin's `check_case`)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ZOO = Path(__file__).resolve().parents[2] / "zoo" / "kernels"
_CACHE: dict = {}


def load(stem: str):
    """The zoo module ``zoo/kernels/<stem>.py`` (imported once)."""
    if stem not in _CACHE:
        spec = importlib.util.spec_from_file_location(f"zoo_test_{stem}", ZOO / f"{stem}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _CACHE[stem] = mod
    return _CACHE[stem]


def small_cases(*suites) -> list:
    """pytest params (suite, case) for every small case of the suites, with readable ids."""
    return [pytest.param(s, c, id=f"{s.name}[{c.name}]") for s in suites for c in s.cases
            if c.small]


def check(suite, case, seed: int = 0):
    """numsim's verdict on one case, as `tirxh check` computes it (an AnalyzerResult)."""
    plugin = pytest.importorskip("tirxh_numsim.plugin")
    return plugin.check_case(SimpleNamespace(suite=suite, case=case), seed=seed)


def simulate(suite, case, seed: int = 0):
    """(inputs, numsim outputs, expected) for one case."""
    numsim = pytest.importorskip("tirxh_numsim")
    inputs = suite.make_inputs(case, seed)
    res = numsim.run(suite.kernel, inputs, consts=suite.consts(case), grid=suite.grid(case),
                     outputs=list(suite.outputs))
    assert res.verdict == "clean", res.summary()
    return inputs, res.outputs, suite.expected(case, inputs)


def run_clean(kernel, args, grid, outputs, consts) -> dict:
    """numsim of one launch of `kernel` on `args` (the kernel's own buffers, not a Suite's
    case): its `outputs`, after asserting the verdict is clean."""
    import tirxh_numsim as ns
    res = ns.run(kernel, args, grid=grid, outputs=outputs, consts=consts)
    assert res.verdict == "clean", res.summary()
    return res.outputs


def mutant(tmp_path, stem: str, edits):
    """The zoo module ``<stem>.py`` with each (old, new) of `edits` replaced (each old must occur
    exactly once), imported as a module of its own from `tmp_path` (its sibling imports found in
    the zoo): for showing that a line of a protocol is load-bearing."""
    src = (ZOO / f"{stem}.py").read_text()
    for old, new in edits:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    path = tmp_path / f"{stem}_mutant.py"
    path.write_text(src)
    sys.path.insert(0, str(ZOO))
    try:
        spec = importlib.util.spec_from_file_location(f"{stem}_mutant", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(ZOO))
    return mod


def sync_race(suite, case, seed: int = 0):
    """sync_check's (synccheck, racecheck) results on one case (every interleaving it explores)."""
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    return analyze.check_kernel(suite.kernel, suite.make_inputs(case, seed),
                                consts=suite.consts(case), grid=suite.grid(case))


# The H200's (sm_90) per-SM limits: what decides how many CTAs of a kernel are resident at once.
SMS, SM_REGS, SM_THREADS, SM_CTAS = 132, 65536, 2048, 32
SM_SMEM, CTA_SMEM_RESERVED = 228 * 1024, 1024  # per SM; the driver reserves 1 KiB per CTA
WARP_REG_UNIT = 256  # registers are allocated per warp in units of 256


def resident_ctas_per_sm(suite, case, target: str = "sm_90a") -> int:
    """How many CTAs of `case` one SM holds at once, from the compiled kernel's register count
    and shared memory (static + dynamic) and the block size: a persistent grid larger than
    132 times this runs in two waves, and a grid whose CTAs wait on each other would hang."""
    consts = suite.consts(case)
    ck = suite.kernel.compile(target, **consts)
    md = ck.launch_metadata()
    threads = 1
    for d in md["block"]:
        threads *= d
    warps = -(-threads // 32)
    per_warp = -(-ck.resources.registers * 32 // WARP_REG_UNIT) * WARP_REG_UNIT
    smem = ck.resources.smem_static + int(md["dynamic_smem"]) + CTA_SMEM_RESERVED
    return min(SM_REGS // (warps * per_warp), SM_THREADS // threads, SM_CTAS, SM_SMEM // smem)


def spills(suite, target: str = "sm_90a") -> dict:
    """Every large (benchmarked) case whose compiled kernel spills or keeps a stack frame, with
    its resources: under a register cap (``MAXREG``) ptxas spills before it fails, and a spill
    in a memory-bound kernel is extra traffic the timing would blame on the algorithm."""
    out = {}
    for case in suite.cases:
        if case.small:
            continue
        r = suite.kernel.compile(target, **suite.consts(case)).resources
        if r.spill_stores or r.spill_loads or r.stack_frame:
            out[case.name] = r
    return out


def ticket_atomics(suite, case, target: str = "sm_90a"):
    """The compiled case's u32 counter atomics (``ATOMG.E.ADD.STRONG.GPU``), each with its result
    register and the instruction after it, and its u64 ones (``ATOMG.E.ADD.64``), with the
    kernel's resources: what `tickets.ask_ticket`'s early tickets rest on (the result lands in
    the register the ticket is held in, and nothing reads it at once; a u64 ticket held across
    a loop was split by ptxas and copied out right after the atomic, session 26)."""
    ck = suite.kernel.compile(target, **suite.consts(case))
    sass = [ln.split("*/", 1)[1].strip() for ln in ck.sass.splitlines()
            if re.match(r"\s+/\*[0-9a-f]{4,}\*/", ln)]
    u32 = [(re.match(r"ATOMG\.E\.ADD\.STRONG\.GPU PT, (R\d+),", ins).group(1), ins, sass[i + 1])
           for i, ins in enumerate(sass) if ins.startswith("ATOMG.E.ADD.STRONG.GPU")]
    u64 = [ins for ins in sass if ins.startswith("ATOMG.E.ADD.64")]
    return ck.resources, u32, u64
