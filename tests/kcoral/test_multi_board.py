"""Several boards on one host (issue 17): every board has its own worker, jobs on different boards
run at the same time, and each one's numbers are those it gets alone. Proven here on two fake
boards; ``benchmarks/kcoral_multi_gpu.py`` proves it on two GPUs."""

import threading

import pytest

from kcoral.client import KCoralClient

from .conftest import fake_job, start_daemon

HOLD_S = 1.5  # each job holds its board this long (fake sleep while loading)


@pytest.fixture
def two_boards(tmp_path):
    d = start_daemon(tmp_path / "s", fake_boards=2)
    try:
        yield d
    finally:
        d.stop(2)


def _job(c, board, time_ms):
    return fake_job(c, board=board, fake={"sleep_s": HOLD_S}, time_ms=time_ms,
                    timing={"min_iters": 30, "max_iters": 30, "budget_s": 10})


def _median(ev):
    return ev["result"]["timing"]["candidate"]["median_ms"]


def test_jobs_on_two_boards_run_at_once_with_their_solo_numbers(two_boards):
    addr = two_boards.address
    with KCoralClient(addr, client_name="probe") as c:
        boards = {b["name"]: b for b in c.boards() if b["type"] == "fake"}
        assert set(boards) == {"fake0", "fake1"}
        pids = {b["properties"]["worker_pid"] for b in boards.values()}
        assert len(pids) == 2 and None not in pids  # one worker process per board
    solo = {}
    for board, ms in (("fake0", 0.05), ("fake1", 0.2)):
        with KCoralClient(addr, client_name=f"solo-{board}") as c:
            ev = c.run(_job(c, board, ms), timeout=120)
            assert ev["state"] == "done" and ev["board"] == board, ev
            solo[board] = _median(ev)
    results, errors = {}, []

    def client_main(board, ms):
        try:
            with KCoralClient(addr, client_name=f"c-{board}") as c:
                results[board] = c.run(_job(c, board, ms), timeout=120)
        except Exception as e:  # asserted below
            errors.append(f"{board}: {e!r}")
    ts = [threading.Thread(target=client_main, args=a) for a in (("fake0", 0.05),
                                                                   ("fake1", 0.2))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors
    with KCoralClient(addr, client_name="probe") as c:
        rows = {b: c.get_job(results[b]["job_id"]) for b in results}
    for board, ev in results.items():
        assert ev["state"] == "done" and ev["board"] == board
        assert ev["result"]["provenance"] == {"kind": "local", "board": board,
                                              "board_type": "fake"}
        assert abs(_median(ev) / solo[board] - 1) < 0.02, (board, _median(ev), solo[board])
    # they ran at the same time: each started before the other finished
    assert max(r["started"] for r in rows.values()) < min(r["finished"] for r in rows.values())
