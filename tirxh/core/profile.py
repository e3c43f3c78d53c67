"""``tirxh profile NODEID``: ask the profiler plugins about one item.

The project is configured as for any run; the one item NODEID names is collected and compiled,
then ``tirxh_profile_item`` is called and every installed profiler answers for its part of the
request (``--ncu``, ``--sanitizer TOOL``, ``--iket`` come from the plugins' options). Each answer
is a report with ``.text``, ``.verdict`` and ``to_json()``; an ``error`` verdict (a sanitizer
finding, a failed tool) fails the command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .errors import UsageError
from .main import ExitCode, select_one, wrap_session
from .reports import SCHEMA
from .runner import compile_item


def profile_session(config, nodeid: str, out: Path, json_path: "str | None" = None,
                    json_stdout: bool = False) -> int:
    def doit(config, session):
        item = select_one(session, nodeid, "profile")
        if getattr(item, "suite", None) is None or getattr(item, "case", None) is None:
            raise UsageError(f"profile {item.nodeid}: the kernel has no T.suite case to run")
        compiled, phase = compile_item(item)
        if compiled is None:
            sys.stderr.write(f"{item.nodeid}: compile {phase.outcome}: {phase.longrepr}\n")
            return ExitCode.FAILED
        # a progress line before the profilers' own (they may run for minutes on a board): a
        # run killed by an outer timeout shows it got this far
        sys.stderr.write(f"profile {item.nodeid}: compiled in {phase.duration:.1f} s\n")
        sys.stderr.flush()
        # each profiler reads its own options from `config`; the request carries what the
        # command itself decides (the artifact directory) and lets a script ask programmatically
        request = {"ncu": None, "sanitizer": None, "iket": None, "out": out}
        answers = config.pm.hook.tirxh_profile_item(item=item, compiled=compiled, config=config,
                                                    request=request)
        reports = [r for a in answers for r in (a if isinstance(a, list) else [a])]
        if not reports:
            raise UsageError("profile: nothing to do; give --ncu, --sanitizer TOOL or --iket "
                             "(installed by tirxh-ncu-profile / tirxh-iket)")
        bad = any(getattr(r, "verdict", None) == "error" for r in reports)
        status = ExitCode.FAILED if bad else ExitCode.OK
        # the same exit status as the command's, in the document (as `tirxh check --json`), so
        # an agent reading only the JSON acts on the same verdict as one reading $?
        doc = {"schema": SCHEMA, "command": "profile", "item": item.nodeid,
               "exitstatus": int(status), "reports": [r.to_json() for r in reports]}
        if json_stdout:
            sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
        else:
            for r in reports:
                print(r.text)
        if json_path:
            Path(json_path).write_text(json.dumps(doc, indent=1, default=str))
        return status

    return wrap_session(config, doit)
