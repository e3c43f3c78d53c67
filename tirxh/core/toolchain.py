"""PTX -> cubin and cubin -> SASS on a machine without a GPU.

Primary path: nvJitLink in-process through cuda-bindings (the ``nvidia-nvjitlink`` wheel); its
``-verbose`` log is the ptxas resource report, parsed into `Resources`. Fallback: a ``ptxas``
binary (CUDA_HOME/bin, PATH, or the optional nvidia-cuda-nvcc wheel). SASS comes from the
``nvidia-cuda-nvdisasm`` wheel's nvdisasm (or CUDA_HOME/PATH).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import struct
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field

from .errors import ToolchainError


@dataclass
class Resources:
    """The ptxas resource report of one entry function."""

    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_frame: int = 0
    smem_static: int = 0
    barriers: int = 0
    cmem: int = 0
    warnings: list = field(default_factory=list)
    # the entry function's SASS in bytes (its ``.text.<name>`` section; 0 when not assembled):
    # not a ptxas figure, read from the cubin. Why: code that every CTA fetches again was most
    # of two KDA backward launches' time (docs/TUNING.md, the `no_instruction` row)
    code_bytes: int = 0

    def to_json(self) -> dict:
        return asdict(self)


_RES = {
    "registers": re.compile(r"[Uu]sed (\d+) registers"),
    # ptxas writes "264 bytes stack frame"; nvJitLink's own summary line "264 stack, ..."
    "stack_frame": re.compile(r"(\d+) bytes stack frame|(\d+) stack,"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "smem_static": re.compile(r"(\d+) bytes smem"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "cmem": re.compile(r"(\d+) bytes cmem\[0\]"),
}


def parse_resources(log: str) -> Resources:
    """Parse a ptxas ``-v`` / nvJitLink ``-verbose`` log (the ``ptxas info`` lines)."""
    r = Resources()
    ptxas_lines = "\n".join(ln for ln in log.splitlines() if "ptxas" in ln) or log
    for name, rx in _RES.items():
        # the stack also from nvJitLink's summary line ("264 stack,"), which some versions
        # write without any "ptxas" line; its "1024 bytes smem" is the reserved 1 KB, not the
        # kernel's static shared memory, so the other fields keep to the ptxas lines
        m = rx.search(ptxas_lines) or (rx.search(log) if name == "stack_frame" else None)
        if m:
            setattr(r, name, int(next(g for g in m.groups() if g is not None)))
    r.warnings = [ln.strip() for ln in log.splitlines()
                  if "warning" in ln.lower() or "Performance Loss" in ln or ln.startswith("note:")]
    return r


def text_bytes(cubin: bytes, name: str) -> int:
    """Size of section ``.text.<name>`` of an ELF64 little-endian cubin (0 when absent): the
    section headers' names, read through the section-name string table."""
    if not cubin or cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return 0
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)

    def header(i):   # (name offset, file offset, size) of section i
        at = shoff + i * shentsize
        return (struct.unpack_from("<I", cubin, at)[0],
                *struct.unpack_from("<QQ", cubin, at + 0x18))
    _, strtab, _ = header(shstrndx)
    want = b".text." + name.encode()
    for i in range(shnum):
        off, _, size = header(i)
        start = strtab + off
        if cubin[start:cubin.index(b"\0", start)] == want:
            return size
    return 0


def _nvjitlink():
    try:
        # optional dependency at run time: the nvJitLink library may be missing or not
        # loadable; then ptxas assembles
        from cuda.bindings import nvjitlink
        nvjitlink.version()
        return nvjitlink
    except Exception:  # library missing or not loadable
        return None


def find_tool(name: str) -> "str | None":
    for env in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(env)
        if root and os.path.exists(os.path.join(root, "bin", name)):
            return os.path.join(root, "bin", name)
    try:  # the nvidia-* wheels put binaries under nvidia/cu*/bin
        import nvidia  # optional dependency: the namespace package exists only with those wheels
        for base in getattr(nvidia, "__path__", []):
            for sub in sorted(os.listdir(base)):
                cand = os.path.join(base, sub, "bin", name)
                if os.path.exists(cand):
                    return cand
    except ImportError:
        pass
    found = shutil.which(name)
    if found:
        return found
    if os.path.exists(f"/usr/local/cuda/bin/{name}"):
        return f"/usr/local/cuda/bin/{name}"
    return None


def _tool_version(path: str) -> str:
    """The last line of ``TOOL --version`` (``Build cuda_13.0.r13.0/compiler.36424714_0``)."""
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "?"
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    return lines[-1] if lines else "?"


@functools.lru_cache(maxsize=None)
def _toolchain_versions() -> tuple:
    # the assembler choice is part of the key: cubins cached before ``auto`` sent setmaxnreg
    # kernels to ptxas by their PTX (session 18) may be nvJitLink's, setmaxnreg dropped
    out = {"assembly": "setmaxnreg-to-ptxas"}
    nj = _nvjitlink()
    if nj is not None:
        out["nvjitlink"] = "%d.%d" % tuple(nj.version())
    for tool in ("ptxas", "nvdisasm"):
        path = find_tool(tool)
        if path:
            out[f"{tool}_path"] = path
            out[tool] = _tool_version(path)
    return tuple(sorted(out.items()))


