"""What tirxh knows about each PTX instruction binding, as data (``tirxh ptx``).

The facts come from the bindings of every loaded plugin (so a third-party binding set shows up as
soon as it is installed): spelling pattern and modifier slots, operands and their types, the
targets that accept the instruction and from which PTX ISA version, its memory and
synchronization effects, the one-line doc, examples in PTX and ``T.ptx`` form, and the numsim
fidelity, which the simulator plugin reports through ``tirxh_binding_fidelity`` (numsim's
semantics table is the source of truth; with no simulator installed the class is unknown and said
to be). docs/PTX_REFERENCE.md is the same data for the built-in sets only.

A query (`resolve`) is a binding name (``wgmma.mma_async.ss``), a PTX spelling
(``ld.global.v4.f32``, facts then include the modifiers it fills, its resolved operands and
effects, and which targets accept exactly that form), its language form (``T.ptx.ld.global_.v4.f32``
or ``T.ptx["ld.global.v4.f32"]``), or an opcode or name prefix (``mbarrier``: every binding under
it).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from ..core.bindings import SYNC_ROLES, Binding, SpellingError
from ..core.errors import UsageError
from ..core.lang.ptxns import ptx as _PTX
from ..core.reference import pattern, python_spelling
from .textsearch import match, terms_of

# weights of the fields a search term can match
SEARCH_WEIGHTS = {"name": 8, "effects": 4, "spelling": 3, "doc": 2, "iset": 1}
_STRING_FORM = re.compile(r"""(?:T\.)?ptx\[\s*(["'])(.+?)\1\s*\](?:\(.*\))?""", re.S)


def normalize(query: str) -> str:
    """A PTX spelling from a PTX spelling or its language form (``T.ptx.ld.global_.f32(...)``,
    ``T.ptx["ld.global.f32"]``): the language's own spelling rules turn the second into the
    first (``global_`` -> ``global``, ``shared__cta`` -> ``shared::cta``, ``_2d`` -> ``2d``)."""
    q = query.strip()
    m = _STRING_FORM.fullmatch(q)
    if m:
        return m.group(2).strip()
    q = q.split("(")[0].strip()
    for prefix in ("T.ptx.", "ptx."):
        if q.startswith(prefix):
            q = q[len(prefix):]
            break
    ns = _PTX
    for part in q.split("."):
        if not part:
            raise UsageError(f"ptx: {query!r} is not a PTX spelling (an empty token)")
        ns = getattr(ns, part)
    return repr(ns)[len("T.ptx."):]


@dataclass
class Resolved:
    """One binding a query named; `modifiers` when the query was a full spelling of it."""

    binding: Binding
    spelling: "str | None" = None
    modifiers: "dict | None" = None


def resolve(query: str, isa) -> list:
    """The bindings `query` names (see the module docstring); a `UsageError` with the nearest
    names when it names none."""
    if query in isa.by_name:
        return [Resolved(isa.by_name[query])]
    spelling = normalize(query)
    if spelling in isa.by_name:
        return [Resolved(isa.by_name[spelling])]
    try:
        return [Resolved(b, spelling, mods) for b, mods in isa.candidates(spelling)]
    except SpellingError as e:
        reason = str(e)
    under = [b for b in isa if b.name.startswith(spelling + ".") or b.opcode == spelling
             or b.name == spelling]
    if under:
        return [Resolved(b) for b in under]
    near = difflib.get_close_matches(spelling, [b.name for b in isa], n=4, cutoff=0.6)
    hint = f"\n  nearest binding names: {', '.join(near)}" if near else ""
    raise UsageError(f"ptx: {query!r} names no instruction binding of the loaded plugins:\n"
                     f"  {reason}{hint}\n  `tirxh ptx search WORDS` searches names and docs")


# -------------------------------------------------------------------------------------------------
# facts
# -------------------------------------------------------------------------------------------------

# what each operand kind of `tirxh.core.bindings` is, in words (docs/PTX_REFERENCE.md's legend)
KIND_WORDS = {"d": "destination", "a": "source", "i": "immediate", "inout": "in/out",
              "m": "address", "dv": "destination vector", "av": "source vector",
              "inoutv": "in/out vector", "dpair": "destination pair a|b",
              "tref": "tensor map + coordinates", "sym": "symbol"}


def operand_json(o) -> dict:
    return {"name": o.name, "kind": o.kind, "kind_text": KIND_WORDS.get(o.kind, o.kind),
            "type": o.type, "count": o.count, "optional": o.optional, "space": o.space}


def effects_json(e) -> dict:
    doc = {"read": e.read, "write": e.write, "atomic": e.atomic, "async_proxy": e.async_proxy,
           "sync": e.sync, "sync_meaning": SYNC_ROLES.get(e.sync) if e.sync else None}
    doc["text"] = effects_text(doc)
    return doc


def effects_text(e: dict) -> str:
    parts = [f"reads {e['read']}" if e["read"] else "",
             f"writes {e['write']}" if e["write"] else "",
             "atomic" if e["atomic"] else "", "async proxy" if e["async_proxy"] else "",
             f"sync role {e['sync']} ({e['sync_meaning']})" if e["sync"] else ""]
    return ", ".join(p for p in parts if p) or "registers only"


def fidelity(binding: Binding, pm) -> dict:
    """The simulator's class and note for `binding` (``tirxh_binding_fidelity``); with no
    simulator answering, the class is None and the note says so."""
    got = pm.hook.tirxh_binding_fidelity(binding=binding) if pm is not None else None
    if got is not None:
        cls, note = got
        return {"class": cls, "note": note, "source": "simulator"}
    return {"class": None, "note": "no simulator plugin answered (install tirxh-numsim)",
            "source": None}


def targets_json(binding: Binding, targets, modifiers: "dict | None" = None) -> list:
    out = []
    for t in targets:
        reason = binding.accepts_target(t, modifiers)
        out.append({"name": t.name, "ok": reason is None, "reason": reason})
    return out


def facts(binding: Binding, isa, targets, pm=None) -> dict:
    """Everything about one binding (JSON-serializable)."""
    b = binding
    doc = {"name": b.name, "opcode": b.opcode, "iset": b.iset, "owner": isa.owners.get(b.name),
           "doc": b.doc, "pattern": pattern(b),
           "slots": [{"name": s.name, "choices": list(s.choices), "optional": s.optional}
                     for s in b.slots],
           "min_sm": b.min_sm, "archs": list(b.archs) if b.archs else None,
           "ptx_isa": f"{b.ptx_isa[0]}.{b.ptx_isa[1]}",
           "modifier_min_sm": dict(b.modifier_min_sm),
           "modifier_ptx_isa": {k: f"{v[0]}.{v[1]}" for k, v in b.modifier_ptx_isa.items()},
           "targets": targets_json(b, targets), "effects": effects_json(b.effects),
           "cross_slot_rules": b.check is not None, "fidelity": fidelity(b, pm),
           "examples": [{"ptx": ex, "python": python_spelling(ex.split()[0]) + "(...)"}
                        for ex in b.all_examples]}
    if callable(b.operands):
        forms = []
        for ex in b.all_examples:
            mods = b.match(ex.split()[0].split(".")[1:])
            if mods is not None:
                forms.append({"spelling": ex.split()[0],
                              "operands": [operand_json(o) for o in b.operand_specs(mods)]})
        doc["operands"] = None
        doc["operand_forms"] = forms
    else:
        doc["operands"] = [operand_json(o) for o in b.operands]
    return doc


def spelling_facts(r: Resolved, targets) -> "dict | None":
    """The form a full spelling selects: its modifiers, operands, effects and targets."""
    if r.modifiers is None:
        return None
    b, mods = r.binding, r.modifiers
    return {"spelling": r.spelling, "python": python_spelling(r.spelling) + "(...)",
            "modifiers": {k: v for k, v in mods.items() if v is not None},
            "operands": [operand_json(o) for o in b.operand_specs(mods)],
            "effects": effects_json(b.effects_for(mods)),
            "targets": targets_json(b, targets, mods)}


def summary(binding: Binding, isa, targets, pm=None) -> dict:
    """The short form ``ptx list`` and ``ptx search`` print."""
    return {"name": binding.name, "iset": binding.iset, "owner": isa.owners.get(binding.name),
            "pattern": pattern(binding), "doc": binding.doc,
            "targets": [t.name for t in targets if binding.accepts_target(t) is None],
            "fidelity": fidelity(binding, pm)["class"]}


# -------------------------------------------------------------------------------------------------
# search
# -------------------------------------------------------------------------------------------------

def search(query: str, isa) -> list:
    """``[(score, binding, matched)]`` for bindings matching every term of `query`
    (`tirxh.kb.textsearch`: the name, a modifier choice or the pattern, the effects and sync
    role, the doc, the binding set), best first."""
    terms = terms_of(query, "ptx search")
    out = []
    for b in isa:
        e = b.effects
        fields = {"name": [b.name],
                  "spelling": [pattern(b)] + [c for s in b.slots for c in s.choices],
                  "effects": [x for x in (e.read, e.write, e.sync, SYNC_ROLES.get(e.sync or ""),
                                          "atomic" if e.atomic else None,
                                          "async proxy" if e.async_proxy else None) if x],
                  "doc": [b.doc], "iset": [b.iset]}
        got = match(terms, fields, SEARCH_WEIGHTS, prose=("doc",))
        if got is not None:
            out.append((got[0], b, got[1]))
    return sorted(out, key=lambda x: (-x[0], x[1].name))
