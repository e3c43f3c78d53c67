"""The per-launch watchdog: its limit rule on its own, and a hung kernel on a fake board freeing
the board in seconds (``timeout.launch``, worker restarted) instead of after the exec budget."""

import threading
import time

import pytest

from kcoral.watchdog import Watchdog

from .conftest import fake_job


def test_limit_is_launch_s_then_fifty_times_the_longest_section():
    wd = Watchdog(lambda *a: None, launch_s=2.0, exec_s=30.0)
    try:
        assert wd.limit() == 2.0  # nothing measured yet
        with wd.guard("a"):
            time.sleep(0.1)
        assert wd.limit() == pytest.approx(50 * wd.longest) and wd.longest >= 0.1
        wd.longest = 10.0
        assert wd.limit() == 30.0  # never past the execution budget
    finally:
        wd.close()


def test_an_overrun_section_fires_once_with_its_name():
    fired = []
    done = threading.Event()

    def on_expire(what, limit, elapsed):
        fired.append((what, limit, elapsed))
        done.set()
    wd = Watchdog(on_expire, launch_s=0.2)
    with wd.guard("quick"):
        pass
    assert not fired
    with wd.guard("the candidate's launch"):
        assert done.wait(5), "the watchdog did not fire"
    assert len(fired) == 1 and fired[0][0] == "the candidate's launch"
    assert fired[0][1] == 0.2 and fired[0][2] >= 0.2
    wd.close()


def test_a_closed_watchdog_never_fires():
    fired = []
    wd = Watchdog(lambda *a: fired.append(a), launch_s=0.1)
    wd.close()
    with wd.guard("after close"):
        time.sleep(0.3)
    assert not fired


@pytest.mark.slow(reason="a daemon whose worker process is killed and restarted")
@pytest.mark.parametrize("hang_after,where", [(0, "the candidate's launch (before timing"),
                                              (12, "timed round")])
def test_a_hung_kernel_frees_its_board_in_seconds(daemon, client, hang_after, where):
    doc = fake_job(client, fake={"hang": True, "hang_after": hang_after},
                   timing={"warmup": 1, "min_iters": 1000, "budget_s": 30},
                   budgets={"exec_s": 300, "launch_s": 1.0})
    t0 = time.monotonic()
    ev = client.run(doc, timeout=120)
    took = time.monotonic() - t0
    err = ev["result"]["error"]
    assert ev["state"] == "failed" and err["type"] == "timeout.launch", err
    assert where in err["message"] and "worker was killed and restarted" in err["message"]
    assert ev["result"]["worker_restarted"] is True
    assert took < 60, f"{took:.1f} s: the board was held far past the 1 s launch limit"
    assert client.run(fake_job(client), timeout=120)["state"] == "done"  # the next job runs
