"""The plugin contract is documented in the pytest template: every hook says when it is called,
documents each argument and its return value, and says whether it is firstresult or historic."""

import inspect

import pytest

from tirxh.core import hookspec

HOOKS = [(name, fn) for name, fn in vars(hookspec).items()
         if name.startswith("tirxh_") and callable(fn)]


def _opts(fn) -> dict:
    return getattr(fn, "tirxh_spec", None) or {}


def test_there_are_hooks_and_all_are_specs():
    assert len(HOOKS) >= 19
    assert all(_opts(fn) is not None for _, fn in HOOKS)


@pytest.mark.parametrize("name,fn", HOOKS, ids=[n for n, _ in HOOKS])
def test_hook_documents_every_argument_and_the_return_value(name, fn):
    doc = inspect.getdoc(fn) or ""
    for arg in inspect.signature(fn).parameters:
        assert f":param {arg}:" in doc, f"{name}: argument {arg!r} is not documented"
    assert ":return:" in doc, f"{name}: the return value is not documented"
    assert "called" in doc.lower() or "asked" in doc.lower(), f"{name}: says not when it runs"


@pytest.mark.parametrize("name,fn", HOOKS, ids=[n for n, _ in HOOKS])
def test_hook_says_firstresult_or_historic(name, fn):
    doc = (inspect.getdoc(fn) or "").lower()
    opts = _opts(fn)
    assert ("firstresult" in doc) == bool(opts.get("firstresult")), name
    assert ("historic" in doc) == bool(opts.get("historic")), name


def test_the_build_command_has_a_hook():
    assert "outdir" in inspect.signature(hookspec.tirxh_build_item).parameters
