"""Which assembler builds a kernel, and what its resource report says (session 18: a fresh
device build of a warp-specialized GEMM came from nvJitLink alone, setmaxnreg dropped and 264
bytes of stack, while its report said 0 and carried no warning)."""

import pytest

from tirxh.core import toolchain
from tirxh.core.toolchain import SETMAXNREG, parse_resources, ptx_to_cubin

# what the device's nvJitLink wrote for that build: its own summary line, no "ptxas" lines
NVJITLINK_SUMMARY = ("info    : 0 bytes gmem\n"
                     "info    : Function properties for 'gemm_bf16_c2':\n"
                     "info    : used 168 registers, used 16 barriers, 264 stack, 1024 bytes "
                     "smem, 1012 bytes cmem[0], 0 bytes lmem\n")
PTXAS_V = ("ptxas info    : Function properties for gemm_bf16_c2\n"
           "ptxas         .     264 bytes stack frame, 660 bytes spill stores, 928 bytes spill "
           "loads\nptxas info    : Used 168 registers, used 16 barriers\n")


def test_nvjitlink_summary_line_reports_its_stack():
    r = parse_resources(NVJITLINK_SUMMARY)
    assert (r.registers, r.barriers, r.stack_frame, r.smem_static, r.cmem) == (
        168, 16, 264, 1024, 1012)


def test_ptxas_lines_report_spills_and_stack():
    r = parse_resources(PTXAS_V)
    assert (r.registers, r.stack_frame, r.spill_stores, r.spill_loads) == (168, 264, 660, 928)


@pytest.mark.parametrize("line, found", [
    ("\tsetmaxnreg.dec.sync.aligned.u32 \t40;", True),
    ("@%p1 setmaxnreg.inc.sync.aligned.u32 232;", True),
    ("// setmaxnreg.inc would go here", False),
    ("\tbar.sync 0;", False),
])
def test_setmaxnreg_is_found_in_instructions_not_comments(line, found):
    assert (SETMAXNREG.search(".version 8.0\n" + line + "\n") is not None) is found


def _fake_assemblers(monkeypatch, have_ptxas, nvjitlink_log=NVJITLINK_SUMMARY):
    calls = []

    def via_ptxas(ptx, arch, line_info, extra):
        calls.append("ptxas")
        return b"ptxas-cubin", PTXAS_V

    def via_nvjitlink(nj, ptx, arch, line_info, extra):
        calls.append("nvjitlink")
        return b"nvjitlink-cubin", nvjitlink_log

    monkeypatch.setattr(toolchain, "_via_ptxas", via_ptxas)
    monkeypatch.setattr(toolchain, "_via_nvjitlink", via_nvjitlink)
    monkeypatch.setattr(toolchain, "_nvjitlink", lambda: object())
    monkeypatch.setattr(toolchain, "find_tool",
                        lambda name: "/bin/ptxas" if have_ptxas and name == "ptxas" else None)
    return calls


WS_PTX = ".version 8.0\n.target sm_90a\n\tsetmaxnreg.dec.sync.aligned.u32 40;\n"
PLAIN_PTX = ".version 8.0\n.target sm_90a\n\tret;\n"


def test_setmaxnreg_ptx_goes_to_ptxas_whatever_nvjitlink_would_say(monkeypatch):
    """The device's nvJitLink wrote no C7504 for the build that lost setmaxnreg: the choice
    cannot hang on its log."""
    calls = _fake_assemblers(monkeypatch, have_ptxas=True)
    cubin, log = ptx_to_cubin(WS_PTX, "sm_90a")
    assert (cubin, calls) == (b"ptxas-cubin", ["ptxas"])
    assert parse_resources(log).warnings[0].startswith("note: the PTX uses setmaxnreg")


def test_plain_ptx_stays_with_nvjitlink(monkeypatch):
    calls = _fake_assemblers(monkeypatch, have_ptxas=True)
    cubin, log = ptx_to_cubin(PLAIN_PTX, "sm_90a")
    assert (cubin, calls, parse_resources(log).warnings) == (b"nvjitlink-cubin", ["nvjitlink"], [])


def test_without_ptxas_the_lost_setmaxnreg_is_a_warning(monkeypatch):
    calls = _fake_assemblers(monkeypatch, have_ptxas=False)
    cubin, log = ptx_to_cubin(WS_PTX, "sm_90a")
    assert (cubin, calls) == (b"nvjitlink-cubin", ["nvjitlink"])
    warnings = parse_resources(log).warnings
    assert warnings and "dropped" in warnings[0] and "ptxas" in warnings[0]


def test_an_explicit_choice_is_kept(monkeypatch):
    calls = _fake_assemblers(monkeypatch, have_ptxas=True)
    assert ptx_to_cubin(WS_PTX, "sm_90a", prefer="nvjitlink")[0] == b"nvjitlink-cubin"
    assert ptx_to_cubin(PLAIN_PTX, "sm_90a", prefer="ptxas")[0] == b"ptxas-cubin"
    assert calls == ["nvjitlink", "ptxas"]


def test_the_assembly_policy_is_in_the_key():
    assert toolchain.toolchain_versions()["assembly"] == "setmaxnreg-to-ptxas"


def test_code_bytes_is_the_entry_functions_sass_size():
    """`Resources.code_bytes`: the cubin's ``.text.<kernel>`` section, 16 bytes a SASS
    instruction (what the KDA prep's 180 -> 136 KB roll was measured by); 0 for a name the
    cubin lacks or bytes that are no ELF."""
    import re

    import tirxh.lang as T

    @T.kernel(grid=1, block=32)
    def tiny(out: T.gptr[T.f32]):
        T.ptx.st.global_.f32(out.at(T.tid.x), 1.0)

    c = tiny.compile("sm_90a")
    instructions = len(re.findall(r"/\*[0-9a-f]{4,6}\*/\s+[^ /]", c.sass))
    assert c.resources.code_bytes == 16 * instructions > 0
    assert c.resources.to_json()["code_bytes"] == c.resources.code_bytes
    assert toolchain.text_bytes(c.cubin, "other") == 0
    assert toolchain.text_bytes(b"not an elf", "tiny") == 0
