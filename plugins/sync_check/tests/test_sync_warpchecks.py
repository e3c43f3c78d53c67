"""Per-warp rules (`warpchecks`) on hand-built traces and small kernels: member masks against the
lanes that executed a collective, .aligned instructions, and the branch named as related."""

from __future__ import annotations

import numpy as np
import pytest

import tirxh.lang as T
from tirxh_numsim import events as ev
from tirxh_sync_check import check_kernel, check_trace


def _kinds(result):
    return sorted((f.kind, f.where.line) for f in result.findings)


def test_lanes_that_exited_need_not_take_part(tb):
    b = tb(block=(32, 1, 1))
    b.add(ev.WarpSync, 0, 3, op="shfl.sync", lanes=0x0000FFFF, membermask=0xFFFFFFFF,
          exited=0xFFFF0000)
    sync, _ = check_trace(b.trace)
    assert sync.verdict == "clean", sync.findings


def test_missing_member_lanes_and_lanes_outside_the_mask_are_both_named(tb):
    b = tb(block=(32, 1, 1))
    b.add(ev.WarpSync, 0, 3, op="vote.sync", lanes=0x000000FF, membermask=0x0000FFF0)
    sync, _ = check_trace(b.trace)
    (f,) = sync.findings
    assert (f.kind, f.where.line) == ("warp.membermask", 3)
    assert "lanes 8-15 named in its member mask" in f.message
    assert "lanes 0-3 executed it without being in the member mask" in f.message


def test_a_partial_last_warp_is_not_divergent(tb):
    """A block of 48 threads: warp 1 has 16 live lanes, a full-mask collective is fine."""
    b = tb(block=(48, 1, 1))
    b.add(ev.WarpSync, 1, 3, op="bar.warp.sync", lanes=0x0000FFFF, membermask=0xFFFFFFFF)
    b.add(ev.WarpSync, 1, 4, op="mma.sync", lanes=0x0000FFFF)
    sync, _ = check_trace(b.trace)
    assert sync.verdict == "clean", sync.findings


def test_memory_events_of_aligned_instructions_are_not_taken_for_the_executing_lanes(tb):
    """ldmatrix's shared read names the eight lanes that supplied row addresses."""
    instr = type("I", (), {"spelling": "ldmatrix.sync.aligned.m8n8.x1.shared.b16"})()
    b = tb(block=(32, 1, 1))
    b.add(ev.MemAccess, 0, 3, instr=instr, lanes=0xFF, space="shared", access="read",
          ranges=[(ln, 4 * ln, 4 * ln + 4) for ln in range(8)])
    sync, _ = check_trace(b.trace)
    assert sync.verdict == "clean", sync.findings


@T.kernel(block=64)
def wgmma_fence_in_branch(out: T.gptr[T.u32]):
    lane = T.laneid()
    with T.if_(lane < 16):
        T.ptx.wgmma.fence.sync.aligned()
    T.ptx.st.global_.u32(out.at(T.tid.x), lane)


def test_aligned_finding_names_the_splitting_branch_as_related():
    sync, _ = check_kernel(wgmma_fence_in_branch, dict(out=np.zeros(64, np.uint32)), grid=(1,))
    f = [f for f in sync.findings if f.kind == "warp.aligned-divergent"]
    assert f, sync.findings
    assert [r.line for r in f[0].related] == [f[0].where.line - 1]  # the `with T.if_` line
    assert f[0].related[0].label.startswith("the branch")


@T.kernel(block=32)
def movmatrix_in_branch(out: T.gptr[T.u32]):
    lane = T.laneid()
    x = T.reg(T.u32, init=lane)
    with T.if_(lane < 16):
        T.ptx.mov.b32(x, T.ptx.movmatrix.sync.aligned.m8n8.trans.b16(x))
    T.ptx.st.global_.u32(out.at(lane), x)


@T.kernel(block=32)
def mma_sync_in_branch(out: T.gptr[T.u32]):
    lane = T.laneid()
    x = T.reg(T.u32, init=lane)
    d = T.fragment(T.f32, 4, init=0.0)
    with T.if_(lane < 16):
        T.ptx.mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32(d, [x, x], [x], d)
    T.ptx.st.global_.u32(out.at(lane), x)


@pytest.mark.parametrize("kernel", [movmatrix_in_branch, mma_sync_in_branch],
                         ids=["movmatrix", "mma.sync"])
def test_divergent_register_collective_is_aligned_divergent(kernel):
    """movmatrix, like mma.sync, takes a register from every lane of the warp: under a branch on
    the lane id it is ``warp.aligned-divergent`` at its line, the branch the related location."""
    sync, _ = check_kernel(kernel, dict(out=np.zeros(32, np.uint32)), grid=(1,))
    (f,) = [f for f in sync.findings if f.kind == "warp.aligned-divergent"]
    assert f.severity == "error" and "lanes 0-15 of warp 0" in f.message, f.message
    assert [r.line for r in f.related] == [f.where.line - 1]


@T.kernel(block=64)
def movmatrix_converged(out: T.gptr[T.u32]):
    lane = T.laneid()
    y = T.ptx.movmatrix.sync.aligned.m8n8.trans.b16(T.reg(T.u32, init=lane))
    T.ptx.st.global_.u32(out.at(T.tid.x), y)


def test_converged_movmatrix_is_clean():
    sync, race = check_kernel(movmatrix_converged, dict(out=np.zeros(64, np.uint32)), grid=(1,))
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings
