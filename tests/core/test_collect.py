"""Collection: node ids, compile-only items, target overrides, import errors, selection."""

import json

from .pytester import BAD, SCALE, VADD

TWO_TARGETS = '[project]\ntargets = ["sm_80", "sm_90a"]\n'


def test_node_ids_suite_cases_times_targets(tirxh):
    tirxh.project(TWO_TARGETS, vadd=VADD, scale=SCALE)
    r = tirxh.run("check", "--collect-only", "-q")
    assert r.ret == 0, r
    r.fnmatch_lines([
        "collected 6 items",
        "kernels/scale.py::scale@sm_80",
        "kernels/scale.py::scale@sm_90a",
        "kernels/vadd.py::vadd[[]small]@sm_80",
        "kernels/vadd.py::vadd[[]small]@sm_90a",
        "kernels/vadd.py::vadd[[]big]@sm_80",
        "kernels/vadd.py::vadd[[]big]@sm_90a",
    ])


def test_kernel_targets_override_project_targets(tirxh):
    tirxh.project(TWO_TARGETS, only=SCALE.replace("@T.kernel(block=64)",
                                                  '@T.kernel(block=64, targets=["sm_100a"])'))
    r = tirxh.run("check", "--collect-only", "-q")
    assert r.ret == 0, r
    assert "kernels/only.py::scale@sm_100a" in r.outlines
    assert not any("@sm_90a" in ln for ln in r.outlines)


def test_unknown_kernel_target_is_a_collection_error(tirxh):
    tirxh.project(only=SCALE.replace("@T.kernel(block=64)", '@T.kernel(targets=["sm_7"])'))
    r = tirxh.run("check")
    assert r.ret == 1
    assert "kernel 'scale': targets= names unknown target(s) 'sm_7'" in r.stdout


def test_import_error_is_reported_and_the_run_goes_on(tirxh):
    tirxh.project(vadd=VADD, broken_import="import numpy\n\nx = 1\nraise RuntimeError('boom')\n")
    r = tirxh.run("check")
    assert r.ret == 1, r
    r.fnmatch_lines([
        "collected 2 items / 1 error",
        "kernels/vadd.py CC [[]100%]",
        "*ERRORS*",
        "*ERROR collecting kernels/broken_import.py*",
        "Traceback (most recent call last):",
        '  File "*kernels/broken_import.py", line 4, in <module>',
        "RuntimeError: boom",
        "*2 compiled, 1 collection error in *",
    ])
    assert "importlib" not in r.stdout  # the user's frames only


def test_nothing_collected_exit_5(tirxh):
    tirxh.project(empty="x = 1\n")
    r = tirxh.run("check")
    assert r.ret == 5
    assert "no items ran" in r.stdout


def test_no_config_file_uses_cwd_defaults(tirxh):
    tirxh.write("kernels/vadd.py", VADD)
    r = tirxh.run("check", "--collect-only", "-q")
    assert r.ret == 0, r
    assert "configfile: none" not in r.stdout  # -q: no header
    r = tirxh.run("check", "--collect-only")
    assert "configfile: none" in r.stdout


def test_keyword_selection(tirxh):
    tirxh.project(TWO_TARGETS, vadd=VADD, scale=SCALE)
    r = tirxh.run("check", "--collect-only", "-k", "vadd and not big and sm_90")
    assert r.ret == 0, r
    assert "collected 6 items / 5 deselected / 1 selected" in r.stdout
    assert "kernels/vadd.py::vadd[small]@sm_90a" in r.outlines
    # a kernel without a Suite (scale) is compile-only: the keyword selects it, or leaves it out
    r = tirxh.run("check", "--collect-only", "-q", "-k", "compile_only")
    assert [ln for ln in r.outlines if "::" in ln] == ["kernels/scale.py::scale@sm_80",
                                                      "kernels/scale.py::scale@sm_90a"]
    r = tirxh.run("check", "--collect-only", "-q", "-k", "not compile_only")
    assert not any("scale" in ln for ln in r.outlines if "::" in ln)
    r = tirxh.run("check", "--collect-only", "-k", "nothing-matches")
    assert r.ret == 5
    r = tirxh.run("check", "-k", "vadd and (")
    assert r.ret == 4
    assert "-k 'vadd and (': at column 11: expected a name" in r.stderr


def test_positional_paths_and_node_ids(tirxh):
    tirxh.project(TWO_TARGETS, vadd=VADD, scale=SCALE)
    r = tirxh.run("check", "--collect-only", "-q", "kernels/scale.py")
    assert [ln for ln in r.outlines if "::" in ln] == ["kernels/scale.py::scale@sm_80",
                                                      "kernels/scale.py::scale@sm_90a"]
    r = tirxh.run("check", "--collect-only", "-q", "kernels/vadd.py::vadd[big]")
    assert [ln for ln in r.outlines if "::" in ln] == ["kernels/vadd.py::vadd[big]@sm_80",
                                                      "kernels/vadd.py::vadd[big]@sm_90a"]
    r = tirxh.run("check", "--collect-only", "kernels/nope.py")
    assert r.ret == 4 and "kernels/nope.py: no such file or directory" in r.stderr


def test_duplicate_node_ids_are_a_collection_error(tirxh):
    tirxh.project(dup=VADD + "\nSUITE2 = T.suite(vadd, inputs=inputs, cases=[T.case('small', "
                             "n=4)])\n")
    r = tirxh.run("check", "--json")
    doc = json.loads(r.stdout)
    assert r.ret == 1
    assert "produced twice (by module variables 'SUITE' and 'SUITE2')" in \
        doc["collect_errors"][0]["longrepr"]


def test_imported_kernels_are_not_collected_twice(tirxh):
    tirxh.project(vadd=VADD, user="from kernels.vadd import vadd, SUITE as S\n")
    r = tirxh.run("check", "--collect-only", "-q")
    # the Suite re-exported by user.py yields items there; the kernel object itself does not
    ids = [ln for ln in r.outlines if "::" in ln]
    assert ids.count("kernels/vadd.py::vadd[small]@sm_90a") == 1
    assert "kernels/user.py::vadd[small]@sm_90a" in ids
    assert not any(i.startswith("kernels/user.py::vadd@") for i in ids)


def test_compile_only_kernel_with_missing_const_fails_at_compile(tirxh):
    tirxh.project(k=SCALE.replace("k: T.const = 2", "k: T.const"))
    r = tirxh.run("check")
    assert r.ret == 1
    assert "kernel 'scale' needs a value for constant 'k'" in r.stdout


def test_bad_kernel_reports_users_file_and_line(tirxh):
    tirxh.project(bad=BAD)
    r = tirxh.run("check")
    assert r.ret == 1, r
    r.fnmatch_lines(["kernels/bad.py F *", "*FAILURES*", "*kernels/bad.py::broken@sm_90a*",
                     "kernel 'broken' defined at kernels/bad.py:4", "[[]compile] failed",
                     "TraceError: */kernels/bad.py:7: in kernel 'broken': *"])
