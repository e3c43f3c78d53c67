"""benchmarks/QUEUE.md: every queued device call names a group or mode its script knows, that
selects items, and the variants its row says it decides (each backticked case suffix such as
`_dyn` in the row's text is a substring of some item it times), checked here without a GPU
(the scripts' list modes). Session 21 spent a call (312 s of the 1,800) on a queued command
that named a valid but wrong group (`decodecols` for `decodecols3`): the script accepted it
and timed something else, which the suffix check would have refused. A row whose command this
test cannot read fails it, so a new kind of call is taught here before it is queued."""

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.benchmarks._listing import sections

ROOT = Path(__file__).resolve().parents[2]
QUEUE = ROOT / "benchmarks" / "QUEUE.md"
LISTERS = {  # script -> (extra environment, extra arguments) of its list mode
    "benchmarks/kda_bench.sh": ({"KDA_BENCH_LIST": "1"}, []),
    "benchmarks/zoo_perf_bench.sh": ({}, ["--list"]),
    "benchmarks/gemm_bench.sh": ({"GEMM_BENCH_LIST": "1"}, []),
}


def queued_calls() -> list:
    """[(row id, the command's script, its environment, its arguments, the case suffixes its
    text names)] of QUEUE.md's table: the command is the row's backticked text that runs ``bash
    benchmarks/...``; a suffix is a backticked word that starts with ``_``."""
    calls = []
    for line in QUEUE.read_text().splitlines():
        m = re.match(r"\| (\w+) \| \d+ \|", line)
        if not m:
            continue
        cmds = [c for c in re.findall(r"`([^`]*bash benchmarks/[^`]*)`", line)]
        assert len(cmds) == 1, f"QUEUE row {m.group(1)}: one command running a benchmarks/ " \
            f"script expected, found {len(cmds)}"
        # the shell's words, `;` and `>` apart from them (a quoted `;`, as in a PROFILES list,
        # stays inside its word); the part that runs the script, up to its redirection
        lex = shlex.shlex(cmds[0], posix=True, punctuation_chars=";>&")
        lex.whitespace_split = True
        parts = [[]]
        for tok in lex:
            if tok == ";":
                parts.append([])
            else:
                parts[-1].append(tok)
        words = next(w for w in parts if any(t.startswith("benchmarks/") for t in w))
        words = words[:words.index(">")] if ">" in words else words
        env = {}
        while words and re.match(r"^[A-Z_]+=", words[0]):
            k, v = words.pop(0).split("=", 1)
            env[k] = v
        if words[:1] == ["timeout"]:   # timeout -k 5 330 bash ...
            words = words[words.index("bash"):]
        assert words[0] == "bash", (m.group(1), words)
        suffixes = sorted(set(re.findall(r"`(_[a-z0-9_]+)`", line.split("|")[3])))
        calls.append((m.group(1), words[1], env, words[2:], suffixes))
    return calls


def test_the_queue_has_rows_and_each_reads():
    calls = queued_calls()
    assert calls, "no queued call found in benchmarks/QUEUE.md's table"
    for row, script, _, _, _ in calls:
        assert (ROOT / script).exists(), (row, script)
        assert script in LISTERS, f"QUEUE row {row}: no list mode known for {script} " \
            "(teach tests/benchmarks/test_queue.py how to check it)"


@pytest.mark.slow(reason="each queued call's list mode: tirxh bench --collect-only over the zoo")
@pytest.mark.parametrize("row,script,env,args,suffixes", queued_calls(),
                         ids=[c[0] for c in queued_calls()])
def test_each_queued_call_selects_the_items_it_names(row, script, env, args, suffixes):
    extra_env, extra_args = LISTERS[script]
    env = {k: v for k, v in env.items() if k not in ("OUT",)}   # $OUT/... is the device's
    full = {**os.environ, **env, **extra_env, "OUT": "/nonexistent/never-created"}
    r = subprocess.run(["bash", script, *args, *extra_args], cwd=ROOT, env=full,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (row, r.stdout[-2000:], r.stderr[-2000:])
    got = sections(r.stdout)
    timed = {k: v for k, v in got.items() if k != "smoke" and not k.startswith("smoke ")}
    assert timed and all(v or "own cases" in k for k, v in timed.items()), (row, got)
    items = [i for v in timed.values() for i in v]
    missing = [x for x in suffixes if not any(x in i for i in items)]
    assert not missing, f"QUEUE row {row} names {missing}, which its command does not time"
    assert not Path("/nonexistent/never-created").exists()
