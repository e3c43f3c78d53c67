"""Node ids on the command line (`tirxh.core.nodeids`): every command agrees that an id selecting
nothing is a usage error naming the closest real ids; show/profile take prefixes and bare names."""

import pytest

from .pytester import SCALE, VADD


@pytest.mark.parametrize("command", ["check", "bench", "build"])
def test_a_node_id_that_matches_nothing_is_a_usage_error(tirxh, command):
    tirxh.project(vadd=VADD)
    r = tirxh.run(command, "kernels/vadd.py::vadd[smal]@sm_90a")
    assert r.ret == 4, r
    assert f"ERROR: {command} kernels/vadd.py::vadd[smal]@sm_90a: no collected item has this " \
           "node id" in r.stderr
    assert "closest: kernels/vadd.py::vadd[small]@sm_90a" in r.stderr


def test_a_target_outside_the_runs_targets_says_so(tirxh):
    tirxh.project(vadd=VADD)
    r = tirxh.run("check", "kernels/vadd.py::vadd[small]@sm_80")
    assert r.ret == 4
    assert "target 'sm_80' is not one of this run's targets (sm_90a); add --target sm_80" in \
        r.stderr
    r = tirxh.run("check", "kernels/vadd.py::vadd[small]@sm_99")
    assert "target 'sm_99' is not one of this run's targets (sm_90a); it is not a registered " \
           "target" in r.stderr
    r = tirxh.run("show", "kernels/vadd.py::vadd[small]@sm_80", "--ptx")
    assert r.ret == 4 and "add --target sm_80" in r.stderr


def test_a_missing_file_names_the_closest_kernel_file(tirxh):
    tirxh.project(vadd=VADD)
    r = tirxh.run("check", "kernels/vad.py")
    assert r.ret == 4 and "kernels/vad.py: no such file or directory; closest: kernels/vadd.py" \
        in r.stderr


def test_show_takes_unique_prefixes_and_bare_names(tirxh):
    tirxh.project(vadd=VADD, scale=SCALE)
    for arg in ("kernels/vadd.py::vadd[sm", "vadd[small]", "vadd[small]@sm_90a", "scale"):
        r = tirxh.run("show", arg, "--ptx")
        assert r.ret == 0, (arg, r)
        assert ".entry" in r.stdout
    r = tirxh.run("show", "vadd", "--ptx")
    assert r.ret == 4 and "show vadd: node id is ambiguous; it matches " \
                          "kernels/vadd.py::vadd[small]@sm_90a, kernels/vadd.py::vadd[big]" \
                          "@sm_90a" in r.stderr
    r = tirxh.run("show", "vad", "--ptx")
    assert r.ret == 4 and "show vad: node id is ambiguous" in r.stderr
    r = tirxh.run("show", "vadd[huge]", "--ptx")
    assert r.ret == 4 and "no collected item has this node id; closest: " in r.stderr


def test_a_kernels_glob_that_matches_no_file_says_so(tirxh):
    tirxh.project('[project]\nkernels = ["kernels/*.py", "kernal/*.py"]\n', vadd=VADD)
    r = tirxh.run("check")
    assert r.ret == 0
    assert "WARNING: " in r.stderr and "[project] kernels: 'kernal/*.py' matches no .py file" \
        in r.stderr
