"""The transform registry and how a build's transforms are chosen; the hook that fills it."""

import json

import pytest

from tirxh.core.errors import CompileError
from tirxh.core.transforms import Transform, TransformRegistry, resolve

from .pytester import SCALE


def _ident(k, ctx):
    return k


A = Transform("a", _ident)
B = Transform("b", _ident, default=True)


def test_defaults_first_then_requested_in_order():
    reg = TransformRegistry()
    reg.add(A, owner="p1")
    reg.add(B, owner="p2")
    assert [t.name for t in reg] == ["a", "b"] and reg.defaults() == [B]
    got = resolve([("a", {"x": 1})], reg)
    assert [(t.name, o) for t, o in got] == [("b", {}), ("a", {"x": 1})]


def test_registering_twice_names_both_owners():
    reg = TransformRegistry()
    reg.add(A, owner="p1")
    with pytest.raises(ValueError, match=r"transform 'a' registered twice \(by 'p1' and 'p2'\)"):
        reg.add(Transform("a", _ident), owner="p2")


def test_only_transforms_can_be_registered():
    with pytest.raises(TypeError, match=r"registry.add\(\) takes a Transform, got 'a'"):
        TransformRegistry().add("a")


def test_options_must_be_a_dict():
    reg = TransformRegistry()
    reg.add(A)
    with pytest.raises(CompileError, match=r"options of IR transform 'a' must be a dict, got 3"):
        resolve([("a", 3)], reg)


# a project plugin (tirxconf.py) adding a default transform (pytester's membar_first)
TRANSFORM_PLUGIN = '''
import tirxh
from tirxh.api import Transform
from tests.core.pytester import membar_first


@tirxh.hookimpl
def tirxh_register_transforms(registry):
    registry.add(Transform("membar-first", membar_first, default=True), owner="tirxconf")
'''


def test_a_plugin_adds_a_default_transform_to_every_build(tirxh):
    tirxh.project(scale=SCALE)
    tirxh.write("tirxconf.py", TRANSFORM_PLUGIN)
    r = tirxh.run("show", "kernels/scale.py::scale@sm_90a", "--ptx")
    assert r.ret == 0, r
    assert "membar.cta" in r.stdout
    r = tirxh.run("show", "kernels/scale.py::scale@sm_90a", "--resources", "--json")
    assert json.loads(r.stdout)["content"]["launch"]["transforms"] == ["membar-first"]
    r = tirxh.run("show", "kernels/scale.py::scale@sm_90a", "--ptx", "-p", "no:tirxconf")
    assert r.ret == 0 and "membar.cta" not in r.stdout


def test_two_plugins_registering_one_name_is_a_plugin_error(tirxh, monkeypatch):
    tirxh.project(scale=SCALE)
    tirxh.write("tirxconf.py", TRANSFORM_PLUGIN)
    tirxh.write("again.py", TRANSFORM_PLUGIN.replace('owner="tirxconf"', 'owner="again"'))
    monkeypatch.syspath_prepend(str(tirxh.path))
    r = tirxh.run("check", "-p", "again")
    assert r.ret == 4
    assert "transform 'membar-first' registered twice (by 'tirxconf' and 'again')" in r.stderr \
        or "transform 'membar-first' registered twice (by 'again' and 'tirxconf')" in r.stderr