def toolchain_versions() -> dict:
    """Versions of the assemblers and the disassembler in use: part of the artifact cache key
    (a new nvJitLink, ptxas or nvdisasm rebuilds every cubin and its SASS) and recorded in each
    compiled kernel's launch metadata."""
    return dict(_toolchain_versions())


def ptx_to_cubin(ptx: str, arch: str, line_info: bool = True, extra: tuple = (),
                 prefer: str = "auto") -> "tuple[bytes, str]":
    """Assemble PTX for `arch` (``sm_90a``); returns (cubin, verbose log).

    `prefer`: ``auto`` (nvJitLink, else ptxas; ptxas for PTX that uses ``setmaxnreg``),
    ``nvjitlink`` or ``ptxas``.

    nvJitLink assembles as one unit of a link and drops ``setmaxnreg`` (C7504: "ignored to
    maintain compatibility across compilation units"): a warp-specialized kernel then keeps one
    register budget for every warp and may spill (session 18: 660 bytes at gemm_bf16_c2
    t256ds4, 5% slower on the H200). Whether it says so depends on its version (the device's did
    not, for some builds), so ``auto`` decides from the PTX itself, not from the log.
    """
    wants_ptxas = prefer == "auto" and SETMAXNREG.search(ptx) is not None
    if wants_ptxas and find_tool("ptxas") is not None:
        cubin, plog = _via_ptxas(ptx, arch, line_info, extra)
        return cubin, (SETMAXNREG_NOTE + "\n" + plog)
    nj = _nvjitlink() if prefer in ("auto", "nvjitlink") else None
    if nj is not None:
        cubin, log = _via_nvjitlink(nj, ptx, arch, line_info, extra)
        if SETMAXNREG.search(ptx) is not None and "C7504" not in log:
            log = SETMAXNREG_LOST + "\n" + log
        return cubin, log
    if prefer == "nvjitlink":
        raise ToolchainError("nvJitLink is not available (pip install nvidia-nvjitlink "
                             "cuda-bindings)")
    return _via_ptxas(ptx, arch, line_info, extra)


# a setmaxnreg instruction (not the word in a comment: PTX comments start with //)
SETMAXNREG = re.compile(r"^[^/\n]*\bsetmaxnreg\.", re.M)
SETMAXNREG_NOTE = ("note: the PTX uses setmaxnreg, which nvJitLink drops (C7504); assembled "
                   "with ptxas (whole-program mode)")
SETMAXNREG_LOST = ("warning: the PTX uses setmaxnreg but no ptxas was found: nvJitLink dropped "
                   "it (C7504), so every warp keeps one register budget (pip install "
                   "'tirxh[ptxas]')")


def _via_nvjitlink(nj, ptx: str, arch: str, line_info: bool, extra: tuple):
    opts = [f"-arch={arch}", "-verbose"] + (["-lineinfo"] if line_info else []) + list(extra)
    h = nj.create(len(opts), opts)
    try:
        data = ptx.encode()
        try:
            nj.add_data(h, nj.InputType.PTX, data, len(data), "kernel.ptx")
            nj.complete(h)
        except Exception as e:
            raise ToolchainError(f"nvJitLink failed for {arch}: {e}", _log(nj, h)) from None
        n = nj.get_linked_cubin_size(h)
        buf = bytearray(n)
        nj.get_linked_cubin(h, buf)
        return bytes(buf), _log(nj, h)
    finally:
        nj.destroy(h)


def _log(nj, h) -> str:
    parts = []
    for size_fn, get_fn in ((nj.get_error_log_size, nj.get_error_log),
                            (nj.get_info_log_size, nj.get_info_log)):
        try:
            n = size_fn(h)
            if n > 1:
                b = bytearray(n)
                get_fn(h, b)
                parts.append(b.rstrip(b"\0").decode(errors="replace"))
        except Exception:
            pass
    return "\n".join(p for p in parts if p)


def _via_ptxas(ptx: str, arch: str, line_info: bool, extra: tuple):
    ptxas = find_tool("ptxas")
    if ptxas is None:
        raise ToolchainError("no PTX assembler: install nvidia-nvjitlink + cuda-bindings, or a "
                             "CUDA toolkit (CUDA_HOME) providing ptxas")
    with tempfile.TemporaryDirectory(prefix="tirxh-") as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [ptxas, f"-arch={arch}", "-v", "-o", out, src] + (["-lineinfo"] if line_info else [])
        p = subprocess.run(cmd + list(extra), capture_output=True, text=True)
        if p.returncode != 0:
            raise ToolchainError(f"ptxas failed for {arch}", p.stderr + p.stdout)
        with open(out, "rb") as f:
            return f.read(), p.stderr + p.stdout


def cubin_to_sass(cubin: bytes) -> str:
    """Disassemble a cubin with nvdisasm (``-c -g`` for line info where present)."""
    tool = find_tool("nvdisasm")
    if tool is None:
        raise ToolchainError("nvdisasm not found: pip install nvidia-cuda-nvdisasm")
    with tempfile.TemporaryDirectory(prefix="tirxh-") as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        p = subprocess.run([tool, "-c", "-g", path], capture_output=True, text=True)
        if p.returncode != 0:
            p = subprocess.run([tool, "-c", path], capture_output=True, text=True)
        if p.returncode != 0:
            raise ToolchainError("nvdisasm failed", p.stderr)
        return p.stdout
