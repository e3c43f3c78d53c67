"""zoo/kernels/tma_copy.py: a persistent TMA load/store copy through a shared-memory ring."""

import re

import pytest

import tirxh.lang as T

from ._zoo import check, load, mutant, resident_ctas_per_sm, small_cases, sync_race

tc = load("tma_copy")


@pytest.mark.parametrize("suite,case", small_cases(tc.SUITE, tc.REG_COPY, tc.PATH_COPY))
def test_small_cases_match_the_reference_in_numsim(suite, case):
    res = check(suite, case)
    assert res.verdict == "clean", [f.message for f in res.findings]


def test_stage_recycling_is_race_free():
    """21 tiles over 3 CTAs with 2 stages: every stage is refilled several times; racecheck
    proves each refill is ordered after the store that read the stage (wait_group.read)."""
    case = next(c for c in tc.SUITE.cases if c.name == "r100_c200_s2")
    assert tc.tiles(100, 200, 32, 64) == 16 and tc.SUITE.grid(case) == (3, 1, 1)
    sync, race = sync_race(tc.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings
    assert "events checked" in race.summary


def test_the_grid_is_persistent():
    big = next(c for c in tc.SUITE.cases if c.name == "r16384_c8192")
    assert tc.SUITE.grid(big) == (396, 1, 1)  # 16384 tiles, 3 CTAs per SM on 132 SMs


def test_shapes_the_kernel_cannot_run_are_refused_when_declared():
    with pytest.raises(ValueError, match=r"case 'c12': R=64 must be >= 1 and C=12 a positive "
                                         r"multiple of 8"):
        T.suite(tc.tma_copy, inputs=tc.inputs, constraints=tc.constraints,
                cases=[T.case("c12", R=64, C=12)])
    with pytest.raises(ValueError, match=r"(?s)box BR x BC = 512 x 128.*STAGES=8: need at "
                                         r"least 2 stages"):
        T.suite(tc.tma_copy, inputs=tc.inputs, constraints=tc.constraints,
                cases=[T.case("box", R=64, C=64, BR=512, STAGES=8)])


def test_bulk_chunks_recycle_stages_race_free_and_the_last_chunk_is_short():
    """BULK=1: 20000 elements in chunks of 32 x 64 = 2048 give 10 chunks over 3 CTAs, the
    last of 1568 elements (3136 bytes: its expect_tx and both copies use the short size, or
    the mbarrier never completes / numsim flags the write past the end)."""
    case = next(c for c in tc.SUITE.cases if c.name == "r100_c200_s2_bulk")
    assert tc.chunks(100, 200, 32, 64) == 10 and tc.SUITE.grid(case) == (3, 1, 1)
    assert check(tc.SUITE, case).verdict == "clean"
    sync, race = sync_race(tc.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings
    ptx = tc.tma_copy.compile("sm_90a", **tc.SUITE.consts(case)).ptx
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor" not in ptx


def test_bulk_mode_is_0_or_1():
    with pytest.raises(ValueError, match=r"case 'b2': BULK=2 must be 0 \(2-D tensor tiles\) or 1"):
        T.suite(tc.tma_copy, inputs=tc.inputs, constraints=tc.constraints,
                cases=[T.case("b2", R=64, C=64, BULK=2)])


def test_policy_mode_is_0_to_3():
    with pytest.raises(ValueError, match=r"case 'pol': POL=4 must be 0 \(no policy\), 1 "
                                         r"\(evict-first loads\), 2 \(loads and stores\) or 3"):
        T.suite(tc.tma_copy, inputs=tc.inputs, constraints=tc.constraints,
                cases=[T.case("pol", R=8, C=8, BR=8, BC=8, STAGES=2, POL=4)])


@pytest.mark.parametrize("name,loads,stores", [("r16384_c8192_pol", 1, 0),
                                               ("r16384_c8192_pol2", 1, 1),
                                               ("r16384_c8192", 0, 0)])
def test_evict_first_policies_go_on_the_copies_they_name(name, loads, stores):
    case = next(c for c in tc.SUITE.cases if c.name == name)
    ptx = tc.SUITE.kernel.compile("sm_90a", **tc.SUITE.consts(case)).ptx
    copies = re.findall(r"cp\.async\.bulk\.tensor\.2d\.(\S+)", ptx)
    ld = {c.endswith(".L2::cache_hint") for c in copies if c.startswith("shared::cluster")}
    st = {c.endswith(".L2::cache_hint") for c in copies if c.startswith("global")}
    assert (ld, st) == ({bool(loads)}, {bool(stores)})  # every load (store) or none
    assert ("createpolicy.fractional.L2::evict_first.b64" in ptx) == bool(loads)


def test_the_equal_share_grids_fit_one_wave():
    """16384 tiles: 256 CTAs of 64 (3 or 2 per SM fit) or 128 of 128 (192 KB rings, 1 per SM)."""
    for name, grid, per_sm in (("r16384_c8192_p256", 256, 3), ("r16384_c8192_p256_s6", 256, 2),
                               ("r16384_c8192_p128_s12", 128, 1)):
        case = next(c for c in tc.SUITE.cases if c.name == name)
        assert tc.SUITE.grid(case) == (grid, 1, 1)
        assert tc.tiles(16384, 8192, 64, 128) % grid == 0
        assert resident_ctas_per_sm(tc.SUITE, case) == per_sm and grid <= 132 * per_sm


def test_reg_copy_is_inductors_pointwise_copy():
    """BLOCK=128, UNROLL=1: 131072 CTAs of 128 threads, one 16-byte load and store each, 16
    CTAs per SM (the thread limit); UNROLL=4 issues its 4 loads before the first store."""
    suite = tc.REG_COPY
    big = next(c for c in suite.cases if c.name == "r16384_c8192")
    assert suite.grid(big) == (131072, 1, 1) and resident_ctas_per_sm(suite, big) == 16
    u4 = next(c for c in suite.cases if c.name == "r16384_c8192_b128_u4")
    ptx = suite.kernel.compile("sm_90a", **suite.consts(u4)).ptx
    ops = re.findall(r"(ld|st)\.global\.v4\.b32", ptx)
    assert ops == ["ld"] * 4 + ["st"] * 4
    assert "shared" not in ptx and "cache_hint" not in ptx


def test_reg_copy_refuses_what_it_cannot_copy():
    with pytest.raises(ValueError, match=r"(?s)case 'odd': R=4 must be >= 1, C=12 a positive "
                                         r"multiple of 8.*BLOCK=48 must be a multiple of 32"):
        T.suite(tc.reg_copy, inputs=tc.REG_COPY.inputs, constraints=tc.reg_constraints,
                cases=[T.case("odd", R=4, C=12, BLOCK=48)])


# session 10: the cases that hold fewer bytes in flight (KB of loads per SM, `loads_in_flight`
# times the CTAs per SM) and whether the grid divides the 16384 16-KB / 32768 8-KB tiles
IN_FLIGHT = {"r16384_c8192": (144, False), "r16384_c8192_b32_s3_p256": (31, True),
             "r16384_c8192_s2_p256": (31, True), "r16384_c8192_b32_s2_p512": (31, True),
             "r16384_c8192_b32_s5_p128": (32, True), "r16384_c8192_s2": (48, False),
             "r16384_c8192_b32_s2_p256": (16, True), "r16384_c8192_b32_s4_lag2_p256": (31, True)}


@pytest.mark.parametrize("name", sorted(IN_FLIGHT))
def test_the_bytes_in_flight_cases_hold_what_their_design_says(name):
    """docs/TUNING.md's predictions rest on these figures: a case whose ring, box or grid drifts
    would time another point of the curve. Every CTA must be resident (one wave)."""
    kb, equal = IN_FLIGHT[name]
    case = next(c for c in tc.SUITE.cases if c.name == name)
    p = tc.SUITE.consts(case)
    grid = tc.SUITE.grid(case)[0]
    per_cta = tc.loads_in_flight(p["BR"], p["BC"], p["STAGES"], p["LAG"])
    assert round(per_cta * grid / min(grid, 132) / 1024) == kb  # per SM that has a CTA
    assert grid <= 132 * resident_ctas_per_sm(tc.SUITE, case)
    assert (tc.tiles(16384, 8192, p["BR"], p["BC"]) % grid == 0) == equal


def test_a_deep_ring_on_two_ctas_wraps_race_free():
    """5 stages, 28 tiles with row and column tails over 2 CTAs: each stage is refilled twice
    (the 1-CTA-per-SM geometry of `_b32_s5_p128`, small)."""
    case = next(c for c in tc.SUITE.cases if c.name == "r100_c200_b16_s5_cta2")
    assert tc.tiles(100, 200, 16, 64) == 28 and tc.SUITE.grid(case) == (2, 1, 1)
    sync, race = sync_race(tc.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


def test_lag2_refills_after_the_store_two_tiles_back_race_free():
    """LAG=2: ``wait_group.read 2`` then a refill of the stage of tile k-2 with tile k+2 (4
    stages, 16 tiles with tails over 3 CTAs); racecheck proves the refill is ordered after the
    store that read that stage, numsim that every tile is copied once."""
    case = next(c for c in tc.SUITE.cases if c.name == "r100_c200_s4_lag2")
    assert check(tc.SUITE, case).verdict == "clean"
    sync, race = sync_race(tc.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings
    ptx = tc.tma_copy.compile("sm_90a", **tc.SUITE.consts(case)).ptx
    assert re.findall(r"cp\.async\.bulk\.wait_group\.read\s+(\d+);", ptx) == ["2"]


def test_lag_leaves_a_stage_loading():
    with pytest.raises(ValueError, match=r"case 'lag': LAG=2 must be in \[1, STAGES=2\)"):
        T.suite(tc.tma_copy, inputs=tc.inputs, constraints=tc.constraints,
                cases=[T.case("lag", R=8, C=8, BR=8, BC=8, STAGES=2, LAG=2)])



# --- session 11: evict-last loads and the 2 x 2 of paths (docs/TUNING.md "tma_copy: which path
# costs") ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["r16384_c8192_pol3", "r100_c200_s2_bulk_pol3"])
def test_pol3_hints_the_loads_evict_last_and_leaves_the_stores_plain(name):
    case = next(c for c in tc.SUITE.cases if c.name == name)
    ptx = tc.tma_copy.compile("sm_90a", **tc.SUITE.consts(case)).ptx
    loads = re.findall(r"cp\.async\.bulk\.\S*shared::cluster\.global\S*", ptx)
    stores = re.findall(r"cp\.async\.bulk\.\S*global\.shared::cta\S*", ptx)
    assert loads and stores
    assert all(c.endswith(".L2::cache_hint") for c in loads)
    assert not any("cache_hint" in c for c in stores)
    assert "createpolicy.fractional.L2::evict_last.b64" in ptx and "evict_first" not in ptx


def test_reg_copy_pol_reads_evict_last_as_rmsnorm_tri_pol2():
    case = next(c for c in tc.REG_COPY.cases if c.name == "r16384_c8192_pol")
    ptx = tc.reg_copy.compile("sm_90a", **tc.REG_COPY.consts(case)).ptx
    assert re.findall(r"(ld|st)\.global(\S*)\.v4\.b32", ptx) == [
        ("ld", ".L1::evict_last.L2::cache_hint"), ("st", "")]
    assert "createpolicy.fractional.L2::evict_last.b64" in ptx
    with pytest.raises(ValueError, match=r"case 'p2': POL=2 must be 0 \(no policy\) or 1"):
        T.suite(tc.reg_copy, inputs=tc.REG_COPY.inputs, constraints=tc.reg_constraints,
                cases=[T.case("p2", R=8, C=8, BLOCK=32, POL=2)])


# each large path_copy case: (bulk loads, ld.global, bulk stores, st.global) in its PTX
PATH_OPS = {"lb": (1, 0, 0, 1), "sb": (0, 1, 1, 0), "lbsb": (1, 0, 1, 0), "lb_pol": (1, 0, 0, 1),
            "sb_pol": (0, 1, 1, 0), "lbsb_pol": (1, 0, 1, 0)}


@pytest.mark.parametrize("name", sorted(PATH_OPS))
def test_path_copy_changes_only_the_path_of_each_half(name):
    """The factorial's premise: every large path_copy case has reg_copy's grid (131072 CTAs of
    128 threads, 2 KB each) and residency (16 CTAs per SM), and each half of the copy goes by
    exactly the path its name says."""
    case = next(c for c in tc.PATH_COPY.cases if c.name == f"r16384_c8192_{name}")
    reg = next(c for c in tc.REG_COPY.cases if c.name == "r16384_c8192")
    assert tc.PATH_COPY.grid(case) == tc.REG_COPY.grid(reg) == (131072, 1, 1)
    assert resident_ctas_per_sm(tc.PATH_COPY, case) == 16
    ptx = tc.path_copy.compile("sm_90a", **tc.PATH_COPY.consts(case)).ptx
    found = (len(re.findall(r"cp\.async\.bulk\.shared::cluster\.global", ptx)),
             len(re.findall(r"ld\.global\S*\.v4\.b32", ptx)),
             len(re.findall(r"cp\.async\.bulk\.global\.shared::cta", ptx)),
             len(re.findall(r"st\.global\.v4\.b32", ptx)))
    assert found == PATH_OPS[name]
    assert ("L2::evict_last" in ptx) == name.endswith("_pol")


@pytest.mark.parametrize("name", ["r100_c200_b32_u2_sb", "r100_c200_b32_u2_lbsb",
                                  "r100_c200_b32_u2_lb"])
def test_path_copy_hands_shared_memory_between_proxies_race_free(name):
    """40 chunks, the last of 4 vectors: sb's registers reach the bulk store through
    ``fence.proxy.async`` and a barrier, lb's landed chunk is read after the mbarrier wait that
    every thread reaches only after the barrier behind its init (sync_check flags either
    missing)."""
    case = next(c for c in tc.PATH_COPY.cases if c.name == name)
    assert tc.PATH_COPY.grid(case) == (40, 1, 1)
    sync, race = sync_race(tc.PATH_COPY, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


def test_the_16_kb_chunks_are_tma_copys_box_bytes_at_13_ctas_per_sm():
    """`_u8_lbsb`: one 16 KB bulk load and store per CTA (a 64 x 128 bf16 box's bytes), 16384
    CTAs, 13 resident per SM (shared memory: 16 KB + 1 KB reserved each)."""
    case = next(c for c in tc.PATH_COPY.cases if c.name == "r16384_c8192_u8_lbsb")
    assert tc._chunk_bytes(128, 8) == 64 * 128 * 2
    assert tc.PATH_COPY.grid(case) == (16384, 1, 1)
    assert resident_ctas_per_sm(tc.PATH_COPY, case) == 13
    small = next(c for c in tc.PATH_COPY.cases if c.name == "r100_c200_b32_u8_lbsb")
    assert tc.PATH_COPY.grid(small) == (10, 1, 1)
    sync, race = sync_race(tc.PATH_COPY, small)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


def test_path_copy_refuses_what_it_cannot_copy():
    with pytest.raises(ValueError, match=r"(?s)case 'bad': LD=2 and ST=0 must be 0 \(registers\)"
                                         r".*needs 65536 bytes of static shared memory"):
        T.suite(tc.path_copy, inputs=tc.PATH_COPY.inputs, constraints=tc.path_constraints,
                cases=[T.case("bad", R=8, C=8, BLOCK=512, UNROLL=8, LD=2, ST=0)])


@pytest.mark.parametrize("suite,case,wait", [
    ("SUITE", "r100_c200_s2", "T.ptx.cp.async_.bulk.wait_group(0)"),
    ("SUITE", "r8_c8_bulk", "T.ptx.cp.async_.bulk.wait_group(0)"),
    ("PATH_COPY", "r100_c200_b32_u2_sb",
     "T.ptx.cp.async_.bulk.wait_group.read(0)  # the chunk is read"),
    ("SUITE", "r100_c200_one", "T.ptx.cp.async_.bulk.wait_group.read(0)  # the box is read"),
], ids=["ring-tma-store", "ring-bulk-store", "path-copy-bulk-store", "one-box-tma-store"])
def test_the_wait_before_the_cta_exits_is_needed(tmp_path, suite, case, wait):
    """Without its last ``cp.async.bulk.wait_group[.read] 0`` a CTA may exit while its last
    stores still read the ring (or chunk): sync_check's exit rule names the commit_group of the
    pending group (exit.bulk-store-pending); the intact kernel is clean (the tests above)."""
    mod = mutant(tmp_path, "tma_copy", [(wait, "pass  #")])  # the line's comment stays
    s = getattr(mod, suite)
    sync, race = sync_race(s, next(c for c in s.cases if c.name == case))
    found = [f for f in sync.findings if f.kind == "exit.bulk-store-pending"]
    assert found and sync.verdict == "error", sync.findings + race.findings
    assert all("commit_group" in open(f.where.file).read().splitlines()[f.where.line - 1]
               for f in found), [f.where for f in found]


# --- session 13: one 2-D box per CTA, path_copy's geometry (docs/TUNING.md "tma_copy: one box
# per CTA") ----------------------------------------------------------------------------------

# each large PERSIST=0 case: (box rows, box cols, CTAs per SM, KB of loads in flight per SM)
ONE_BOX = {"r16384_c8192_one_b8x128": (8, 128, 16, 32),
           "r16384_c8192_one_b8x128_pol3": (8, 128, 16, 32),
           "r16384_c8192_one_b4x256_pol3": (4, 256, 16, 32),
           "r16384_c8192_one_b8x128_t64_pol3": (8, 128, 32, 64),
           "r16384_c8192_one_b16x128_t256_pol3": (16, 128, 8, 32)}


@pytest.mark.parametrize("name", sorted(ONE_BOX))
def test_one_box_cases_have_the_geometry_their_predictions_rest_on(name):
    """docs/PERFORMANCE.md's predictions compare these with path_copy `_lbsb` (131072 CTAs of 2
    KB, 16 per SM by the thread limit, 32 KB per SM): each CTA copies exactly one box with one
    2-D tensor load and one 2-D tensor store, leaves after ``wait_group.read 0``, and the
    box, BLOCK and residency give the bytes per SM its row says."""
    br, bc, per_sm, kb = ONE_BOX[name]
    case = next(c for c in tc.SUITE.cases if c.name == name)
    p = tc.SUITE.consts(case)
    assert (p["BR"], p["BC"], p["PERSIST"]) == (br, bc, 0)
    assert tc.SUITE.grid(case) == (tc.tiles(16384, 8192, br, bc), 1, 1)
    assert resident_ctas_per_sm(tc.SUITE, case) == per_sm
    assert per_sm * br * bc * 2 == kb * 1024
    ptx = tc.tma_copy.compile("sm_90a", **p).ptx
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", ptx)) == 1
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta", ptx)) == 1
    assert re.findall(r"cp\.async\.bulk\.wait_group(\.read)?\s+(\d+);", ptx) == [(".read", "0")]
    assert "nctaid" not in ptx  # no persistent walk
    assert ("createpolicy.fractional.L2::evict_last.b64" in ptx) == name.endswith("_pol3")


@pytest.mark.parametrize("name", ["r3_c24_one", "r100_c200_one",
                                  "r100_c200_one_b4x128_el"])
def test_one_box_per_cta_is_race_free_with_boxes_past_both_edges(name):
    """3 x 24 in 8 x 16 boxes (2 CTAs, each box past the last row, the second past the last
    column too), 100 x 200 in 8 x 64 (52 CTAs of 64 threads) and 4 x 128 boxes (50 of 128):
    the loads zero-fill outside the matrix and still complete the box's full byte count, the
    stores write only the inside (numsim compares every element, the test above); the one
    mbarrier is initialised and waited on by thread 0 alone, the idle threads touch nothing."""
    case = next(c for c in tc.SUITE.cases if c.name == name)
    p = tc.SUITE.consts(case)
    assert tc.SUITE.grid(case) == (tc.tiles(case.params["R"], case.params["C"], p["BR"], p["BC"]),
                                   1, 1)
    ptx = tc.tma_copy.compile("sm_90a", **p).ptx
    assert ("L2::evict_last" in ptx) == name.endswith("_el")  # `_el`: POL=3
    sync, race = sync_race(tc.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


def test_one_box_per_cta_refuses_ring_settings_and_odd_blocks():
    with pytest.raises(ValueError, match=r"case 'p2': PERSIST=2 must be 1 \(a persistent ring\) "
                                         r"or 0 \(one box per CTA\)"):
        T.suite(tc.tma_copy, inputs=tc.inputs, constraints=tc.constraints,
                cases=[T.case("p2", R=8, C=8, BR=8, BC=8, PERSIST=2)])
    with pytest.raises(ValueError, match=r"(?s)case 'ring': PERSIST=0 copies one 2-D box per "
                                         r"CTA with no ring: BULK=1, STAGES=2.*BLOCK=48 must "
                                         r"be a multiple of 32"):
        T.suite(tc.tma_copy, inputs=tc.inputs, constraints=tc.constraints,
                cases=[T.case("ring", R=8, C=8, BR=8, BC=8, STAGES=2, BULK=1, PERSIST=0,
                              BLOCK=48)])


def test_one_box_per_cta_allows_a_box_no_ring_could_hold():
    """PERSIST=0 has one stage: a 256 x 256 box (128 KiB) fits where two stages would not."""
    assert tc.constraints(R=512, C=512, BR=256, BC=256, STAGES=4, CTAS=396, PERSIST=0) == []
    assert any("STAGES=4" in m for m in tc.constraints(R=512, C=512, BR=256, BC=256, STAGES=4,
                                                       CTAS=396))


def test_one_box_per_cta_needs_its_load_wait_and_its_own_box(tmp_path):
    """The PERSIST=0 protocol's two load-bearing lines: without the ``mbarrier`` wait the
    tensor store reads the box while the load may still write it (sync_check: an async write
    pending at the exit, a read-write race); with CTA t copying box t + 1, box 0 is never
    written (numsim: elements never written)."""
    case = "r100_c200_one"
    early = mutant(tmp_path, "tma_copy", [("            full[0].wait(0)\n            store(0, 0)",
                                           "            store(0, 0)")])
    sync, race = sync_race(early.SUITE, next(c for c in early.SUITE.cases if c.name == case))
    kinds = {f.kind for f in sync.findings + race.findings}
    assert sync.verdict == "error" and race.verdict == "error", kinds
    assert {"exit.async-write-pending", "race.read-write"} <= kinds
    (tmp_path / "off").mkdir()
    off = mutant(tmp_path / "off", "tma_copy", [("if PERSIST else cta\n",
                                                 "if PERSIST else cta + 1\n")])
    res = check(off.SUITE, next(c for c in off.SUITE.cases if c.name == case))
    assert res.verdict == "error"
    assert any("never written (first at [0, 0])" in f.message for f in res.findings)
