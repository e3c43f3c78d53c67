"""`tirxh skills`: the packaged skills are valid Agent Skills, install writes them, and every
`tirxh ...` command a skill or AGENTS.md names exists (parsed by the real command line; the
read-only ones are run)."""

import argparse
import json
import re
import shlex

import pytest

from tirxh.core.cli import build_argparser
from tirxh.core.config import Parser
from tirxh.core.errors import UsageError
from tirxh.core.pluginmanager import build_plugin_manager
from tirxh.plugins.skills import front_matter, install, packaged_skills, validate

from ..core.pytester import REPO

SKILLS = ("tirxh-debug-kernel", "tirxh-profile-kernel", "tirxh-write-kernel")
DOCS = [REPO / "AGENTS.md"] + [REPO / "tirxh" / "skills" / s / "SKILL.md" for s in SKILLS]
# placeholders in the documents and a value each parses with
PLACEHOLDERS = {"N": "8", "S": "60"}
# commands safe to run here: no GPU, no files written outside the test's project
READ_ONLY = {("zoo", "list"), ("zoo", "search"), ("zoo", "show"), ("ptx", "search"),
             ("ptx", "show"), ("skills", "list")}


def test_packaged_skills_are_valid_agent_skills():
    skills = packaged_skills()
    assert [s.name for s in skills] == list(SKILLS)
    for s in skills:
        assert 1 <= len(s.description) <= 1024 and "Use when" in s.description
        assert list(s.files) == ["SKILL.md"]
        assert len(s.files["SKILL.md"].split()) < 3000  # loaded whole on activation: stay lean


@pytest.mark.parametrize("text, match", [
    ("name: x\n", "starts with YAML front matter"),
    ("---\nname: x\n", "starts with YAML front matter"),
    ("---\nname x\n---\n", r"SKILL.md:2: expected 'key: value'"),
])
def test_front_matter_errors(text, match):
    with pytest.raises(ValueError, match=match):
        front_matter(text, "SKILL.md")


@pytest.mark.parametrize("folder, meta, problem", [
    ("a", {"description": "d"}, "no 'name:'"),
    ("a", {"name": "a"}, "no 'description:'"),
    ("A", {"name": "A", "description": "d"}, "must be 1-64 characters"),
    ("a--b", {"name": "a--b", "description": "d"}, "must be 1-64 characters"),
    ("a", {"name": "b", "description": "d"}, "differs from its folder 'a'"),
    ("a", {"name": "a", "description": "x" * 1025}, "1025 characters"),
    ("a", {"name": "a", "description": "use it: now"}, "not a plain YAML scalar"),
    ("a", {"name": "a", "description": "'quoted'"}, "not a plain YAML scalar"),
])
def test_validate_finds_each_problem(folder, meta, problem):
    [p] = validate(folder, meta, "X/SKILL.md")
    assert problem in p and p.startswith("X/SKILL.md: ")


def test_install_default_agents_dir_and_idempotence(tirxh):
    tirxh.project()
    r = tirxh.run("skills", "install")
    assert r.ret == 0, r
    r.fnmatch_lines([f"written     {tirxh.path}/.claude/skills/{s}" for s in SKILLS])
    for s in SKILLS:
        assert (tirxh.path / ".claude" / "skills" / s / "SKILL.md").is_file()
    r = tirxh.run("skills", "install", "--json")
    doc = json.loads(r.stdout)
    assert (doc["schema"], doc["command"], doc["action"]) == ("tirxh.report/1", "skills",
                                                              "install")
    assert {s["status"] for s in doc["skills"]} == {"unchanged"}
    r = tirxh.run("skills", "install", "--agents")
    assert r.ret == 0 and (tirxh.path / ".agents/skills/tirxh-debug-kernel/SKILL.md").is_file()
    r = tirxh.run("skills", "install", "somewhere/else")
    assert r.ret == 0 and (tirxh.path / "somewhere/else/tirxh-write-kernel/SKILL.md").is_file()


def test_install_keeps_a_users_edit_unless_forced(tmp_path):
    skills = packaged_skills()
    install(skills, tmp_path)
    edited = tmp_path / "tirxh-debug-kernel" / "SKILL.md"
    edited.write_text("my notes\n")
    with pytest.raises(UsageError, match=r"exist with other content \(pass --force(.|\n)*"
                                         r"tirxh-debug-kernel/SKILL.md"):
        install(skills, tmp_path)
    assert edited.read_text() == "my notes\n"  # nothing was written
    states = {s["name"]: s["status"] for s in install(skills, tmp_path, force=True)}
    assert states == {"tirxh-debug-kernel": "overwritten", "tirxh-profile-kernel": "unchanged",
                      "tirxh-write-kernel": "unchanged"}


def test_list_json(tirxh):
    doc = json.loads(tirxh.run("skills", "list", "--json").stdout)
    assert [s["name"] for s in doc["skills"]] == list(SKILLS)


@pytest.mark.parametrize("args, match", [
    (["skills", "install", "d", "--agents"], "give DIR or --agents, not both"),
    (["skills", "list", "d"], "DIR, --agents and --force belong to `skills install`"),
    (["skills", "remove"], "invalid choice: 'remove'"),
])
def test_usage_errors(tirxh, args, match):
    r = tirxh.run(*args)
    assert r.ret == 4 and match in r.stderr, r


# -------------------------------------------------------------------------------------------------
# every command a document names exists
# -------------------------------------------------------------------------------------------------

def _commands(text: str) -> list:
    """`tirxh ...` commands in code blocks (one per line, comments dropped) and inline code."""
    found = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            for part in line.split("&&"):
                if part.strip().startswith("tirxh "):
                    found.append(part.strip())
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    found += [c for c in re.findall(r"`(tirxh [^`]+)`", prose.replace("\n", " "))]
    return found


def _argv(command: str) -> list:
    # optional parts written [--opt VALUE] or [DIR] are taken as given; placeholders get values
    command = re.sub(r"\[(-[^\]]*|[A-Z_]+)\]", r"\1", command)
    return [PLACEHOLDERS.get(w, w) for w in shlex.split(command)[1:]]


@pytest.fixture(scope="module")
def full_parser():
    """The command line with every installed plugin's options and commands (--ncu, mcp, ...)."""
    pm = build_plugin_manager()
    parser = Parser()
    pm.hook.tirxh_addoption.call_historic(kwargs={"parser": parser})
    return build_argparser(parser, pm.commands())


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.parent.name if p.name == "SKILL.md"
                         else p.name)
def test_every_command_named_exists(doc, full_parser, tirxh):
    commands = _commands(doc.read_text())
    assert len(commands) >= 5, commands
    tirxh.project()
    choices = next(a for a in full_parser._actions
                   if isinstance(a, argparse._SubParsersAction)).choices
    for command in commands:
        argv = _argv(command)
        if len(argv) == 1:  # a command named in prose ("`tirxh bench`") must exist
            assert argv[0] in choices, f"{doc.name}: `{command}` is not a tirxh command"
            continue
        try:
            ns = full_parser.parse_args(argv)
        except (UsageError, SystemExit) as e:
            pytest.fail(f"{doc.name}: `{command}` does not parse: {e}")
        key = (ns.command, getattr(ns, "action", None))
        if key in READ_ONLY:
            argv = ["ptx", "show", "ld"] if argv[-1] == "SPELLING" else \
                [a if a not in ("NAME", "WORDS") else "vadd" for a in argv]
            r = tirxh.run(*argv)
            assert r.ret == 0, f"{doc.name}: `{command}` ran as {argv}: {r}"
