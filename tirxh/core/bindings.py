"""Instruction bindings: PTX instructions described as data.

A `Binding` says how one PTX instruction (or a family sharing an opcode and operand shape) is
spelled, which operands it takes, which targets accept it, what it does to memory and
synchronization state, and what it is for. Bindings are contributed by plugins through the
``tirxh_register_instructions`` hook; the language, the PTX emitter, numsim and sync_check all read
the same entries. Adding a PTX capability means adding bindings, nothing else.

Spelling model: a call ``T.ptx.ld.global_.v4.f32`` becomes the tokens ``ld global v4 f32``. The
first token is the opcode; the rest fill the binding's ordered modifier `Slot`s, each slot taking
at most one token from its choices (optional slots may be skipped). A spelling is accepted by the
bindings of its opcode whose slots consume every token; when several do (forms told apart only by
their operands: ``wgmma.mma_async`` ss/rs, ``mov.b64 d, {a, b}``), the tracer takes the first, in
registration order, whose operands fit.

Every binding carries example spellings (`Binding.example`, `Binding.examples`): the generated
assembly test (`tirxh.core.isa_check`) emits them for every target that accepts the binding and
lets ptxas judge, and the PTX reference (`tirxh.core.reference`) prints them. `SYNC_ROLES` below
lists the values `Effects.sync` may take. How faithfully a simulator models a binding is not a
binding field: the simulator's own table is the one source (numsim's semantics table, surfaced in
the reference through the ``tirxh_binding_fidelity`` hook).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Callable, Iterable, Sequence

from .errors import SpellingError
from .types import DType


@dataclass(frozen=True)
class Slot:
    """One modifier position: `name` (used by ``$name`` references), accepted tokens, optional."""

    name: str
    choices: tuple
    optional: bool = False

    def accepts(self, token: str) -> bool:
        return token in self.choices


def slot(name: str, choices: "str | Iterable[str]", optional: bool = False) -> Slot:
    """Build a slot; `choices` may be a space-separated string (``"global shared::cta"``)."""
    if isinstance(choices, str):
        choices = choices.split()
    return Slot(name, tuple(choices), optional)


def opt(name: str, choices: "str | Iterable[str]") -> Slot:
    """An optional slot."""
    return slot(name, choices, optional=True)


# Operand kinds:
#   d      destination register (omitted by the caller -> a fresh register is returned)
#   a      source: register, special register or immediate
#   i      immediate only
#   inout  register read and written (accumulators, in-place updates)
#   m      memory operand [addr]
#   dv/av/inoutv   brace vector of `count` registers (destination / source / both)
#   dpair  two destinations written ``a|b`` (elect.sync, setp's p|q form); type ``b32|pred``
#   tref   a tensor-map operand ``[tmap, {c0, ...}]``
#   sym    a symbol or label name, written as-is
DEST_KINDS = ("d", "dv", "dpair", "inout", "inoutv")
_KINDS = DEST_KINDS + ("a", "i", "m", "av", "tref", "sym")


@dataclass(frozen=True)
class OperandSpec:
    name: str
    kind: str
    type: "str | None" = None  # PTX type name or "$slot"; None for m/sym
    count: "int | str | None" = None  # vector length, or "$slot" (v2 -> 2)
    optional: bool = False  # a trailing operand the caller may leave out
    space: "str | None" = None  # memory operands: the state space addressed, or "$slot"

    @property
    def is_dest(self) -> bool:
        return self.kind in DEST_KINDS

    @property
    def is_vector(self) -> bool:
        return self.kind.endswith("v")


def operands(spec: str) -> tuple:
    """Parse a compact operand list: ``"d:$type a:$type b:$type"``, ``"dv:$type:$vec m"``.

    Each word is ``name=kind:type:count`` or ``kind:type:count`` (the name defaults to the kind and
    position); a word whose first part is not a kind is a named source (``b:$type`` is
    ``b=a:$type``); a trailing ``?`` marks an optional operand; ``@space`` on a memory operand
    names the state space it addresses (``dst=m@shared::cta``, ``m@$ss``; absent: generic).
    """
    out: list = []
    for i, word in enumerate(spec.split()):
        optional = word.endswith("?")
        word = word.rstrip("?")
        name, _, rest = word.rpartition("=")
        rest, _, space = rest.partition("@")  # ``m@shared::cta``: the operand's state space
        parts = rest.split(":")
        kind = parts[0]
        if kind not in _KINDS:  # a bare name (``b:$type``, ``membermask:b32``) is a source
            name, kind = name or kind, "a"
        typ = parts[1] if len(parts) > 1 and parts[1] else None
        count = parts[2] if len(parts) > 2 else None
        if count is not None and not count.startswith("$"):
            count = int(count)
        if not name:
            name = kind if all(o.name != kind for o in out) else f"{kind}{i}"
        out.append(OperandSpec(name, kind, typ, count, optional, space or None))
    return tuple(out)


@dataclass(frozen=True)
class Effects:
    """What an instruction does beyond registers (consumed by numsim and sync_check).

    `read`/`write`: the state space touched (``global``, ``shared``, ``shared::cta``,
    ``shared::cluster``, ``local``, ``param``, ``const``, ``generic``; ``tmem`` for Blackwell
    tensor memory) or a ``$slot`` reference; `sync`: a synchronization role, one of `SYNC_ROLES`
    (the table below this class); `async_proxy`: the access is made by the async proxy (TMA,
    wgmma, tcgen05); `atomic`: read-modify-write.
    """

    read: "str | None" = None
    write: "str | None" = None
    sync: "str | None" = None
    async_proxy: bool = False
    atomic: bool = False

    def resolve(self, modifiers: dict) -> "Effects":
        def r(v):
            if isinstance(v, str) and v.startswith("$"):
                tok = modifiers.get(v[1:])
                return tok if tok else "generic"
            return v
        return replace(self, read=r(self.read), write=r(self.write), sync=r(self.sync))


NO_EFFECTS = Effects()


# The synchronization roles bindings declare in `Effects.sync` (sync_check and numsim key on these
# strings; the PTX reference prints this table). A binding's role says what the instruction does
# to synchronization state; which barrier/group it acts on comes from its operands.
SYNC_ROLES = {
    "bar.sync": "CTA/named barrier: arrive and wait for the participating threads",
    "bar.arrive": "CTA/named barrier: arrive without waiting",
    "warp": "warp-collective: every lane in the member mask must execute it convergently",
    "fence": "memory fence ordering this thread's generic-proxy accesses at a scope",
    "fence.proxy.async": "orders generic-proxy accesses with later/earlier async-proxy accesses",
    "fence.mbarrier_init": "makes prior mbarrier.init visible at cluster scope",
    "fence.proxy.tensormap": "orders generic writes of a tensor map with its use by TMA",
    "cp.async": "asynchronous copy joining the open cp.async group; its write lands by the "
                "matching cp.async.wait_* (or cp.async.mbarrier.arrive)",
    "cp.async.commit": "closes the open cp.async group",
    "cp.async.wait": "waits until at most N cp.async groups are pending (wait_all: none)",
    "cp.async.mbarrier.arrive": "arrive-on an mbarrier once this thread's prior cp.async finish",
    "mbarrier.init": "initializes an mbarrier (expected count, phase 0)",
    "mbarrier.inval": "invalidates an mbarrier",
    "mbarrier.arrive": "arrives on an mbarrier (count arrivals, default 1)",
    "mbarrier.arrive_drop": "arrives and lowers the expected count of later phases",
    "mbarrier.arrive.expect_tx": "expect_tx(tx) then one arrive, atomically",
    "mbarrier.expect_tx": "raises the current phase's pending transaction bytes",
    "mbarrier.complete_tx": "completes transaction bytes on an mbarrier; async copies with this "
                            "role complete_tx their byte count on their mbarrier operand",
    "mbarrier.wait": "tests/waits for completion of a phase (returns a predicate)",
    "bulk.copy": "bulk (TMA) copy tracked by the bulk async-group of the issuing thread",
    "bulk.commit": "closes the open bulk async-group",
    "bulk.wait": "waits until at most N bulk async-groups are pending (.read: their reads)",
    "cluster.arrive": "arrives at the cluster barrier",
    "cluster.wait": "waits at the cluster barrier",
    "griddepcontrol": "programmatic dependent launch (launch_dependents / wait)",
    "setmaxnreg": "warpgroup-wide register budget change (.sync.aligned)",
    "wgmma.mma": "asynchronous warpgroup MMA joining the open wgmma group",
    "wgmma.fence": "orders register/shared accesses before following wgmma.mma_async",
    "wgmma.commit": "closes the open wgmma group",
    "wgmma.wait": "waits until at most N wgmma groups are pending",
    "tcgen05.alloc": "TMEM allocation (alloc, relinquish_alloc_permit)",
    "tcgen05.dealloc": "TMEM deallocation",
    "tcgen05.mma": "asynchronous tensor-core MMA into TMEM, tracked by tcgen05.commit",
    "tcgen05.commit": "arrive on an mbarrier when this thread's prior tcgen05 ops complete",
    "tcgen05.ld": "asynchronous TMEM -> register load, complete at tcgen05.wait::ld",
    "tcgen05.st": "asynchronous register -> TMEM store, complete at tcgen05.wait::st",
    "tcgen05.wait": "waits for prior tcgen05.ld (wait::ld) or tcgen05.st (wait::st)",
    "tcgen05.fence": "orders tcgen05 operations across a thread synchronization",
}


@dataclass(frozen=True)
class Binding:
    """One instruction binding.

    name: unique id (``ld``, ``add.int``, ``wgmma.mma_async.ss``); opcode: first spelling token;
    slots: ordered modifier slots; operands: a tuple of `OperandSpec`, or a callable
    ``(modifiers) -> tuple`` for instructions whose operand count depends on modifiers (MMA);
    min_sm: smallest SM the instruction exists on (portable forward); archs: when set, the exact
    arch-specific targets that accept it (``sm_90a``); ptx_isa: minimum PTX ISA version;
    iset: the binding set it belongs to (``base``, ``sm80``, ``sm90a``, ``sm100a``); doc: one line.
    """

    name: str
    opcode: str
    slots: tuple
    operands: "tuple | Callable"
    doc: str
    min_sm: int = 50
    archs: "tuple | None" = None
    ptx_isa: tuple = (6, 0)
    effects: Effects = NO_EFFECTS
    iset: str = "base"
    check: "Callable | None" = None  # (modifiers) -> error message or None, for cross-slot rules
    example: "str | None" = None  # a spelling that exercises the binding (for generated tests/docs)
    # more spellings exercising other forms; an example may end in ``name=value`` words giving the
    # immediate for operand `name` (``setmaxnreg.inc.sync.aligned.u32 n=240``)
    examples: tuple = ()
    # modifier token -> the smallest SM accepting it, for forms newer than the instruction
    # (``mbarrier.arrive`` exists on sm_80, its ``.cluster`` scope only from sm_90)
    modifier_min_sm: dict = field(default_factory=dict, hash=False, compare=False)
    # modifier token -> the smallest PTX ISA version accepting it (``.b128``: 8.3)
    modifier_ptx_isa: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def all_examples(self) -> tuple:
        """Every example spelling: `example` first, then `examples`."""
        return ((self.example,) if self.example else ()) + tuple(self.examples)

    def operand_specs(self, modifiers: dict) -> tuple:
        """The operands of this binding's form with `modifiers` filled in, remembered per
        modifiers: a trace asks for them at every instruction call, and resolving them again
        was ~30% of tracing a kernel (topk_warp, session 33)."""
        try:
            key = tuple(sorted(modifiers.items()))
            return self._specs_seen[key]
        except TypeError:                   # a modifier value that is not hashable
            key = None
        except KeyError:
            pass
        ops = self.operands(modifiers) if callable(self.operands) else self.operands
        specs = tuple(_resolve_spec(o, modifiers) for o in ops)
        if key is not None:
            self._specs_seen[key] = specs
        return specs

    @cached_property
    def _specs_seen(self) -> dict:
        """`operand_specs`' memory (in the instance's __dict__: the dataclass is frozen)."""
        return {}

    def effects_for(self, modifiers: dict) -> Effects:
        return self.effects.resolve(modifiers)

    def match(self, tokens: Sequence[str]) -> "dict | None":
        """Fill slots from tokens (opcode excluded); None when they do not fit."""
        mods = self._fill(tokens)
        if mods is None or (self.check is not None and self.check(mods) is not None):
            return None
        return mods

    def _fill(self, tokens: Sequence[str]) -> "dict | None":
        """Slots filled from tokens, without the cross-slot `check`."""
        mods: dict = {}
        i = 0
        for s in self.slots:
            if i < len(tokens) and s.accepts(tokens[i]):
                mods[s.name] = tokens[i]
                i += 1
            elif s.optional:
                mods[s.name] = None
            else:
                return None
        if i != len(tokens):
            return None
        return mods

    def progress(self, tokens: Sequence[str]) -> int:
        """How many tokens fill slots before the first mismatch (ranks error explanations)."""
        i = 0
        for s in self.slots:
            if i < len(tokens) and s.accepts(tokens[i]):
                i += 1
            elif not s.optional:
                break
        return i + (len(self.slots) if self._fill(tokens) is not None else 0)

    def explain_mismatch(self, tokens: Sequence[str]) -> str:
        """Say where the tokens stop fitting this binding (for error messages)."""
        i = 0
        for s in self.slots:
            if i < len(tokens) and s.accepts(tokens[i]):
                i += 1
            elif s.optional:
                continue
            else:
                found = f".{tokens[i]}" if i < len(tokens) else "nothing"
                return (f"at {s.name!r} expected one of "
                        f"{', '.join('.' + c for c in s.choices[:12])}"
                        f"{', ...' if len(s.choices) > 12 else ''}; found {found}")
        if i != len(tokens):
            return f"unexpected modifier .{tokens[i]}"
        if self.check is not None:
            msg = self.check(self._fill(tokens) or {})
            if msg:
                return msg
        return "no mismatch"

    def accepts_target(self, target, modifiers: "dict | None" = None) -> "str | None":
        """None when `target` accepts this binding (with these modifiers), else the reason."""
        if self.iset not in target.isets:
            return (f"{self.opcode} ({self.name}) belongs to binding set {self.iset!r}, which "
                    f"target {target.name} does not accept (it accepts {', '.join(target.isets)})")
        if self.archs is not None and target.name not in self.archs:
            return (f"{self.name} exists only on {', '.join(self.archs)}; "
                    f"target is {target.name}")
        if target.sm < self.min_sm:
            return f"{self.name} needs sm_{self.min_sm} or newer; target is {target.name}"
        if tuple(target.ptx_isa) < tuple(self.ptx_isa):
            return (f"{self.name} needs PTX ISA {self.ptx_isa[0]}.{self.ptx_isa[1]}; target "
                    f"{target.name} emits {target.ptx_isa[0]}.{target.ptx_isa[1]}")
        for tok in (modifiers or {}).values():
            need = self.modifier_min_sm.get(tok)
            if need is not None and target.sm < need:
                return (f"{self.name} with .{tok} needs sm_{need} or newer; target is "
                        f"{target.name}")
            isa = self.modifier_ptx_isa.get(tok)
            if isa is not None and tuple(target.ptx_isa) < tuple(isa):
                return (f"{self.name} with .{tok} needs PTX ISA {isa[0]}.{isa[1]}; target "
                        f"{target.name} emits {target.ptx_isa[0]}.{target.ptx_isa[1]}")
        return None


def _resolve_spec(o: OperandSpec, mods: dict) -> OperandSpec:
    typ, count, space = o.type, o.count, o.space
    if isinstance(typ, str) and typ.startswith("$"):
        typ = mods.get(typ[1:])
    if isinstance(space, str) and space.startswith("$"):
        space = mods.get(space[1:]) or "generic"
    if isinstance(count, str):
        tok = mods.get(count[1:])
        count = int(re.sub(r"\D", "", tok)) if tok else 1
    if typ == o.type and count == o.count and space == o.space:
        return o
    return replace(o, type=typ, count=count, space=space)


@dataclass
class InstructionSet:
    """The registry the ``tirxh_register_instructions`` hook fills.

    `add` refuses a second binding with the same name (a plugin conflict must be loud); lookups by
    opcode keep registration order, so earlier (more specific) bindings win.
    """

    by_name: dict = field(default_factory=dict)
    by_opcode: dict = field(default_factory=dict)
    owners: dict = field(default_factory=dict)
    # spelling -> its candidates, as `candidates` found them: a trace asks at every instruction
    # call, and matching the slots again was ~15% of tracing topk_warp; `add` forgets them
    _seen: dict = field(default_factory=dict, repr=False, compare=False)

    def add(self, binding: Binding, owner: str = "?") -> None:
        if binding.name in self.by_name:
            raise ValueError(f"instruction binding {binding.name!r} registered twice "
                             f"(by {self.owners[binding.name]!r} and {owner!r})")
        self.by_name[binding.name] = binding
        self.by_opcode.setdefault(binding.opcode, []).append(binding)
        self.owners[binding.name] = owner
        self._seen.clear()

    def extend(self, bindings: Iterable[Binding], owner: str = "?") -> None:
        for b in bindings:
            self.add(b, owner)

    def __len__(self) -> int:
        return len(self.by_name)

    def __iter__(self):
        return iter(self.by_name.values())

    def lookup(self, spelling: str) -> "tuple[Binding, dict]":
        """Find the binding for a dotted spelling; raise `SpellingError` with a suggestion."""
        return self.candidates(spelling)[0]

    def candidates(self, spelling: str) -> "list[tuple[Binding, dict]]":
        """Every binding accepting the spelling, in registration order.

        Several bindings share a spelling when only the operands tell the forms apart
        (``wgmma.mma_async`` with A from shared memory or registers, ``mov.b64 d, {a, b}``); the
        tracer takes the first whose operands fit. Raises `SpellingError` when none does.
        Each call gets its own modifier dicts (an instruction keeps the one it was given).
        """
        found = self._seen.get(spelling)
        if found is None:
            found = self._seen[spelling] = self._match(spelling)
        return [(b, dict(mods)) for b, mods in found]

    def _match(self, spelling: str) -> list:
        tokens = spelling.split(".")
        opcode, rest = tokens[0], tokens[1:]
        cands = self.by_opcode.get(opcode)
        if not cands:
            near = difflib.get_close_matches(opcode, list(self.by_opcode), n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise SpellingError(f"unknown PTX instruction {spelling!r}: no binding for opcode "
                                f"{opcode!r}{hint}")
        found = []
        for b in cands:
            mods = b.match(rest)
            if mods is not None:
                found.append((b, mods))
        if found:
            return found
        # the bindings that got furthest into the spelling explain it best
        ranked = sorted(cands, key=lambda b: -b.progress(rest))
        reasons = [f"  {b.name}: {b.explain_mismatch(rest)}" for b in ranked[:6]]
        near = _near_spellings(spelling, cands)
        hint = f"\n  did you mean {near}?" if near else ""
        raise SpellingError(f"no binding accepts {spelling!r}:\n" + "\n".join(reasons) + hint)


def _near_spellings(spelling: str, cands: list) -> "str | None":
    """Suggest a close known spelling by fixing the one token that is off (cheap, bounded)."""
    tokens = spelling.split(".")
    best = None
    for b in cands:
        choices = [t for s in b.slots for t in s.choices]
        fixed = []
        for t in tokens[1:]:
            if any(t in s.choices for s in b.slots):
                fixed.append(t)
            else:
                m = difflib.get_close_matches(t.rstrip("_"), choices, n=1)
                if not m:
                    break
                fixed.append(m[0])
        else:
            cand = ".".join([tokens[0]] + fixed)
            if cand != spelling and b.match(fixed) is not None:
                best = cand
                break
    return best


def type_compatible(reg_type: DType, op_type: DType) -> bool:
    """PTX's operand type rule, relaxed as the ISA allows (section "Operand Type Information").

    Same type; any type of the same width where either side is a bit type (``.bN``); integer types
    of the same width regardless of signedness; and narrow (8/16-bit) memory types held in a wider
    integer register, as ld/st/cvt permit.
    """
    if reg_type == op_type:
        return True
    if reg_type.kind == "pred" or op_type.kind == "pred":
        return False
    if reg_type.bits == op_type.bits and "bits" in (reg_type.kind, op_type.kind):
        return True
    ints = ("uint", "sint", "bits")
    if reg_type.bits == op_type.bits and reg_type.kind in ints and op_type.kind in ints:
        return True
    if op_type.bits <= 8 and reg_type.bits <= 32 and reg_type.kind in ints:
        return True
    return False

