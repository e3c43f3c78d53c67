"""Skills for coding agents, as package data: one folder per skill holding a ``SKILL.md`` (YAML
front matter ``name``/``description``, the format Claude Code reads from ``.claude/skills`` and
Codex from ``.agents/skills``). ``tirxh skills install [DIR]`` copies them into a project
(`tirxh.plugins.skills`)."""
