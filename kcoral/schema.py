"""Typed, validated documents: the machinery the job model (`kcoral.job`) and tool option sets
are declared with.

A model is a dataclass whose fields each carry a *kind* (`Str`, `Int`, `Num`, `ListOf`, `Obj`,
...) through `spec()`. `Model.parse(obj)` walks the fields, converts and checks every value
against its kind, refuses unknown keys, runs each model's own cross-field `check()`, and raises
one `JobError` listing every problem with its field path (``launches[0].args[2].scalar``); so the
validation *is* the declaration, and a new field cannot be added without saying what it accepts.
`Model.to_doc()` writes the canonical JSON form (defaults filled in, unset optional fields left
out).

Kinds are strict on purpose, because jobs come from clients the daemon does not trust: numbers
are finite and bounded (a bool is not a number), names match fixed patterns (so no name can be a
path), collections have a maximum size, and free JSON (`Json`) is bounded in depth and size.
"""

from __future__ import annotations

import dataclasses
import math
import re

from .errors import JobError

_BAD = object()  # a value that failed: its problem is recorded, the parent keeps going

# name patterns (anchored with fullmatch); none admits '/', '\\', whitespace or control characters
IDENT = r"[A-Za-z_][A-Za-z0-9_]{0,63}"                    # buffers, parameters, option keys
ENTRY = r"[A-Za-z_$][A-Za-z0-9_$]{0,127}"                 # PTX kernel entry names
PLUGIN = r"[a-z][a-z0-9_]{0,31}(?:[.-][a-z0-9_]{1,31}){0,3}"  # tools and baselines: torch.matmul
TAG = r"[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,63}"               # tags and board names (no '..')
DISPLAY = r"[A-Za-z0-9_.:,=+@\[\]()-]{0,200}"             # a job's display name: vadd[n4096]
TARGET = r"sm_[0-9]{2,3}[a-z]?"
DIGEST = r"[0-9a-f]{64}"


class Problems(list):
    """``(field, message)`` pairs collected while parsing."""

    def add(self, path: str, message: str) -> None:
        self.append((path or "job", message))


class Kind:
    """What one field accepts; `parse` returns the converted value or records a problem."""

    def parse(self, v, path: str, p: Problems):  # pragma: no cover - interface
        raise NotImplementedError

    def dump(self, v):
        return v

    def describe(self) -> str:
        return type(self).__name__.lower()


class Str(Kind):
    def __init__(self, pattern: "str | None" = None, max_len: int = 256, choices=None,
                 what: str = ""):
        self.rx = re.compile(pattern) if pattern else None
        self.max_len, self.choices, self.what = max_len, tuple(choices or ()), what

    def parse(self, v, path, p):
        if not isinstance(v, str):
            p.add(path, f"expected a string, got {_show(v)}")
            return _BAD
        if self.choices and v not in self.choices:
            p.add(path, f"{_show(v)} is not one of {list(self.choices)}")
            return _BAD
        if len(v) > self.max_len:
            p.add(path, f"longer than {self.max_len} characters ({len(v)})")
            return _BAD
        if self.rx is not None and (not self.rx.fullmatch(v) or ".." in v):
            p.add(path, f"{_show(v)} is not a valid {self.what or 'name'} "
                        f"(pattern {self.rx.pattern})")
            return _BAD
        return v


class Text(Str):
    """Free text for messages: printable, bounded, no control characters."""

    def __init__(self, max_len: int = 2000):
        super().__init__(max_len=max_len)

    def parse(self, v, path, p):
        v = super().parse(v, path, p)
        if v is not _BAD and any(ord(c) < 32 and c not in "\t\n" for c in v):
            p.add(path, "contains control characters")
            return _BAD
        return v


class Int(Kind):
    def __init__(self, lo: int, hi: int, choices=None):
        self.lo, self.hi, self.choices = lo, hi, tuple(choices or ())

    def parse(self, v, path, p):
        if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53:
            v = int(v)  # JSON writers may spell 4096 as 4096.0
        if not isinstance(v, int) or isinstance(v, bool):
            p.add(path, f"expected an integer, got {_show(v)}")
            return _BAD
        if self.choices and v not in self.choices:
            p.add(path, f"{v} is not one of {list(self.choices)}")
            return _BAD
        if not self.lo <= v <= self.hi:
            p.add(path, f"{v} is outside {self.lo}..{self.hi}")
            return _BAD
        return v


