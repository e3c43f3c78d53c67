"""Vector clocks and the byte-granular shadow memory racecheck keeps per memory region.

Threads of the analysis are lane classes of warps (`lanes`: a converged warp is one thread; the
lanes of a diverged warp are split into classes until a join) and asynchronous operations (each
TMA copy, bulk copy, cp.async, st.async or wgmma is its own thread whose clock starts from its
issuer's at issue). A vector clock is a numpy int32 array indexed by thread.

A `Region` shadows one allocation (a CTA's shared window, or one global buffer) byte by byte:
the last write's thread, clock, event and proxy, and the last read clock of every lane-class
thread that can reach it (`cols`: a CTA's shared window is reachable from its cluster's threads
only); reads by asynchronous operations are kept as `AsyncRead` records instead, since there are
many such threads and each reads large boxes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


def new_clock(n: int, owner: "int | None" = None) -> np.ndarray:
    vc = np.zeros(n, np.int32)
    if owner is not None:
        vc[owner] = 1
    return vc


class Region:
    """Shadow state of one allocation of `size` bytes read by the threads `cols` (thread ids; a
    thread's column is ``colidx[thread]``, -1 for threads that cannot reach it)."""

    def __init__(self, name: str, size: int, cols, nthreads: int):
        self.name = name
        self.size = size
        self.cols = np.asarray(cols, np.int64)
        self.colidx = np.full(max(nthreads, 1), -1, np.int64)
        self.colidx[self.cols] = np.arange(len(self.cols))
        n = len(self.cols)
        self.wt = np.full(size, -1, np.int32)  # writer thread
        self.wc = np.zeros(size, np.int32)  # writer clock
        self.we = np.full(size, -1, np.int32)  # writer event index
        self.wasync = np.zeros(size, bool)  # written through the async proxy
        self.watomic = np.zeros(size, bool)
        self.rc = np.zeros((size, n), np.int32)  # last read clock per column
        self.re = np.full((size, n), -1, np.int32)  # last read event per column
        self.async_reads: list = []


    def grow(self, size: int) -> None:
        """Extend the shadow to `size` bytes (regions of unknown size, in hand-built traces)."""
        if size <= self.size:
            return
        extra = size - self.size
        self.wt = np.concatenate([self.wt, np.full(extra, -1, np.int32)])
        self.wc = np.concatenate([self.wc, np.zeros(extra, np.int32)])
        self.we = np.concatenate([self.we, np.full(extra, -1, np.int32)])
        self.wasync = np.concatenate([self.wasync, np.zeros(extra, bool)])
        self.watomic = np.concatenate([self.watomic, np.zeros(extra, bool)])
        self.rc = np.concatenate([self.rc, np.zeros((extra, self.rc.shape[1]), np.int32)])
        self.re = np.concatenate([self.re, np.full((extra, self.re.shape[1]), -1, np.int32)])
        self.size = size


@dataclass
class AsyncRead:
    """Bytes an asynchronous operation reads, until its completion is ordered before a write."""

    thread: int
    clock: int
    idx: np.ndarray  # sorted unique byte offsets in the region
    lo: int
    hi: int
    event: int


def ranges_array(ranges) -> np.ndarray:
    """numsim's ``(lane, start, end)`` ranges as an int64 array of shape (n, 3). Read as one
    flat stream (``np.fromiter``): about twice as fast as ``np.asarray`` on a list of tuples,
    which inspects every tuple as a nested sequence."""
    if isinstance(ranges, np.ndarray):
        return ranges
    flat = itertools.chain.from_iterable(ranges)
    return np.fromiter(flat, np.int64, 3 * len(ranges)).reshape(len(ranges), 3)


def byte_indices(ranges, base: int) -> "tuple[np.ndarray, np.ndarray]":
    """(byte offsets relative to `base`, the lane of each byte) of ``(lane, start, end)``
    ranges (a list of tuples or an int64 array of shape (n, 3))."""
    if len(ranges) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    arr = ranges_array(ranges)
    lanes, starts = arr[:, 0], (arr[:, 1] - base if base else arr[:, 1])
    lens = arr[:, 2] - arr[:, 1]
    n = int(lens.min())
    if n == int(lens.max()):
        # the common access: every lane the same width (a warp's 32 lanes x 4 bytes): one
        # broadcast add instead of the repeat/cumsum below (same bytes, same order)
        if n <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return (starts[:, None] + np.arange(n)).ravel(), np.repeat(lanes, n)
    lens = np.maximum(lens, 0)
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    offs = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    idx = offs + np.arange(total)
    return idx, np.repeat(lanes, lens)


def any_true(mask: np.ndarray) -> bool:
    """Whether a boolean mask has a True element. ``np.count_nonzero`` is one C call, where
    ``mask.any()`` dispatches through numpy's Python-level reduction wrappers: ~4x slower on the
    ~100-byte masks of one access, and racecheck tests a dozen masks per access."""
    return np.count_nonzero(mask) > 0


def lane_index(lanes: np.ndarray) -> np.ndarray:
    """``np.clip(lanes, 0, 31)`` (a lane id, or -1 / `convergedlanes.MANY` for none or several,
    as an index into per-lane tables): two ufuncs, where ``np.clip`` on integers builds
    ``np.iinfo`` objects on every call."""
    return np.minimum(np.maximum(lanes, 0), 31)


def duplicated(idx: np.ndarray) -> np.ndarray:
    """The values that occur more than once in `idx`, sorted, each at least once (a value
    occurring k times is listed k - 1 times: for a fancy-index assignment that is the same as
    ``u[counts > 1]`` of ``np.unique(idx, return_counts=True)``, at the cost of one sort)."""
    s = np.sort(idx)
    return s[1:][s[1:] == s[:-1]]
