"""The test suite's run policy: the default ``python -m pytest -q`` is a fast feedback loop; CI runs
everything.

Tests that are slow for a reason (daemons and worker processes, pip installs, simulating the
zoo's large kernels, decoding recorded GPU traces) carry the ``slow`` marker, either in their own
file or, for the files listed in `SLOW_FILES`, here. A default run deselects them; they run when
``TIRXH_TESTS=all`` is set (``.ci/run`` sets it, then runs the README's test command) or when a
``-m`` expression is given (``-m slow`` runs only them).
"""

import os

import pytest

ALL_ENV = "TIRXH_TESTS"

# whole files that are slow, with the reason (relative to this directory)
SLOW_FILES = {
    "tests/kcoral/test_service.py": "a KCoral daemon with worker processes for each test",
    "tests/kcoral/test_restart.py": "kills a daemon and restarts it from its store",
    "tests/kcoral/test_plugins_tools.py": "jobs through kcoral.runjob and worker subprocesses",
    "tests/kcoral/test_agent.py": "a daemon and a remote-board agent process",
    "tests/kcoral/test_sanitizer_corpus.py": "the sync_check corpus through a board",
    "tests/kcoral/test_cli.py": "the kcoral command against a running daemon",
    "tests/kcoral/test_load.py": "many concurrent jobs on one daemon",
    "tests/kcoral/test_tirxh_bench.py": "tirxh bench with embedded and configured daemons",
    "tests/kcoral/test_tls_limits.py": "daemons with TLS and size limits",
    "tests/kcoral/test_robustness.py": "daemons under hangs, retries, many streams and quotas",
    "tests/kcoral/test_security.py": "daemons with identities, roles and budgets",
    "tests/kcoral/test_bad_requests.py": "a daemon for each kind of bad request",
    "tests/kcoral/test_multi_board.py": "two boards timing jobs at once in a daemon",
    "tests/kcoral/test_pgstore.py": "a PostgreSQL server from initdb for the module",
    "tests/zoo/test_gemm_sm90.py": "numsim and sync_check on the persistent GEMM's variants",
    "tests/zoo/test_gemm_wgmma.py": "numsim of the wgmma GEMM",
    "tests/zoo/test_norms.py": "numsim of the norms over their cases",
    "tests/zoo/test_decode_attention.py": "numsim of paged decode attention",
    "tests/zoo/test_transpose.py": "numsim traces of the transpose",
    "tests/zoo/test_topk.py": "numsim of radix select over long rows",
    "tests/zoo/test_softmax.py": "numsim of softmax and cross-entropy rows",
    "tests/zoo/test_kda_fwd.py": "numsim and sync_check of the chunked KDA forward's variants",
    "plugins/sync_check/tests/test_sync_zoo.py": "both analyses on every zoo suite",
    "plugins/iket/tests/test_outputs.py": "decodes and renders recorded H200 traces",
    "plugins/iket/tests/test_kcoral_tool.py": "the iket tool through kcoral.runjob",
    "plugins/iket/tests/test_h200_recordings.py": "recorded H200 traces",
    "plugins/mcp/tests/test_server.py": "every MCP tool call runs a tirxh child process",
    "plugins/mcp/tests/test_plugin.py": "tirxh mcp child processes and a stdio server",
}

HERE = os.path.dirname(os.path.abspath(__file__))


def run_all(config) -> bool:
    return os.environ.get(ALL_ENV) == "all" or bool(config.getoption("markexpr", ""))


def pytest_collection_modifyitems(config, items):
    for item in items:
        rel = os.path.relpath(str(item.path), HERE).replace(os.sep, "/")
        if rel in SLOW_FILES:
            item.add_marker(pytest.mark.slow(reason=SLOW_FILES[rel]))
    if run_all(config):
        return
    slow = [i for i in items if i.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [i for i in items if i.get_closest_marker("slow") is None]


def pytest_terminal_summary(terminalreporter, config):
    if not run_all(config):
        terminalreporter.write_line(f"slow tests were not run: {ALL_ENV}=all python -m pytest "
                                    "runs everything (.ci/run does)")
