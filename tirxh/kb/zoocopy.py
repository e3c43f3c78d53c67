"""``tirxh zoo new NAME --from ZOO_KERNEL``: a zoo kernel copied into a project, renamed.

The copy is the zoo module's source, changed in three ways and otherwise byte for byte:

- the module's other kernels are removed, with the suites that cover them and the top-level
  helpers nothing else uses (a leading comment block goes with what it annotates), so the new file
  holds one kernel;
- the kernel is renamed: the module variable bound to it (its ``def``, or ``k = factory("k")``)
  everywhere it appears as a name (not attributes or comments), a string literal that is exactly
  the kernel's name (``name="k"``), and each suite variable covering it whose name contains the
  old name (``SWIGLU`` -> ``MY_SWIGLU``, case kept); a generic ``SUITE`` stays;
- a first-line comment says where it came from.

The file is ``NAME.py`` in the project's kernels directory (the directory part of the first
``[project] kernels`` glob, or ``--dir``). Before returning, the copy is imported once: a copy that
does not import, lacks the renamed kernel or would not be collected is removed and reported. A zoo
module that imports a sibling module of the zoo is refused (one file is copied, not a package).
"""

from __future__ import annotations

import ast
import io
import keyword
import re
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import UsageError
from ..core.lang.kernel import Kernel
from ..core.suite import Suite
from .zoo import ZooKernel, import_path

_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclass
class Copy:
    """What `copy_kernel` wrote: the file, the renames made and what was removed."""

    name: str
    source: ZooKernel
    path: Path
    renamed: dict = field(default_factory=dict)
    removed: list = field(default_factory=list)

    def to_json(self, rootdir: Path) -> dict:
        rel = _rel(self.path, rootdir)
        return {"name": self.name, "from": self.source.ident,
                "source": str(self.source.module.path),
                "file": str(self.path), "relpath": rel, "renamed": self.renamed,
                "removed": self.removed, "next": f"tirxh check {rel}"}


def kernels_dir(rootdir: Path, globs: list) -> Path:
    """The directory part of the first ``[project] kernels`` glob (``kernels/*.py`` -> kernels)."""
    if not globs:
        raise UsageError("[project] kernels is empty: there is no kernels directory to copy into; "
                         "use --dir DIR")
    parts = []
    for part in Path(globs[0]).parts[:-1]:
        if _GLOB_CHARS.search(part):
            break
        parts.append(part)
    return rootdir.joinpath(*parts)


def copy_kernel(source: ZooKernel, name: str, dest_dir: Path, kernel_files, force: bool = False,
                stamp: str = "") -> Copy:
    """Write ``dest_dir/NAME.py`` (see the module docstring); `kernel_files()` lists the files
    the project collects (checked after writing). `stamp` goes into the first-line comment."""
    if not name.isidentifier() or keyword.iskeyword(name):
        raise UsageError(f"zoo new {name!r}: the name must be a Python identifier (it becomes the "
                         f"kernel function and the file name)")
    text = source.module.path.read_text(encoding="utf-8")
    _refuse_local_imports(source, text)
    pruned, removed = prune(text, source)
    renames = _renames(source, name)
    taken = _identifiers(pruned) - set(renames)
    clash = sorted(set(renames.values()) & taken)
    if clash:
        raise UsageError(f"zoo new {name!r}: {', '.join(map(repr, clash))} already names "
                         f"something else in {source.module.relpath}; choose another name")
    body = rename_identifiers(pruned, renames, {source.kernel.name: name})
    header = (f"# From the tirxh zoo: {source.ident}, renamed to {name} by `tirxh zoo new`"
              f"{' (' + stamp + ')' if stamp else ''}.\n")
    dest = Path(dest_dir) / f"{name}.py"
    if dest.exists() and not force:
        raise UsageError(f"{dest}: exists; choose another name or pass --force")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(header + body, encoding="utf-8")
    try:
        _verify(dest, name, renames, source, kernel_files)
    except Exception:
        dest.unlink()
        raise
    return Copy(name, source, dest, renames, removed)


# -------------------------------------------------------------------------------------------------
# pruning the module's other kernels
# -------------------------------------------------------------------------------------------------

def prune(text: str, keep: ZooKernel) -> "tuple[str, list]":
    """`text` without the module's other kernels, their suites and the top-level definitions
    only they used; returns the text and the removed names."""
    module = keep.module
    others = {v for k in module.kernels if k is not keep for v in k.variables}
    if not others:
        return text, []
    other_suites = {var for k in module.kernels if k is not keep for var, _ in k.suites}
    tree = ast.parse(text)
    body = list(tree.body)
    drop = [n for n in body if _defines(n) and _defines(n) <= (others | other_suites)]
    dead = set().union(*(_loads(n) for n in drop)) if drop else set()
    changed = True
    while changed:  # helpers that only the removed code used (and nothing left uses)
        changed = False
        kept = [n for n in body if n not in drop]
        for n in kept:
            names = _defines(n)
            if not names or not names <= dead:
                continue
            used = set().union(*(_loads(m) for m in kept if m is not n))
            if not names & used:
                drop.append(n)
                dead |= _loads(n)
                changed = True
    lines = text.splitlines(keepends=True)
    gone = set()
    for n in drop:
        first = min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])])
        while first > 1 and lines[first - 2].lstrip().startswith("#"):
            first -= 1  # the comment block just above belongs to what is removed
        gone.update(range(first, n.end_lineno + 1))
    out = "".join(line for i, line in enumerate(lines, 1) if i not in gone)
    out = re.sub(r"\n{4,}", "\n\n\n", out).rstrip("\n") + "\n"
    removed = sorted(x for n in drop for x in _defines(n))
    return out, removed


