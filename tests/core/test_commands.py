"""Commands contributed by plugins (``tirxh_add_commands``): the registry, parsing, dispatch,
``--help``, conflicts and ``tirxh_unconfigure``."""

import json

import pytest

from tirxh.core.commands import CommandRegistry
from tirxh.core.pluginmanager import PluginValidationError, build_plugin_manager

HELLO = '''
import json
from tirxh.core.errors import UsageError

def tirxh_add_commands(commands):
    commands.add("hello", "say hello to NAME", run, configure=configure)

def configure(parser):
    parser.add_argument("name")
    parser.add_argument("--times", type=int, default=1)

def run(config):
    if config.option.name == "nobody":
        raise UsageError("hello: nobody to greet")
    if config.option.json:
        print(json.dumps({"command": "hello", "name": config.option.name,
                          "rootdir": str(config.rootdir)}))
    else:
        print(" ".join(["hello " + config.option.name] * config.option.times))
    return 3 if config.option.name == "three" else 0

def tirxh_unconfigure(config):
    (config.rootdir / "unconfigured.txt").write_text(config.command)
'''


def _noop(config):
    return 0


def test_registry_keeps_order_and_owner():
    reg = CommandRegistry()
    reg.add("one", "first", _noop)
    reg.add("two-2", "second", _noop, configure=lambda p: None, description="longer")
    assert [c.name for c in reg] == ["one", "two-2"] and len(reg) == 2
    assert "one" in reg and reg.get("three") is None
    cmd = reg.get("two-2")
    assert cmd.owner == __name__ and cmd.description == "longer"
    assert reg.get("one").description == "first"


@pytest.mark.parametrize("kwargs, match", [
    ({"name": "Bad"}, "must be lower case"),
    ({"name": "2fast"}, "must be lower case"),
    ({"name": "x", "run": "not callable"}, "run must be callable"),
    ({"name": "x", "configure": 3}, "configure must be callable"),
])
def test_registry_refuses_plugin_mistakes(kwargs, match):
    reg = CommandRegistry()
    args = {"name": "x", "help": "h", "run": _noop, **kwargs}
    with pytest.raises(ValueError, match=match):
        reg.add(args.pop("name"), args.pop("help"), args.pop("run"), **args)


def test_registry_refuses_a_second_command_of_the_same_name():
    reg = CommandRegistry()
    reg.add("x", "h", _noop)
    with pytest.raises(ValueError, match=r"'x' is registered twice \(by .*test_commands and"):
        reg.add("x", "h", _noop)


class _Adds:
    """A plugin object adding command `name`."""

    def __init__(self, name):
        self.name = name

    def tirxh_add_commands(self, commands):
        commands.add(self.name, "added", _noop)


def test_plugin_manager_collects_commands_once():
    pm = build_plugin_manager(autoload=False)
    pm.register(_Adds("one"), name="adds-one")
    first = pm.commands()
    assert pm.commands() is first and first.get("one").help == "added"
    pm.register(_Adds("late"), name="adds-late")  # historic: a late plugin still contributes
    assert "late" in first


def test_duplicate_command_across_plugins_is_a_plugin_error():
    pm = build_plugin_manager(autoload=False)
    pm.register(_Adds("dup"), name="first")
    pm.register(_Adds("dup"), name="second")
    with pytest.raises(PluginValidationError, match="'dup' is registered twice"):
        pm.commands()


def test_plugin_command_runs_with_its_options(tirxh):
    tirxh.project()
    tirxh.write("tirxconf.py", HELLO)
    r = tirxh.run("hello", "world", "--times", "2")
    assert r.ret == 0, r
    assert r.outlines == ["hello world hello world"]
    assert (tirxh.path / "unconfigured.txt").read_text() == "hello"
    r = tirxh.run("hello", "world", "--json")
    assert json.loads(r.stdout) == {"command": "hello", "name": "world",
                                    "rootdir": str(tirxh.path)}
    assert tirxh.run("hello", "three").ret == 3  # the runner's exit code is the command's


def test_plugin_command_errors_are_usage_errors(tirxh):
    tirxh.project()
    tirxh.write("tirxconf.py", HELLO)
    r = tirxh.run("hello", "nobody")
    assert r.ret == 4 and "ERROR: hello: nobody to greet" in r.stderr
    assert (tirxh.path / "unconfigured.txt").read_text() == "hello"  # unconfigure still ran
    r = tirxh.run("hello")
    assert r.ret == 4 and "the following arguments are required: name" in r.stderr
    r = tirxh.run("hello", "x", "--times", "many")
    assert r.ret == 4 and "invalid int value" in r.stderr


def test_help_lists_plugin_commands(tirxh):
    tirxh.project()
    tirxh.write("tirxconf.py", HELLO)
    r = tirxh.run("--help")
    assert r.ret == 0
    r.fnmatch_lines(["*init*", "*hello*say hello to NAME*"])
    r = tirxh.run("hello", "--help")
    assert r.ret == 0 and "--times" in r.stdout and "--trace-config" in r.stdout
    r = tirxh.run()
    assert r.ret == 4 and "hello" in r.stderr  # no command: the help goes to stderr


def test_trace_config_goes_to_stderr(tirxh):
    tirxh.project()
    tirxh.write("tirxconf.py", HELLO)
    r = tirxh.run("hello", "world", "--trace-config")
    assert r.ret == 0 and r.outlines == ["hello world"]
    assert "tirxconf" in r.stderr and "tirxh_add_commands" in r.stderr


def test_command_named_like_a_builtin_is_a_plugin_error(tirxh):
    tirxh.project()
    tirxh.write("tirxconf.py", "def tirxh_add_commands(commands):\n"
                               "    commands.add('check', 'a second check', lambda c: 0)\n")
    r = tirxh.run("plugins")
    assert r.ret == 4
    assert "plugin error: command 'check'" in r.stderr and "built-in tirxh command" in r.stderr


def test_blocking_the_plugin_removes_its_command(tirxh):
    tirxh.project()
    tirxh.write("tirxconf.py", HELLO)
    r = tirxh.run("hello", "x", "-p", "no:tirxconf")
    assert r.ret == 4 and "invalid choice: 'hello'" in r.stderr
