"""numsim names shared memory as the kernel declared it: ``red+4`` for a 1-D variable,
``sA[2]+0x40`` (leading index, hex bytes into it: a pipeline stage) for a multi-dimensional one."""

import tirxh.lang as T
from tirxh_numsim.memory import SharedLayout


@T.kernel(block=32)
def staged(out: T.gptr[T.f32]):
    red = T.shared(T.f32, 32)
    sA = T.shared(T.bf16, (3, 64, 64), align=1024)
    T.ptx.st.shared.f32(red.at(0), 1.0)
    T.ptx.st.shared.b16(sA.at(0, 0, 0), 0)


def test_names_of_shared_addresses():
    lay = SharedLayout.of(staged.specialize())
    red, sa = lay.symbols["red"], lay.symbols["sA"]
    assert lay.name_of(red + 4) == "red+4"
    assert lay.name_of(sa + 2 * 64 * 64 * 2 + 0x40) == "sA[2]+0x40"
    assert lay.name_of(sa) == "sA[0]+0x0"
