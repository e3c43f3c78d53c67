"""benchmarks/hotspots.py: every hot spot of a profile document reaches the text, in the
document's order, with its two largest stall reasons as shares of the line's samples; a
document with no ncu report says so and exits 1."""

import json

from benchmarks import hotspots


def _doc(n):
    spots = [{"samples": 10 * (n - i), "share": (n - i) / 100, "file": f"/x/k{i}.py", "line": i,
              "sass": "LDG.E R1", "stalls": {"long_scoreboard": 6 * (n - i),
                                             "barrier": 3 * (n - i), "mio": n - i}}
             for i in range(n)]
    return {"reports": [{"tool": "ncu", "summary": {
        "kernel": "k", "hotspots": spots, "hotspot_coverage": {"samples": 999, "mapped": 990},
        "stalls": [{"reason": "long_scoreboard", "ratio": 4.5}]}},
        {"tool": "iket", "summary": {"kernel": "k"}}]}


def test_every_hot_spot_past_the_reports_five(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_doc(12)))
    assert hotspots.main([str(path), "--top", "11"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "hot spots of k: 999 samples, 990 mapped to source lines"
    assert out[1] == "  stalls (warps per issue cycle): long_scoreboard 4.50"
    rows = out[2:]
    assert len(rows) == 11 and "k0.py:0" in rows[0] and "k10.py:10" in rows[10]
    assert rows[0].endswith("long_scoreboard 60%, barrier 30%")


def test_no_ncu_report(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"reports": [{"tool": "iket", "summary": {"kernel": "k"}}]}))
    assert hotspots.main([str(path)]) == 1
    assert "no ncu report" in capsys.readouterr().out
