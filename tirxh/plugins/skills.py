"""``tirxh skills list | install [DIR]``: skills for coding agents, written into a project.

The skills ship with tirxh as package data (``tirxh/skills/<name>/SKILL.md``, each with YAML front
matter ``name:`` and ``description:``: the Agent Skills format that Claude Code reads from
``.claude/skills`` and Codex from ``.agents/skills``). ``install`` copies every skill folder into
DIR, by default ``.claude/skills`` of the project (``--agents``: ``.agents/skills``); a file that
exists with other content is refused unless ``--force``, so a user's edits are not lost silently.
With ``--json`` both actions print one document (``{"schema": "tirxh.report/1", "command":
"skills", "action": ...}``).
"""

from __future__ import annotations

import importlib.resources
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UsageError
from ..core.main import ExitCode
from ..core.pluginmanager import hookimpl
from ..core.reports import SCHEMA

SKILLS_PACKAGE = "tirxh.skills"
CLAUDE_DIR = ".claude/skills"
AGENTS_DIR = ".agents/skills"
# the Agent Skills rules for the front matter (name: 1-64 of a-z 0-9 and single hyphens, equal
# to the folder's name; description: 1-1024 characters)
NAME_RE = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*\Z")
MAX_NAME, MAX_DESCRIPTION = 64, 1024


@dataclass
class Skill:
    """One skill folder: its front matter and its files (relative path -> bytes)."""

    name: str
    description: str
    files: dict

    def to_json(self) -> dict:
        return {"name": self.name, "description": self.description, "files": sorted(self.files)}


def front_matter(text: str, where: str) -> dict:
    """The ``key: value`` lines between the leading ``---`` lines of a SKILL.md."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---" or "---" not in [x.strip() for x in lines[1:]]:
        raise ValueError(f"{where}: a SKILL.md starts with YAML front matter between '---' lines")
    end = [x.strip() for x in lines[1:]].index("---") + 1
    out = {}
    for n, line in enumerate(lines[1:end], 2):
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip() or key != key.strip():
            raise ValueError(f"{where}:{n}: expected 'key: value' in the front matter, got "
                             f"{line!r}")
        out[key.strip()] = value.strip()
    return out


# a YAML plain scalar may not contain these (they would start a mapping or a comment) nor start
# with an indicator character; values are written unquoted, so the rule keeps them valid YAML
_YAML_BREAKERS = (": ", " #")
_YAML_INDICATORS = tuple("-?:,[]{}#&*!|>'\"%@`")


def validate(folder: str, meta: dict, where: str) -> list:
    """Problems with a skill's front matter (empty: valid)."""
    problems = []
    for key, value in meta.items():
        if any(b in value for b in _YAML_BREAKERS) or value.startswith(_YAML_INDICATORS) or \
                value.endswith(":"):
            problems.append(f"{where}: {key}: {value[:40]!r}... is not a plain YAML scalar "
                            f"(no ': ', ' #', leading indicator or trailing ':')")
    name, desc = meta.get("name", ""), meta.get("description", "")
    if not name:
        problems.append(f"{where}: no 'name:' in the front matter")
    elif len(name) > MAX_NAME or not NAME_RE.match(name):
        problems.append(f"{where}: name {name!r} must be 1-{MAX_NAME} characters of a-z, 0-9 and "
                        f"single '-' (not first or last)")
    elif name != folder:
        problems.append(f"{where}: name {name!r} differs from its folder {folder!r}")
    if not desc:
        problems.append(f"{where}: no 'description:' in the front matter")
    elif len(desc) > MAX_DESCRIPTION:
        problems.append(f"{where}: description has {len(desc)} characters (at most "
                        f"{MAX_DESCRIPTION})")
    return problems