def _defines(node) -> set:
    """Names a top-level statement binds (functions, classes, assignments to names or tuples of
    names: ``SUITE, SUITE_PEERS = make_suites(k)``); empty for anything else."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, ast.AnnAssign) else []
    flat = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
    if not flat or not all(isinstance(e, ast.Name) for e in flat):
        return set()
    return {e.id for e in flat}


def _loads(node) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}


# -------------------------------------------------------------------------------------------------
# renaming
# -------------------------------------------------------------------------------------------------

def _renames(source: ZooKernel, name: str) -> dict:
    out = {v: name for v in source.variables}
    for var, _ in source.suites:
        new = _substitute(var, source.kernel.name, name)
        if new != var:
            out[var] = new
    return out


def _substitute(ident: str, old: str, new: str) -> str:
    """`old` replaced by `new` where it stands between underscores (or the ends) in `ident`,
    in the case it is written (``SWIGLU_SUITE`` -> ``MY_SWIGLU_SUITE``)."""
    for o, n in ((old, new), (old.upper(), new.upper())):
        ident = re.sub(rf"(?<![A-Za-z0-9]){re.escape(o)}(?![A-Za-z0-9])", n, ident)
    return ident


def _identifiers(text: str) -> set:
    return {t.string for t in _names(text)}


def _names(text: str):
    """The module's own NAME tokens: not attributes (a name after ``.`` is another object's,
    ``T.ptx.ld.global_.v4``), not inside strings or comments."""
    prev = None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and not keyword.iskeyword(tok.string) and \
                not (prev is not None and prev.type == tokenize.OP and prev.string == "."):
            yield tok
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            prev = tok


def rename_identifiers(text: str, renames: dict, strings: "dict | None" = None) -> str:
    """Replace the module's own names (`_names`) found in `renames`, and string literals whose
    whole value is a key of `strings` (quotes kept); layout is untouched."""
    lines = text.splitlines(keepends=True)
    edits: dict = {}
    for tok in _names(text):
        if tok.string in renames:
            edits.setdefault(tok.start[0], []).append((tok.start[1], tok.end[1],
                                                       renames[tok.string]))
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.STRING and strings and tok.start[0] == tok.end[0]:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):  # an f-string (one STRING token before 3.12)
                continue
            if isinstance(value, str) and value in strings:
                new = tok.string.replace(value, strings[value], 1)
                edits.setdefault(tok.start[0], []).append((tok.start[1], tok.end[1], new))
    for row, spans in edits.items():
        line = lines[row - 1]
        for start, end, new in sorted(spans, reverse=True):
            line = line[:start] + new + line[end:]
        lines[row - 1] = line
    return "".join(lines)


# -------------------------------------------------------------------------------------------------
# checks
# -------------------------------------------------------------------------------------------------

def _refuse_local_imports(source: ZooKernel, text: str) -> None:
    """One file is copied: a zoo module importing a module of the zoo itself cannot work."""
    zoo_root = source.module.path.parents[len(Path(source.module.relpath).parts) - 1]
    dirs = {zoo_root, source.module.path.parent}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or "."]
        else:
            continue
        for n in names:
            top = n.split(".")[0]
            local = top == "." or any((d / f"{top}.py").is_file() or (d / top).is_dir()
                                      for d in dirs)
            if local:
                raise UsageError(f"zoo kernel {source.ident} imports {n!r} from the zoo itself "
                                 f"({source.module.relpath}:{node.lineno}); `tirxh zoo new` copies "
                                 f"one module: copy that module too, by hand")


def _verify(dest: Path, name: str, renames: dict, source: ZooKernel, kernel_files) -> None:
    """Import the copy: it must define kernel `name` and each renamed suite must cover it."""
    if dest.resolve() not in {Path(p).resolve() for p in kernel_files()}:
        raise UsageError(f"{dest}: [project] kernels does not match this file, so `tirxh check` "
                         f"would not collect it; pass --dir with a kernels directory")
    modname = f"_tirxh_zoo_new_{name}"
    try:
        module = import_path(dest, modname)
    except Exception as e:
        raise UsageError(f"{dest}: the copy of {source.ident} does not import "
                         f"({type(e).__name__}: {e}); it was removed") from None
    finally:
        sys.modules.pop(modname, None)
    k = getattr(module, name, None)
    if not isinstance(k, Kernel) or k.name != name:
        raise UsageError(f"{dest}: the copy of {source.ident} defines no kernel {name!r}; it was "
                         f"removed")
    for var, _ in source.suites:
        suite = getattr(module, renames.get(var, var), None)
        if not isinstance(suite, Suite) or suite.kernel is not k:
            raise UsageError(f"{dest}: suite {renames.get(var, var)!r} of the copy does not cover "
                             f"{name!r}; it was removed")


def _rel(path: Path, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)
