"""Imports are at the top of product modules (STYLE.md): a function-level import hides a
dependency, and hidden imports are how cycles between packages stay invisible.

An import inside a function is allowed only for an optional dependency or a measured start-up
cost, and must say which in a comment on its line or on the comment lines right above it
(``# optional dependency: ...`` / ``# start-up cost: ...``). The walk covers tirxh/, every plugin
distribution's package (plugins/*/tirxh_*/) and kcoral/ (generated protobuf code excepted).
"""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REASONS = ("optional dependency", "start-up cost")


def product_files() -> list:
    files = sorted(REPO.glob("tirxh/**/*.py"))
    files += sorted(p for d in sorted(REPO.glob("plugins/*/tirxh_*")) for p in d.rglob("*.py"))
    files += sorted(p for p in REPO.glob("kcoral/**/*.py") if "_proto" not in p.parts)
    return files


def hidden_imports(path: Path) -> list:
    """``(line, text)`` of every import inside a function without a comment giving the reason."""
    src = path.read_text()
    lines = src.splitlines()
    out = []

    def justified(node) -> bool:
        here = lines[node.lineno - 1]
        above = []
        for ln in reversed(lines[:node.lineno - 1]):
            if not ln.strip().startswith("#"):
                break
            above.append(ln)
        text = " ".join([here[here.find("#"):] if "#" in here else ""] + above)
        return any(r in text for r in REASONS)

    def walk(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.Lambda))
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)) and \
                    not justified(child):
                out.append((child.lineno, lines[child.lineno - 1].strip()))
            walk(child, inner)

    walk(ast.parse(src, str(path)), False)
    return out


# files the kcoral engineer is changing on branch kcoral (kcoral/, the bench plugin whose job
# builder moves into the core, and the two profilers' calls of it): strict, so a file that
# becomes clean fails here until its entry is removed


def _param(path: Path):
    rel = path.relative_to(REPO).as_posix()
    return pytest.param(path, id=rel)


def test_the_walk_sees_the_product_code():
    rels = {p.relative_to(REPO).as_posix() for p in product_files()}
    assert {"tirxh/core/compiler.py", "plugins/numsim/tirxh_numsim/sim.py",
            "kcoral/client.py"} <= rels
    assert not any("/tests/" in r or "_proto" in r for r in rels)


def test_the_rule_finds_an_unexplained_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    import json\n\n\ndef g():\n"
                 "    # optional dependency: plots only\n    import matplotlib\n\n\n"
                 "def h():\n    import torch  # start-up cost: 2 s, measured\n")
    assert hidden_imports(f) == [(2, "import json")]


@pytest.mark.parametrize("path", [_param(p) for p in product_files()])
def test_no_hidden_imports(path):
    found = hidden_imports(path)
    assert not found, (f"{path.relative_to(REPO)}: imports inside functions without a comment "
                       f"saying 'optional dependency' or 'start-up cost': {found}")
