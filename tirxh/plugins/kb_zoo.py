"""``tirxh zoo list | search QUERY | show NAME | new NAME --from ZOO_KERNEL``: the kernel zoo.

A built-in plugin that contributes a whole command (``tirxh_add_commands``). The substance is in
`tirxh.kb.zoo` (what a zoo kernel is, the search) and `tirxh.kb.zoocopy` (``new``); this module
parses the arguments and prints. Every action prints a terminal view, or with ``--json`` one
document holding the same data: ``{"schema": "tirxh.report/1", "command": "zoo", "action": ...}``.
The zoo is the one installed with tirxh unless ``--zoo DIR`` names another.
"""

from __future__ import annotations

import json
import sys

from .. import __version__
from ..core.errors import UsageError
from ..core.main import ExitCode
from ..core.pluginmanager import hookimpl
from ..core.reports import SCHEMA
from ..kb.zoo import load_zoo
from ..kb.zoocopy import copy_kernel, kernels_dir

ACTIONS = ("list", "search", "show", "new")
_MAX_MATCHES = 6  # matched instructions shown per search hit in the terminal (JSON has all)


@hookimpl
def tirxh_add_commands(commands):
    commands.add("zoo", "the kernel zoo: list, search, show, copy a kernel into this project",
                 run, configure=configure,
                 description="The kernel zoo: measured kernels to start from. ACTION is list; "
                             "search QUERY...; show NAME; new NAME --from ZOO_KERNEL (copies the "
                             "zoo kernel into this project's kernels directory, renamed).")


def configure(parser) -> None:
    parser.add_argument("action", choices=ACTIONS, metavar="ACTION",
                        help="list | search QUERY... | show NAME | new NAME --from ZOO_KERNEL")
    parser.add_argument("args", nargs="*", metavar="ARG",
                        help="the query words (search), a kernel (show) or the new name (new)")
    parser.add_argument("--zoo", metavar="DIR", help="a zoo directory (a tirx.toml project) "
                                                     "instead of the one installed with tirxh")
    parser.add_argument("--from", dest="source", metavar="ZOO_KERNEL",
                        help="(new) the zoo kernel to copy: a name, module::kernel or module")
    parser.add_argument("--dir", metavar="DIR",
                        help="(new) where to write NAME.py (default: the directory of the "
                             "first [project] kernels glob)")
    parser.add_argument("--force", action="store_true", help="(new) overwrite NAME.py")


def run(config) -> int:
    opt = config.option
    action, args = opt.action, list(opt.args)
    want = {"list": 0, "search": None, "show": 1, "new": 1}[action]
    if action == "search" and not args:
        raise UsageError("zoo search: give the words to search for (zoo search QUERY...)")
    if want is not None and len(args) != want:
        usage = {"list": "zoo list", "show": "zoo show NAME",
                 "new": "zoo new NAME --from ZOO_KERNEL"}[action]
        raise UsageError(f"zoo {action}: expected {usage}, got {len(args)} argument(s) "
                         f"{' '.join(args)!r}")
    if action != "new" and (opt.source or opt.dir or opt.force):
        raise UsageError(f"zoo {action}: --from, --dir and --force belong to `zoo new`")
    zoo = load_zoo(opt.zoo)
    doc = {"schema": SCHEMA, "command": "zoo", "action": action, "zoo": str(zoo.root)}
    if action == "list":
        return _list(config, zoo, doc)
    if action == "search":
        return _search(config, zoo, " ".join(args), doc)
    if action == "show":
        return _show(config, zoo, args[0], doc)
    return _new(config, zoo, args[0], doc)


def _emit(config, doc: dict, lines: list) -> None:
    if config.option.json:
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def _problems(config, zoo, doc) -> int:
    """Zoo modules that do not import fail `list`/`search` (exit 1) after the listing, and
    inconsistent declarations are warned about: never silent."""
    doc["problems"], doc["warnings"] = zoo.problems, zoo.warnings
    if not config.option.json:
        for p in doc["problems"]:
            sys.stderr.write(f"ERROR: zoo {p}\n")
        for w in doc["warnings"]:
            sys.stderr.write(f"WARNING: zoo {w}\n")
    return ExitCode.FAILED if doc["problems"] else ExitCode.OK


def _tags(tags) -> str:
    return f"  [{', '.join(tags)}]" if tags else ""


def _list(config, zoo, doc) -> int:
    kernels = zoo.kernels
    doc["kernels"] = [k.summary_json(zoo.targets) for k in kernels]
    status = _problems(config, zoo, doc)
    lines = [f"{len(kernels)} kernels in the zoo ({zoo.root})"]
    width = max([len(k.name) for k in kernels] + [8])
    mwidth = max([len(k.module.relpath) for k in kernels] + [8])
    for k in kernels:
        lines.append(f"  {k.name:<{width}}  {k.module.relpath:<{mwidth}}  {k.summary}"
                     f"{_tags(k.module.tags)}")
    lines.append("more: tirxh zoo show NAME; tirxh zoo search WORDS")
    _emit(config, doc, lines)
    return status


