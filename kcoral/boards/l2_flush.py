"""Empty the L2 before a timed launch (the cuda board), by writing or by reading.

A timed launch must not find its inputs in the L2 from the previous launch, so the board
sweeps a buffer of 2x the L2's size through it first. How it sweeps decides what the timed
kernel inherits:

- ``write`` (the protocol since kcoral-measure/1, and triton's ``do_bench``, which measured
  the 4.25 TB/s copy anchor): ``cuMemsetD32Async`` over the buffer. The L2 ends full of the
  memset's *dirty* lines, which the timed kernel's first misses evict: their write-back (up
  to the L2's size, ~50 MB on an H100/H200, ~12 us of HBM writes at 4.3 TB/s) falls inside
  the timed window. How much of it the kernel pays is what the two modes measure (a
  hypothesis until then, docs/PERFORMANCE.md "Session 28": ncu, whose cache control
  invalidates the L2, put top-k 5.0-5.8% below KCoral's medians in session 27).
- ``read``: a read-only kernel (`SWEEP_PTX`) loads every 16 bytes of the same buffer once. The
  previous launch's dirty lines are written back *during the sweep*, before the start event,
  and the L2 ends full of clean lines that the timed kernel evicts for free: the state ncu's
  cache control leaves, with nothing of the harness's own traffic in the timed window.

The sweep is PTX JIT-compiled by the driver for whatever board it runs on (``.target sm_70``,
loaded once per device, kept across jobs), so no toolchain is needed on the board. Its one
store is predicated on the XOR of the words it read, which is 0 for any buffer filled by
``cuMemsetD32`` (every 16-byte vector holds four equal words): the loads cannot be optimized
away, and the store never happens.
"""

from __future__ import annotations

import ctypes

FLUSH_MODES = ("write", "read")
SWEEP_ENTRY = "kcoral_l2_read_sweep"
SWEEP_THREADS = 256
SWEEP_CTAS_PER_SM = 8  # 2048 threads an SM on sm_90: ~4 MB of 16-byte loads in flight

SWEEP_PTX = r"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry kcoral_l2_read_sweep(
    .param .u64 buf,
    .param .u64 n_vec)
{
    .reg .pred  %p<3>;
    .reg .b32   %r<10>;
    .reg .b64   %rd<8>;

    ld.param.u64        %rd1, [buf];
    ld.param.u64        %rd2, [n_vec];
    mov.u32             %r1, %ctaid.x;
    mov.u32             %r2, %ntid.x;
    mov.u32             %r3, %tid.x;
    mov.u32             %r4, %nctaid.x;
    mul.wide.u32        %rd3, %r1, %r2;
    cvt.u64.u32         %rd4, %r3;
    add.u64             %rd3, %rd3, %rd4;
    mul.wide.u32        %rd5, %r4, %r2;
    mov.b32             %r5, 0;
$Lloop:
    setp.ge.u64         %p1, %rd3, %rd2;
    @%p1 bra            $Ldone;
    shl.b64             %rd6, %rd3, 4;
    add.u64             %rd7, %rd1, %rd6;
    ld.global.cg.v4.u32 {%r6, %r7, %r8, %r9}, [%rd7];
    xor.b32             %r5, %r5, %r6;
    xor.b32             %r5, %r5, %r7;
    xor.b32             %r5, %r5, %r8;
    xor.b32             %r5, %r5, %r9;
    add.u64             %rd3, %rd3, %rd5;
    bra.uni             $Lloop;
$Ldone:
    setp.ne.u32         %p2, %r5, 0;
    @%p2 st.global.u32  [%rd1], %r5;
    ret;
}
"""


def flush_mode(l2_flush) -> str:
    """A board's `timed_batch` flush argument as a mode: ``""`` (no flush), ``"write"`` or
    ``"read"``. ``True`` is ``"write"`` (the argument was a bool before the modes)."""
    if l2_flush is True:
        return "write"
    if not l2_flush:
        return ""
    if l2_flush not in FLUSH_MODES:
        raise ValueError(f"L2 flush mode {l2_flush!r} is not one of {list(FLUSH_MODES)}")
    return l2_flush


class L2Flush:
    """One device's flush buffer and its two ways of sweeping it.

    `driver` is ``cuda.bindings.driver`` (or a test double with the calls used here);
    `check(result, what)` unwraps a driver result and raises a `JobFailure` on an error. The
    buffer (2x `l2_bytes`, at least 1 MiB, a whole number of 16-byte vectors) is allocated and
    zeroed here; the read sweep's module is loaded on its first use."""

    def __init__(self, driver, check, stream, l2_bytes: int, sm_count: int):
        self.cu, self._check, self.stream = driver, check, stream
        nbytes = max(2 * int(l2_bytes), 1 << 20)
        self.n_vec = -(-nbytes // 16)
        self.words = 4 * self.n_vec
        self.buf = int(check(driver.cuMemAlloc(self.words * 4), "cuMemAlloc(L2 flush buffer)"))
        check(driver.cuMemsetD32(self.buf, 0, self.words), "cuMemsetD32(L2 flush buffer)")
        self.grid = max(1, int(sm_count)) * SWEEP_CTAS_PER_SM
        self._value = 0
        self._module = None
        self._func = None
        self._params = None

    def write(self) -> None:
        """Fill the buffer with a new 32-bit value: every line dirty in the L2 afterwards."""
        self._value = (self._value + 1) & 0xFFFFFFFF
        self._check(self.cu.cuMemsetD32Async(self.buf, self._value, self.words, self.stream),
                    "cuMemsetD32Async(L2 flush)")

    def read(self) -> None:
        """Load every 16 bytes of the buffer once: clean lines in the L2 afterwards."""
        if self._func is None:
            self._load()
        self._check(self.cu.cuLaunchKernel(self._func, self.grid, 1, 1, SWEEP_THREADS, 1, 1, 0,
                                           self.stream, self._params[0], 0),
                    "cuLaunchKernel(L2 read sweep)")

    def sweep(self, mode: str) -> None:
        {"write": self.write, "read": self.read}[mode]()

    def _load(self) -> None:
        ptx = SWEEP_PTX.encode() + b"\0"
        self._module = self._check(self.cu.cuModuleLoadData(ptx),
                                   "cuModuleLoadData(L2 read sweep)")
        self._func = self._check(self.cu.cuModuleGetFunction(self._module, SWEEP_ENTRY.encode()),
                                 "cuModuleGetFunction(L2 read sweep)")
        args = (ctypes.c_uint64 * 2)(self.buf, self.n_vec)
        ptrs = (ctypes.c_void_p * 2)(ctypes.addressof(args), ctypes.addressof(args) + 8)
        self._params = (ctypes.addressof(ptrs), args, ptrs)  # the arrays kept alive

    def free(self) -> None:
        if self._module is not None:
            self.cu.cuModuleUnload(self._module)
            self._module = self._func = None
        self.cu.cuMemFree(self.buf)
