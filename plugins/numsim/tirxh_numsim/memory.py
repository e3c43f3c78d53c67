"""State spaces: global buffers, per-CTA shared memory, per-thread local memory, the param space,
and the address map.

Address model (documented because diagnostics print these numbers):

- Each global buffer bound to a pointer parameter gets a fake 64-bit base
  ``GLOBAL_BASE + i * GLOBAL_STRIDE`` (i = parameter position), so an address names its buffer and
  every access is bounds-checked against that one allocation.
- Shared memory addresses are offsets in the CTA's shared window starting at 0, laid out as the
  compiler lays it out (`SharedLayout`): every variable of a kernel in the window ``tirx_dsmem``
  at its compiled offset, the window at 0 (the GPU's base, rounded up by the kernel's prologue,
  is aligned to every variable's alignment, so addresses agree with it modulo that alignment:
  swizzle patterns and alignment checks see what the GPU sees).
  A ``shared::cluster`` address of another CTA (from ``mapa``) is
  ``(rank + 1) << CLUSTER_SHIFT | offset``; a generic address of shared memory (``cvta.shared``)
  is ``SHARED_GENERIC + offset``.
- Local memory addresses are offsets in the thread's own local window starting at 0: the
  kernel's ``.local`` variables (`T.local`) in declaration order, each at its alignment. Every
  thread has its own copy; generic addresses of local memory (``cvta.local``) are not modelled.
- A parameter's address (``mov.u64 r, param``; ``cvta.param`` is the identity) is
  ``PARAM_BASE + 256 * i``; TMA finds its tensor map from that address.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .values import Unsupported, uint_of

GLOBAL_BASE = 0x7000_0000_0000
GLOBAL_STRIDE = 1 << 36
SHARED_GENERIC = 0x5000_0000_0000
SHARED_GENERIC_END = SHARED_GENERIC + (1 << 32)
CLUSTER_SHIFT = 24
PARAM_BASE = 0x6000_0000_0000  # parameter i lives at PARAM_BASE + 256 * i (param and generic)


@dataclass
class Buffer:
    """One bound global allocation: `data` is a flat uint8 copy of the caller's array."""

    name: str
    base: int
    data: np.ndarray
    dtype: np.dtype
    shape: tuple
    written: "np.ndarray | None" = None

    @property
    def nbytes(self) -> int:
        return self.data.size

    def mark_written(self, off: np.ndarray, nbytes: int) -> None:
        """Record that bytes [off, off + nbytes) were stored (for unwritten-output checks)."""
        if nbytes == 1:
            self.written[off] = True
        else:
            self.written[(np.asarray(off)[:, None] + np.arange(nbytes)).reshape(-1)] = True

    def unwritten_elements(self) -> np.ndarray:
        """Mask (in the array's shape) of elements not every byte of which was stored."""
        size = self.dtype.itemsize
        return ~self.written.reshape(-1, size).all(axis=1).reshape(self.shape)

    def array(self) -> np.ndarray:
        return self.data.view(self.dtype).reshape(self.shape).copy()


class GlobalMemory:
    """The bound buffers, located by address (see the module docstring)."""

    def __init__(self):
        self.buffers: list[Buffer] = []
        self.by_name: dict[str, Buffer] = {}
        self._bases = np.zeros(0, np.uint64)

    def bind(self, name: str, index: int, array: np.ndarray) -> Buffer:
        arr = np.ascontiguousarray(array)
        data = arr.reshape(-1).view(np.uint8).copy() if arr.size else np.zeros(0, np.uint8)
        buf = Buffer(name, GLOBAL_BASE + index * GLOBAL_STRIDE, data, arr.dtype, arr.shape,
                     np.zeros(data.size, bool))
        self.buffers.append(buf)
        self.by_name[name] = buf
        self.buffers.sort(key=lambda b: b.base)
        self._bases = np.array([b.base for b in self.buffers], np.uint64)
        return buf

    def locate(self, addrs: np.ndarray, nbytes: int):
        """(buffer index per address or -1, byte offset, in-bounds mask)."""
        addrs = addrs.astype(np.uint64)
        if not self.buffers:
            n = addrs.shape[0]
            return np.full(n, -1), np.zeros(n, np.int64), np.zeros(n, bool)
        idx = np.searchsorted(self._bases, addrs, side="right").astype(np.int64) - 1
        safe = np.maximum(idx, 0)
        base = self._bases[safe]
        off = (addrs - base).astype(np.int64)
        sizes = np.array([b.nbytes for b in self.buffers], np.int64)[safe]
        ok = (idx >= 0) & (addrs >= base) & (off + nbytes <= sizes)
        ok &= off < GLOBAL_STRIDE
        return np.where(ok, idx, -1), off, ok

    def read(self, bidx: np.ndarray, off: np.ndarray, nbytes: int) -> np.ndarray:
        """Read `nbytes`-wide words (returned as uint) at in-bounds (buffer, offset) pairs."""
        one = _single(bidx)
        if one is not None:
            return _gather(self.buffers[one].data, off, nbytes)
        out = np.zeros(off.shape[0], uint_of(nbytes))
        for b in np.unique(bidx):
            sel = bidx == b
            out[sel] = _gather(self.buffers[b].data, off[sel], nbytes)
        return out

    def write(self, bidx: np.ndarray, off: np.ndarray, nbytes: int, words: np.ndarray) -> None:
        one = _single(bidx)
        if one is not None:
            buf = self.buffers[one]
            _scatter(buf.data, off, nbytes, words)
            buf.mark_written(off, nbytes)
            return
        for b in np.unique(bidx):
            sel = bidx == b
            buf = self.buffers[b]
            _scatter(buf.data, off[sel], nbytes, words[sel])
            buf.mark_written(off[sel], nbytes)

    def name_of(self, addr: int) -> str:
        bidx, off, _ = self.locate(np.array([addr], np.uint64), 1)
        if bidx[0] >= 0:
            return self.buffers[bidx[0]].name
        i = int(np.searchsorted(self._bases, np.uint64(addr), side="right")) - 1
        if i >= 0:
            return f"{self.buffers[i].name}+{addr - self.buffers[i].base} (past its end)"
        return "no buffer"


