"""The PTX instruction reference, generated from the instruction bindings.

``python -m tirxh.core.reference`` writes ``docs/PTX_REFERENCE.md`` (``--check`` exits 1 when the
file on disk differs, for CI; ``-o PATH`` writes elsewhere). The page is built from the built-in
binding sets only (no autoloaded entry-point plugins), so it does not change with what is
installed; the plugins named in `REFERENCE_PLUGINS` are loaded by entry-point name to answer
``tirxh_binding_fidelity`` (numsim's semantics table is the one source of its fidelity).

For every binding set and every binding it lists: the spelling pattern with its modifier slots and
their choices, the operands (per example when they depend on the modifiers), which targets accept
it and from which PTX ISA, its memory/synchronization effects, numsim's fidelity class for it,
its doc line, and its example spellings in both the PTX and the ``T.ptx`` form.
"""

from __future__ import annotations

import argparse
import keyword
import os
import sys

from .bindings import SYNC_ROLES, Binding, InstructionSet
from .pluginmanager import TirxhPluginManager, build_plugin_manager
from .registry import collect_toolset

DEFAULT_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "docs", "PTX_REFERENCE.md")

_MAX_OPERAND_ROWS = 8

_ISET_TITLES = {
    "base": "base — every target",
    "sm80": "sm80 — Ampere and newer",
    "sm90": "sm90 — Hopper and newer (portable sm_90 features)",
    "sm90a": "sm90a — sm_90a only (arch-specific)",
    "sm100a": "sm100a — Blackwell (sm_100a, sm_110a)",
}


# plugins whose ``tirxh_binding_fidelity`` answers the page records (loaded by entry-point name)
REFERENCE_PLUGINS = ("numsim",)

# the classes a ``tirxh_binding_fidelity`` answer may name (the hook's contract)
FIDELITY_CLASSES = {
    "modeled": "matches the PTX ISA (bitwise for integer and exactly rounded paths)",
    "representative": "numerically close but not bit-exact (hardware approximations, clocks)",
    "ordering_only": "no data effect to model: a fence, cache hint or prefetch that only orders "
                     "or speeds up memory accesses (recorded for sync_check)",
    "rejected": "not simulated: a kernel executing it gets an `incomplete` verdict naming it",
}


def reference_manager() -> TirxhPluginManager:
    """The built-in plugins plus those of `REFERENCE_PLUGINS` that are installed."""
    pm = build_plugin_manager(autoload=False)
    for name in REFERENCE_PLUGINS:
        pm.load_entrypoint(name)
    return pm


def builtin_toolset() -> "tuple[InstructionSet, object]":
    """Targets and bindings of the built-in plugins only (stable across installations)."""
    return collect_toolset(build_plugin_manager(autoload=False))


def fidelity_table(isa, pm: "TirxhPluginManager | None" = None) -> dict:
    """``{binding name: (class, note)}`` from the ``tirxh_binding_fidelity`` answers (bindings
    nobody answered for are left out). A class outside `FIDELITY_CLASSES` is an error naming
    the binding."""
    pm = pm if pm is not None else reference_manager()
    out = {}
    for b in isa:
        got = pm.hook.tirxh_binding_fidelity(binding=b)
        if got is None:
            continue
        cls, note = got
        if cls not in FIDELITY_CLASSES:
            raise ValueError(f"tirxh_binding_fidelity answered {cls!r} for binding {b.name!r}; "
                             f"expected one of {', '.join(FIDELITY_CLASSES)}")
        out[b.name] = (cls, note)
    return out


def python_spelling(spelling: str) -> str:
    """``cp.async.bulk.tensor.2d.shared::cluster`` -> ``T.ptx.cp.async_.bulk.tensor._2d...``."""
    out = []
    for tok in spelling.split("."):
        tok = tok.replace("::", "__")
        if keyword.iskeyword(tok):
            tok += "_"
        if tok[:1].isdigit():
            tok = "_" + tok
        out.append(tok)
    return "T.ptx." + ".".join(out)