def packaged_skills() -> list:
    """Every skill shipped with tirxh, validated (a broken one is tirxh's bug: it raises)."""
    root = importlib.resources.files(SKILLS_PACKAGE)
    skills, problems = [], []
    for folder in sorted((d for d in root.iterdir() if d.is_dir()), key=lambda d: d.name):
        skill_md = folder / "SKILL.md"
        if not skill_md.is_file():
            continue  # __pycache__ and the like
        where = f"{SKILLS_PACKAGE}/{folder.name}/SKILL.md"
        meta = front_matter(skill_md.read_text(encoding="utf-8"), where)
        problems += validate(folder.name, meta, where)
        files = {rel: data for rel, data in _files(folder)}
        skills.append(Skill(meta.get("name", folder.name), meta.get("description", ""), files))
    if problems:
        raise ValueError("invalid packaged skills:\n" + "\n".join(problems))
    return skills


def _files(folder, prefix: str = ""):
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        rel = f"{prefix}{entry.name}"
        if entry.is_dir():
            if entry.name != "__pycache__":
                yield from _files(entry, rel + "/")
        elif not entry.name.endswith((".pyc", ".py")):
            yield rel, entry.read_bytes()


def install(skills: list, dest: Path, force: bool = False) -> list:
    """Write each skill folder under `dest`; refuse (before writing anything) files that exist
    with other content unless `force`. Returns per skill its files and what happened."""
    conflicts = [str(dest / s.name / rel) for s in skills for rel, data in s.files.items()
                 if (dest / s.name / rel).is_file() and
                 (dest / s.name / rel).read_bytes() != data]
    if conflicts and not force:
        raise UsageError("skills install: these files exist with other content (pass --force to "
                         "overwrite them):\n  " + "\n  ".join(conflicts))
    out = []
    for s in skills:
        states = []
        for rel, data in s.files.items():
            path = dest / s.name / rel
            if path.is_file() and path.read_bytes() == data:
                states.append("unchanged")
                continue
            states.append("overwritten" if path.exists() else "written")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        status = "unchanged" if set(states) == {"unchanged"} else \
            "overwritten" if "overwritten" in states else "written"
        out.append({**s.to_json(), "dir": str(dest / s.name), "status": status})
    return out


# -------------------------------------------------------------------------------------------------
# the command
# -------------------------------------------------------------------------------------------------

@hookimpl
def tirxh_add_commands(commands):
    commands.add("skills", "skills for coding agents: list, install into .claude/skills",
                 run, configure=configure,
                 description="Skills for coding agents (writing, debugging and profiling TIRx "
                             "kernels). ACTION is list, or install [DIR]: writes one folder per "
                             f"skill into DIR (default: {CLAUDE_DIR} of the project, which Claude "
                             f"Code reads; --agents: {AGENTS_DIR}, which Codex reads).")


def configure(parser) -> None:
    parser.add_argument("action", choices=("list", "install"), metavar="ACTION",
                        help="list | install [DIR]")
    parser.add_argument("dir", nargs="?", metavar="DIR",
                        help=f"(install) where to write the skill folders (default: {CLAUDE_DIR} "
                             f"of the project)")
    parser.add_argument("--agents", action="store_true",
                        help=f"(install) write into {AGENTS_DIR} of the project (Codex)")
    parser.add_argument("--force", action="store_true",
                        help="(install) overwrite skill files that were changed")


def run(config) -> int:
    opt = config.option
    skills = packaged_skills()
    doc = {"schema": SCHEMA, "command": "skills", "action": opt.action}
    if opt.action == "list":
        if opt.dir or opt.agents or opt.force:
            raise UsageError("skills list: DIR, --agents and --force belong to `skills install`")
        doc["skills"] = [s.to_json() for s in skills]
        lines = [f"{len(skills)} skills (install: tirxh skills install [DIR])"]
        lines += [f"  {s.name}: {s.description}" for s in skills]
    else:
        if opt.dir and opt.agents:
            raise UsageError("skills install: give DIR or --agents, not both")
        dest = Path(opt.dir).resolve() if opt.dir else \
            config.rootdir / (AGENTS_DIR if opt.agents else CLAUDE_DIR)
        doc["dir"] = str(dest)
        doc["skills"] = install(skills, dest, force=opt.force)
        lines = [f"{s['status']:<11} {s['dir']}" for s in doc["skills"]]
    if opt.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write("\n".join(lines) + "\n")
    return ExitCode.OK
