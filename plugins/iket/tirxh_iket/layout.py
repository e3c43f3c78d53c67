"""The trace buffer's layout: the contract between the instrumented kernel and the host decoder.

The buffer is one region per warp of the grid (no atomics: a warp owns its region, found from its
CTA and warp index), each region `capacity` records of 32 bytes::

    offset  0  u64  %globaltimer (ns)
    offset  8  u64  %clock64 (SM cycles)
    offset 16  u32  event word: VALID_BIT | site index (index into `sites`)
    offset 20  u32  sequence number of the event in its warp (0, 1, 2, ...)
    offset 24  u32  %smid
    offset 28  u32  %warpid (the hardware warp slot on the SM)

Region of the warp with CTA linear index c and warp index w (in the CTA): ``c * warps_per_cta + w``.
A warp writing more than `capacity` events keeps overwriting its last record, whose sequence number
then tells the decoder how many were lost. The host zero-fills the buffer, so an unwritten record
has no VALID_BIT.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

RECORD_BYTES = 32
VALID_BIT = 0x8000_0000
PARAM_NAME = "iket_trace"
FORMAT_VERSION = 1

RECORD_DTYPE = np.dtype([("globaltimer", "<u8"), ("clock", "<u8"), ("event", "<u4"),
                         ("seq", "<u4"), ("smid", "<u4"), ("hwwarp", "<u4")])
assert RECORD_DTYPE.itemsize == RECORD_BYTES


class LayoutError(ValueError):
    """A layout document or a trace buffer that does not fit the layout (names the field)."""


@dataclass(frozen=True)
class Site:
    """One annotation in the source: ``begin``/``end`` of a range, or a ``mark``."""

    kind: str
    name: str
    file: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class TraceLayout:
    """Everything the host needs to size and decode a trace buffer of one instrumented kernel."""

    kernel: str
    capacity: int
    warps_per_cta: int
    block: tuple
    sites: list = field(default_factory=list)
    param: str = PARAM_NAME
    cost: dict = field(default_factory=dict)  # instructions added: prologue, per event
    version: int = FORMAT_VERSION

    def buffer_bytes(self, grid) -> int:
        """Bytes of trace buffer for a launch with `grid` (zero-filled by the host)."""
        ctas = int(np.prod([int(g) for g in grid]))
        return ctas * self.warps_per_cta * self.capacity * RECORD_BYTES

    def to_json(self) -> dict:
        d = asdict(self)
        d["block"] = list(self.block)
        return d

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1)

    @classmethod
    def from_json(cls, d: dict) -> "TraceLayout":
        problems = []
        for key, typ in (("kernel", str), ("capacity", int), ("warps_per_cta", int),
                         ("block", list), ("sites", list)):
            if not isinstance(d.get(key), typ):
                problems.append(f"layout.{key}: expected {typ.__name__}, got {d.get(key)!r}")
        if d.get("version", FORMAT_VERSION) != FORMAT_VERSION:
            problems.append(f"layout.version: {d.get('version')!r}, this decoder reads "
                            f"{FORMAT_VERSION}")
        sites = []
        for i, s in enumerate(d.get("sites") or []):
            try:
                site = Site(str(s["kind"]), str(s["name"]), str(s["file"]), int(s["line"]))
            except (KeyError, TypeError, ValueError) as e:
                problems.append(f"layout.sites[{i}]: {e!r}")
                continue
            if site.kind not in ("begin", "end", "mark"):
                problems.append(f"layout.sites[{i}].kind: {site.kind!r} is not begin/end/mark")
            sites.append(site)
        if problems:
            raise LayoutError("; ".join(problems))
        return cls(kernel=d["kernel"], capacity=d["capacity"], warps_per_cta=d["warps_per_cta"],
                   block=tuple(d["block"]), sites=sites, param=d.get("param", PARAM_NAME),
                   cost=dict(d.get("cost", {})), version=d.get("version", FORMAT_VERSION))

    @classmethod
    def load(cls, path) -> "TraceLayout":
        with open(path) as f:
            try:
                return cls.from_json(json.load(f))
            except json.JSONDecodeError as e:
                raise LayoutError(f"{path}: not JSON: {e}") from None
