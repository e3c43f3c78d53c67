"""`T.local`: a per-thread ``.local`` array declared in the entry body, addressed like shared
memory (``[sym+off]`` or a 32-bit register from ``mov.u32 r, sym``), assembled by nvJitLink into
a stack frame with STL/LDL, printed by `irprint` and carried losslessly by `irjson`.
(numsim's execution of it is tested in plugins/numsim/tests/test_local.py.)"""

import inspect
import json
import re

import pytest

import tirxh.lang as T
from tirxh.core import ir, irjson
from tirxh.core.emit_ptx import emit_ptx
from tirxh.core.irprint import format_kernel
from tirxh.core.lang.trace import TraceError
from tirxh.core.registry import default_targets

HERE = __file__


@T.kernel(grid=1, block=64)
def spill(x: T.gptr[T.u32], out: T.gptr[T.u32], n: T.u32):
    """arr[i] = x[tid]*i + tid for i < n, then sum (i+1) * arr[n-1-i]: register indices the
    register allocator cannot resolve, so the array lives in local memory."""
    arr = T.local(T.u32, 16, name="arr")
    tid = T.tid.x
    v = T.ptx.ld.global_.u32(x.at(tid))
    with T.range(0, n) as i:
        T.ptx.st.local.u32(arr.at(i), v * i + tid)
    acc = T.reg(T.u32, 0)
    with T.range(0, n) as i:
        acc.set(acc + T.ptx.ld.local.u32(arr.at(n - 1 - i)) * (i + 1))
    T.ptx.st.local.u32(arr.at(0), acc)  # STATIC
    T.ptx.st.global_.u32(out.at(tid), T.ptx.ld.local.u32(arr.at(0)))


def _ptx(kernel, target="sm_90a"):
    return emit_ptx(kernel.specialize(), default_targets().get(target))


def test_local_is_declared_in_the_entry_body():
    kir = spill.specialize()
    (var,) = kir.local
    assert isinstance(var, ir.LocalVar)
    assert (var.name, var.nbytes, var.align, var.dtype.name, var.shape) == ("arr", 64, 16, "u32",
                                                                          (16,))
    assert var.loc.file == HERE and kir.shared == []
    ptx = _ptx(spill)
    body = ptx[ptx.index("{"):]
    assert "\t.local .align 16 .b8 arr[64];" in body
    assert ".local" not in ptx[:ptx.index("{")]  # function scope, not module scope


def test_static_and_register_addresses():
    ptx = _ptx(spill)
    assert "st.local.u32 \t[arr], " in ptx  # Python-int index: [sym+off], no instruction
    # register index: the 32-bit local address of arr, scaled and added by one mad.lo.u32
    base = re.search(r"mov\.u32 \t(%\w+), arr;", ptx).group(1)
    addr = re.search(rf"mad\.lo\.u32 \t(%\w+), %\w+, 4, {base};", ptx).group(1)
    assert f"st.local.u32 \t[{addr}], " in ptx


def test_at_with_several_indices_and_an_offset():
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.f32]):
        m = T.local(T.f32, (4, 8), align=32)
        T.ptx.st.local.f32(m.at(2, 3), 1.0)
        T.ptx.st.global_.f32(out.at(0), T.ptx.ld.local.f32(m.at(2, 3)))

    ptx = _ptx(k)
    assert "\t.local .align 32 .b8 m[128];" in ptx  # named as the kernel declared it
    assert "[m+76]" in ptx  # (2*8 + 3) * 4


def test_assembles_to_a_stack_frame_with_stl_and_ldl():
    ck = spill.compile("sm_90a")
    assert ck.resources.stack_frame >= 64
    sass = ck.sass
    assert "STL" in sass and "LDL" in sass


def test_irprint_lists_local_variables():
    text = format_kernel(spill.specialize())
    assert "  local arr: u32[16] (64 B per thread, align 16)" in text


def test_irjson_round_trip_keeps_local_variables_and_ptx():
    kir = spill.specialize()
    text = irjson.dumps(kir)
    doc = json.loads(text)
    assert doc["local"] == [{"name": "arr", "nbytes": 64, "align": 16, "dtype": "u32",
                             "shape": {"$tuple": [16]}, "loc": doc["local"][0]["loc"]}]
    back = irjson.loads(text)
    (v,) = back.local
    assert (v.name, v.nbytes, v.align, v.dtype.name, v.shape) == ("arr", 64, 16, "u32", (16,))
    assert v.loc == kir.local[0].loc
    t = default_targets().get("sm_90a")
    assert emit_ptx(back, t) == emit_ptx(kir, t)
    assert irjson.dumps(back) == text


def test_irjson_without_local_key_loads_as_no_local_variables():
    doc = irjson.to_doc(spill.specialize())
    doc.pop("local")
    assert irjson.from_doc(doc).local == []


def test_irjson_malformed_local_names_the_field():
    doc = irjson.to_doc(spill.specialize())
    doc["local"][0]["shape"] = {"$tuple": [0]}
    doc["local"][0]["dtype"] = "u33"
    with pytest.raises(irjson.IRJSONError, match=r"local\[0\]\.shape") as ei:
        irjson.from_doc(doc)
    assert ei.value.kernel == "spill"
    doc["local"][0]["shape"] = {"$tuple": [16]}
    with pytest.raises(irjson.IRJSONError, match=r"local\[0\]\.dtype: unknown PTX type 'u33'"):
        irjson.from_doc(doc)


@pytest.mark.parametrize("kwargs, match", [
    (dict(align=12), r"T.local\(align=12\): alignment must be a power of two"),
    (dict(align=2), r"T.local\(align=2\): below the 4-byte size of .u32"),
    (dict(shape=(4, 0)), r"T.local\(shape=\(4, 0\)\): expected positive int dimensions"),
])
def test_bad_declarations_name_the_line(kwargs, match):
    shape = kwargs.pop("shape", 8)

    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        T.local(T.u32, shape, **kwargs)  # MARK

    with pytest.raises(TraceError, match=match) as ei:
        k.specialize()
    src, first = inspect.getsourcelines(k.__wrapped__)
    line = first + next(i for i, s in enumerate(src) if "# MARK" in s)
    assert ei.value.loc.file == HERE and ei.value.loc.line == line
