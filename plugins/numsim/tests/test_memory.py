"""numsim's shared-memory layout is the compiler's (issue 19): every variable at the offset the
PTX gives it in the one window, so swizzle patterns and alignment see what the GPU sees."""

import re

import numpy as np
import pytest

import tirxh.lang as T
import tirxh_numsim as ns
from tirxh_numsim.memory import SharedLayout

TMA2D = T.ptx.cp.async_.bulk.tensor._2d.shared__cluster.global_.tile.mbarrier__complete_tx__bytes


def _decode_like(small_first: bool, layout: str = "window"):
    """decode_attention's shape: 2564 bytes of small variables (cm, cl, cacc, last for G = 1)
    beside a 1024-aligned, 128B-swizzled TMA tile and its mbarrier (with layout "split", the
    small variables are static declarations in front of the window, as before issue 19)."""
    @T.kernel(grid=1, block=32, smem_layout=layout)
    def k(tmap: T.tensormap, src: T.gptr[T.u8], out: T.gptr[T.u32]):
        if small_first:
            small = T.shared(T.f32, (641,), name="small")
        tile = T.shared(T.bf16, (64, 64), align=1024, swizzle=128, dynamic=True, name="tile")
        full = T.mbarrier(1, name="full", dynamic=True)
        if not small_first:
            small = T.shared(T.f32, (641,), name="small")
        tid = T.tid.x
        T.ptx.st.shared.f32(small.at(640), 0.0)
        with T.if_(tid == 0):
            full.init(1)
            T.ptx.fence.mbarrier_init.release.cluster()
            full.arrive_expect_tx(64 * 64 * 2)
            TMA2D(tile.at(0), tmap[0, 0], full[0])
        full.wait(0)
        with T.range(tid, 64 * 64 * 2 // 4, 32) as i:
            T.ptx.st.global_.u32(out.at(i), T.ptx.ld.shared.u32(tile.ptr() + i * 4))
    return k


@pytest.mark.parametrize("small_first", [True, False])
def test_numsim_places_every_variable_where_the_ptx_does(small_first):
    k = _decode_like(small_first)
    kir = k.specialize()
    lay = SharedLayout.of(kir)
    ptx = k.ptx("sm_90a")
    for v in kir.shared:
        assert lay.symbols[v.name] == v.offset  # the compiler's offset from the window's base
        assert f"//   {v.name}: +{v.offset} (" in ptx
    assert lay.symbols["tile"] % 1024 == 0 and lay.symbols["tirx_dsmem"] == 0
    assert lay.size == kir.dynamic_smem - kir.smem_slack == 8192 + 2564 + 4 + 8
    # the GPU's window: rounded up to 1024 at run time, with the slack in the launch
    assert kir.smem_slack == 1008 and "and.b32 \t%tirx_smem, %tirx_smem, -1024;" in ptx
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\S* \t\[%tirx_smem\]", ptx)


@pytest.mark.parametrize("small_first", [True, False])
def test_a_swizzled_tma_tile_beside_small_variables_lands_swizzled(small_first):
    src, inputs = _tma_inputs()
    res = ns.run(_decode_like(small_first), inputs, grid=(1,))
    assert res.verdict == "clean", res.summary()
    raw = res.outputs["out"].view(np.uint8)
    want = np.zeros_like(raw)
    lin = np.arange(raw.size)
    # 128B swizzle (PTX ISA "Tensor-copy swizzling modes"): 16-byte chunk ^= row % 8, on
    # addresses relative to a 1024-aligned base
    want[lin ^ (((lin >> 7) & 7) << 4)] = src.view(np.uint8).reshape(-1)
    assert np.array_equal(raw, want)


def _tma_inputs():
    rng = np.random.default_rng(3)
    src = rng.integers(0, 1 << 16, (64, 64), dtype=np.uint16)
    return src, dict(src=src.view(np.uint8).reshape(64, 128),
                     out=np.zeros(64 * 64 * 2 // 4, np.uint32),
                     tmap=T.TensorMap("src", box=(64, 128), swizzle=128))


def test_the_old_split_layout_faults_in_numsim_as_it_did_on_the_h200():
    """Static variables in front of the window: the H200 put the window at the next 16-byte
    boundary (2576, GPU call 3) and the TMA load faulted; numsim now says so."""
    res = ns.run(_decode_like(True, "split"), _tma_inputs()[1], grid=(1,))
    assert res.verdict == "error"
    mis = [f for f in res.diagnostics if f.kind == "numsim.misaligned"]
    assert mis and "TMA box in shared memory (128B swizzle)" in mis[0].message
    assert "at 0xa10 (not a multiple of 1024)" in mis[0].message


@pytest.mark.parametrize("static,window", [(2564, 2576), (16, 16), (1024, 1024)])
def test_the_split_layout_puts_the_window_at_the_next_16_byte_boundary(static, window):
    """What the H200 did (GPU call 3, benchmarks/probes dsmem_align): window mod 1024 = 528, 16
    and 0 behind 2564, 16 and 1024 static bytes, whatever `.align` the window declares."""
    @T.kernel(grid=1, block=32, smem_layout="split")
    def k(out: T.gptr[T.u32]):
        pad = T.shared(T.u8, (static,), name="pad")
        win = T.shared(T.u32, (256,), align=1024, dynamic=True, name="win")
        T.ptx.st.shared.u8(pad.at(0), 1)
        T.ptx.st.shared.u32(win.at(0), 1)

    lay = SharedLayout.of(k.specialize())
    assert lay.symbols["pad"] == 0 and lay.symbols["tirx_dsmem"] == lay.symbols["win"] == window
    assert lay.size == window + 1024


@T.kernel(grid=1, block=32)
def _hinted_copy(src: T.gptr[T.u32], out: T.gptr[T.u32]):
    first = T.ptx.createpolicy.fractional.L2__evict_first.b64()
    last = T.reg(T.b64)
    T.ptx.createpolicy.fractional.L2__evict_last.b64(last, 0.5)
    i = T.tid.x * 4
    v = T.ptx["ld.global.L1::evict_first.L2::cache_hint.v4.b32"](src.at(i), first)
    T.ptx["st.global.L2::cache_hint.v4.b32"](out.at(i), v, last)


def test_cache_policies_change_no_data():
    """createpolicy gives an opaque word (representative): .L2::cache_hint loads and stores that
    take it move exactly the bytes they move without it, so kernels with Triton-style eviction
    policies are checked like any other."""
    src = np.arange(128, dtype=np.uint32) * 2654435761
    res = ns.run(_hinted_copy, dict(src=src, out=np.zeros(128, np.uint32)), grid=(1,))
    assert res.verdict == "clean", res.summary()
    np.testing.assert_array_equal(res.outputs["out"], src)
    ptx = _hinted_copy.ptx("sm_90a")
    assert "createpolicy.fractional.L2::evict_first.b64" in ptx
    assert re.search(r"ld\.global\.L1::evict_first\.L2::cache_hint\.v4\.b32 .*, %rd\d+;", ptx)
