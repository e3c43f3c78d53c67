"""``python -m tirxh_iket render TRACE.bin|.npy[.gz] LAYOUT.json [--out DIR] [--clock-ghz G]``

Decode a trace buffer (as KCoral returns it) and write ``iket_trace.json`` (open it in
https://ui.perfetto.dev), ``iket_timeline.png`` and ``iket_summary.txt/.json`` into DIR; prints the
summary. Exit status: 0 ok, 1 the timeline is incomplete (lost events, unmatched ranges), 2 bad
input.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from .decode import read_trace_file
from .kcoral_tool import render
from .layout import LayoutError, TraceLayout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tirxh_iket")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("render", help="decode a trace buffer into the timeline artifacts")
    p.add_argument("trace")
    p.add_argument("layout")
    p.add_argument("--out", default=".")
    p.add_argument("--clock-ghz", type=float, default=None)
    p.add_argument("--max-sms", type=int, default=12)
    a = ap.parse_args(argv)
    try:
        layout = TraceLayout.load(a.layout)
        data = read_trace_file(a.trace)
        out = pathlib.Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        arts, s = render(data, layout, out, clock_ghz=a.clock_ghz, max_sms=a.max_sms)
    except (LayoutError, OSError, ValueError) as e:
        print(f"tirxh_iket render: {e}", file=sys.stderr)
        return 2
    print((out / "iket_summary.txt").read_text(), end="")
    print("wrote " + ", ".join(sorted(arts)))
    return 1 if s["verdict"] == "incomplete" else 0


if __name__ == "__main__":
    sys.exit(main())