def pattern(b: Binding) -> str:
    """``ld{.sem}{.scope}...{.vec}.type``: required slots as ``.name``, optional ones in braces."""
    parts = [b.opcode]
    for s in b.slots:
        if len(s.choices) == 1 and not s.optional:
            parts.append("." + s.choices[0])
        elif s.optional:
            parts.append("{." + (s.choices[0] if len(s.choices) == 1 else s.name) + "}")
        else:
            parts.append("." + s.name)
    return "".join(parts)


def _slot_rows(b: Binding) -> list:
    rows = []
    for s in b.slots:
        if len(s.choices) == 1:
            continue
        choices = " ".join("." + c for c in s.choices)
        if len(s.choices) > 24:
            choices = (" ".join("." + c for c in s.choices[:6]) +
                       f" ... ({len(s.choices)} choices)")
        rows.append(f"  - `{s.name}`{' (optional)' if s.optional else ''}: {choices}")
    return rows


def _operand(o) -> str:
    kind = {"d": "dest", "a": "src", "i": "imm", "inout": "in/out", "m": "[addr]",
            "dv": "dest {vec}", "av": "src {vec}", "inoutv": "in/out {vec}", "dpair": "dest a|b",
            "tref": "[tmap, {coords}]", "sym": "symbol"}[o.kind]
    typ = f" .{o.type}" if o.type else ""
    count = f" x{o.count}" if o.count not in (None, 1) or o.is_vector else ""
    space = f" {o.space}" if o.space else ""
    opt = "?" if o.optional else ""
    return f"`{o.name}{opt}` {kind}{typ}{count}{space}"


def _operands(b: Binding) -> list:
    if not callable(b.operands):
        ops = b.operands
        return ["- operands: " + (", ".join(_operand(o) for o in ops) if ops else "none")]
    rows = ["- operands (depend on the modifiers; shown for examples):"]
    seen, shown = set(), 0
    for text in b.all_examples:
        spelling = text.split()[0]
        mods = b.match(spelling.split(".")[1:])
        if mods is None:
            continue
        line = ", ".join(_operand(o) for o in b.operand_specs(mods)) or "none"
        shape = tuple(o.kind + (o.type or "") for o in b.operand_specs(mods))
        if shape in seen or shown >= _MAX_OPERAND_ROWS:
            continue  # same operand kinds and types as a row above (only counts differ)
        seen.add(shape)
        shown += 1
        rows.append(f"  - `{spelling}`: {line}")
    return rows


def _targets(b: Binding, targets) -> str:
    ok = [t.name for t in targets if b.accepts_target(t) is None]
    return ", ".join(ok) if ok else "none of the registered targets"


def _effects(b: Binding) -> str:
    e = b.effects
    parts = []
    if e.read:
        parts.append(f"reads {e.read}")
    if e.write:
        parts.append(f"writes {e.write}")
    if e.atomic:
        parts.append("atomic")
    if e.async_proxy:
        parts.append("async proxy")
    if e.sync:
        parts.append(f"sync role `{e.sync}`")
    return ", ".join(parts) if parts else "registers only"


def _fidelity(b: Binding, fidelity: dict) -> str:
    # the class only: the notes live in numsim's own page (plugins/numsim/SUPPORTED_OPS.md), so
    # rewording a note there does not make this page stale
    if b.name not in fidelity:
        return ("not known (no installed plugin answered tirxh_binding_fidelity: install "
                "tirxh-numsim and regenerate)")
    return fidelity[b.name][0]


