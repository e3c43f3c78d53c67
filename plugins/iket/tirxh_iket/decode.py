"""Trace buffer -> events -> spans, on a common time base.

Time base. ``%globaltimer`` is a nanosecond clock shared by all SMs, but on some boards it only
advances in coarse steps (about a microsecond); ``%clock64`` counts SM cycles exactly but each SM
has its own origin. The decoder uses both: per SM, a least-squares line maps clock64 to
globaltimer over all of the SM's events, so the warps of one SM share one exact clock and the SMs
are placed on the global timer (SMs whose events span less than 20 µs are not fitted: their warps
start at their own globaltimer reading and advance by clock64 at the median fitted rate, or at
`clock_ghz`, the SM clock KCoral measured). Without any rate the decoder falls back to globaltimer
alone. `Timeline.timebase` says which was used.

Warp roles. A warp's role is the set of range names it recorded (``load``; ``mma+epilogue``), so
the producer and consumer warps of a warp-specialized kernel separate without any extra
annotation; `role_names` (warp index in the CTA -> name) overrides it.
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass, field

import numpy as np

from .layout import RECORD_BYTES, RECORD_DTYPE, VALID_BIT, LayoutError, TraceLayout

MIN_LIFETIME_FOR_RATE_NS = 20_000


def suggest_capacity(needed: int) -> int:
    """A capacity for a warp that needed `needed` events: +1/8 headroom, a multiple of 32."""
    want = needed + max(needed // 8, 1)
    return -(-want // 32) * 32


def loss_message(loss: dict) -> str:
    """The one line that says what was lost and what to rerun with."""
    return (f"{loss['events']} events lost in {loss['warps']} warps (capacity "
            f"{loss['capacity']} per warp); the largest need was {loss['needed_max']} events a "
            f"warp: rerun with --iket-capacity {loss['suggested_capacity']} (a trace buffer of "
            f"{loss['suggested_bytes'] / 2 ** 20:.1f} MiB)")


@dataclass
class Event:
    t: float          # ns since the earliest event of the trace
    kind: str         # begin | end | mark
    name: str
    where: str        # file:line of the annotation
    seq: int


@dataclass
class Span:
    name: str
    start: float
    end: float
    depth: int
    where: str

    @property
    def dur(self) -> float:
        return self.end - self.start


@dataclass
class WarpTrace:
    """The events and spans of one warp (identified by CTA and warp index in the CTA)."""

    cta: int
    warp: int
    sm: int
    hwwarp: int
    role: str = ""
    events: list = field(default_factory=list)
    spans: list = field(default_factory=list)
    marks: list = field(default_factory=list)
    dropped: int = 0
    cut: int = 0  # range ends/begins left unpaired at the gap of lost events (see `decode`)

    @property
    def needed(self) -> int:
        """Events the warp tried to write: the sequence number of its last record + 1, exact
        because the device counts every event, also those past the capacity (layout.py)."""
        return self.events[-1].seq + 1 if self.events else 0

    @property
    def covered_end(self) -> float:
        """The end of what the warp's records cover without a gap: its last event, or, when
        events were lost, the last event before them (the kept last record lies past the gap)."""
        if self.dropped:
            return self.events[-2].t if len(self.events) > 1 else self.start
        return self.end

    @property
    def start(self) -> float:
        return self.events[0].t

    @property
    def end(self) -> float:
        return self.events[-1].t


@dataclass
class Timeline:
    """A decoded trace: warps with spans, plus what the decoder could not make sense of."""

    kernel: str
    warps: list
    timebase: str
    clock_ghz: "float | None"
    issues: list = field(default_factory=list)
    t0_globaltimer: int = 0
    regions: int = 0  # warp regions in the buffer (the grid's warps): sizes a larger capacity
    capacity: int = 0

    @property
    def sms(self) -> list:
        return sorted({w.sm for w in self.warps})

    @property
    def roles(self) -> list:
        return sorted({w.role for w in self.warps})

    @property
    def duration(self) -> float:
        if not self.warps:
            return 0.0
        return max(w.end for w in self.warps) - min(w.start for w in self.warps)

    @property
    def dropped(self) -> int:
        return sum(w.dropped for w in self.warps)

    def loss(self) -> "dict | None":
        """What was lost, and the capacity that would have held it (None when nothing was).

        ``needed_max`` is exact (`WarpTrace.needed`); ``suggested_capacity`` adds 1/8 of headroom
        (a schedule decided at run time, an atomic tile counter, can give a warp more events on
        the next run) and rounds up to a multiple of 32; ``suggested_bytes`` is the trace buffer
        that capacity takes for this grid."""
        lossy = [w for w in self.warps if w.dropped]
        if not lossy:
            return None
        need = max(w.needed for w in lossy)
        cap = suggest_capacity(need)
        return {"events": sum(w.dropped for w in lossy), "warps": len(lossy),
                "needed_max": need, "capacity": self.capacity, "suggested_capacity": cap,
                "suggested_bytes": self.regions * cap * RECORD_BYTES,
                "cut_ranges": sum(w.cut for w in lossy)}


def read_buffer(data, layout: TraceLayout) -> np.ndarray:
    """Records as a ``(warps, capacity)`` structured array; checks the size fits the layout."""
    raw = np.frombuffer(bytes(data) if not isinstance(data, np.ndarray) else data.tobytes(),
                        dtype=np.uint8)
    per_warp = layout.capacity * RECORD_DTYPE.itemsize
    if raw.size == 0 or raw.size % per_warp:
        raise LayoutError(f"trace buffer of {raw.size} bytes is not a whole number of warp regions "
                          f"({layout.capacity} records x {RECORD_DTYPE.itemsize} bytes) for "
                          f"kernel {layout.kernel!r}")
    return raw.view(RECORD_DTYPE).reshape(-1, layout.capacity)


def decode(data, layout: TraceLayout, clock_ghz: "float | None" = None,
           timebase: str = "auto", role_names: "dict | None" = None) -> Timeline:
    """Decode a trace buffer written by the profiling build described by `layout`.

    timebase: ``auto`` (globaltimer anchors + clock64 deltas when a clock rate is known),
    ``globaltimer`` or ``clock``.
    """
    if timebase not in ("auto", "globaltimer", "clock"):
        raise ValueError(f"timebase {timebase!r} is not 'auto', 'globaltimer' or 'clock'")
    recs = read_buffer(data, layout)
    issues: list[str] = []
    nsites = len(layout.sites)
    raw_warps = []
    for gw in np.nonzero((recs["event"] & VALID_BIT).any(axis=1))[0]:
        r = recs[gw]
        r = r[(r["event"] & VALID_BIT) != 0]
        r = r[np.argsort(r["seq"], kind="stable")]
        dropped = 0
        last = len(r) - 1
        if len(r) == layout.capacity and int(r["seq"][last]) > layout.capacity - 1:
            dropped = int(r["seq"][last]) - (layout.capacity - 1)
        sites = r["event"] & ~np.uint32(VALID_BIT)
        if (sites >= nsites).any():
            issues.append(f"warp {int(gw)}: event site {int(sites.max())} is not in the layout "
                          f"({nsites} sites): buffer and layout do not match")
            continue
        raw_warps.append((int(gw), r, dropped))
    if not raw_warps:
        return Timeline(layout.kernel, [], "none", clock_ghz,
                        issues + ["the trace buffer holds no events (did the kernel run the "
                                  "profiling build, and do its warps reach an annotation?)"])

    fits, rate, used = _time_base(raw_warps, clock_ghz, timebase)
    t0 = min(int(r["globaltimer"][0]) for _, r, _ in raw_warps)
    timed = []
    for gw, r, dropped in raw_warps:
        sm = int(r["smid"][0])
        gt = (r["globaltimer"].astype(np.int64) - t0).astype(np.float64)
        clk = r["clock"].astype(np.float64)
        if used == "globaltimer":
            ts = gt
        elif sm in fits:  # the SM's own line: every warp of the SM on one consistent clock
            a, b = fits[sm]
            ts = a + b * clk - t0
        else:  # too few events on this SM to fit: anchor on the warp's first reading
            ts = gt[0] + (clk - clk[0]) / rate
        timed.append((gw, r, dropped, sm, ts))
    first = min(float(ts[0]) for *_, ts in timed)  # times are relative to the earliest event
    warps = []
    for gw, r, dropped, sm, ts in timed:
        w = WarpTrace(cta=gw // layout.warps_per_cta, warp=gw % layout.warps_per_cta,
                      sm=sm, hwwarp=int(r["hwwarp"][0]), dropped=dropped)
        for rec, t in zip(r, ts):
            site = layout.sites[int(rec["event"]) & ~VALID_BIT]
            w.events.append(Event(float(t) - first, site.kind, site.name, site.where,
                                  int(rec["seq"])))
        _pair(w, issues)
        warps.append(w)
    _assign_roles(warps, role_names)
    tl = Timeline(layout.kernel, warps, used, rate if used != "globaltimer" else clock_ghz,
                  issues, t0, regions=recs.shape[0], capacity=layout.capacity)
    loss = tl.loss()
    if loss:  # one line for all lossy warps, first: it says what to do
        tl.issues.insert(0, loss_message(loss))
        if loss["cut_ranges"]:
            tl.issues.insert(1, f"{loss['cut_ranges']} ranges cut by the gap of lost events in "
                                "those warps, not reported (their spans after the gap are "
                                "missing; no range pairs across it)")
    return tl


def _time_base(raw_warps, clock_ghz, timebase) -> "tuple[dict, float, str]":
    """Per-SM fits ``globaltimer ~ a + b * clock64`` and the clock rate (cycles per ns).

    clock64 is one counter per SM, so all events of an SM are fitted together by least squares:
    a coarse globaltimer (1 us steps on some boards) quantizes each reading, and the error
    averages out over many events and a long span. SMs whose events span less than 20 us are
    not fitted; their warps are anchored on their own first globaltimer reading.
    """
    if timebase == "globaltimer":
        return {}, 0.0, "globaltimer"
    per_sm: dict = {}
    for _, r, _ in raw_warps:
        per_sm.setdefault(int(r["smid"][0]), []).append(r)
    fits = {}
    for sm, recs in per_sm.items():
        gt = np.concatenate([r["globaltimer"] for r in recs]).astype(np.float64)
        clk = np.concatenate([r["clock"] for r in recs]).astype(np.float64)
        if gt.max() - gt.min() < MIN_LIFETIME_FOR_RATE_NS:
            continue
        gm, cm = gt.mean(), clk.mean()
        b = float(np.dot(gt - gm, clk - cm) / np.dot(clk - cm, clk - cm))  # ns per cycle
        if b > 0:
            fits[sm] = (gm - b * cm, b)
    if fits:
        rate = float(np.median([1.0 / b for _, b in fits.values()]))
        return fits, rate, "globaltimer+clock64 (per-SM fit)"
    if clock_ghz:
        return {}, float(clock_ghz), "globaltimer+clock64 (board clock)"
    if timebase == "clock":
        raise ValueError("timebase 'clock' needs clock_ghz: the trace is too short to estimate "
                         "the SM clock rate")
    return {}, 0.0, "globaltimer"


def _pair(w: WarpTrace, issues: list) -> None:
    """Match begin/end events of one warp into spans (ranges nest; names must match).

    A warp that lost events kept its first ``capacity - 1`` events and its last one (layout.py):
    only the first ones are paired. The last record lies past a gap of unknown events, so a
    range is never paired across the gap (a begin before it and an end after it are usually
    different iterations, and would make one bogus long span); what the gap cuts (ranges open
    at it, an end after it) is counted in `WarpTrace.cut`, not reported per warp: it is a
    consequence of the lost events, which `decode` reports in one line. Mismatches before the
    gap are real and reported as in any warp."""
    stack: list[Event] = []
    paired = w.events[:-1] if w.dropped else w.events
    for ev in paired:
        if ev.kind == "mark":
            w.marks.append(ev)
        elif ev.kind == "begin":
            stack.append(ev)
        elif stack and stack[-1].name == ev.name:
            b = stack.pop()
            w.spans.append(Span(ev.name, b.t, ev.t, len(stack), b.where))
        else:
            top = stack[-1].name if stack else None
            issues.append(f"cta {w.cta} warp {w.warp}: end of range {ev.name!r} ({ev.where}) "
                          f"while {'range ' + repr(top) if top else 'no range'} is open "
                          "(annotations in divergent code, or lost events)")
    if w.dropped:
        last = w.events[-1]
        if last.kind == "mark":
            w.marks.append(last)
        else:  # a begin or an end past the gap: its partner is in the gap, or was before it
            w.cut += 1
        w.cut += len(stack)
    else:
        for b in stack:
            issues.append(f"cta {w.cta} warp {w.warp}: range {b.name!r} ({b.where}) never "
                          "ended (the warp exited inside it)")
    w.spans.sort(key=lambda s: (s.start, s.depth))


def _assign_roles(warps: list, role_names: "dict | None") -> None:
    for w in warps:
        if role_names and w.warp in role_names:
            w.role = str(role_names[w.warp])
            continue
        names = sorted({s.name for s in w.spans if s.depth == 0}) or \
            sorted({m.name for m in w.marks})
        w.role = "+".join(names) if names else "(none)"


def read_trace_file(path):
    """The raw buffer of a trace file: ``.npy``, or ``.bin`` as KCoral returns it, or either
    gzip-compressed (``.bin.gz``: the records a warp never wrote are zero, so a recording kept as
    a test fixture compresses several times). Returns a uint8 array (``.npy``: as saved)."""
    path = str(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if path.endswith((".npy", ".npy.gz")):
        return np.load(io.BytesIO(raw))
    return np.frombuffer(raw, dtype=np.uint8)


def load(buffer_path, layout_path, **kw) -> Timeline:
    """Decode the files KCoral returns: the raw buffer (``.bin``/``.npy``, optionally ``.gz``)
    and its layout."""
    layout = TraceLayout.load(layout_path)
    return decode(read_trace_file(buffer_path), layout, **kw)
