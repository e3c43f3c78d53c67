"""The compile pipeline: named stages, IR transforms, one artifact key, SASS cached with the cubin."""

import dataclasses

import pytest

import tirxh.lang as T
from tirxh.core import cache as cache_mod
from tirxh.core import compiler
from tirxh.core.cache import ArtifactCache
from tirxh.core.compiler import STAGES, Pipeline, compile_kernel, emit_ptx_for
from tirxh.core.errors import CompileError, ToolchainError
from tirxh.core.transforms import Transform, TransformRegistry

from .pytester import membar_first


@T.kernel(block=64)
def scale(out: T.gptr[T.f32], k: T.const = 2):
    x = T.ptx.ld.global_.f32(out.at(T.tid.x))
    T.ptx.st.global_.f32(out.at(T.tid.x), x * float(k))


MEMBAR = Transform("membar", membar_first, doc="a membar.cta first")


@pytest.fixture
def tmp_cache(tmp_path):
    return ArtifactCache(tmp_path / "cache")


def test_stages_are_named_in_order():
    assert STAGES == ("trace", "transform", "legalize", "emit", "assemble", "disassemble")
    assert all(callable(getattr(Pipeline, s)) for s in STAGES if s != "disassemble")


def test_stages_run_one_at_a_time_and_ptx_matches_the_whole_run():
    p = Pipeline("sm_90a")
    k = p.trace(scale, {"k": 3})
    k2, outputs = p.transform(k)
    assert k2 is k and outputs == {}  # no default transforms among the built-ins
    p.legalize(k2)
    text = p.emit(k2)
    assert "mul.f32" in text and text == emit_ptx_for(scale, "sm_90a", {"k": 3})


def test_transform_by_object_changes_ptx_key_and_hands_back_output(tmp_cache):
    plain = compile_kernel(scale, "sm_90a", cache=tmp_cache)
    inst = compile_kernel(scale, "sm_90a", cache=tmp_cache, transforms=[(MEMBAR, {"n": 1})])
    assert "membar.cta" in inst.ptx and "membar.cta" not in plain.ptx
    assert inst.key != plain.key
    assert inst.transforms == {"membar": {"added": 1, "options": {"n": 1}}}
    assert inst.launch_metadata()["transforms"] == ["membar"]
    # the traced IR (cached on the kernel) is untouched
    assert all(i.opcode != "membar" for i in scale.specialize().instructions())


def test_transform_options_and_version_are_part_of_the_key(tmp_cache):
    p1 = Pipeline("sm_90a", cache=tmp_cache, transforms=[(MEMBAR, {"n": 1})])
    p2 = Pipeline("sm_90a", cache=tmp_cache, transforms=[(MEMBAR, {"n": 2})])
    p3 = Pipeline("sm_90a", cache=tmp_cache,
                  transforms=[dataclasses.replace(MEMBAR, version="2")])
    ptx = p1.ptx(scale)
    assert len({p1.key(ptx), p2.key(ptx), p3.key(ptx)}) == 3


def test_toolchain_versions_are_part_of_the_key(monkeypatch):
    p = Pipeline("sm_90a")
    before = p.key("// ptx")
    monkeypatch.setattr(cache_mod, "toolchain_versions", lambda: {"ptxas": "other"})
    assert p.key("// ptx") != before


def test_registered_transforms_by_name_and_defaults():
    reg = TransformRegistry()
    reg.add(MEMBAR, owner="test")
    named = Pipeline("sm_90a", registry=reg, transforms=["membar"]).ptx(scale)
    assert "membar.cta" in named and "membar.cta" not in Pipeline("sm_90a", registry=reg).ptx(
        scale)
    reg2 = TransformRegistry()
    reg2.add(dataclasses.replace(MEMBAR, default=True), owner="test")
    assert "membar.cta" in Pipeline("sm_90a", registry=reg2).ptx(scale)
    # naming a default transform again is harmless
    assert Pipeline("sm_90a", registry=reg2, transforms=["membar"]).ptx(scale).count(
        "membar.cta") == 1


def test_unknown_transform_is_a_compile_error():
    with pytest.raises(CompileError, match=r"unknown IR transform 'nope'; registered "
                                           r"transforms: none \(a plugin adds one with"):
        Pipeline("sm_90a", registry=TransformRegistry(), transforms=["nope"])


def test_transform_that_returns_no_ir_is_named():
    bad = Transform("bad", lambda k, ctx: None)
    with pytest.raises(CompileError, match=r"IR transform 'bad' returned NoneType, not a "
                                           r"KernelIR"):
        compile_kernel(scale, "sm_90a", assemble=False, transforms=[bad])


def test_transform_applied_twice_is_an_error():
    with pytest.raises(CompileError, match=r"IR transform 'membar' is applied twice"):
        Pipeline("sm_90a", transforms=[MEMBAR, (MEMBAR, {"n": 2})])


def test_legalize_runs_after_the_transforms():
    def huge_block(k, ctx):
        return dataclasses.replace(k, block=(2048, 1, 1))
    with pytest.raises(CompileError, match=r"block \(2048, 1, 1\) has 2048 threads; sm_90a "
                                           r"allows 1024"):
        compile_kernel(scale, "sm_90a", assemble=False,
                       transforms=[Transform("huge", huge_block)])


def test_cached_build_reuses_cubin_and_sass(tmp_cache, monkeypatch):
    first = compile_kernel(scale, "sm_90a", cache=tmp_cache)
    assert not first.cache_hit and "FMUL" in first.sass
    assert (tmp_cache.root / first.key[:2] / first.key / "sass").read_text() == first.sass

    def no_nvdisasm(cubin):
        raise AssertionError("nvdisasm ran on a cache hit")
    monkeypatch.setattr(compiler, "cubin_to_sass", no_nvdisasm)
    again = compile_kernel(scale, "sm_90a", cache=tmp_cache)
    assert again.cache_hit and again.key == first.key
    assert again.sass == first.sass and tmp_cache.sass_hits == 1
    assert set(again.timings) == {"trace_s", "transform_s", "emit_s", "assemble_s",
                                  "disassemble_s"}


def test_disabled_cache_disassembles_every_time(tmp_path, monkeypatch):
    off = ArtifactCache(tmp_path / "off", enabled=False)
    calls = []
    monkeypatch.setattr(compiler, "cubin_to_sass", lambda cubin: calls.append(1) or "SASS")
    for _ in range(2):
        assert compile_kernel(scale, "sm_90a", cache=off).sass == "SASS"
    assert len(calls) == 2 and not (tmp_path / "off").exists()


def test_no_cubin_no_sass():
    ck = compile_kernel(scale, "sm_90a", assemble=False)
    assert ck.cubin is None and ck.key == ""
    with pytest.raises(CompileError, match=r"no cubin to disassemble \(built with "
                                           r"assemble=False\)"):
        ck.sass


def test_ptxas_error_points_at_the_python_line(monkeypatch):
    def fail(ptx, arch, line_info=True):
        n = next(i for i, ln in enumerate(ptx.splitlines(), 1) if "mul.f32" in ln)
        raise ToolchainError("ptxas failed for sm_90a", f"kernel.ptx, line {n}; error")
    monkeypatch.setattr(compiler, "ptx_to_cubin", fail)
    with pytest.raises(CompileError, match=r"(?s)ptxas failed.*comes from .*test_compiler\.py:"
                                           r"\d+"):
        compile_kernel(scale, "sm_90a", cache=ArtifactCache(enabled=False), consts={"k": 5})
