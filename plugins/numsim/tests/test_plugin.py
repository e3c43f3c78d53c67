"""The tirxh plugin: entry point, `tirxh check` integration, mismatch reports, [numsim] keys."""

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
import types
from importlib import metadata
from pathlib import Path

import numpy as np

import tirxh.lang as T
from tirxh_numsim.plugin import check_case, mismatch_text

ZOO = Path(__file__).resolve().parents[3] / "zoo"


def _zoo(name):
    spec = importlib.util.spec_from_file_location(f"zoo_{name}", ZOO / "kernels" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _item(suite, case):
    return types.SimpleNamespace(suite=suite, case=case, consts=None)


def test_entry_point_is_installed():
    eps = [ep for ep in metadata.entry_points(group="tirxh") if ep.name == "numsim"]
    assert eps and eps[0].value == "tirxh_numsim.plugin"


def test_zoo_wgmma_gemm_small_case_is_clean():
    mod = _zoo("gemm_wgmma")
    case = mod.SUITE.cases[0]
    res = check_case(_item(mod.SUITE, case))
    assert res.analyzer == "numsim" and res.verdict == "clean", res.summary
    # warp-specialized (producer / consumer warpgroups), yet vectorized over its warps
    assert res.stats["mode"] == "batched" and res.stats["lane_instructions"] > 0
    assert res.stats["warp_instructions"] > 4 * res.stats["group_instructions"]


@T.kernel(grid=lambda n: T.cdiv(n, 64), block=64)
def saxpy(x: T.gptr[T.f32], y: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 64 + T.tid.x
    with T.if_(i < n):
        v = T.ptx.ld.global_.f32(x.at(i))
        T.ptx.st.global_.f32(y.at(i), v * 2.0 + T.ptx.ld.global_.f32(y.at(i)))


def _inputs(rng, n):
    return dict(x=np.arange(n, dtype=np.float32), y=np.ones(n, np.float32), n=n)


def test_mismatch_report_has_indices_values_errors_and_rms():
    # the reference says 3x, the kernel does 2x: every element with x != 0 differs
    suite = T.suite(saxpy, inputs=_inputs, reference=lambda x, **_: {"y": 3 * x + 1},
                    outputs=["y"], cases=[T.case("n100", n=100)])
    res = check_case(_item(suite, suite.cases[0]))
    assert res.verdict == "error"
    mm = [f for f in res.findings if f.kind == "numsim.mismatch"]
    assert len(mm) == 1
    text = mm[0].message
    assert "99 of 100 elements differ" in text and "RMS ratio" in text
    assert "at (1,): got 3.0, expected 4.0" in text
    assert mm[0].data["max_abs"] == 99.0
    # outputs are poisoned before the run, so a kernel that never writes y is caught even
    # when the reference happens to match the initial contents
    ok = T.suite(saxpy, inputs=_inputs, reference=lambda x, **_: {"y": 2 * x + 1},
                 outputs=["y"], cases=[T.case("n100", n=100)])
    assert check_case(_item(ok, ok.cases[0])).verdict == "clean"


def test_mismatch_text_for_shape_errors():
    assert "shape" in mismatch_text("c", {"ok": False, "reason": "shape (2,) != expected (3,)"})


def test_unsupported_kernel_is_incomplete_not_clean():
    @T.kernel(grid=1, block=32)
    def usesconst(y: T.gptr[T.f32]):
        T.ptx.st.global_.f32(y.at(T.tid.x), T.ptx.ld.const.f32(y.at(0)))
    suite = T.suite(usesconst, inputs=lambda rng: dict(y=np.zeros(32, np.float32)),
                    reference=lambda y: {"y": y}, outputs=["y"])
    res = check_case(_item(suite, suite.cases[0]))
    assert res.verdict == "incomplete"
    assert "const" in res.summary and "ld.const.f32" in res.summary


KERNEL = '''
import numpy as np
import tirxh.lang as T


@T.kernel(grid=lambda n: T.cdiv(n, 64), block=64)
def twice(x: T.gptr[T.f32], y: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 64 + T.tid.x
    with T.if_(i < n):
        T.ptx.st.global_.f32(y.at(i), T.ptx.ld.global_.f32(x.at(i)) * 2.0)


def inputs(rng, n):
    return dict(x=rng.standard_normal(n, np.float32), y=np.zeros(n, np.float32), n=n)


SUITE = T.suite(twice, inputs=inputs, reference=lambda x: {"y": x * REF}, outputs=["y"],
                cases=[T.case("n300", n=300), T.case("huge", n=1 << 30, small=False)])
'''


def _project(tmp_path, ref, extra=""):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "twice.py").write_text(KERNEL.replace("REF", ref))
    (tmp_path / "tirx.toml").write_text(textwrap.dedent('''
        [project]
        name = "t"
        targets = ["sm_90a"]
        kernels = ["kernels/*.py"]
        ''') + extra)


def _check(tmp_path):
    env = dict(os.environ)
    env.pop("TIRXH_DISABLE_PLUGIN_AUTOLOAD", None)
    env["TIRXH_CACHE_DIR"] = str(tmp_path / ".tirxh-cache")   # hermetic: not the user's cache
    return subprocess.run([sys.executable, "-m", "tirxh", "check", "-v"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=300)


def test_tirxh_check_runs_numsim_and_reports_mismatches(tmp_path):
    _project(tmp_path, "3.0", "\n[numsim]\nseed = 5\n")
    r = _check(tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "numsim" in out and "elements differ" in out, out
    assert "huge" not in out.split("collected")[-1] or "FAILED" not in out.split("huge")[-1][:40]


def test_tirxh_check_passes_a_correct_kernel(tmp_path):
    _project(tmp_path, "2.0")
    r = _check(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    # other analyzers may be installed: "PASSED (numsim, synccheck, ...)"
    assert re.search(r"twice\[n300\]@sm_90a PASSED \([^)]*numsim", r.stdout), r.stdout


def test_numsim_section_keys_are_declared(tmp_path):
    _project(tmp_path, "2.0", "\n[numsim]\nbogus = 1\n")
    r = _check(tmp_path)
    assert r.returncode != 0
    assert "bogus" in r.stdout + r.stderr