class Num(Kind):
    """A finite number in ``[lo, hi]`` (``(lo, hi]`` with `lo_open`); never NaN or infinite."""

    def __init__(self, lo: float, hi: float, lo_open: bool = False):
        self.lo, self.hi, self.lo_open = lo, hi, lo_open

    def parse(self, v, path, p):
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            p.add(path, f"expected a number, got {_show(v)}")
            return _BAD
        v = float(v) if isinstance(v, float) or abs(v) < 2 ** 63 else math.inf
        if not math.isfinite(v):
            p.add(path, f"expected a finite number, got {_show(v)}")
            return _BAD
        if v < self.lo or v > self.hi or (self.lo_open and v == self.lo):
            lo = "(" if self.lo_open else "["
            p.add(path, f"{v:g} is outside {lo}{self.lo:g}, {self.hi:g}]")
            return _BAD
        return v


class Bool(Kind):
    def parse(self, v, path, p):
        if not isinstance(v, bool):
            p.add(path, f"expected true or false, got {_show(v)}")
            return _BAD
        return v


class Optional(Kind):
    """`inner`, or null."""

    def __init__(self, inner: Kind):
        self.inner = inner

    def parse(self, v, path, p):
        return None if v is None else self.inner.parse(v, path, p)

    def dump(self, v):
        return None if v is None else self.inner.dump(v)


class ListOf(Kind):
    def __init__(self, item: Kind, max_len: int, min_len: int = 0):
        self.item, self.max_len, self.min_len = item, max_len, min_len

    def parse(self, v, path, p):
        if not isinstance(v, list):
            p.add(path, f"expected a list, got {_show(v)}")
            return _BAD
        if not self.min_len <= len(v) <= self.max_len:
            p.add(path, f"expected {self.min_len}..{self.max_len} entries, got {len(v)}")
            return _BAD
        out = [self.item.parse(x, f"{path}[{i}]", p) for i, x in enumerate(v)]
        return _BAD if any(x is _BAD for x in out) else out

    def dump(self, v):
        return [self.item.dump(x) for x in v]


class Dim3(Kind):
    """1 to 3 positive integers, padded with 1s to three (``[16]`` -> ``[16, 1, 1]``)."""

    def __init__(self, hi: int = 2 ** 31 - 1):
        self.hi = hi

    def parse(self, v, path, p):
        if (not isinstance(v, list) or not 1 <= len(v) <= 3 or not all(
                isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= self.hi
                for x in v)):
            p.add(path, f"expected 1 to 3 integers in 1..{self.hi}, got {_show(v)}")
            return _BAD
        return list(v) + [1] * (3 - len(v))


class MapOf(Kind):
    """An object whose keys match `key` and whose values are of kind `value`."""

    def __init__(self, value: Kind, key: Str = None, max_len: int = 256):
        self.value, self.key, self.max_len = value, key or Str(IDENT), max_len

    def parse(self, v, path, p):
        if not isinstance(v, dict):
            p.add(path, f"expected an object, got {_show(v)}")
            return _BAD
        if len(v) > self.max_len:
            p.add(path, f"more than {self.max_len} entries ({len(v)})")
            return _BAD
        out, bad = {}, False
        for k, x in v.items():
            kp = Problems()
            if self.key.parse(k, path, kp) is _BAD:  # a bad key is named on the map itself
                p.add(path, f"key {_show(k)}: {kp[0][1]}")
                bad = True
                continue
            sub = f"{path}.{k}"
            out[k] = self.value.parse(x, sub, p)
            bad = bad or out[k] is _BAD
        return _BAD if bad else out

    def dump(self, v):
        return {k: self.value.dump(x) for k, x in v.items()}


class Json(Kind):
    """Plain JSON bounded in depth and size, every number finite (tool options, layouts)."""

    def __init__(self, max_depth: int = 8, max_items: int = 20000, max_str: int = 4096):
        self.max_depth, self.max_items, self.max_str = max_depth, max_items, max_str

    def parse(self, v, path, p):
        budget = [self.max_items]
        why = self._check(v, 0, budget)
        if why:
            p.add(path, why)
            return _BAD
        return v

    def _check(self, v, depth, budget) -> "str | None":
        budget[0] -= 1
        if budget[0] < 0:
            return f"more than {self.max_items} values"
        if depth > self.max_depth:
            return f"nested deeper than {self.max_depth} levels"
        if v is None or isinstance(v, bool):
            return None
        if isinstance(v, (int, float)):
            return None if math.isfinite(v) and abs(v) < 2 ** 63 else \
                f"{_show(v)} is not a finite number below 2**63"
        if isinstance(v, str):
            return None if len(v) <= self.max_str else f"a string longer than {self.max_str}"
        if isinstance(v, list):
            for x in v:
                why = self._check(x, depth + 1, budget)
                if why:
                    return why
            return None
        if isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str) or len(k) > 128:
                    return f"key {_show(k)} is not a short string"
                why = self._check(x, depth + 1, budget)
                if why:
                    return why
            return None
        return f"unexpected value {_show(v)}"


