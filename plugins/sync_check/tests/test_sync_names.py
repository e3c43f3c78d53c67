"""A race finding names the shared variable the kernel declared (``buf+128``), not ``smem+128``."""

import numpy as np

import tirxh.lang as T
from tirxh_sync_check.analyze import check_kernel


@T.kernel(block=64)
def racy(out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 64)
    t = T.tid.x
    T.ptx.st.shared.u32(buf.at(t), t)
    T.ptx.st.global_.u32(out.at(t), T.ptx.ld.shared.u32(buf.at(t ^ 32)))


def test_race_names_the_declared_variable():
    _, race = check_kernel(racy, {"out": np.zeros(64, np.uint32)})
    f = next(f for f in race.findings if f.kind == "race.read-write")
    assert "shared buf+128 (cta 0)" in f.message and "smem" not in f.message
