"""Node ids on the command line: what an argument selects, and what to say when it selects nothing.

Every command agrees (docs/CLI.md): ``check``/``bench``/``build`` take node ids as filters,
``show``/``profile`` take one item. An argument that selects nothing is a usage error (exit 4)
naming the closest real ids, and saying so when the target it names is not one of the run's
targets. ``show``/``profile`` also accept a unique prefix (``kernels/vadd.py::vadd[n10``) and a
bare kernel name or item name (``vadd``, ``vadd[n4096]``).
"""

from __future__ import annotations

import difflib

from .errors import UsageError


def matches(nodeid: str, flt: str) -> bool:
    """`flt` selects `nodeid`: equal, or a prefix ending at a part (``::``, ``[``, ``@``)."""
    return nodeid == flt or any(nodeid.startswith(flt + s) for s in ("::", "[", "@"))


def closest(arg: str, ids: list, n: int = 3) -> list:
    """The real ids most like `arg`: by the whole id, and by the part after ``::`` (so a bare
    ``vadd[huge]`` finds ``kernels/vadd.py::vadd[big]@sm_90a``)."""
    got = difflib.get_close_matches(arg, ids, n=n, cutoff=0.4)
    if len(got) < n:
        tail = arg.split("::", 1)[-1]
        by_tail = {i.split("::", 1)[-1]: i for i in ids}
        got += [by_tail[t] for t in difflib.get_close_matches(tail, list(by_tail), n=n,
                                                              cutoff=0.4)
                if by_tail[t] not in got]
    return got[:n]


def no_match(arg: str, items: list, config, command: str) -> UsageError:
    """The usage error for an argument that selects no item."""
    ids = [i.nodeid for i in items]
    why = [f"{command} {arg}: no collected item has this node id"]
    target = arg.rsplit("@", 1)[1] if "@" in arg.split("::")[-1] else None
    if target and target not in (config.project_targets or []):
        known = config.targets is not None and target in config.targets
        why.append(f"target {target!r} is not one of this run's targets "
                   f"({', '.join(config.project_targets)})" +
                   (f"; add --target {target}" if known else "; it is not a registered target"))
    near = closest(arg, ids)
    if near:
        why.append("closest: " + ", ".join(near))
    elif ids:
        why.append(f"{len(ids)} items were collected; list them with `tirxh check "
                   "--collect-only`")
    return UsageError("; ".join(why))


def find_item(items: list, arg: str, config, command: str = "show", collect_errors=()):
    """The one item `arg` names: its node id, a unique prefix of one, or a bare kernel or item
    name (``vadd``, ``vadd[n4096]``, ``vadd[n4096]@sm_90a``)."""
    for rule in (lambda i: i.nodeid == arg,
                 lambda i: i.nodeid.startswith(arg),
                 lambda i: "::" not in arg and (i.kernel.name == arg or i.name.startswith(arg))):
        cands = [i for i in items if rule(i)]
        if len(cands) == 1:
            return cands[0]
        if cands:
            raise UsageError(f"{command} {arg}: node id is ambiguous; it matches "
                             + ", ".join(i.nodeid for i in cands[:10])
                             + (f" and {len(cands) - 10} more" if len(cands) > 10 else ""))
    if collect_errors:
        raise UsageError(f"{command} {arg}: no collected item has this node id (modules that "
                         f"failed to import: {', '.join(collect_errors)})")
    raise no_match(arg, items, config, command)