def _binding_section(b: Binding, targets, fidelity: dict) -> list:
    lines = [f"### `{b.name}`", "", b.doc, "", f"- spelling: `{pattern(b)}`"]
    lines += _slot_rows(b)
    lines += _operands(b)
    req = [f"sm_{b.min_sm}+" if b.archs is None else "only " + ", ".join(b.archs),
           f"PTX ISA {b.ptx_isa[0]}.{b.ptx_isa[1]}"]
    lines.append(f"- targets: {_targets(b, targets)} ({'; '.join(req)})")
    extra = [f".{k}: sm_{v}+" for k, v in sorted(b.modifier_min_sm.items())]
    extra += [f".{k}: PTX ISA {v[0]}.{v[1]}" for k, v in sorted(b.modifier_ptx_isa.items())]
    if extra:
        lines.append(f"- modifiers needing more: {', '.join(extra)}")
    lines.append(f"- effects: {_effects(b)}")
    lines.append(f"- numsim fidelity: {_fidelity(b, fidelity)}")
    if b.check is not None:
        lines.append("- cross-slot rules: checked at trace time (see the binding's `check`)")
    if b.all_examples:
        lines.append("- examples:")
        for text in b.all_examples:
            spelling, _, values = text.partition(" ")
            note = f" — operands {values}" if values else ""
            lines.append(f"  - `{spelling}` / `{python_spelling(spelling)}(...)`{note}")
    else:
        lines.append("- examples: none (not callable; see the doc line)")
    lines.append("")
    return lines


def render(isa: InstructionSet, targets, fidelity: "dict | None" = None) -> str:
    """The whole reference page as Markdown; `fidelity` is `fidelity_table`'s answer."""
    fidelity = fidelity or {}
    targets = list(targets)
    out = [
        "# PTX instruction reference",
        "",
        "Generated from the instruction bindings by `python -m tirxh.core.reference`; do not edit "
        "by hand (a test fails when this file is stale).",
        "",
        "Spelling in the language: `T.ptx.<spelling>(operands...)` with `.` between tokens, "
        "`__` for `::`, a trailing `_` on Python keywords (`global_`, `async_`), a leading `_` on "
        "tokens that start with a digit (`_2d`), or the string form `T.ptx[\"exact.spelling\"]`. "
        "Operands come in PTX order; a leading destination left out is allocated and returned. "
        "`pred=p` guards the instruction. Kinds: `dest`/`src`/`imm` registers or immediates, "
        "`[addr]` a memory operand (its state space follows), `{vec}` a brace vector of "
        "registers, `in/out` read and written (accumulators), `dest a|b` a register|predicate "
        "pair.",
        "",
        "## Targets",
        "",
        "| target | SM | PTX ISA | binding sets | description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for t in targets:
        out.append(f"| {t.name} | {t.sm} | {t.ptx_isa[0]}.{t.ptx_isa[1]} | "
                   f"{', '.join(t.isets)} | {t.description} |")
    out += ["", "## Synchronization roles (`Effects.sync`)", "", "| role | meaning |",
            "| --- | --- |"]
    out += [f"| `{k}` | {v} |" for k, v in SYNC_ROLES.items()]
    out += ["", "## numsim fidelity (numsim's semantics table, through `tirxh_binding_fidelity`)",
            "", "| class | meaning |", "| --- | --- |"]
    out += [f"| `{k}` | {v} |" for k, v in FIDELITY_CLASSES.items()]
    out += ["", "Each binding's note (what exactly is modeled, and the gaps) is in "
            "plugins/numsim/SUPPORTED_OPS.md."]
    out.append("")
    isets = []
    for b in isa:
        if b.iset not in isets:
            isets.append(b.iset)
    for iset in isets:
        bs = [b for b in isa if b.iset == iset]
        out += [f"## Binding set {_ISET_TITLES.get(iset, iset)}", "",
                f"{len(bs)} bindings: " + ", ".join(f"`{b.name}`" for b in bs) + ".", ""]
        for b in bs:
            out += _binding_section(b, targets, fidelity)
    return "\n".join(out).rstrip() + "\n"


def page() -> str:
    """The page as ``python -m tirxh.core.reference`` writes it."""
    isa, targets = builtin_toolset()
    return render(isa, targets, fidelity_table(isa))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tirxh.core.reference",
                                description="Write the PTX reference from the bindings.")
    p.add_argument("-o", "--output", default=DEFAULT_PATH, help="where to write (default: "
                   "docs/PTX_REFERENCE.md of the source tree)")
    p.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    args = p.parse_args(argv)
    text = page()
    if args.check:
        try:
            with open(args.output, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            print(f"{args.output} is stale; run: python -m tirxh.core.reference", file=sys.stderr)
            return 1
        return 0
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.output} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
