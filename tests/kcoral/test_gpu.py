"""The cuda board end to end on a real GPU (skipped without one): vadd through the daemon,
a faulting kernel reported as runtime.* with the board recovering."""

import numpy as np
import pytest

import tirxh.lang as T
from kcoral.client import KCoralClient
from kcoral.server import Daemon
from tirxh.core.compiler import compile_kernel
from tirxh.api import build_job

pytestmark = pytest.mark.gpu


@T.kernel(grid=lambda n: T.cdiv(n, 256), block=256)
def vadd(a: T.gptr[T.f32], b: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 256 + T.tid.x
    with T.if_(i < n):
        x = T.ptx.ld.global_.f32(a.at(i))
        y = T.ptx.ld.global_.f32(b.at(i))
        T.ptx.st.global_.f32(out.at(i), x + y)


@T.kernel(grid=1, block=32)
def trap_kernel(n: T.u32):
    T.ptx.trap()


def inputs(rng, n):
    return dict(a=rng.standard_normal(n, dtype=np.float32),
                b=rng.standard_normal(n, dtype=np.float32), out=np.empty(n, np.float32), n=n)


SUITE = T.suite(vadd, inputs=inputs, reference=lambda a, b: {"out": a + b}, outputs=["out"],
                cases=[T.case("n1M", n=1 << 20)], bytes=lambda n: 12 * n)


def test_cuda_board_end_to_end(tmp_path):
    d = Daemon({"boards": {"cuda": {"devices": [0]}}}, state_dir=tmp_path, port=0).start()
    try:
        with KCoralClient(d.address) as c:
            ck = compile_kernel(vadd, "sm_90a")
            doc = build_job(ck, SUITE, SUITE.cases[0], put=c.put_blob,
                            timing={"min_iters": 20, "budget_s": 2.0})
            ev = c.run(doc, timeout=300)
            r = ev["result"]
            assert ev["state"] == "done", r
            assert r["verified"] and all(x["ok"] for x in r["correctness"])
            t = r["timing"]
            assert 0 < t["candidate"]["median_ms"] < 1.0 and not t["suspect"]
            assert r["device"]["kind"] == "cuda" and r["device"]["l2_bytes"] > 0
            tk = compile_kernel(trap_kernel, "sm_90a")
            bad = {"target": "sm_90a", "module": {"format": "cubin", "blob": c.put_blob(tk.cubin)},
                   "launches": [{"entry": "trap_kernel", "grid": [1], "block": [32],
                                 "args": [{"scalar": 1, "dtype": "u32"}]}],
                   "timing": {"enabled": False}}
            ev = c.run(bad, timeout=300)
            assert ev["state"] == "failed"
            assert ev["result"]["error"]["type"].startswith("runtime.")
            assert ev["result"]["worker_restarted"]
            assert c.run(doc, timeout=300)["state"] == "done"
    finally:
        d.stop(5)


@T.kernel(grid=1, block=32)
def noop(n: T.u32):
    with T.if_(T.tid.x > n):
        T.ptx.trap()


def test_torch_baselines_on_the_cuda_board(tmp_path):
    pytest.importorskip("torch", reason="the torch baselines need torch on the GPU host")
    from tirxh.core.types import numpy_dtype
    bf16 = numpy_dtype("bf16")
    d = Daemon({"boards": {"cuda": {"devices": [0]}}}, state_dir=tmp_path, port=0).start()
    try:
        with KCoralClient(d.address) as c:
            nk = compile_kernel(noop, "sm_90a")
            shape = [1, 8, 512, 64]
            rng = np.random.default_rng(0)
            a = rng.standard_normal((256, 128)).astype(bf16)
            b = rng.standard_normal((64, 128)).astype(bf16)
            doc = {"target": "sm_90a", "module": {"format": "cubin", "blob": c.put_blob(nk.cubin)},
                   "launches": [{"entry": "noop", "grid": [1], "block": [32],
                                 "args": [{"scalar": 1 << 20, "dtype": "u32"}]}],
                   "buffers": [{"name": n, "dtype": "bf16", "shape": shape,
                                "init": {"kind": "normal"}} for n in ("q", "k", "v")]
                   + [{"name": "o", "dtype": "bf16", "shape": shape, "output": True},
                      {"name": "A", "dtype": "bf16", "shape": [256, 128],
                       "init": {"kind": "blob", "blob": c.put_array(a)}},
                      {"name": "B", "dtype": "bf16", "shape": [64, 128],
                       "init": {"kind": "blob", "blob": c.put_array(b)}},
                      {"name": "C", "dtype": "f32", "shape": [256, 64], "output": True}],
                   "baselines": [{"name": "torch.sdpa",
                                  "args": {"q": "q", "k": "k", "v": "v", "out": "o"}},
                                 {"name": "torch.matmul",
                                  "args": {"a": "A", "b": "B", "out": "C", "transpose_b": True}},
                                 {"name": "torch.matmul",
                                  "args": {"M": 1024, "N": 1024, "K": 1024, "dtype": "bf16"}}],
                   "timing": {"min_iters": 10, "budget_s": 2.0}}
            ev = c.run(doc, timeout=300)
            assert ev["state"] == "done", ev["result"]
            bl = ev["result"]["timing"]["baselines"]
            assert bl["torch.sdpa"]["median_ms"] > 0 and bl["torch.matmul"]["speedup"] > 0
            # the buffer-role form as a correctness reference: C = A @ B^T in f32
            ref = {"target": "sm_90a", "module": doc["module"], "launches": doc["launches"],
                   "buffers": doc["buffers"][4:],
                   "checks": [{"buffer": "C", "baseline": "torch.matmul", "rtol": 1e-2,
                               "atol": 1e-2, "baseline_args": {"a": "A", "b": "B",
                                                               "transpose_b": True}}],
                   "timing": {"enabled": False}}
            ev = c.run(ref, timeout=300)
            # the noop candidate leaves C poisoned, so it must fail against the reference
            assert ev["result"]["error"]["type"] == "correctness.mismatch", ev["result"]
    finally:
        d.stop(5)
