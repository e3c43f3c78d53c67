"""Load zoo kernel modules by file (the zoo is a tirxh project, not a package) and run their
small cases in numsim against their references."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np

import tirxh.lang as T

ZOO = Path(__file__).resolve().parents[2] / "zoo" / "kernels"


@functools.lru_cache(maxsize=None)
def load(stem: str):
    spec = importlib.util.spec_from_file_location(f"zoo_test_{stem}", ZOO / f"{stem}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def small_cases(stem: str) -> list:
    return [c for c in load(stem).SUITE.cases if c.small]


def simulate(suite, case, inputs=None, seed: int = 0):
    """One numsim launch of `case` (fresh inputs unless given); returns (result, inputs)."""
    import tirxh_numsim as ns  # the numsim plugin distribution (installed with the project)
    inputs = suite.make_inputs(case, seed) if inputs is None else inputs
    res = ns.run(suite.kernel, inputs, grid=suite.grid(case), outputs=list(suite.outputs),
                 consts=suite.consts(case))
    return res, inputs


def assert_matches(suite, case, res, inputs) -> None:
    """Every output within the suite's tolerance of the reference, and a clean verdict."""
    assert res.verdict == "clean", [f.message for f in res.diagnostics]
    expected = suite.expected(case, inputs)
    for name in suite.outputs:
        rep = suite.tolerance_for(name).compare(res.outputs[name], expected[name])
        assert rep["ok"], (name, rep)
    assert all(np.isfinite(np.asarray(res.outputs[n], np.float64)).all()
               for n in suite.outputs if np.asarray(res.outputs[n]).dtype.kind == "f" or
               "bfloat16" in str(np.asarray(res.outputs[n]).dtype))


def normalized_rms_errors(suite, case, res, inputs) -> dict:
    """{output: RMS(result - reference) / RMS(reference)} of one simulated case."""
    expected = suite.expected(case, inputs)
    out = {}
    for name in suite.outputs:
        ref = np.asarray(expected[name], np.float64)
        err = np.asarray(res.outputs[name], np.float64) - ref
        out[name] = float(np.sqrt(np.mean(err ** 2) / np.mean(ref ** 2)))
    return out


def matches_within(suite, case) -> dict:
    """Simulate `case`, assert it matches the reference (`assert_matches`) and return its
    `normalized_rms_errors`, for a test to hold them below the kernel's measured level."""
    res, inputs = simulate(suite, case)
    assert_matches(suite, case, res, inputs)
    return normalized_rms_errors(suite, case, res, inputs)


def load_mutant(stem: str, old: str, new: str, tmp_path):
    """The zoo module with one exact piece of its source replaced (the piece must occur once)."""
    src = (ZOO / f"{stem}.py").read_text()
    assert src.count(old) == 1, f"{stem}.py no longer holds the one {old!r} this test mutates"
    path = tmp_path / f"{stem}_mutant.py"
    path.write_text(src.replace(old, new))
    spec = importlib.util.spec_from_file_location(f"zoo_mutant_{stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def mismatches(suite, case, res, inputs) -> bool:
    """Whether any output differs from the reference beyond the suite's tolerance."""
    expected = suite.expected(case, inputs)
    return any(not suite.tolerance_for(n).compare(res.outputs[n], expected[n])["ok"]
               for n in suite.outputs)


def declare(suite, case, constraints):
    """Declare `suite`'s kernel again with `case` alone under `constraints`: a refused shape
    raises here, as the zoo module's own suite would when the module is collected."""
    return T.suite(suite.kernel, inputs=suite.inputs, reference=suite.reference,
                   outputs=suite.outputs, cases=[case], constraints=constraints)


def relaunch_on_scratch(suite, case, res, inputs):
    """A second launch of a scan with flags (zoo/kernels/cumsum*.py) on the first launch's
    scratch, `flags` and `counter` left in place as a timing loop leaves them, the rows
    reversed; its outputs must match. Returns (result, flag statuses, flag epochs) as sets."""
    again = dict(inputs, x=np.flip(inputs["x"], axis=1).copy(),
                 flags=res.outputs["flags"], counter=res.outputs["counter"])
    res2, _ = simulate(suite, case, inputs=again)
    assert_matches(suite, case, res2, again)
    tags = res2.outputs["flags"] >> np.uint64(32)
    return (res2, set((tags & np.uint64(3)).tolist()),
            set((tags >> np.uint64(2)).tolist()))


REGS_PER_SM, SMEM_PER_SM, CTA_RESERVED = 65536, 228 * 1024, 1024  # the H200 (sm_90)


def ctas_per_sm(suite, case, block: int, maxreg: int, stash: int) -> int:
    """How many CTAs of a scan's H200 case (zoo/kernels/cumsum_smem.py, cumsum_tma.py) one SM
    holds, from what ptxas built: registers at most the cap `maxreg` and no spill traffic
    (asserted), `block` threads, at least `stash` bytes of shared memory; CTAs are limited by
    `maxreg` registers a thread and shared memory + 1 KB reserved each."""
    compiled = suite.kernel.compile("sm_90a", **suite.consts(case))
    res = compiled.resources
    res = res() if callable(res) else res
    assert res.registers <= maxreg and res.spill_stores == res.spill_loads == 0
    meta = compiled.launch_metadata
    meta = meta() if callable(meta) else meta
    smem = meta["dynamic_smem"] + res.smem_static
    assert meta["block"][0] == block and smem >= stash
    return min(REGS_PER_SM // (block * maxreg), SMEM_PER_SM // (smem + CTA_RESERVED))


def kcoral_job_on_sim(suite, case, tmp_path) -> dict:
    """What the H200 run does with `case`, on the CPU: KCoral's whole job (seeds, repeated
    launches on one scratch, the perturbation guard) on numsim's board; returns its result."""
    from kcoral.blobs import BlobStore
    from kcoral.boards import BoardSpec
    from kcoral.measure import run_job
    from kcoral.plugins import registries
    from tirxh.api import build_job
    from tirxh_numsim.kcoral_board import SimDevice
    blobs = BlobStore(tmp_path / "blobs")
    compiled = suite.kernel.compile("sm_90a", **suite.consts(case))
    job = build_job(compiled, suite, case, put=blobs.put)
    dev = SimDevice(BoardSpec("sim0", "sim", "sm_90a", timing=False))
    dev.begin_job(job.doc)
    return run_job(job, dev, blobs, registries().baselines, lambda *a: None)


def scan_error_and_bound(suite, case, tile: int, seed: int = 5):
    """A scan kernel (zoo/kernels/cumsum*.py) on normal data (sd 10, off the suite's dyadic
    grid): each element's error against the float64 cumsum, and the bound `cumsum`'s docstring
    states, (log2(tile) + tiles up to it) * eps * sum |x| up to it."""
    inputs = suite.make_inputs(case, 3)
    rng = np.random.default_rng(seed)
    inputs["x"] = (rng.standard_normal(inputs["x"].shape) * 10).astype(np.float32)
    res, _ = simulate(suite, case, inputs=inputs)
    x = inputs["x"].astype(np.float64)
    err = np.abs(res.outputs["out"] - np.cumsum(x, axis=1))
    tiles_before = np.arange(x.shape[1]) // tile + 1
    eps = np.finfo(np.float32).eps
    return err, (np.log2(tile) + tiles_before) * eps * np.cumsum(np.abs(x), axis=1)
