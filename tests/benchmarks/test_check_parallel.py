"""benchmarks/check_parallel.py: serial and ``-n`` runs alternate after a warm-up, and the
summary gives each mode's median and the ratio."""

import json

import check_parallel as C  # benchmarks/ is on sys.path (tests/benchmarks/conftest.py)


def test_summary_medians_and_ratio():
    runs = {"serial": [{"wall_s": 10.0, "cpu_s": 9.0, "load": 1.0},
                       {"wall_s": 12.0, "cpu_s": 9.5, "load": 2.0}],
            "-n 2": [{"wall_s": 6.0, "cpu_s": 10.0, "load": 1.5},
                     {"wall_s": 5.0, "cpu_s": 10.2, "load": 0.5}]}
    lines = C.summary(runs)
    assert lines[0].startswith("serial") and "11.00 s wall" in lines[0] and "1.0, 2.0" in lines[0]
    assert lines[1].startswith("-n 2") and "5.50 s wall" in lines[1]
    assert lines[2] == "parallel / serial wall time: 0.50"


def test_a_small_selection_runs_both_ways(tmp_path, capsys):
    out = tmp_path / "runs.json"
    assert C.main(["-n", "2", "--repeat", "1", "--json", str(out), "kernels/vadd.py"]) == 0
    runs = json.loads(out.read_text())
    assert set(runs) == {"serial", "-n 2"}
    assert all(len(rs) == 1 and rs[0]["wall_s"] > 0 for rs in runs.values())
    assert "parallel / serial wall time:" in capsys.readouterr().out