def _single(bidx: np.ndarray) -> "int | None":
    """The buffer index when every access is to the same buffer (the common case)."""
    if bidx.size and bidx[0] == bidx[-1] and not (bidx != bidx[0]).any():
        return int(bidx[0])
    return None


def _gather(data: np.ndarray, off: np.ndarray, nbytes: int) -> np.ndarray:
    ut = uint_of(nbytes)
    if data.size % nbytes == 0 and not np.any(off % nbytes):
        return data.view(ut)[off // nbytes]
    raw = data[off[:, None] + np.arange(nbytes)]
    return raw.reshape(-1).view(ut)


def _scatter(data: np.ndarray, off: np.ndarray, nbytes: int, words: np.ndarray) -> None:
    ut = uint_of(nbytes)
    words = np.asarray(words).astype(ut, copy=False)
    if data.size % nbytes == 0 and not np.any(off % nbytes):
        data.view(ut)[off // nbytes] = words
        return
    raw = np.ascontiguousarray(words).view(np.uint8).reshape(-1, nbytes)
    data[off[:, None] + np.arange(nbytes)] = raw


@dataclass
class _Layout:
    """Where each variable lives in a window (a CTA's shared window, a thread's local window)."""

    size: int
    symbols: dict = field(default_factory=dict)  # symbol name -> offset
    regions: list = field(default_factory=list)  # (start, end, name) for diagnostics
    rows: dict = field(default_factory=dict)  # name -> bytes per leading index (rank >= 2)
    space = "?"

    @staticmethod
    def _place(variables, syms: dict, regions: list) -> int:
        """Lay `variables` out in order at their alignments; returns the end offset."""
        off = 0
        for v in variables:
            off = -(-off // v.align) * v.align
            syms[v.name] = off
            regions.append((off, off + v.nbytes, v.name))
            off += v.nbytes
        return off

    @staticmethod
    def _rows(variables) -> dict:
        return {v.name: v.nbytes // v.shape[0] for v in variables
                if len(getattr(v, "shape", ())) >= 2 and v.shape[0] > 0}

    def name_of(self, addr: int) -> str:
        """Memory named as the kernel declared it: ``red+4`` (bytes into a 1-D variable),
        ``sA[2]+0x40`` (leading index, then hex bytes into that slice: a pipeline stage of a
        ``(STAGES, ...)`` buffer)."""
        for s, e, n in self.regions:
            if s <= addr < e:
                row = self.rows.get(n)
                if row:
                    i, off = divmod(addr - s, row)
                    return f"{n}[{i}]+{off:#x}"
                return f"{n}+{addr - s}"
        return f"{self.space}+{addr}"


class SharedLayout(_Layout):
    """The compiler's layout (`tirxh.core.lang.memory.shared`): the window ``tirx_dsmem`` at 0 and
    each variable at its offset in it; the window's bytes are what the launch provides less the
    slack the GPU spends rounding its base up (`KernelIR.smem_slack`).

    Layout "split" (probes of the toolchain's placement only): the static variables in
    declaration order from 0, each at its alignment, then the window at the next 16-byte
    boundary, whatever alignment it declares -- the 16 bytes are all a kernel may rely on there
    (benchmarks/probes ``dsmem_align`` measures where an H200 puts it)."""

    space = "shared"

    @classmethod
    def of(cls, kir) -> "SharedLayout":
        syms, regions = {}, []
        off = cls._place([v for v in kir.shared if not v.dynamic], syms, regions)
        dyn = -(-off // 16) * 16
        syms["tirx_dsmem"] = dyn
        for v in kir.shared:
            if v.dynamic:
                syms[v.name] = dyn + v.offset
                regions.append((dyn + v.offset, dyn + v.offset + v.nbytes, v.name))
        size = dyn + kir.dynamic_smem - kir.smem_slack
        return cls(max(size, 0), syms, sorted(regions), cls._rows(kir.shared))


class LocalLayout(_Layout):
    """The local variables of a thread (`T.local`)."""

    space = "local"

    @classmethod
    def of(cls, kir) -> "LocalLayout":
        syms, regions = {}, []
        size = cls._place(getattr(kir, "local", ()), syms, regions)
        return cls(size, syms, regions, cls._rows(getattr(kir, "local", ())))


class ByteRows:
    """One byte window per row (a CTA for shared memory, a lane for local memory) with an
    initialized-byte map: the memory starts undefined and reads of unwritten bytes are flagged."""

    def __init__(self, layout: _Layout, rows: int):
        self.layout = layout
        size = max(layout.size, 1)
        self.data = np.zeros((rows, size), np.uint8)
        self.init = np.zeros((rows, size), bool)
        self.on_write = None  # called after every write (spinning warps wake up on it)

    @property
    def size(self) -> int:
        return self.layout.size

    def in_bounds(self, addr: np.ndarray, nbytes: int) -> np.ndarray:
        a = addr.astype(np.int64)
        return (a >= 0) & (a + nbytes <= self.layout.size)

    def read(self, rows: np.ndarray, addr: np.ndarray, nbytes: int):
        """(words, all-bytes-initialized mask) for in-bounds addresses of `rows`."""
        idx = addr.astype(np.int64)[:, None] + np.arange(nbytes)
        raw = self.data[rows[:, None], idx]
        init = self.init[rows[:, None], idx].all(axis=1)
        return np.ascontiguousarray(raw).reshape(-1).view(uint_of(nbytes)), init

    def write(self, rows: np.ndarray, addr: np.ndarray, nbytes: int, words) -> None:
        raw = np.ascontiguousarray(np.asarray(words).astype(uint_of(nbytes))).view(
            np.uint8).reshape(-1, nbytes)
        idx = addr.astype(np.int64)[:, None] + np.arange(nbytes)
        self.data[rows[:, None], idx] = raw
        self.init[rows[:, None], idx] = True
        if self.on_write is not None:
            self.on_write()

    def read_bytes(self, row: int, addr: np.ndarray) -> "tuple[np.ndarray, np.ndarray]":
        a = addr.astype(np.int64)
        return self.data[row, a], self.init[row, a]

    def write_bytes(self, row: int, addr: np.ndarray, raw: np.ndarray) -> None:
        a = addr.astype(np.int64)
        self.data[row, a] = raw
        self.init[row, a] = True
        if self.on_write is not None:
            self.on_write()


class SharedMemory(ByteRows):
    """Shared memory of the CTAs of one group, one row per CTA."""


class LocalMemory(ByteRows):
    """The local windows of the lanes of one `Warps`, one row per lane."""

    def take(self, lanes: np.ndarray) -> "LocalMemory":
        """The windows of `lanes` (a group split off)."""
        out = LocalMemory(self.layout, 0)
        out.data, out.init = self.data[lanes], self.init[lanes]
        return out

    def join(self, parts: list, perm: np.ndarray) -> "LocalMemory":
        """The windows of merged groups (`parts` in order, then lanes permuted by `perm`)."""
        out = LocalMemory(self.layout, 0)
        out.data = np.concatenate([p.data for p in parts])[perm]
        out.init = np.concatenate([p.init for p in parts])[perm]
        return out


class ParamSpace:
    """Kernel parameters by name: scalar values, pointer bases and tensor-map descriptions."""

    def __init__(self):
        self.values: dict = {}  # name -> (numpy scalar)
        self.tensormaps: dict = {}  # name -> describe() dict

    def read(self, name: str, offset: int, dt: np.dtype):
        if name not in self.values:
            if name in self.tensormaps:
                raise Unsupported(f"reading the bytes of tensor-map parameter {name!r} with ld "
                                  "(numsim keeps tensor maps as descriptions)")
            raise Unsupported(f"ld.param of unknown parameter {name!r}")
        v = self.values[name]
        raw = np.asarray(v).reshape(1).view(np.uint8)
        pad = np.zeros(max(0, offset + dt.itemsize - raw.size), np.uint8)
        raw = np.concatenate([raw, pad])[offset: offset + dt.itemsize]
        return raw.view(dt)[0]
