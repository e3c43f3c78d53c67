"""zoo/kernels/kda_bwd_prep3.py (piece 2a of both walks with operands split once into swizzled
bf16 planes, fragments by ldmatrix): the planes' ldmatrix fragments equal, word for word, the
scalar-load split fragments kda_bwd_prep2's products build (A row-major, A transposed, B
k-major; a [64, 129]-stride tile and a [64, 64] one, in place); the wavefront count of those
loads from numsim's trace (the conflicts gone)."""

from collections import defaultdict

import numpy as np
import pytest

import tirxh.lang as T

from tests.zoo._zoo import mutant, resident_ctas_per_sm, sync_race
from tests.zoo.zoo_modules import assert_matches, load

MOD = load("kda_bwd_prep3")
TC = MOD.TC

N128, SK = 128, TC.SK      # the prep's [C, 128] f32 tiles, 129 words a row


def _elements(spelling):
    """Events numsim records for one execution of a shared-memory instruction: one an
    element a lane (ldmatrix .xN: 2N bf16 pairs' halves; .v4 / .v2: 4 / 2)."""
    parts = spelling.split(".")
    if parts[0] == "ldmatrix" or parts[0] == "stmatrix":
        return 2 * int(next(p for p in parts if p.startswith("x"))[1:])
    return next((int(p[1:]) for p in parts if p in ("v2", "v4")), 1)