def _search(config, zoo, query: str, doc) -> int:
    hits = zoo.search(query, config.isa)
    doc.update(query=query, results=[h.to_json(zoo.targets) for h in hits])
    status = _problems(config, zoo, doc)
    lines = [f"{len(hits)} of {len(zoo.kernels)} zoo kernels match {query!r}"]
    for h in hits:
        k = h.kernel
        lines.append(f"  {k.name}  {k.module.relpath}  (score {h.score})  {k.summary}")
        parts = []
        for fname, values in h.matched.items():
            more = f" (+{len(values) - _MAX_MATCHES} more)" if len(values) > _MAX_MATCHES else ""
            parts.append(f"{fname}: {', '.join(values[:_MAX_MATCHES])}{more}")
        lines.append(f"      {'; '.join(parts)}")
    if not hits:
        lines.append("  (try fewer or shorter words; `tirxh zoo list` shows every kernel)")
    _emit(config, doc, lines)
    return status


def _show(config, zoo, name: str, doc) -> int:
    k = zoo.find(name)
    data = k.to_json(config.isa, zoo.targets)
    doc["kernel"] = data
    lines = [f"{k.name} -- {k.module.relpath}:{k.line} (zoo {zoo.root})", ""]
    lines += [k.module.header, ""] if k.module.header else []
    if k.doc:
        lines += [k.doc, ""]
    lines.append(f"tags: {', '.join(k.module.tags) or '-'}")
    lines.append(f"targets: {', '.join(data['targets'])}")
    lines.append("parameters: " + ", ".join(
        f"{p['name']}: {p['dtype'] or p['kind']}" + (f" = {p['default']!r}" if "default" in p
                                                     else "") for p in data["params"]))
    cases = data["cases"]
    if cases:
        lines.append("cases (small: checked by numsim in `tirxh check`; large: benchmarks):")
        for c in cases:
            params = " ".join(f"{a}={v}" for a, v in c["params"].items())
            work = "".join(f"  {w} {c[w]:.3g}" for w in ("flops", "bytes")
                           if isinstance(c.get(w), (int, float)))
            lines.append(f"  {c['name']:<24} {'small' if c['small'] else 'large'}  {params}{work}")
    else:
        lines.append("cases: none (a compile-only kernel: no suite)")
    for chk in data["checking"]:
        tol = chk["tolerance"]
        names = ", ".join(b.get("name", "?") if isinstance(b, dict) else str(b)
                          for b in chk["baselines"])
        lines.append(f"checked ({chk['suite']}): outputs {', '.join(chk['outputs'])}; tolerance "
                     f"{_tol(tol)}; baselines: {names or '-'}")
    ins = data["instructions"]
    n = ins["specializations"]
    lines.append(f"PTX instructions ({n} specialization{'s' if n != 1 else ''} traced"
                 f"{'' if ins['complete'] else ', INCOMPLETE'}):")
    for b in ins["bindings"]:
        lines.append(f"  {b['binding']}: {', '.join(b['spellings'])}")
    lines += [f"  trace failed: {e}" for e in ins["errors"]]
    for row in data["figures"]:
        lines.append("measured (zoo README):")
        lines += [f"  {col}: {val}" for col, val in row.items()]
    lines += [f"warning: {w}" for w in data["warnings"]]
    lines.append(f"copy it: tirxh zoo new my_{k.name} --from {k.name}")
    _emit(config, doc, lines)
    return ExitCode.OK


def _tol(tol: dict) -> str:
    if set(tol) == {"rtol", "atol", "rms"}:
        return " ".join(f"{key}={tol[key]}" for key in ("rtol", "atol", "rms")
                        if tol[key] is not None)
    return "; ".join(f"{out}: {_tol(t)}" for out, t in tol.items())


def _new(config, zoo, name: str, doc) -> int:
    opt = config.option
    if not opt.source:
        raise UsageError("zoo new: name the zoo kernel to copy with --from ZOO_KERNEL "
                         "(`tirxh zoo list` lists them)")
    if config.inipath is None:
        raise UsageError(f"zoo new: no tirx.toml in {config.rootdir} or above: run it inside a "
                         f"project (`tirxh init DIR` writes one) or pass --rootdir")
    source = zoo.find(opt.source)
    dest_dir = (config.rootdir / opt.dir) if opt.dir else \
        kernels_dir(config.rootdir, config.getini("project", "kernels"))
    copy = copy_kernel(source, name, dest_dir, config.kernel_files, force=opt.force,
                       stamp=f"tirxh {__version__}")
    doc.update(copy.to_json(config.rootdir))
    rel = doc["relpath"]
    lines = [f"wrote {rel} (zoo {source.ident}, renamed to {name})"]
    if copy.removed:
        lines.append(f"removed the module's other definitions: {', '.join(copy.removed)}")
    lines.append(f"next: {doc['next']}")
    _emit(config, doc, lines)
    return ExitCode.OK
