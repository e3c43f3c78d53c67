"""The JSON form of the IR (`tirxh.core.irjson`): lossless over the zoo and the golden kernels
(the PTX emitted from the loaded IR is byte-identical), bindings re-resolved from the loader's
instruction set, and malformed input reported with the field named."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import tirxh.lang as T
from tests.lang import kernels_golden as kg
from tirxh.core import ir, irjson
from tirxh.core.emit_ptx import emit_ptx
from tirxh.core.registry import default_isa, default_targets

ZOO = Path(__file__).resolve().parents[2] / "zoo" / "kernels"


def _zoo_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"zoo_irjson_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _zoo_specializations() -> list:
    """(id, kernel, consts, target): every zoo kernel, once per distinct set of constants."""
    out = []
    for path in sorted(ZOO.glob("*.py")):
        mod = _zoo_module(path)
        suites = [v for v in vars(mod).values() if isinstance(v, T.Suite)]
        for kern in [v for v in vars(mod).values() if isinstance(v, T.Kernel)]:
            target = (kern.targets or ("sm_90a",))[0]
            seen = set()
            params = [c.params for s in suites if s.kernel is kern for c in s.cases] or [{}]
            for p in params:
                consts = kern.resolve_consts(p)
                key = tuple(sorted(consts.items()))
                if key in seen:
                    continue
                seen.add(key)
                tag = ",".join(f"{k}={v}" for k, v in key) or "default"
                out.append((f"{path.stem}:{kern.name}[{tag}]", kern, consts, target))
    return out


ZOO_SPECS = _zoo_specializations()
GOLDEN_SPECS = [(f"golden:{k.name}@{t}", k, c, t) for k, c in kg.GOLDEN
                for t in ("sm_80", "sm_90a")]


def _spec_params(specs) -> list:
    """One specialization per zoo kernel in the default run; every other one is `slow`
    (each traces a zoo kernel twice and emits it twice: seconds for the large ones)."""
    seen, out = set(), []
    for sid, kern, consts, target in specs:
        first = sid.startswith("golden:") or id(kern) not in seen
        seen.add(id(kern))
        marks = () if first else (pytest.mark.slow(reason="one more specialization of a zoo "
                                                          "kernel already round-tripped"),)
        out.append(pytest.param(kern, consts, target, id=sid, marks=marks))
    return out


@pytest.mark.parametrize("kernel,consts,target", _spec_params(ZOO_SPECS + GOLDEN_SPECS))
def test_round_trip_emits_identical_ptx(kernel, consts, target):
    kir = kernel.specialize(**consts)
    text = irjson.dumps(kir)
    back = irjson.loads(text, default_isa())
    t = default_targets().get(target)
    assert emit_ptx(back, t) == emit_ptx(kir, t)
    assert irjson.dumps(back) == text  # a fixed point: nothing drifts on a second trip
    # the bindings are the loader's own registry entries, found again from the spellings
    for a, b in zip(kir.instructions(), back.instructions()):
        assert b.binding is default_isa().by_name[a.binding.name]
        assert b.modifiers == a.modifiers and b.loc == a.loc
    assert [(r.id, r.dtype, r.hint) for r in back.regs] == \
        [(r.id, r.dtype, r.hint) for r in kir.regs]


def test_zoo_is_covered():
    names = {s[0].split("[")[0] for s in ZOO_SPECS}
    assert {"vadd:vadd", "gemm_wgmma:gemm_wgmma", "gemm_mma:gemm_mma",
            "reduce_rows:reduce_rows", "gemm_tcgen05:gemm_tcgen05"} <= names


def test_annotations_and_structure_survive():
    vadd = next(s for s in ZOO_SPECS if s[0].startswith("vadd:"))
    kir = vadd[1].specialize(**vadd[2])
    back = irjson.loads(irjson.dumps(kir))
    kinds = lambda k: [type(s).__name__ for s in k.walk()]  # noqa: E731
    assert kinds(back) == kinds(kir)
    ann = [(s.kind, s.name) for s in back.walk() if isinstance(s, ir.Annotation)]
    assert ann == [("begin", "load"), ("end", "load"), ("begin", "store"), ("end", "store")]


def test_compiled_kernel_ir_json():
    ck = kg.saxpy.compile("sm_90a")
    doc = json.loads(ck.ir_json())
    assert doc["schema"] == irjson.SCHEMA and doc["name"] == "saxpy"
    assert [p["name"] for p in doc["params"]] == ["x", "y", "alpha", "n"]


def test_loaded_ir_simulates_like_the_original():
    numsim = pytest.importorskip("tirxh_numsim")

    class _Compiled:  # numsim runs a CompiledKernel's IR; the loaded IR stands in for one
        def __init__(self, k):
            self.ir, self.name, self.consts = k, k.name, {}

    kir = kg.saxpy.specialize()
    back = irjson.loads(irjson.dumps(kir))
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(300, np.float32), rng.standard_normal(300, np.float32)
    outs = [numsim.run(_Compiled(k), dict(x=x, y=y.copy(), alpha=np.float32(1.5), n=300),
                       grid=(3,)).outputs["y"] for k in (kir, back)]
    np.testing.assert_array_equal(outs[0], outs[1])
    # fma rounds once: the f64 product of two f32 values is exact
    np.testing.assert_allclose(outs[1], (1.5 * x.astype(np.float64) + y).astype(np.float32),
                               rtol=1e-6)


# -- malformed input ---------------------------------------------------------------------------

def _doc():
    return irjson.to_doc(kg.saxpy.specialize())


def _first_instr(doc, spelling_prefix):
    def walk(stmts):
        for s in stmts:
            yield s
            for key in ("then", "else", "body"):
                if isinstance(s.get(key), list):
                    yield from walk(s[key])
    return next(s for s in walk(doc["body"]) if s["op"] == "instr"
                and s["spelling"].startswith(spelling_prefix))


def _body_path(doc, target) -> str:
    def walk(stmts, path):
        for i, s in enumerate(stmts):
            if s is target:
                return f"{path}[{i}]"
            for key in ("then", "else", "body"):
                if isinstance(s.get(key), list):
                    got = walk(s[key], f"{path}[{i}].{key}")
                    if got:
                        return got
        return None
    return walk(doc["body"], "body")


def test_unknown_spelling_names_the_field():
    doc = _doc()
    fma = _first_instr(doc, "fma")
    fma["spelling"] = "fmaa.rn.f32"
    with pytest.raises(irjson.IRJSONError, match=r"kernel 'saxpy': body.*\.spelling: unknown "
                                                 r"PTX instruction 'fmaa.rn.f32'") as ei:
        irjson.from_doc(doc)
    assert ei.value.field == _body_path(doc, fma) + ".spelling"


def test_bad_operand_kind_is_rechecked():
    doc = _doc()
    st = _first_instr(doc, "st.global")
    st["operands"][0] = {"imm": 3, "t": "u64"}  # st's address must be a memory operand
    with pytest.raises(irjson.IRJSONError, match=r"\.operands: st\.global\.f32: .*expects a "
                                                 r"memory address"):
        irjson.from_doc(doc)


def test_operand_type_is_rechecked():
    doc = _doc()
    fma = _first_instr(doc, "fma")
    u64 = next(i for i, r in enumerate(doc["regs"]) if r[1] == "u64")
    fma["operands"][1] = {"r": u64}
    with pytest.raises(irjson.IRJSONError, match=r"expects type \.f32, got a register of "
                                                 r"type \.u64"):
        irjson.from_doc(doc)


def test_binding_must_accept_the_spelling():
    doc = _doc()
    _first_instr(doc, "fma")["binding"] = "ld"
    with pytest.raises(irjson.IRJSONError, match=r"\.binding: binding 'ld' does not accept "
                                                 r"'fma\.rn\.f32'"):
        irjson.from_doc(doc)


def test_every_problem_is_reported_together():
    doc = _doc()
    doc["regs"][0][1] = "f33"
    doc["block"] = [0, 1, 1]
    doc["body"].append({"op": "goto", "loc": doc["loc"]})
    doc["body"].append({"op": "break", "cond": 10_000, "negate": False, "loc": doc["loc"]})
    with pytest.raises(irjson.IRJSONError) as ei:
        irjson.from_doc(doc)
    fields = [f for f, _ in ei.value.problems]
    n = len(doc["body"])
    assert "regs[0].dtype" in fields and "block" in fields
    assert f"body[{n - 2}].op" in fields and f"body[{n - 1}].cond" in fields
    assert "unknown PTX type 'f33'" in str(ei.value)


@pytest.mark.parametrize("text,match", [
    ("{nope", r"ir: not JSON"),
    ("[1, 2]", r"ir: expected a JSON object"),
    ('{"schema": "tirxh-ir/0", "name": "k"}', r"kernel 'k': schema: expected 'tirxh-ir/1'"),
])
def test_malformed_documents(text, match):
    with pytest.raises(irjson.IRJSONError, match=match):
        irjson.loads(text)


def test_unserializable_constant_is_named():
    kir = kg.saxpy.specialize()
    kir.consts = {"weird": object()}
    with pytest.raises(TypeError, match=r"kernel 'saxpy': consts.weird: .*has no JSON form"):
        irjson.dumps(kir)


def test_constant_types_are_kept():
    kir = kg.smem_roundtrip.specialize(ROWS=3)
    kir.consts = {"ROWS": 3, "t": (1, 2), "l": [1.0], "x": float("inf"), "s": "a", "n": None}
    back = irjson.loads(irjson.dumps(kir))
    assert back.consts == kir.consts
    assert type(back.consts["t"]) is tuple and type(back.consts["l"]) is list


def test_the_shared_layout_travels_and_older_documents_are_split():
    kir = kg.smem_roundtrip.specialize(ROWS=3)
    doc = irjson.to_doc(kir)
    assert doc["smem_layout"] == "window" and doc["shared"][0]["dynamic"] is True
    assert irjson.from_doc(doc).smem_layout == "window"
    # a document from before the single window: its static variables were declarations
    del doc["smem_layout"]
    doc["shared"][0]["dynamic"] = False
    old = irjson.from_doc(doc)
    assert old.smem_layout == "split"
    assert "\t.shared .align 16 .b8 buf[768];" in emit_ptx(old, default_targets().get("sm_90a"))


def test_an_unknown_shared_layout_is_named():
    doc = irjson.to_doc(kg.branches.specialize())  # (saxpy's cached IR is altered above)
    doc["smem_layout"] = "packed"
    with pytest.raises(irjson.IRJSONError, match=r"kernel 'branches': smem_layout: expected one "
                                                 r"of 'window', 'split', got 'packed'"):
        irjson.from_doc(doc)
