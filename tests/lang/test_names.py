"""Shared and local memory are named as the kernel declared them (``red = T.shared(...)`` is the
PTX symbol ``red``), so the PTX, numsim's diagnostics and sync_check's findings say ``red+4``, not
``smem+4``."""

import tirxh.lang as T
from tirxh.core.compiler import compile_kernel


@T.kernel(block=32)
def named(out: T.gptr[T.f32]):
    red = T.shared(T.f32, 32)
    stages = T.shared(T.f32, (2, 32), name="ring")  # an explicit name wins
    tmp: T.LocalBuffer = T.local(T.f32, 4)
    full = T.mbarrier(2)
    a, b = T.shared(T.f32, 4), T.shared(T.f32, 4)  # not a plain assignment: the defaults
    out_ = T.shared(T.f32, 4, name="out")  # a parameter's name gets a suffix
    T.ptx.st.shared.f32(red.at(T.tid.x), 1.0)
    T.ptx.st.shared.f32(stages.at(1, T.tid.x), 1.0)
    T.ptx.st.local.f32(tmp.at(0), 1.0)
    T.ptx.st.shared.f32(a.at(0), 1.0)
    T.ptx.st.shared.f32(b.at(0), 1.0)
    T.ptx.st.shared.f32(out_.at(0), 1.0)
    T.ptx.mbarrier.init.shared__cta.b64(full[0], 1)


def test_memory_is_named_as_declared():
    k = named.specialize()
    assert [v.name for v in k.shared] == ["red", "ring", "full", "smem", "smem_1", "out_1"]
    assert [v.name for v in k.local] == ["tmp"]


def test_the_names_assemble():
    ck = compile_kernel(named, "sm_90a")
    assert "//   red: +0 (128 bytes, align 16)" in ck.ptx and ck.cubin[:4] == b"\x7fELF"
    assert "//   ring: +128 (256 bytes, align 16)" in ck.ptx  # the PTX maps the window
