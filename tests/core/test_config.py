"""tirx.toml discovery and validation: every problem named with file, line, key, expectation."""

import pytest

from tirxh.core.config import Parser, declare_core_ini, find_rootdir, validate
from tirxh.core.errors import ConfigError, UsageError

from .pytester import VADD


def _parser():
    p = Parser()
    declare_core_ini(p)
    return p


def test_rootdir_is_found_walking_up(tmp_path):
    (tmp_path / "tirx.toml").write_text("[project]\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_rootdir(deep) == (tmp_path.resolve(), tmp_path.resolve() / "tirx.toml")


def test_no_config_file_means_start_dir_and_defaults(tmp_path):
    root, ini = find_rootdir(tmp_path)
    assert (root, ini) == (tmp_path.resolve(), None)
    values = validate({}, _parser(), None)
    assert values["project"]["targets"] == ["sm_90a"]
    assert values["project"]["kernels"] == ["kernels/*.py"]
    assert values["check"]["fail_on"] == "error"


def test_explicit_rootdir_must_exist(tmp_path):
    with pytest.raises(UsageError, match="--rootdir .*: not a directory"):
        find_rootdir(rootdir=tmp_path / "nope")


def test_all_problems_are_collected_with_lines(tmp_path):
    path = tmp_path / "tirx.toml"
    path.write_text('[project]\nname = 3\ntargets = "sm_90a"\ncolour = "red"\n\n'
                    '[check]\nfail_on = "sometimes"\n\n[bench]\nkcoral = "localhost"\n\n'
                    '[mystery]\nx = 1\n')
    from tirxh.core.config import tomllib
    with pytest.raises(ConfigError) as ei:
        validate(tomllib.loads(path.read_text()), _parser(), path)
    msg = str(ei.value)
    assert msg.startswith(f"{path}: invalid configuration:")
    assert "line 2: [project] name: expected a string, got int 3" in msg
    assert "line 3: [project] targets: expected a list of strings, got str 'sm_90a'" in msg
    assert "line 4: [project] unknown key 'colour' (known keys: kernels, name, requires, " \
           "targets)" in msg
    assert "line 7: [check] fail_on: expected one of 'error', 'compiled', 'incomplete', " \
           "'review', got 'sometimes'" in msg
    assert "line 10: [bench] kcoral: expected 'host:port' (port 1-65535), got 'localhost'" in msg
    assert "line 12: unknown section [mystery]" in msg
    assert len(ei.value.problems) == 6


def test_bad_requirement_syntax():
    with pytest.raises(ConfigError, match=r"\[project\] requires: invalid requirement 'numsim>>1'"):
        validate({"project": {"requires": ["numsim>>1"]}}, _parser(), None)


def test_plugin_declared_section_and_types():
    p = _parser()
    p.addini("numsim", "max_steps", "int", 1000, "steps")
    p.addini("check", "extra", "bool", False)
    values = validate({"numsim": {"max_steps": 5}, "check": {"extra": True}}, p, None)
    assert values["numsim"] == {"max_steps": 5}
    assert values["check"]["extra"] is True
    with pytest.raises(ConfigError, match=r"\[numsim\] max_steps: expected an integer, got bool"):
        validate({"numsim": {"max_steps": True}}, p, None)


def test_addini_rejects_unknown_type_and_duplicates():
    p = _parser()
    with pytest.raises(UsageError, match="type 'list' is not one of"):
        p.addini("x", "y", "list")
    with pytest.raises(UsageError, match=r"\[project\] name is declared twice"):
        p.addini("project", "name")


def test_toml_syntax_error_is_usage_error(tirxh):
    tirxh.write("tirx.toml", "[project\nname=1\n")
    r = tirxh.run("check")
    assert r.ret == 4
    assert "tirx.toml: invalid configuration:" in r.stderr
    assert "TOML syntax error" in r.stderr


def test_config_error_exit_code_and_message(tirxh):
    tirxh.project('[project]\ntargets = ["sm_90a"]\nkernel = ["k/*.py"]\n', vadd=VADD)
    r = tirxh.run("check")
    assert r.ret == 4, r
    r.fnmatch_lines(["ERROR: */tirx.toml: invalid configuration:",
                     "  line 3: [[]project] unknown key 'kernel' (known keys: *"], err=True)


def test_unknown_target_is_usage_error(tirxh):
    tirxh.project('[project]\ntargets = ["sm_91z"]\n', vadd=VADD)
    r = tirxh.run("check")
    assert r.ret == 4
    assert "[project] targets: unknown target(s) 'sm_91z'; known targets:" in r.stderr
    tirxh.project(vadd=VADD)
    r = tirxh.run("check", "--target", "sm_12")
    assert r.ret == 4 and "--target: unknown target(s) 'sm_12'" in r.stderr


def test_every_problem_is_reported_at_once_unknown_targets_and_requires_included(tirxh):
    tirxh.project('[project]\ntargets = ["sm_91z"]\nkernel = "x"\n'
                  'requires = ["tirxh>=99"]\n\n[check]\nfail_on = "never"\n', vadd=VADD)
    r = tirxh.run("check")
    assert r.ret == 4
    r.fnmatch_lines(["ERROR: */tirx.toml: invalid configuration:",
                     "  line 3: [[]project] unknown key 'kernel'*",
                     "  line 7: [[]check] fail_on: expected one of*",
                     "  line 2: [[]project] targets: unknown target(s) 'sm_91z'; known targets: *",
                     "  line 4: [[]project] requires: 'tirxh>=99': tirxh * is installed"], err=True)


def test_a_section_of_a_plugin_autoload_did_not_load_is_a_warning(tirxh):
    tirxh.project('[project]\n\n[numsim]\nseed = 3\n', vadd=VADD)
    r = tirxh.run("check", "--collect-only")  # hermetic: TIRXH_DISABLE_PLUGIN_AUTOLOAD=1
    assert r.ret == 0, r
    assert ("WARNING: tirx.toml: [numsim] belongs to plugin 'numsim' (tirxh-numsim), which is "
            "not loaded (TIRXH_DISABLE_PLUGIN_AUTOLOAD is set; load it with -p numsim): the "
            "section is ignored") in r.stderr
    tirxh.project('[project]\n\n[nosuchplugin]\nx = 1\n', vadd=VADD)
    r = tirxh.run("check", "--collect-only")
    assert r.ret == 4 and "unknown section [nosuchplugin]" in r.stderr


@pytest.mark.parametrize("requires, ok", [
    (["tirxh>=0.1"], True),
    (["tirxh>=99"], False),
    (["tirxh-nonexistent-plugin"], False),
])
def test_requires_checks_loaded_plugins(tirxh, requires, ok):
    import json
    tirxh.project(f"[project]\nrequires = {json.dumps(requires)}\n", vadd=VADD)
    r = tirxh.run("check", "--collect-only")
    if ok:
        assert r.ret == 0, r
    else:
        assert r.ret == 4, r
        assert "[project] requires: " in r.stderr
        assert ("is installed" in r.stderr) or ("no loaded plugin comes from" in r.stderr)


def test_plugin_section_via_tirxconf(tirxh):
    tirxh.project("[project]\n[lint]\nmax_instructions = 3\n", vadd=VADD)
    tirxh.write("tirxconf.py", '''
        def tirxh_addoption(parser):
            parser.addini("lint", "max_instructions", "int", 100, "limit")

        def tirxh_configure(config):
            print("limit", config.getini("lint", "max_instructions"))
    ''')
    r = tirxh.run("check", "--collect-only", "-q")
    assert r.ret == 0, r
    assert "limit 3" in r.stdout
    # without the plugin that declares it, [lint] is an unknown section
    r = tirxh.run("check", "--collect-only", "-p", "no:tirxconf")
    assert r.ret == 4
    assert "line 2: unknown section [lint]" in r.stderr


def test_section_named_after_a_blocked_plugin_is_ignored(tirxh, monkeypatch):
    tirxh.project("[project]\n[lintplug]\nlevel = 2\n", vadd=VADD)
    tirxh.write("lintplug.py", '''
        def tirxh_addoption(parser):
            parser.addini("lintplug", "level", "int", 1)
    ''')
    monkeypatch.syspath_prepend(str(tirxh.path))
    assert tirxh.run("check", "--collect-only", "-p", "lintplug").ret == 0
    assert tirxh.run("check", "--collect-only").ret == 4  # not loaded, not blocked
    assert tirxh.run("check", "--collect-only", "-p", "no:lintplug").ret == 0
