"""`tirxh ptx` end to end: list, search, show (with zoo users and numsim fidelity), errors."""

import json

import pytest

NUMSIM = ("-p", "tirxh_numsim.plugin")


def test_list_every_binding_and_by_target(tirxh):
    r = tirxh.run("ptx", "list", "--json")
    assert r.ret == 0, r
    doc = json.loads(r.stdout)
    assert (doc["schema"], doc["command"], doc["action"]) == ("tirxh.report/1", "ptx", "list")
    names = [b["name"] for b in doc["bindings"]]
    assert len(names) == len(set(names)) and {"ld", "wgmma.mma_async.ss", "tcgen05.mma"} <= \
        set(names)
    r = tirxh.run("ptx", "list", "--target", "sm_80", "--json")
    sm80 = {b["name"] for b in json.loads(r.stdout)["bindings"]}
    assert "ld" in sm80 and "wgmma.mma_async.ss" not in sm80 and "cp.async" in sm80
    r = tirxh.run("ptx", "list")
    r.fnmatch_lines(["* instruction bindings", "[[]base[]]", "  ld * Load from a state space*"])


def test_search(tirxh):
    r = tirxh.run("ptx", "search", "source", "lane", "--json")
    doc = json.loads(r.stdout)
    assert doc["query"] == "source lane" and doc["bindings"][0]["name"] == "shfl.sync.pred"
    assert doc["bindings"][0]["matched"]["doc"] == ["source", "lane"]
    assert "every lane" in doc["bindings"][0]["matched"]["effects"][0]  # the sync role's text
    r = tirxh.run("ptx", "search", "shfl")
    r.fnmatch_lines(["2 instruction bindings match 'shfl'", "  shfl.sync *", "  shfl.sync.pred *"])
    r = tirxh.run("ptx", "search", "mbarrier", "wait", "--target", "sm_80")
    assert r.ret == 0 and "mbarrier.try_wait" not in r.stdout  # sm_90 only


def test_show_a_spelling_with_zoo_users_and_numsim_fidelity(tirxh):
    r = tirxh.run("ptx", "show", "T.ptx.shfl.sync.bfly.b32", *NUMSIM, "--json")
    assert r.ret == 0, r
    b, pred = json.loads(r.stdout)["bindings"]  # two forms told apart by their operands
    assert (b["name"], pred["name"]) == ("shfl.sync", "shfl.sync.pred")
    assert b["form"]["spelling"] == "shfl.sync.bfly.b32"
    assert b["fidelity"]["source"] == "simulator" and b["fidelity"]["class"] == "modeled"
    assert {"kernel": "kernels/reduce_rows.py::reduce_rows",
            "spellings": ["shfl.sync.bfly.b32"]} in b["zoo"]["kernels"]
    r = tirxh.run("ptx", "show", "shfl.sync.bfly.b32", *NUMSIM)
    r.fnmatch_lines(["shfl.sync  (binding set base, plugin tirxh.isa_base)",
                     "  numsim fidelity: modeled (simulator)*",
                     "  this form: shfl.sync.bfly.b32 = T.ptx.shfl.sync.bfly.b32(...)*",
                     "  used in the zoo by: *kernels/reduce_rows.py::reduce_rows*"])


def test_show_without_a_simulator_says_so(tirxh):
    r = tirxh.run("ptx", "show", "ex2", "--json")
    [b] = json.loads(r.stdout)["bindings"]
    assert b["fidelity"]["class"] is None and b["fidelity"]["source"] is None
    r = tirxh.run("ptx", "show", "ex2")
    r.fnmatch_lines(["  numsim fidelity: unknown: no simulator plugin answered*"])


def test_show_an_opcode_lists_every_binding_under_it(tirxh):
    r = tirxh.run("ptx", "show", "wgmma", "--json")
    names = [b["name"] for b in json.loads(r.stdout)["bindings"]]
    assert {"wgmma.fence", "wgmma.mma_async.ss", "wgmma.wait_group"} <= set(names)


def test_show_reports_a_missing_zoo_without_failing(tirxh, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = tirxh.run("ptx", "show", "bar.sync", "--zoo", str(empty), "--json")
    assert r.ret == 0
    assert "not a zoo" in json.loads(r.stdout)["bindings"][0]["zoo"]["error"]


@pytest.mark.parametrize("args, match", [
    (["ptx", "show"], "ptx show: expected one SPELLING, got 0 argument(s)"),
    (["ptx", "show", "ld.globl.f32"], "did you mean ld.global.f32"),
    (["ptx", "list", "x"], "ptx list: takes no arguments"),
    (["ptx", "search"], "ptx search: give the words to search for"),
    (["ptx", "list", "--target", "sm_99"], "ptx --target 'sm_99': not a registered target"),
    (["ptx", "show", "ld", "--target", "sm_80"], "--target belongs to list and search"),
])
def test_usage_errors(tirxh, args, match):
    r = tirxh.run(*args)
    assert r.ret == 4 and match in r.stderr, r
