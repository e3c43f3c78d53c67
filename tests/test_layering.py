"""The seams between packages (docs/ARCHITECTURE.md), enforced as pytest guards ``_pytest``.

- Plugin distributions (``plugins/*``: their packages, tests and benchmarks), KCoral and
  ``examples/`` import tirxh only through its public modules: ``tirxh`` itself, ``tirxh.api``,
  ``tirxh.lang`` and ``tirxh.testing``.
- The core (``tirxh/``) imports no plugin distribution.
- No import cycle between the packages: tirxh, kcoral and each plugin distribution. The
  intended direction: kcoral imports nothing from tirxh (nor any plugin); tirxh may import
  kcoral's client, job model and (for the embedded mode) daemon; plugin distributions import
  tirxh's public modules and kcoral's plugin API.

Every import counts, at module level or inside a function (an AST walk), because a hidden import
is still a dependency.
"""

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PUBLIC = {"tirxh", "tirxh.api", "tirxh.lang", "tirxh.testing"}


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _py_files(*globs: str) -> list:
    out = []
    for g in globs:
        out += [p for p in sorted(REPO.glob(g)) if "_proto" not in p.parts and
                ".venv" not in p.parts and "build" not in p.parts]
    return out


@functools.lru_cache(maxsize=None)
def imports(path: Path) -> tuple:
    """Every absolute import in a file, anywhere in it, as ``(line, module)``; ``from tirxh
    import N`` gives ``tirxh.N`` (N may be a submodule); relative imports are left out.
    (Cached: several tests walk the same files.)"""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "tirxh":
                out += [(node.lineno, f"tirxh.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, node.module))
    return tuple(out)


def _tirxh_violation(module: str) -> bool:
    """A ``tirxh.*`` module outside the public ones (``from tirxh import main`` is fine: `main`
    is not a module; ``from tirxh import core`` is not)."""
    if not module.startswith("tirxh."):
        return False
    if any(module == p or module.startswith(p + ".") for p in PUBLIC - {"tirxh"}):
        return False
    sub = module.split(".")[1]
    return (REPO / "tirxh" / sub).is_dir() or (REPO / "tirxh" / f"{sub}.py").exists()


def _distributions() -> dict:
    """Top-level package of each plugin distribution -> its directory under plugins/."""
    return {pkg.name: pkg.parent.name for pkg in sorted(REPO.glob("plugins/*/*/__init__.py"))
            for pkg in [pkg.parent] if pkg.name not in ("tests", "benchmarks")}


def _package_of(module: str, dists: dict) -> "str | None":
    top = module.split(".")[0]
    if top in ("tirxh", "kcoral"):
        return top
    return top if top in dists else None


def _violations() -> list:
    found = []
    for path in _py_files("plugins/**/*.py", "examples/**/*.py"):
        for line, mod in imports(path):
            if _tirxh_violation(mod):
                found.append((_rel(path), line, mod))
    return found


def test_the_walk_sees_nested_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import tirxh.api\n\ndef f():\n    from tirxh.core import ir\n"
                 "    from tirxh import main, core\n")
    mods = [m for _, m in imports(f)]
    assert mods == ["tirxh.api", "tirxh.core", "tirxh.main", "tirxh.core"]
    assert [m for m in mods if _tirxh_violation(m)] == ["tirxh.core", "tirxh.core"]


def test_plugins_and_examples_import_only_public_tirxh_modules():
    bad = _violations()
    assert not bad, ("import tirxh through tirxh.api / tirxh.lang / tirxh.testing only:\n" +
                     "\n".join(f"  {f}:{n}: {m}" for f, n, m in bad))


def test_the_core_imports_no_plugin_distribution():
    dists = _distributions()
    assert {"tirxh_numsim", "tirxh_sync_check", "tirxh_iket", "tirxh_ncu_profile"} <= set(dists)
    bad = [(_rel(p), n, m) for p in _py_files("tirxh/**/*.py") for n, m in imports(p)
           if m.split(".")[0] in dists]
    assert not bad, bad


def _graph(skip_from=()) -> dict:
    """Package -> the packages its product code imports (tests and benchmarks left out)."""
    dists = _distributions()
    roots = {"tirxh": _py_files("tirxh/**/*.py"), "kcoral": _py_files("kcoral/**/*.py")}
    for pkg, d in dists.items():
        roots[pkg] = _py_files(f"plugins/{d}/{pkg}/**/*.py")
    graph = {}
    for pkg, files in roots.items():
        if pkg in skip_from:
            continue
        deps = {_package_of(m, dists) for p in files for _, m in imports(p)}
        graph[pkg] = sorted(d for d in deps if d and d != pkg)
    return graph


def _cycle(graph: dict) -> "list | None":
    state, stack = {}, []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in graph.get(n, ()):
            if state.get(m) == "open":
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = "done"
        return None

    for n in graph:
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_cycle_finder():
    assert _cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert _cycle({"a": ["b"], "b": ["a"]}) == ["a", "b", "a"]


def test_no_import_cycle_between_tirxh_and_the_plugin_distributions():
    graph = _graph(skip_from=("kcoral",))
    assert "kcoral" in graph["tirxh"]  # tirxh bench uses the kcoral client (allowed direction)
    assert _cycle(graph) is None, f"import cycle between packages: {_cycle(graph)}"


def test_kcoral_imports_nothing_from_tirxh_or_a_plugin():
    graph = _graph()
    assert graph["kcoral"] == [], f"kcoral imports {graph['kcoral']}"
    assert _cycle(graph) is None
