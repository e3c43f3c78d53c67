"""`tirxh mcp` as a command: --list-tools, option errors, and the stdio server end to end
(the SDK's stdio client starts `python -m tirxh mcp` as a child: no network)."""

import json
import os
import subprocess
import sys

import anyio
import pytest

pytest.importorskip("mcp", reason="tirxh-mcp needs the mcp SDK: pip install 'mcp>=2,<3'")

from mcp import Client, StdioServerParameters  # noqa: E402

PLUGIN = "tirxh_mcp.plugin"


def _tirxh(tmp_path, *args):
    env = dict(os.environ, TIRXH_DISABLE_PLUGIN_AUTOLOAD="1",
               TIRXH_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-m", "tirxh", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def test_list_tools_json(tmp_path):
    p = _tirxh(tmp_path, "mcp", "-p", PLUGIN, "--list-tools", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == "tirxh.report/1" and doc["command"] == "mcp"
    tools = {t["name"]: t for t in doc["tools"]}
    assert "ptx_show" in tools and tools["ptx_show"]["input_schema"]["required"] == ["spelling"]
    p = _tirxh(tmp_path, "mcp", "-p", PLUGIN, "--list-tools")
    assert p.returncode == 0 and p.stdout.splitlines()[0].startswith("check ")


@pytest.mark.parametrize("args, match", [
    (["--json"], "--json applies to --list-tools"),
    (["--timeout", "0"], "must be positive"),
    (["--timeout", "soon"], "invalid float value"),
])
def test_option_errors(tmp_path, args, match):
    p = _tirxh(tmp_path, "mcp", "-p", PLUGIN, *args)
    assert p.returncode == 4 and match in p.stderr


# an interpreter where the SDK cannot be imported (a GPU host installed offline, --no-deps)
WITHOUT_SDK = """
import sys

class NoSDK:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" or name.startswith("mcp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoSDK())
from tirxh import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_the_sdk_tirxh_starts_and_mcp_says_what_is_missing(tmp_path):
    env = dict(os.environ, TIRXH_DISABLE_PLUGIN_AUTOLOAD="1")

    def run(*args):
        return subprocess.run([sys.executable, "-c", WITHOUT_SDK, *args, "-p", PLUGIN],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    p = run("plugins")
    assert p.returncode == 0 and "tirxh_mcp" in p.stdout, p.stderr
    p = run("mcp", "--list-tools")
    assert p.returncode == 4
    assert "tirxh mcp needs the MCP SDK: pip install 'mcp>=2,<3'" in p.stderr


def test_help_lists_the_command(tmp_path):
    p = _tirxh(tmp_path, "--help", "-p", PLUGIN)  # -p is pre-scanned for the help too
    assert p.returncode == 0 and "serve tirxh to coding agents over MCP" in p.stdout


def test_stdio_server_answers_a_client(tmp_path):
    env = dict(os.environ, TIRXH_DISABLE_PLUGIN_AUTOLOAD="1",
               TIRXH_CACHE_DIR=str(tmp_path / "cache"))
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "tirxh", "mcp", "-p", PLUGIN],
                                   env=env, cwd=str(tmp_path))

    async def go():
        async with Client(params) as client:
            tools = await client.list_tools()
            got = await client.call_tool("zoo_show", {"name": "reduce_rows"})
            return tools, got
    tools, got = anyio.run(go)
    assert "check" in {t.name for t in tools.tools}
    assert not got.is_error and got.structured_content["kernel"]["name"] == "reduce_rows"
