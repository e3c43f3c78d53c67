"""`tirxh show --phases` (tirxh/core/sass_phases.py): a kernel's SASS cut at its waits for other
threads, each phase's instructions by class, its loops and the source lines that made it; on a
hand-written listing and on a kernel compiled by ptxas in a small project."""

import json

from tirxh.core.sass_phases import format_phases, phases

# an nvdisasm -c -g listing in miniature: two phases ended by waits (a barrier, an mbarrier
# wait), a loop in the second, and a third phase after the last wait
LISTING = """
        .global         k
k:
.text.k:
	//## File "/p/kernels/k.py", line 10
        /*0000*/                   LDG.E R2, desc[UR4][R2.64] ;
        /*0010*/                   LDG.E.128 R4, desc[UR4][R6.64] ;
	//## File "/p/kernels/k.py", line 11
        /*0020*/                   STL [R1+0x4], R2 ;
        /*0030*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
	//## File "/p/kernels/k.py", line 14
.L_x_1:
        /*0040*/                   LDSM.16.M88.4 R8, [R9] ;
        /*0050*/                   HMMA.16816.F32.BF16 R12, R8, R10, R12 ;
        /*0060*/               @P0 BRA `(.L_x_1) ;
	//## File "/p/kernels/k.py", line 15
        /*0070*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR8], R3 ;
	//## File "/p/kernels/k.py", line 17
        /*0080*/                   MUFU.EX2 R1, R1 ;
        /*0090*/                   STG.E [R2.64], R1 ;
        /*00a0*/               @P2 BRA `(.L_x_2) ;
        /*00b0*/                   EXIT ;
.L_x_2:
        /*00c0*/                   BRA `(.L_x_2);
"""


def test_phases_end_at_waits_and_count_by_class():
    ps = phases(LISTING)
    assert [p.ends_with for p in ps] == ["BAR.SYNC.DEFER_BLOCKING",
                                         "SYNCS.PHASECHK.TRANS64.TRYWAIT", ""]
    first, second, third = ps
    assert first.instructions == 4 and first.counts == {"global_load": 2, "local": 1}
    assert first.lines == {"k.py:10": 2, "k.py:11": 2} and not first.loop
    assert second.counts == {"shared_load": 1, "tensor": 1, "branch": 1} and second.loop
    # a forward branch (to the end's self-loop) is not a loop of the phase
    assert third.counts == {"mufu": 1, "global_store": 1, "branch": 2} and not third.loop
    assert (first.start, first.end, third.end) == (0x0, 0x30, 0xc0)


def test_the_table_names_each_phase_its_loop_and_busiest_lines():
    text = format_phases(phases(LISTING), "k: SASS between waits")
    lines = text.splitlines()
    assert lines[0] == "k: SASS between waits"
    assert lines[1].split()[:3] == ["phase", "instrs", "LDG"]
    assert lines[2].startswith("1 ") and "BAR.SYNC.DEFER_BLOCKING" in lines[2] \
        and "k.py:10 (2), k.py:11 (2)" in lines[2]
    assert lines[3].startswith("2 loop") and "k.py:14 (3)" in lines[3]
    assert lines[-1].startswith("3 phases, 13 instructions")


def test_json_lists_every_line_of_a_phase():
    doc = phases(LISTING)[1].to_json()
    assert doc["loop"] and doc["counts"]["tensor"] == 1
    assert doc["lines"] == [{"line": "k.py:14", "instructions": 3},
                            {"line": "k.py:15", "instructions": 1}]


PHASED = '''
import numpy as np
import tirxh.lang as T


@T.kernel(grid=1, block=64)
def phased(a: T.gptr[T.f32], out: T.gptr[T.f32]):
    s = T.shared(T.f32, (64,), name="s")
    t = T.tid.x
    T.ptx.st.shared.f32(s.at(t), T.ptx.ld.global_.f32(a.at(t)))
    T.ptx.bar.sync(0)
    x = T.ptx.ld.shared.f32(s.at(63 - t))
    T.ptx.bar.sync(0)
    T.ptx.st.global_.f32(out.at(t), T.ptx.ex2.approx.f32(x))


SUITE = T.suite(phased, inputs=lambda rng: dict(a=np.zeros(64, np.float32),
                                                out=np.zeros(64, np.float32)),
                reference=lambda a, **_: {"out": np.exp2(a[::-1])}, outputs=["out"],
                cases=[T.case("one")])
'''


def test_show_phases_of_a_compiled_kernel(tirxh):
    """ptxas's SASS of a kernel with two barriers: three phases, the global load in the first
    (from the kernel file's line 10), the shared load in the second, the exponential and the
    store in the third."""
    tirxh.project(phased=PHASED)
    r = tirxh.run("show", "kernels/phased.py::phased[one]@sm_90a", "--phases", "--json")
    assert r.ret == 0, r
    doc = json.loads(r.stdout)
    assert doc["kind"] == "phases"
    ps = doc["content"]
    assert [p["ends_with"].split(".")[0] for p in ps] == ["BAR", "BAR", ""]
    assert ps[0]["counts"].get("global_load") == 1 and "global_load" not in ps[2]["counts"]
    assert ps[0]["lines"][0]["line"].startswith("phased.py:")
    assert "phased.py:10" in {ln["line"] for ln in ps[0]["lines"]}
    assert ps[1]["counts"].get("shared_load") == 1
    assert ps[2]["counts"].get("mufu") == 1 and ps[2]["counts"].get("global_store") == 1
    r = tirxh.run("show", "kernels/phased.py::phased[one]@sm_90a", "--phases")
    assert r.ret == 0 and "SASS between waits" in r.stdout and "3 phases" in r.stdout
