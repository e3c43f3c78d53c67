"""The MCP server in-process, through the SDK's own client (`mcp.Client` on an `MCPServer`
instance: an in-memory session, no network). Each tool runs the real ``tirxh ... --json`` in a
child process, so these tests also prove the tool's document is the command's."""

import json
import os
import subprocess
import sys

import anyio
import pytest

pytest.importorskip("mcp", reason="tirxh-mcp needs the mcp SDK: pip install 'mcp>=2,<3'")

from mcp import Client  # noqa: E402

from tirxh.testing import share_zoo_index  # noqa: E402
from tirxh_mcp.runner import TirxhRunner  # noqa: E402
from tirxh_mcp.server import build_server, tool_listing  # noqa: E402

TOOLS = {"check", "bench", "profile", "show", "zoo_list", "zoo_search", "zoo_show",
         "ptx_search", "ptx_show"}


@pytest.fixture
def project(tmp_path, monkeypatch, zoo_index):
    """A starter project (`tirxh init`) and hermetic tirxh children: a private artifact cache
    but for the shared zoo instruction index (tirxh.testing: `zoo search` and `ptx show` trace
    the whole zoo, minutes, unless another test or run already did), installed plugins not
    autoloaded (numsim and sync_check come in with -p)."""
    monkeypatch.setenv("TIRXH_CACHE_DIR", str(tmp_path / "cache"))
    share_zoo_index(tmp_path / "cache", zoo_index)
    monkeypatch.setenv("TIRXH_DISABLE_PLUGIN_AUTOLOAD", "1")
    subprocess.run([sys.executable, "-m", "tirxh", "init", str(tmp_path / "demo")], check=True,
                   capture_output=True)
    return tmp_path / "demo"


def _runner(project, plugins=()):
    # 900 s: under load (CI beside a README run on 2 cores) `ptx show` traced the zoo past 300 s
    # when its index was cold
    return TirxhRunner(cwd=project, rootdir=project, plugins=list(plugins), timeout=900)


def _cli(project, *args, plugins=()):
    """The same command run by hand, for comparison."""
    argv = [sys.executable, "-m", "tirxh", *args, "--json", "--rootdir", str(project)]
    for p in plugins:
        argv += ["-p", p]
    p = subprocess.run(argv, cwd=project, capture_output=True, text=True, env=dict(os.environ))
    return json.loads(p.stdout)


def _call(server, name, args):
    async def go():
        async with Client(server) as client:
            return await client.call_tool(name, args)
    return anyio.run(go)


def test_tools_are_listed_with_schemas(project):
    server = build_server(_runner(project))

    async def go():
        async with Client(server) as client:
            return await client.list_tools()
    listed = anyio.run(go)
    assert {t.name for t in listed.tools} == TOOLS
    show = next(t for t in listed.tools if t.name == "show")
    assert show.input_schema["required"] == ["nodeid", "kind"]
    assert set(show.input_schema["properties"]["kind"]["enum"]) == {"ir", "ptx", "sass",
                                                                    "resources", "phases"}
    assert {t["name"] for t in tool_listing(server)} == TOOLS


def test_zoo_and_ptx_tools_return_the_commands_json(project):
    server = build_server(_runner(project))
    got = _call(server, "zoo_show", {"name": "vadd"})
    assert not got.is_error, got.content
    assert got.structured_content == _cli(project, "zoo", "show", "vadd")
    assert got.structured_content["kernel"]["name"] == "vadd"
    got = _call(server, "ptx_show", {"spelling": "T.ptx.ld.global_.v4.f32"})
    assert got.structured_content == _cli(project, "ptx", "show", "T.ptx.ld.global_.v4.f32")
    assert got.structured_content["bindings"][0]["form"]["spelling"] == "ld.global.v4.f32"
    got = _call(server, "zoo_search", {"query": "wgmma tma"})
    assert got.structured_content == _cli(project, "zoo", "search", "wgmma", "tma")
    names = [r["name"] for r in got.structured_content["results"]]
    assert "gemm_wgmma" in names and "vadd" not in names  # the zoo grows: no fixed rank
    got = _call(server, "ptx_search", {"query": "mbarrier try_wait"})
    assert "mbarrier.try_wait" in [b["name"] for b in got.structured_content["bindings"]]


def test_check_and_show_run_in_the_project(project):
    plugins = ["tirxh_numsim.plugin", "tirxh_sync_check.plugin"]
    server = build_server(_runner(project, plugins))
    got = _call(server, "check", {"keyword": "n1000"})
    doc = got.structured_content
    assert doc["command"] == "check" and doc["exitstatus"] == 0
    assert doc["summary"]["passed"] == 1
    analyzers = {r["analyzer"]: r["verdict"] for r in doc["items"][0]["phases"][1]["results"]}
    assert analyzers["numsim"] == "clean"
    got = _call(server, "show", {"nodeid": "kernels/vadd.py::vadd[n1000]", "kind": "ptx"})
    assert ".visible .entry vadd" in got.structured_content["content"]


def test_a_command_without_json_is_a_tool_error(project):
    server = build_server(_runner(project))
    got = _call(server, "ptx_show", {"spelling": "ld.globl.f32"})
    assert got.is_error
    text = got.content[0].text
    assert "names no instruction binding" in text and "exited with status 4" in text
    got = _call(server, "show", {"nodeid": "kernels/nosuch.py::k", "kind": "ir"})
    assert got.is_error and "exited with status 4" in got.content[0].text
    assert "kernels/nosuch.py::k" in got.content[0].text


def test_bad_arguments_are_refused_by_the_schema(project):
    got = _call(build_server(_runner(project)), "show", {"nodeid": "x", "kind": "cubin"})
    assert got.is_error and "kind" in got.content[0].text
