"""The tirxh side of iket: ``tirxh profile NODEID --iket [--iket-capacity N]``.

Builds the profiling build of the item (the compile pipeline plus iket's IR transform,
registered here through ``tirxh_register_transforms``), makes its job from the normal build's (as
``tirxh bench`` does) with the module swapped for the instrumented cubin and the trace buffer added, and submits
it with timing on; a second job times the normal build, so the report carries the
instrumentation overhead measured on the same board. Artifacts (trace JSON, PNG, summaries, raw
buffer and layout) are downloaded into ``request["out"]``.

Neither job carries the suite's baselines: the overhead is the instrumented build's median over
the normal build's, and timing a baseline too (torch.sdpa for attention) doubled each job's
timing loop for a figure the profile does not report. Both jobs check one correctness seed
(`PROFILE_SEEDS`), not the protocol's four: the question a profile asks of correctness is only
whether the profiling build computes what the normal build does, and for B4 H32 S2048 attention
the four seeds' inputs and numpy references took 31 s to build and 1.28 GB to upload (one: 8 s).

Phases are logged to stderr as they happen (``iket [+12.3s] ...``: profiling build compiled,
jobs built, uploaded, each KCoral state, timeline rendered on the board, artifacts downloaded,
normal build timed), so a run killed by an outer ``timeout`` still shows how far it got
(sessions 7 and 8 lost an attention profile without a clue where its 150 s went).

Capacity. ``--iket-capacity auto`` (the default) runs at `DEFAULT_CAPACITY` records per warp and,
when the board's summary says events were lost, reruns the profiling build once at the capacity
the summary suggests (the exact largest per-warp need, which the device counts past a full
region, plus 1/8: `decode.suggest_capacity`), if that trace buffer fits `AUTO_MAX_TRACE_BYTES`;
the report keeps both runs (``summary["capacity_runs"]``, and a line of the text). An explicit
``--iket-capacity N`` runs once, as asked. Why not size the buffer before the run from the IR:
the loops that repeat annotations rarely have constant trip counts (in session 15's
gemm_bf16_c2[m512n4096k4096_t128] every one has register bounds: the persistent tile loops, and
the K loops, whose tile count comes from the runtime K argument), so a static count would need the
launch's arguments evaluated through the IR and be a bound at best; one extra job of a few seconds
(the rerun) measures the need exactly.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from dataclasses import dataclass, field

from kcoral.errors import KCoralError
from tirxh.api import CompileError, build_job, client_for, hookimpl

from .instrument import DEFAULT_CAPACITY
from .job import MAX_TRACE_BYTES, profiling_job
from .transform import TRANSFORM, compile_profiling_build


PROFILE_SEEDS = (1,)  # one correctness run, before timing (module docstring)
AUTO = "auto"
# The largest trace buffer `--iket-capacity auto` reruns with on its own: 1/8 of the hard limit
# (job.MAX_TRACE_BYTES). The buffer is zero-filled on the device, copied back, saved by runjob,
# decoded on the board's CPU, written again as an artifact and downloaded; past this size a
# rerun should be the user's explicit choice (a smaller case usually answers the same question).
AUTO_MAX_TRACE_BYTES = 256 << 20


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
    parser.addoption("--iket-capacity", type=_capacity_arg, default=AUTO, metavar="N|auto",
                     help=f"profile --iket: trace records per warp; 'auto' (the default) runs "
                          f"at {DEFAULT_CAPACITY} and, if events were lost, once more at the "
                          f"measured need (trace buffer up to {AUTO_MAX_TRACE_BYTES >> 20} MiB)")


def _median_ms(result: dict) -> "float | None":
    t = (result or {}).get("timing") or {}
    return (t.get("candidate") or {}).get("median_ms")


def _clock_ghz(result: dict) -> "float | None":
    mhz = ((result or {}).get("timing") or {}).get("sm_clock_mhz") or {}
    vals = [v for v in (mhz.get("before"), mhz.get("after")) if v]
    return sum(vals) / len(vals) / 1e3 if vals else None


class Phases:
    """Progress lines on `stream` (stderr), each with the seconds since the profile began: what a
    killed run leaves behind. Repeated KCoral progress of one state (the timing loop reports
    every batch) is printed at most every `every_s` seconds."""

    def __init__(self, stream=None, every_s: float = 5.0):
        self.stream = stream if stream is not None else sys.stderr
        self.t0 = time.monotonic()
        self.every_s = every_s
        self._last = (None, -1e9)

    def __call__(self, msg: str) -> None:
        self.stream.write(f"iket [+{time.monotonic() - self.t0:6.1f}s] {msg}\n")
        self.stream.flush()

    def event(self, what: str, ev: dict) -> None:
        state, now = ev.get("state"), time.monotonic()
        if state == self._last[0] and now - self._last[1] < self.every_s:
            return
        self._last = (state, now)
        board, message = ev.get("board") or "", ev.get("message") or ""
        where = f" on {board}" if board and board not in message else ""
        self(f"{what}: {state}{where}" + (f": {message}" if message else "")[:300])


def _submit(client, doc, timeout, phases: Phases, what: str):
    last = None
    for ev in client.submit(doc, timeout=timeout):
        phases.event(what, ev)
        last = ev
    return (last or {}).get("result") or {}


def _render_times(got: dict) -> str:
    t = (got.get("summary") or {}).get("render_s") or {}
    return ", ".join(f"{k} {v:.1f} s" for k, v in t.items())


def parse_capacity(value) -> "tuple[int, bool]":
    """``--iket-capacity`` (or the request's ``capacity``): ``auto`` (or unset/0) ->
    ``(DEFAULT_CAPACITY, True)``, a positive int N -> ``(N, False)``. Raises ValueError naming
    the value otherwise."""
    if value in (None, 0, "", AUTO):
        return DEFAULT_CAPACITY, True
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if isinstance(value, bool) or n < 1 or str(n) != str(value).strip():
        raise ValueError(f"--iket-capacity {value!r}: expected 'auto' or a positive number of "
                         "records per warp")
    return n, False


def _capacity_arg(text: str):
    """argparse type of ``--iket-capacity``: 'auto' or a positive int."""
    try:
        n, auto = parse_capacity(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return AUTO if auto else n


def _loss_brief(loss: dict) -> str:
    return (f"{loss['events']} events lost in {loss['warps']} warps, the largest need "
            f"{loss['needed_max']} events a warp")


@hookimpl
def tirxh_profile_item(item, compiled, config, request):
    opt = request.get("iket")
    if not opt and not config.getoption("iket"):
        return None
    opt = dict(opt or {})
    try:
        capacity, auto = parse_capacity(opt.get("capacity") or config.getoption("iket_capacity"))
    except ValueError as e:
        return IketReport(item.name, "error", {"reason": str(e)}, f"iket: {e}")
    phases = Phases()
    grid = [int(g) for g in item.suite.grid(item.case)]
    grid3 = grid + [1] * (3 - len(grid))

    def build(cap):
        return compile_profiling_build(item.kernel, compiled.target, compiled.consts,
                                       capacity=cap, isa=getattr(config, "isa", None),
                                       cache=getattr(config, "cache", None))

    try:  # before any daemon is contacted: a kernel that cannot be instrumented runs nothing
        prof, layout = build(capacity)
    except CompileError as e:  # InstrumentError included
        return IketReport(item.name, "error", {"reason": str(e)}, f"iket: {e}")
    phases(f"profiling build compiled: {len(layout.sites)} annotation sites, capacity "
           f"{capacity} records per warp{' (auto: rerun once if events are lost)' if auto else ''}"
           f", trace buffer {layout.buffer_bytes(grid3) / 2 ** 20:.1f} MiB; building the jobs "
           "(inputs and expected outputs, on this CPU)")
    client = client_for(config)
    timeout = float(config.getini("bench", "timeout_s") or 900.0)
    sent = []

    def put(data: bytes) -> str:
        sent.append(len(data))
        return client.put_blob(data)

    plain = build_job(compiled, item.suite, item.case, seeds=PROFILE_SEEDS, put=put).to_doc()
    plain["baselines"] = []  # the overhead is a ratio of the two builds (module docstring)
    tool_opts = {k: v for k, v in opt.items() if k in ("roles", "max_sms")}

    def job_of(prof, layout):
        return profiling_job(plain, prof, layout, put(prof.cubin), options=tool_opts,
                             ir_blob=put(prof.ir_json().encode()))

    def run(doc, what):
        t = time.monotonic()
        missing = client.upload()
        phases(f"uploaded {len(missing)} blobs the daemon lacked in {time.monotonic() - t:.1f} s")
        res = _submit(client, doc, timeout, phases, what)
        got = (res.get("tools") or {}).get("iket") or {}
        rendered = _render_times(got)
        phases(f"profiling job{what[len('profiling build'):]} {res.get('status', '?')} (run {res.get('run_s', '?')} s on the "
               f"board); iket {got.get('status', 'no result')}"
               + (f"; rendered on the board: {rendered}" if rendered else ""))
        return res, got

    doc = job_of(prof, layout)
    phases(f"jobs built: inputs and expected outputs of {len(plain.get('runs', []))} runs, "
           f"{len(sent)} blobs, {sum(sent) / 2 ** 20:.0f} MiB")
    runs = []  # one entry per profiling run: its capacity and what it lost
    note = ""
    try:
        res, got = run(doc, "profiling build")
        loss = (got.get("summary") or {}).get("events_lost") if got.get("status") == "ok" else None
        runs.append({"capacity": capacity, "events_lost": loss})
        if loss and auto:
            want = int(loss["suggested_capacity"])
            if loss["suggested_bytes"] > AUTO_MAX_TRACE_BYTES:
                note = (f"iket: the run at capacity {capacity} lost events ({_loss_brief(loss)}); "
                        f"not rerun automatically: capacity {want} takes a "
                        f"{loss['suggested_bytes'] / 2 ** 20:.0f} MiB trace buffer, over auto's "
                        f"{AUTO_MAX_TRACE_BYTES >> 20} MiB; rerun with --iket-capacity {want} "
                        f"(allowed up to {MAX_TRACE_BYTES >> 30} GiB) or profile a smaller case")
                phases(note[len("iket: "):])
            else:
                phases(f"capacity {capacity} lost events ({_loss_brief(loss)}): rerunning once "
                       f"at capacity {want} ({loss['suggested_bytes'] / 2 ** 20:.1f} MiB)")
                try:  # a rerun that fails keeps the first run's timeline (incomplete)
                    prof2, layout2 = build(want)
                    res2, got2 = run(job_of(prof2, layout2), "profiling build (rerun)")
                    why = None if got2.get("status") == "ok" else (
                        got2.get("reason") or (res2.get("error") or {}).get("message")
                        or "no iket result")
                except CompileError as e:
                    why = f"the profiling build at capacity {want} failed: {e}"
                except KCoralError as e:
                    why = f"KCoral refused the job: {e.code}: {e.message}"
                except ValueError as e:  # job.add_trace_buffer's size check
                    why = str(e)
                if why is None:
                    loss2 = (got2.get("summary") or {}).get("events_lost")
                    runs.append({"capacity": want, "events_lost": loss2})
                    note = (f"iket: capacity auto: the first run, at capacity {capacity}, lost "
                            f"events ({_loss_brief(loss)}); this timeline is the rerun's, at "
                            f"capacity {want}"
                            + (f", which lost events too ({_loss_brief(loss2)})" if loss2 else
                               ", which lost none"))
                    prof, layout, res, got = prof2, layout2, res2, got2
                else:  # keep the first run's (incomplete) timeline, say why
                    runs.append({"capacity": want, "error": why})
                    note = (f"iket: capacity auto: the run at capacity {capacity} lost events "
                            f"({_loss_brief(loss)}); its rerun at capacity {want} failed "
                            f"({why}); this timeline is the first run's")
                    phases(f"rerun failed: {why}")
    except KCoralError as e:  # refused (no board for the target, bad job) or daemon gone
        return IketReport(item.name, "error", {"reason": f"{e.code}: {e.message}"},
                          f"iket: KCoral refused the job: {e.code}: {e.message}")
    if got.get("status") != "ok":
        why = got.get("reason") or (res.get("error") or {}).get("message") or "no iket result"
        return IketReport(item.name, "error", {"reason": why}, f"iket: {why}")
    out = pathlib.Path(request.get("out") or ".") / "".join(
        c if c.isalnum() or c in "-_.[]" else "_" for c in item.name)
    out.mkdir(parents=True, exist_ok=True)
    arts = {}  # downloaded before the normal build is timed: a run killed then keeps them
    for name, dg in (got.get("artifacts") or {}).items():
        (out / name).write_bytes(client.download(dg))
        arts[name] = out / name
    phases(f"{len(arts)} artifacts downloaded into {out} "
           f"({sum(p.stat().st_size for p in arts.values()) / 2 ** 20:.1f} MiB)")
    try:
        base = _submit(client, dict(plain, tools=[]), timeout, phases, "normal build")
        phases(f"normal build timed: {base.get('status', '?')}")
    except KCoralError as e:  # the timeline stands; only the overhead is missing
        base = {}
        phases(f"normal build not timed: {e.code}: {e.message}")
    s = dict(got.get("summary") or {})
    s["capacity_runs"] = runs
    inst, ref = _median_ms(res), _median_ms(base)
    s["overhead"] = {"instrumented_median_ms": inst, "plain_median_ms": ref,
                     "ratio": inst / ref if inst and ref else None,
                     "registers": {"plain": compiled.resources.registers,
                                   "instrumented": prof.resources.registers}}
    (out / "iket_summary.json").write_text(json.dumps(s, indent=1))
    text = (out / "iket_summary.txt").read_text() if (out / "iket_summary.txt").exists() else ""
    if note:
        text += "\n  " + note
    if inst and ref:
        text += (f"\n  instrumentation overhead: {inst:.4g} ms vs {ref:.4g} ms "
                 f"({inst / ref - 1:+.1%}); registers {compiled.resources.registers} -> "
                 f"{prof.resources.registers}")
    return IketReport(item.name, got.get("verdict"), s, text, arts)