def _shared_wavefronts(events):
    """(accesses, wavefronts) of traced shared-memory accesses. numsim records a wide access
    (ldmatrix, v4) an element at a time, consecutive events of one warp and instruction:
    those are joined into one access first (`_elements` of them). Each access is served in as
    many wavefronts as the most distinct 4-byte words one of the 32 banks holds (an
    ldmatrix.x4 or a v4 access without conflicts: 4; a scalar one: 1): the count of
    tests/zoo/test_kda_bwd_prep_only.py for accesses wider than a word."""
    open_, done = {}, []
    for e in events:
        if getattr(e, "space", None) != "shared":
            continue
        instr = getattr(e, "instr", None)
        key = (getattr(e, "cta", 0), getattr(e, "warp", 0), id(instr))
        want = _elements(instr.spelling) if instr is not None else 1
        banks, n = open_.get(key, (defaultdict(set), 0))
        for _, start, end in e.ranges:
            for w in range(start // 4, (end + 3) // 4):
                banks[w % 32].add(w)
        if n + 1 == want:
            done.append(banks)
            open_.pop(key, None)
        else:
            open_[key] = (banks, n + 1)
    assert not open_, "a wide access with missing element events"
    return len(done), sum(max(len(w) for w in b.values()) for b in done)


def test_the_wavefront_count_of_an_ldmatrix_x4():
    """The measure: 32 lanes each reading 16 bytes of 8 rows of a 128-byte-swizzled tile (one
    ldmatrix.x4 of pattern "A") is 4 wavefronts; the same rows unswizzled (all lanes on chunk
    0 of rows 128 bytes apart) is 16: 8 rows share 4 banks, 4 matrices."""
    def ev(swz):
        class E:
            space = "shared"
            ranges = [(ln, 128 * ((ln & 7) + 8 * (ln >> 4)) + 16 * ((((ln >> 3) & 1)
                                                                       ^ ((ln & 7) if swz else 0))),
                       0) for ln in range(32)]
        E.ranges = [(ln, s, s + 16) for ln, s, _ in E.ranges]
        return E
    assert _shared_wavefronts([ev(True)]) == (1, 4)
    assert _shared_wavefronts([ev(False)]) == (1, 16)


def _words(n):
    """Fragment words a thread of _probe writes: a and b n / 16 fragments of 8, at 4."""
    return n // 16 * 8 + 4 * 8 + n // 16 * 8


@T.kernel(grid=(1,), block=256)
def _probe(src: T.gptr[T.f32], ref: T.gptr[T.u32], got: T.gptr[T.u32], WIDE: T.const = 1):
    """The f32 matrix src [64, n] (n = 128 with WIDE, else 64) into a shared tile of stride
    129 (WIDE) or 64; every warp writes the split fragments of its roles read both ways: the
    scalar ``ld.shared.f32`` ones of kda_bwd_pieces_tc._frag into ref, then (after the tile is
    converted in place into planes) the planes' ldmatrix ones into got, thread-major."""
    n = N128 if WIDE else 64
    nwords = _words(n)
    stride = SK if WIDE else 64
    tile = T.shared(T.f32, (64, stride), name="sTile", align=128)
    with T.range(64 * n // 256) as i:
        e = T.tid.x + 256 * i
        r, c = e // n, e % n
        T.ptx.st.shared.f32(tile.at(r, c), T.ptx.ld.global_.f32(src.at(e)))
    T.ptx.bar.sync(0)
    ln = TC._Lane()
    lanes = MOD.Lanes()
    w = T.tid.x >> 5
    g, t = ln.g, ln.t
    # (form, m0 or k0, list of second coordinates): a: rows 16 (w % 4), all k-steps; at
    # (A = tile^T): rows 16 w of the transpose (n / 16 of them), k-steps over the 64 rows;
    # b (B = tile, k-major): k rows 16 (w % 4), every n-tile pair
    roles = [("a", (w & 3) << 4, [16 * s for s in range(n // 16)]),
             ("at", (w % (n // 16)) << 4, [16 * s for s in range(4)]),
             ("b", (w & 3) << 4, [16 * p for p in range(n // 16)])]
    words = []
    plain, trans = TC._shared(tile, stride), TC._shared(tile, stride, transposed=True)
    for form, x0, ys in roles:
        for y0 in ys:
            if form == "a":
                words += sum(TC._frag(plain, plain.at(x0 + g, y0 + 2 * t), None,
                                      TC.A_PAIRS, (0, 1)), [])
            elif form == "at":
                words += sum(TC._frag(trans, trans.at(x0 + g, y0 + 2 * t), None,
                                      TC.A_PAIRS, (0, 1)), [])
            else:
                base = plain.at(x0 + 2 * t, y0 + g)
                for o in range(2):
                    words += sum(TC._frag(plain, base + 8 * o * plain.cs, None, TC.B_PAIRS,
                                          (1, 0)), [])
    for i, x in enumerate(words):
        T.ptx.st.global_.b32(ref.at(T.tid.x * nwords + i), x)
    pl = MOD.Planes(tile.ptr(), n)
    MOD.convert([(MOD.rows_of(tile) if WIDE else MOD.cols_of(tile), pl)])
    T.ptx.bar.sync(0)
    words = []
    for form, x0, ys in roles:
        for y0 in ys:
            if form == "b":
                hi, lo = pl.b(lanes, x0, y0)
                words += hi[0:2] + lo[0:2] + hi[2:4] + lo[2:4]
            else:
                hi, lo = (pl.a if form == "a" else pl.at)(lanes, x0, y0)
                words += hi + lo
    for i, x in enumerate(words):
        T.ptx.st.global_.b32(got.at(T.tid.x * nwords + i), x)


@pytest.mark.parametrize("wide", [1, 0], ids=["c128_s129", "c64_s64"])
def test_plane_fragments_equal_the_scalar_split_fragments(wide):
    """Every word of every fragment form, hi and lo, on values spanning 2^-30 .. 2^30 (so the
    lo parts are not zero), equal bit for bit; the ldmatrix loads take 4 wavefronts each, the
    minimum for 512 bytes, where the scalar loads they replace take 4 (stride 129) or 8
    (stride 64) wavefronts for 128 bytes."""
    ns = pytest.importorskip("tirxh_numsim")
    n = N128 if wide else 64
    rng = np.random.default_rng(7)
    src = (rng.standard_normal(64 * n) * 2.0 ** rng.integers(-30, 30, 64 * n)).astype(
        np.float32)
    used = _words(n)
    x = dict(src=src, ref=np.zeros(256 * used, np.uint32),
             got=np.full(256 * used, 0xDEADBEEF, np.uint32))
    res = ns.run(_probe, x, grid=(1,), outputs=["ref", "got"], consts=dict(WIDE=wide),
                 trace=True)
    assert res.verdict == "clean", res.diagnostics
    ref = np.asarray(res.outputs["ref"]).reshape(256, used)
    got = np.asarray(res.outputs["got"]).reshape(256, used)
    assert (ref != 0).mean() > 0.9                       # lo words present
    assert np.array_equal(ref, got)
    lds = [e for e in res.trace.events if getattr(e, "space", None) == "shared"
           and e.instr.spelling.startswith("ldmatrix")]
    scalar = [e for e in res.trace.events if getattr(e, "space", None) == "shared"
              and e.instr.spelling == "ld.shared.f32" and len(e.ranges) == 32]
    assert lds and scalar
    a, wv = _shared_wavefronts(lds)
    assert a == 8 * (_words(n) // 4) and wv == 4 * a, (a, wv)   # 4 words a load, 8 warps
    # the conversion's chunk stores: 4 wavefronts a v4 store (the minimum)
    st = [e for e in res.trace.events if getattr(e, "space", None) == "shared"
          and e.instr.spelling.startswith("st.shared.v4")]
    n_st, w_st = _shared_wavefronts(st)
    assert n_st == 64 * n // 8 // 32 * 2 and w_st == 4 * n_st     # hi and lo a chunk
    # the worst scalar load is a fragment load of the f32 tile (the conversion's are 1)
    assert max(_shared_wavefronts([e])[1] for e in scalar) == (4 if wide else 8)


P2 = load("kda_bwd_prep2")
SLOW = pytest.mark.slow   # numsim of 256 threads: ~2-3 s a chunk and kernel


def _case(name):
    return next(c for c in P2.SUITE.cases if c.name == name)


def _both(case, trace=False):
    """prep3 and prep2 in numsim on the same inputs of `case`."""
    import tirxh_numsim as ns
    x = P2.SUITE.make_inputs(case, 0)
    out = []
    for mod, kern in ((MOD, MOD.kda_bwd_prep3), (P2, P2.kda_bwd_prep2)):
        y = {n: (np.zeros_like(a) if n in P2.OUTPUTS else a) for n, a in x.items()}
        out.append(ns.run(kern, y, grid=P2.SUITE.grid(case), outputs=list(P2.OUTPUTS),
                          consts=P2.SUITE.consts(case), trace=trace and mod is MOD))
    return out


def _identical(case, names):
    r3, r2 = _both(case)
    for name in names:
        assert np.array_equal(np.asarray(r3.outputs[name]), np.asarray(r2.outputs[name])), name


def test_both_walks_are_bit_identical_to_prep2():
    """One 20-row chunk, deep gates: both walks' N words and B^T, and exp(G_C)."""
    _identical(_case("t20_h1_deep"), P2.OUTPUTS)


@SLOW
@pytest.mark.parametrize("name", ["t150_h1_deep", "pack_80_1_30_h2", "pm_t77_h1_mixed"])
def test_bit_identical_to_prep2_on_its_small_cases(name):
    """Full chunks and tails (three chunks under saturated gates), a varlen pack on 2 heads
    with a one-token sequence, and PREP=1 on odd T."""
    _identical(_case(name), P2.OUTPUTS)


def test_small_case_matches_reference():
    """The suite's rule against float64 on one 20-row chunk (the bit-identity above covers
    the rest: prep2's suite checks its cases)."""
    import tirxh_numsim as ns
    case = next(c for c in MOD.SUITE.cases if c.name == "t20_h1_deep")
    x = MOD.SUITE.make_inputs(case, 0)
    res = ns.run(MOD.kda_bwd_prep3, x, grid=MOD.SUITE.grid(case), outputs=list(MOD.OUTPUTS),
                 consts=MOD.SUITE.consts(case))
    assert_matches(MOD.SUITE, case, res, x)


@SLOW
def test_sync_check_is_clean():
    """One 20-row chunk: the prep, the in-place conversions (each round's loads before its
    barrier), the reverse walk's planes over the G and P slots, V over QE's slot, X over W."""
    for result in sync_race(MOD.SUITE, _case("t20_h1_deep")):
        assert result.verdict == "clean", [f.message for f in result.findings]


@SLOW
def test_conversion_barrier_is_load_bearing(tmp_path):
    """Without the barrier inside `convert`, the in-place stores of KE's planes race the other
    warps' loads of KE's f32 rows: sync_check reports it."""
    mut = mutant(tmp_path, "kda_bwd_prep3", [(
        "            held.append((pl, row, col, read(row, col)))\n    T.ptx.bar.sync(0)\n",
        "            held.append((pl, row, col, read(row, col)))\n")])
    verdicts = [r.verdict for r in sync_race(mut.SUITE, _case("t20_h1_deep"))]
    assert any(v != "clean" for v in verdicts), verdicts


def test_compiles_without_spills():
    """ptxas on this machine (2026-12-03): no spills at PREP 1 and 2; kda_bwd_reverse's 227 KB
    of shared memory (the planes live in its slots): one CTA of 256 threads an SM."""
    for prep in (1, 2):
        r = MOD.kda_bwd_prep3.compile("sm_90a", PREP=prep).resources
        assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
    assert resident_ctas_per_sm(MOD.SUITE, MOD.SUITE.cases[0]) == 1


@SLOW
def test_the_conflicts_are_gone_on_a_full_chunk():
    """One full 64-row chunk (the cycle model's unit), deep gates, PREP=2, numsim's trace:
    every ldmatrix (3,392: the walks' fragments) takes the minimum 4 wavefronts, and the
    launch's shared wavefronts fall from prep2's 78,162 (22,922 accesses, the walks' scalar
    fragment loads ~4 each) to 33,426 (13,130), of which the prep (unchanged: ~14.9K,
    tests/zoo/test_kda_bwd_prep_only.py) is now the larger part."""
    import tirxh_numsim as ns
    case = T.case("full", B=1, T_=64, H=1, gate="deep")
    x = P2.SUITE.make_inputs(case, 0)
    counts = []
    for kern in (MOD.kda_bwd_prep3, P2.kda_bwd_prep2):
        y = {n: (np.zeros_like(a) if n in P2.OUTPUTS else a) for n, a in x.items()}
        res = ns.run(kern, y, grid=P2.SUITE.grid(case), outputs=list(P2.OUTPUTS),
                     consts=dict(PREP=2), trace=True)
        ev = [e for e in res.trace.events if getattr(e, "space", None) == "shared"]
        lds = [e for e in ev if e.instr.spelling.startswith("ldmatrix")]
        counts.append((_shared_wavefronts(ev), _shared_wavefronts(lds) if lds else (0, 0)))
    (all3, ld3), (all2, ld2) = counts
    assert ld3 == (3392, 4 * 3392) and ld2 == (0, 0)
    assert all2 == (22922, 78162) and all3 == (13130, 33426)
