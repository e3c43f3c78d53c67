"""``tirxh ptx list | show SPELLING | search QUERY``: the PTX instructions tirxh can emit.

A built-in plugin that contributes a whole command (``tirxh_add_commands``). The facts are those
of the bindings of every loaded plugin (`tirxh.kb.ptxinfo`); ``show`` adds the zoo kernels whose
traced IR uses the instruction (`tirxh.kb.zoo`). With ``--json`` every action prints one document
with the same data: ``{"schema": "tirxh.report/1", "command": "ptx", "action": ...}``.
"""

from __future__ import annotations

import json
import sys

from ..core.errors import UsageError
from ..core.main import ExitCode
from ..core.pluginmanager import hookimpl
from ..core.reports import SCHEMA
from ..kb import ptxinfo
from ..kb.zoo import load_zoo

ACTIONS = ("list", "show", "search")
_MAX_EXAMPLES = 8  # examples printed per binding in the terminal (JSON has all)


@hookimpl
def tirxh_add_commands(commands):
    commands.add("ptx", "the PTX instructions of the loaded binding sets: list, show, search",
                 run, configure=configure,
                 description="The PTX instruction reference of every loaded plugin. ACTION is "
                             "list; show SPELLING (a binding name, a PTX spelling such as "
                             "ld.global.v4.f32, its T.ptx form, or an opcode); search QUERY...")


def configure(parser) -> None:
    parser.add_argument("action", choices=ACTIONS, metavar="ACTION",
                        help="list | show SPELLING | search QUERY...")
    parser.add_argument("args", nargs="*", metavar="ARG",
                        help="the spelling (show) or the query words (search)")
    parser.add_argument("--target", dest="ptx_target", metavar="SM",
                        help="(list, search) only the instructions target SM accepts")
    parser.add_argument("--zoo", metavar="DIR", help="(show) the zoo whose kernels are listed "
                                                     "as users (default: the installed one)")


def run(config) -> int:
    opt = config.option
    args = list(opt.args)
    if opt.action == "list" and args:
        raise UsageError(f"ptx list: takes no arguments, got {' '.join(args)!r}")
    if opt.action == "show" and len(args) != 1:
        raise UsageError(f"ptx show: expected one SPELLING, got {len(args)} argument(s)")
    if opt.action == "search" and not args:
        raise UsageError("ptx search: give the words to search for (ptx search QUERY...)")
    targets = list(config.targets)
    if opt.ptx_target:
        if opt.action == "show":
            raise UsageError("ptx show: --target belongs to list and search (show lists every "
                             "target with its verdict)")
        if opt.ptx_target not in config.targets:
            raise UsageError(f"ptx --target {opt.ptx_target!r}: not a registered target (known: "
                             f"{', '.join(sorted(t.name for t in config.targets))})")
    doc = {"schema": SCHEMA, "command": "ptx", "action": opt.action}
    if opt.action == "show":
        lines = _show(config, args[0], targets, doc)
    else:
        lines = _list(config, " ".join(args), targets, doc)
    if opt.json:
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    return ExitCode.OK


def _accepted(config, b) -> bool:
    want = config.option.ptx_target
    return want is None or b.accepts_target(config.targets.get(want)) is None


def _list(config, query: str, targets, doc) -> list:
    isa, pm = config.isa, config.pm
    if config.option.action == "list":
        rows = [(None, b, None) for b in isa]
    else:
        rows = ptxinfo.search(query, isa)
        doc["query"] = query
    rows = [r for r in rows if _accepted(config, r[1])]
    doc["target"] = config.option.ptx_target
    doc["bindings"] = []
    for score, b, matched in rows:
        entry = ptxinfo.summary(b, isa, targets, pm)
        if score is not None:
            entry.update(score=score, matched=matched)
        doc["bindings"].append(entry)
    scope = f" accepted by {config.option.ptx_target}" if config.option.ptx_target else ""
    head = (f"{len(rows)} instruction bindings{scope}" if query == "" else
            f"{len(rows)} instruction bindings{scope} match {query!r}")
    lines = [head]
    width = max([len(b.name) for _, b, _ in rows] + [8])
    iset = None
    for score, b, _ in rows:
        if score is None and b.iset != iset:
            iset = b.iset
            lines.append(f"[{iset}]")
        lines.append(f"  {b.name:<{width}}  {b.doc}")
    lines.append("more: tirxh ptx show NAME_OR_SPELLING")
    return lines


