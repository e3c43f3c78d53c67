"""The tirxh side of iket: ``tirxh profile NODEID --iket [--iket-capacity N]``.

Builds the profiling build of the item (the compile pipeline plus iket's IR transform,
registered here through ``tirxh_register_transforms``), makes its job from the normal build's (as
``tirxh bench`` does) with the module swapped for the instrumented cubin and the trace buffer added, and submits
it with timing on; a second job times the normal build, so the report carries the
instrumentation overhead measured on the same board. Artifacts (trace JSON, PNG, summaries, raw
buffer and layout) are downloaded into ``request["out"]``.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field

from kcoral.errors import KCoralError
from tirxh.api import CompileError, build_job, client_for, hookimpl

from .instrument import DEFAULT_CAPACITY
from .job import profiling_job
from .transform import TRANSFORM, compile_profiling_build


@dataclass
class IketReport:
    item: str
    verdict: "str | None"
    summary: dict
    text: str
    artifacts: dict = field(default_factory=dict)
    tool: str = "iket"

    def to_json(self) -> dict:
        return {"item": self.item, "tool": self.tool, "verdict": self.verdict,
                "summary": self.summary,
                "artifacts": {k: str(v) for k, v in self.artifacts.items()}}


@hookimpl
def tirxh_register_transforms(registry):
    registry.add(TRANSFORM, owner="iket")


@hookimpl
def tirxh_addoption(parser):
    parser.addoption("--iket", action="store_true", default=False,
                     help="profile: record an intra-kernel timeline of the T.iket annotations")
    parser.addoption("--iket-capacity", type=int, default=DEFAULT_CAPACITY, metavar="N",
                     help=f"profile --iket: trace records per warp (default {DEFAULT_CAPACITY})")


def _median_ms(result: dict) -> "float | None":
    t = (result or {}).get("timing") or {}
    return (t.get("candidate") or {}).get("median_ms")


def _clock_ghz(result: dict) -> "float | None":
    mhz = ((result or {}).get("timing") or {}).get("sm_clock_mhz") or {}
    vals = [v for v in (mhz.get("before"), mhz.get("after")) if v]
    return sum(vals) / len(vals) / 1e3 if vals else None


def _submit(client, doc, timeout):
    last = None
    for ev in client.submit(doc, timeout=timeout):
        last = ev
    return (last or {}).get("result") or {}


@hookimpl
def tirxh_profile_item(item, compiled, config, request):
    opt = request.get("iket")
    if not opt and not config.getoption("iket"):
        return None
    opt = dict(opt or {})
    capacity = int(opt.get("capacity") or config.getoption("iket_capacity") or DEFAULT_CAPACITY)
    try:  # before any daemon is contacted: a kernel that cannot be instrumented runs nothing
        prof, layout = compile_profiling_build(item.kernel, compiled.target, compiled.consts,
                                               capacity=capacity, isa=getattr(config, "isa", None),
                                               cache=getattr(config, "cache", None))
    except CompileError as e:  # InstrumentError included
        return IketReport(item.name, "error", {"reason": str(e)}, f"iket: {e}")
    client = client_for(config)
    timeout = float(config.getini("bench", "timeout_s") or 900.0)
    plain = build_job(compiled, item.suite, item.case, put=client.put_blob).to_doc()
    doc = profiling_job(plain, prof, layout, client.put_blob(prof.cubin),
                        options={k: v for k, v in opt.items() if k in ("roles", "max_sms")},
                        ir_blob=client.put_blob(prof.ir_json().encode()))
    try:
        res = _submit(client, doc, timeout)
        base = _submit(client, dict(plain, tools=[]), timeout)
    except KCoralError as e:  # refused (no board for the target, bad job) or daemon gone
        return IketReport(item.name, "error", {"reason": f"{e.code}: {e.message}"},
                          f"iket: KCoral refused the job: {e.code}: {e.message}")
    got = (res.get("tools") or {}).get("iket") or {}
    out = pathlib.Path(request.get("out") or ".") / "".join(
        c if c.isalnum() or c in "-_.[]" else "_" for c in item.name)
    out.mkdir(parents=True, exist_ok=True)
    if got.get("status") != "ok":
        why = got.get("reason") or (res.get("error") or {}).get("message") or "no iket result"
        return IketReport(item.name, "error", {"reason": why}, f"iket: {why}")
    arts = {}
    for name, dg in (got.get("artifacts") or {}).items():
        (out / name).write_bytes(client.download(dg))
        arts[name] = out / name
    s = dict(got.get("summary") or {})
    inst, ref = _median_ms(res), _median_ms(base)
    s["overhead"] = {"instrumented_median_ms": inst, "plain_median_ms": ref,
                     "ratio": inst / ref if inst and ref else None,
                     "registers": {"plain": compiled.resources.registers,
                                   "instrumented": prof.resources.registers}}
    (out / "iket_summary.json").write_text(json.dumps(s, indent=1))
    text = (out / "iket_summary.txt").read_text() if (out / "iket_summary.txt").exists() else ""
    if inst and ref:
        text += (f"\n  instrumentation overhead: {inst:.4g} ms vs {ref:.4g} ms "
                 f"({inst / ref - 1:+.1%}); registers {compiled.resources.registers} -> "
                 f"{prof.resources.registers}")
    return IketReport(item.name, got.get("verdict"), s, text, arts)
