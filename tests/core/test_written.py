"""`tirxh.core.written`: the declared outputs a compiled kernel can never write, found from its
IR on the CPU; and `tirxh check` failing a timing case (no analyzer simulates it) that declares
one (session 15, H200: kda_bwd_prep_sg[po_t8192_h96] declared 'bt', which its WALK=0 build
never writes; KCoral's poison stayed there and the device job failed)."""

import json

import tirxh.lang as T
from tirxh.core.written import never_written


def _ir(kernel, **consts):
    return kernel.compile("sm_90a", **consts).ir_json()


@T.kernel(grid=lambda n: T.cdiv(n, 128), block=128)
def two_out(a: T.gptr[T.f32], out: T.gptr[T.f32], side: T.gptr[T.f32], n: T.u32,
            SIDE: T.const = 0):
    """Writes `out`; `side` only with SIDE=1 (as kda_bwd_prep_sg's 'bt' with WALK=1)."""
    i = T.ctaid.x * 128 + T.tid.x
    with T.if_(i < n):
        x = T.ptx.ld.global_.f32(a.at(i))
        T.ptx.st.global_.f32(out.at(i), x)
        if SIDE:
            T.ptx.st.global_.f32(side.at(n - 1 - i), x * 2.0)


@T.kernel(grid=lambda n: T.cdiv(n, 128), block=128)
def side_read_only(a: T.gptr[T.f32], out: T.gptr[T.f32], side: T.gptr[T.f32], n: T.u32):
    """Reads `side` (its address arithmetic and a load), never stores to it."""
    i = T.ctaid.x * 128 + T.tid.x
    with T.if_(i < n):
        T.ptx.st.global_.f32(out.at(i), T.ptx.ld.global_.f32(a.at(i))
                             + T.ptx.ld.global_.f32(side.at(i + 1)))


@T.kernel(grid=lambda n: 1, block=32)
def side_escapes(a: T.gptr[T.f32], out: T.gptr[T.f32], side: T.gptr[T.f32], n: T.u32):
    """Keeps `side`'s address in memory (`out` as u64 words): someone else may write through
    it, so it is not called never written."""
    T.ptx.st.global_.u64(out.at(0), side.base)


def test_an_output_nothing_stores_to_is_named():
    assert never_written(_ir(two_out), ["out", "side"]) == ["side"]
    assert never_written(_ir(two_out, SIDE=1), ["out", "side"]) == []
    # parsed JSON works too; names not among the pointer parameters are not judged
    assert never_written(json.loads(_ir(two_out)), ["side", "n", "nope"]) == ["side"]


def test_a_read_only_or_escaping_pointer_is_judged_conservatively():
    assert never_written(_ir(side_read_only), ["out", "side"]) == ["side"]
    assert never_written(_ir(side_escapes), ["out", "side"]) == []


def test_an_unknown_node_using_the_pointer_counts_as_a_write():
    doc = json.loads(_ir(two_out))
    assert never_written(doc, ["side"]) == ["side"]
    param_load = next(i for i in _walk(doc["body"]) if i.get("spelling") == "ld.param.u64"
                      and "side" in json.dumps(i["operands"]))
    doc["body"].append({"op": "mystery", "uses": param_load["operands"][0]})
    assert never_written(doc, ["side"]) == []


def test_a_kernel_with_a_tensor_map_gets_no_answer():
    doc = json.loads(_ir(two_out))
    doc["params"].append({"name": "tm", "kind": "tensormap", "dtype": None, "size": 128,
                          "align": 64})
    assert never_written(doc, ["out", "side"]) == []


def _walk(nodes):
    for n in nodes or ():
        if n.get("op") == "instr":
            yield n
        for k in ("body", "then", "else"):
            if isinstance(n.get(k), list):
                yield from _walk(n[k])


TIMING = '''
import numpy as np
import tirxh.lang as T


@T.kernel(grid=lambda n: T.cdiv(n, 128), block=128)
def vcopy(a: T.gptr[T.f32], out: T.gptr[T.f32], side: T.gptr[T.f32], n: T.u32,
          SIDE: T.const = 1):
    i = T.ctaid.x * 128 + T.tid.x
    with T.if_(i < n):
        x = T.ptx.ld.global_.f32(a.at(i))
        T.ptx.st.global_.f32(out.at(i), x)
        if SIDE:
            T.ptx.st.global_.f32(side.at(i), x)


def big_inputs(rng, n):
    return dict(a=rng.standard_normal(n, np.float32), out=np.zeros(n, np.float32),
                side=np.zeros(n, np.float32), n=n)


# timing only (no reference): nothing simulates these
SUITE_TIMING = T.suite(vcopy, inputs=big_inputs, outputs=["out", "side"],
                       cases=[T.case("t_side", n=1 << 20), T.case("t_noside", n=1 << 20,
                                                                  SIDE=0)])
'''


def test_check_fails_a_timing_case_declaring_an_output_its_build_never_writes(tirxh):
    tirxh.project(vcopy=TIMING)
    r = tirxh.run("check", "--json")
    assert r.ret == 1, r
    by = {i["case"]: i for i in json.loads(r.stdout)["items"]}
    assert by["t_side"]["outcome"] == "compiled"
    bad = by["t_noside"]
    assert bad["outcome"] == "failed", bad
    assert ("vcopy[t_noside]: declared output(s) 'side' never written by this build (SIDE=0): "
            "no store, atomic or copy addresses them") in bad["phases"][1]["longrepr"]