class Scalar(Kind):
    """A baseline argument: a name (`Str(pattern)`), a finite number, a bool, or null."""

    def __init__(self, pattern: str = r"[A-Za-z0-9_.:+-]{0,64}"):
        self.name = Str(pattern, what="value")
        self.num = Num(-1e300, 1e300)

    def parse(self, v, path, p):
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, str):
            return self.name.parse(v, path, p)
        if isinstance(v, int) and abs(v) < 2 ** 63:
            return v
        return self.num.parse(v, path, p)


class Number(Kind):
    """An integer (any size: the consumer checks its range), a finite float, or a bool."""

    def parse(self, v, path, p):
        if isinstance(v, (bool, int)) or (isinstance(v, float) and math.isfinite(v)):
            return v
        p.add(path, f"expected a number or a bool, got {_show(v)}")
        return _BAD


class Obj(Kind):
    def __init__(self, model: type):
        self.model = model

    def parse(self, v, path, p):
        return self.model._parse(v, path, p)

    def dump(self, v):
        return v.to_doc()


REQUIRED = dataclasses.MISSING


def spec(kind: Kind, default=REQUIRED, key: "str | None" = None):
    """A model field of `kind`; `default` (copied for lists, dicts and models) or required;
    `key` when the JSON key differs from the attribute name."""
    md = {"kind": kind, "key": key}
    if default is REQUIRED:
        return dataclasses.field(metadata=md)
    if isinstance(default, (list, dict, Model)):
        return dataclasses.field(default_factory=lambda d=default: _copy(d), metadata=md)
    return dataclasses.field(default=default, metadata=md)


def _copy(d):
    if isinstance(d, Model):
        return dataclasses.replace(d)
    return type(d)(d)


class Model:
    """Base of typed documents (subclasses are dataclasses whose fields use `spec`)."""

    @classmethod
    def parse(cls, obj, path: str = ""):
        """The typed document, or `JobError` listing every problem."""
        p = Problems()
        out = cls._parse(obj, path, p)
        if p or out is _BAD:
            raise JobError(p or [(path or "job", "invalid")])
        return out

    @classmethod
    def _parse(cls, obj, path, p):
        if not isinstance(obj, dict):
            p.add(path, f"expected an object, got {_show(obj)}")
            return _BAD
        fields = [f for f in dataclasses.fields(cls) if "kind" in f.metadata]
        keys = {f.metadata.get("key") or f.name: f for f in fields}
        unknown = [k for k in obj if k not in keys]
        for k in unknown[:5]:
            p.add(_join(path, k if isinstance(k, str) and len(k) < 80 else "?"),
                  f"unknown field (expected one of {sorted(keys)})")
        kwargs, bad = {}, bool(unknown)
        for key, f in keys.items():
            sub = _join(path, key)
            if key not in obj:
                if f.default is REQUIRED and f.default_factory is REQUIRED:
                    p.add(sub, "missing")
                    bad = True
                continue
            v = f.metadata["kind"].parse(obj[key], sub, p)
            if v is _BAD:
                bad = True
            else:
                kwargs[f.name] = v
        if bad:
            return _BAD
        out = cls(**kwargs)
        n = len(p)
        out.check(path, p)
        return _BAD if len(p) > n else out

    def check(self, path: str, p: Problems) -> None:
        """Cross-field rules of this model (record problems with ``p.add(field, message)``)."""

    def to_doc(self) -> dict:
        d = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None or "kind" not in f.metadata:
                continue
            d[f.metadata.get("key") or f.name] = f.metadata["kind"].dump(v)
        return d


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(v) -> str:
    """A short, safe rendering of a client's value for a message."""
    if isinstance(v, (dict, list)):
        return f"a JSON {'object' if isinstance(v, dict) else 'list'}"
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."