def _show(config, query: str, targets, doc) -> list:
    isa = config.isa
    resolved = ptxinfo.resolve(query, isa)
    doc["query"] = query
    doc["bindings"] = []
    try:
        zoo = load_zoo(config.option.zoo)
        zoo_error = None
    except UsageError as e:  # no zoo is a fact to report, not a reason to fail the lookup
        zoo, zoo_error = None, str(e)
    lines = []
    for r in resolved:
        b = r.binding
        facts = ptxinfo.facts(b, isa, targets, config.pm)
        facts["form"] = ptxinfo.spelling_facts(r, targets)
        facts["zoo"] = _zoo_users(zoo, zoo_error, b, isa)
        doc["bindings"].append(facts)
        lines += _format(facts)
    return lines


def _zoo_users(zoo, error, b, isa) -> dict:
    if zoo is None:
        return {"error": error, "kernels": []}
    users = zoo.users_of([b.name], isa)
    incomplete = [k.ident for k in zoo.kernels if not k.instructions(isa).complete]
    broken = [m.relpath for m in zoo.modules if m.error]
    return {"zoo": str(zoo.root), "kernels": [{"kernel": k.ident, "spellings": ss}
                                              for k, ss in users],
            "not_traced": incomplete + broken}


def _ops(ops: list) -> str:
    def one(o):
        bits = [f"{o['name']}{'?' if o['optional'] else ''}:", o["kind_text"]]
        bits += [f".{o['type']}"] if o["type"] else []
        bits += [f"x{o['count']}"] if o["count"] not in (None, 1) else []
        bits += [o["space"]] if o["space"] else []
        return " ".join(bits)
    return ", ".join(one(o) for o in ops) or "none"


def _format(f: dict) -> list:
    lines = [f"{f['name']}  (binding set {f['iset']}, plugin {f['owner']})", f"  {f['doc']}",
             f"  spelling: {f['pattern']}"]
    for s in f["slots"]:
        if len(s["choices"]) > 1:
            shown = " ".join("." + c for c in s["choices"][:16])
            more = f" ... ({len(s['choices'])} choices)" if len(s["choices"]) > 16 else ""
            lines.append(f"    {s['name']}{' (optional)' if s['optional'] else ''}: {shown}{more}")
    if f["operands"] is not None:
        lines.append(f"  operands: {_ops(f['operands'])}")
    else:
        lines.append("  operands (depend on the modifiers; one example per shape):")
        shapes = {}
        for form in f["operand_forms"]:  # forms differing only in vector counts: shown once
            shape = tuple((o["kind"], o["type"], o["optional"]) for o in form["operands"])
            shapes.setdefault(shape, form)
        lines += [f"    {form['spelling']}: {_ops(form['operands'])}" for form in shapes.values()]
    req = f"sm_{f['min_sm']}+" if f["archs"] is None else "only " + ", ".join(f["archs"])
    ok = [t["name"] for t in f["targets"] if t["ok"]]
    lines.append(f"  targets: {', '.join(ok) or 'none loaded'} ({req}; PTX ISA {f['ptx_isa']})")
    extra = [f".{k}: sm_{v}+" for k, v in sorted(f["modifier_min_sm"].items())]
    extra += [f".{k}: PTX ISA {v}" for k, v in sorted(f["modifier_ptx_isa"].items())]
    if extra:
        lines.append(f"  modifiers needing more: {', '.join(extra)}")
    lines.append(f"  effects: {f['effects']['text']}")
    fid = f["fidelity"]
    cls = fid["class"] or "unknown"
    note = f": {fid['note']}" if fid["note"] else ""
    source = f" ({fid['source']})" if fid["source"] else ""
    lines.append(f"  numsim fidelity: {cls}{source}{note}")
    form = f["form"]
    if form is not None:
        mods = " ".join(f"{k}={v}" for k, v in form["modifiers"].items())
        lines.append(f"  this form: {form['spelling']} = {form['python']}  [{mods}]")
        lines.append(f"    operands: {_ops(form['operands'])}")
        lines.append(f"    effects: {form['effects']['text']}")
        lines += [f"    {t['name']}: {'ok' if t['ok'] else t['reason']}" for t in form["targets"]]
    if f["examples"]:
        lines.append("  examples:")
        lines += [f"    {e['ptx']}  /  {e['python']}" for e in f["examples"][:_MAX_EXAMPLES]]
        if len(f["examples"]) > _MAX_EXAMPLES:
            lines.append(f"    (+{len(f['examples']) - _MAX_EXAMPLES} more; --json has all)")
    z = f["zoo"]
    if z.get("error"):
        lines.append(f"  zoo: {z['error']}")
    else:
        users = [f"{u['kernel']} ({', '.join(u['spellings'])})" for u in z["kernels"]]
        lines.append(f"  used in the zoo by: {'; '.join(users) if users else 'no zoo kernel'}")
        if z["not_traced"]:
            lines.append(f"    (not traced, so not known: {', '.join(z['not_traced'])})")
    lines.append("")
    return lines
