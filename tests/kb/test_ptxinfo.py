"""Instruction facts: query forms, facts, fidelity through the hook, search."""

import pytest

from tirxh.core.errors import UsageError
from tirxh.core.pluginmanager import build_plugin_manager, hookimpl
from tirxh.core.registry import default_targets
from tirxh.kb import ptxinfo


@pytest.fixture(scope="module")
def targets():
    return list(default_targets())


@pytest.mark.parametrize("query, spelling", [
    ("ld.global.v4.f32", "ld.global.v4.f32"),
    ("T.ptx.ld.global_.v4.f32", "ld.global.v4.f32"),
    ("T.ptx.ld.global_.v4.f32(a.at(i))", "ld.global.v4.f32"),
    ("ptx.mbarrier.try_wait.parity.shared__cta.b64", "mbarrier.try_wait.parity.shared::cta.b64"),
    ('T.ptx["mbarrier.try_wait.parity.shared::cta.b64"]',
     "mbarrier.try_wait.parity.shared::cta.b64"),
    ("T.ptx['cp.async.bulk.tensor.2d.shared::cluster.global.tile'](x)",
     "cp.async.bulk.tensor.2d.shared::cluster.global.tile"),
    ("T.ptx.cp.async_.bulk.tensor._2d.shared__cluster.global_", "cp.async.bulk.tensor.2d."
                                                                 "shared::cluster.global"),
])
def test_normalize_follows_the_language(query, spelling):
    assert ptxinfo.normalize(query) == spelling


def test_normalize_refuses_empty_tokens():
    with pytest.raises(UsageError, match=r"'ld..f32' is not a PTX spelling \(an empty token\)"):
        ptxinfo.normalize("ld..f32")


def test_resolve_every_query_form(isa):
    [r] = ptxinfo.resolve("wgmma.mma_async.ss", isa)  # a binding name
    assert r.binding.name == "wgmma.mma_async.ss" and r.modifiers is None
    [r] = ptxinfo.resolve("T.ptx.ld.global_.v4.f32", isa)  # a full spelling
    assert r.binding.name == "ld" and r.modifiers["vec"] == "v4"
    names = [r.binding.name for r in ptxinfo.resolve("wgmma.mma_async.sync.aligned."
                                                     "m64n128k16.f32.bf16.bf16", isa)]
    assert names == ["wgmma.mma_async.ss", "wgmma.mma_async.rs"]  # told apart by operands
    under = {r.binding.name for r in ptxinfo.resolve("mbarrier", isa)}  # an opcode
    assert {"mbarrier.init", "mbarrier.try_wait", "mbarrier.arrive"} <= under
    with pytest.raises(UsageError, match=r"'ld.globl.f32' names no instruction binding"
                                         r"(.|\n)*did you mean ld.global.f32"):
        ptxinfo.resolve("ld.globl.f32", isa)
    with pytest.raises(UsageError, match=r"nearest binding names: .*mbarrier.try_wait"):
        ptxinfo.resolve("mbarrier.try_wiat", isa)


def test_facts_of_a_binding_and_of_a_form(isa, targets):
    [r] = ptxinfo.resolve("mbarrier.try_wait.parity.shared::cta.b64", isa)
    f = ptxinfo.facts(r.binding, isa, targets)
    assert f["owner"] == "tirxh.isa_sm90a" and f["iset"] == "sm90" and f["ptx_isa"] == "8.0"
    assert f["effects"]["sync"] == "mbarrier.wait" and "phase" in f["effects"]["sync_meaning"]
    ok = {t["name"]: t["ok"] for t in f["targets"]}
    assert ok["sm_90a"] and not ok["sm_80"]
    assert f["operands"] is None and f["operand_forms"][0]["operands"][0]["kind_text"] == \
        "destination"
    assert f["examples"][0]["python"] == "T.ptx.mbarrier.try_wait.parity.shared__cta.b64(...)"
    form = ptxinfo.spelling_facts(r, targets)
    assert form["modifiers"] == {"op": "try_wait", "parity": "parity", "ss": "shared::cta",
                                 "type": "b64"}
    assert form["effects"]["read"] == "shared::cta"
    sm80 = next(t for t in form["targets"] if t["name"] == "sm_80")
    assert "does not accept" in sm80["reason"]
    [r] = ptxinfo.resolve("bar.sync", isa)
    assert ptxinfo.spelling_facts(r, targets) is None  # a name: no particular form


class _Simulator:
    @hookimpl
    def tirxh_binding_fidelity(self, binding):
        if binding.name == "ex2":
            return "representative", "1 ulp"
        return None


def test_fidelity_from_the_simulator_and_unknown_without_one(isa):
    ex2 = isa.by_name["ex2"]
    pm = build_plugin_manager(autoload=False)
    for unanswered in (ptxinfo.fidelity(ex2, None), ptxinfo.fidelity(ex2, pm)):
        assert unanswered["class"] is None and unanswered["source"] is None
        assert "no simulator plugin answered" in unanswered["note"]
    pm.register(_Simulator(), name="sim")
    assert ptxinfo.fidelity(ex2, pm) == {"class": "representative", "note": "1 ulp",
                                         "source": "simulator"}
    assert ptxinfo.fidelity(isa.by_name["add.int"], pm)["class"] is None


def test_search_ranks_names_over_docs(isa):
    hits = ptxinfo.search("try_wait", isa)
    assert hits[0][1].name == "mbarrier.try_wait" and "name" in hits[0][2]
    hits = ptxinfo.search("async proxy wgmma", isa)
    assert {b.name for _, b, _ in hits} >= {"wgmma.mma_async.ss"}
    assert all("effects" in m for _, _, m in hits)
    assert ptxinfo.search("nosuchthing", isa) == []
    with pytest.raises(UsageError, match="ptx search: the query is empty"):
        ptxinfo.search("", isa)
