"""Golden PTX for small kernels; regenerate with TIRXH_REGEN_GOLDEN=1 after a deliberate change."""

import os
import re
from pathlib import Path

import pytest

from tests.lang import kernels_golden as kg

GOLDEN_DIR = Path(__file__).parent / "golden"
TARGETS = ["sm_80", "sm_90a"]


def _normalize(ptx: str) -> str:
    # absolute source paths differ per checkout; keep the basename
    return re.sub(r'"[^"]*/([^/"]+)"', r'"\1"', re.sub(r"\(\S*/([^/\s]+):(\d+)\)", r"(\1:\2)", ptx))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kernel,consts", kg.GOLDEN, ids=[k.name for k, _ in kg.GOLDEN])
def test_golden(kernel, consts, target):
    ptx = _normalize(kernel.ptx(target, **consts))
    path = GOLDEN_DIR / f"{kernel.name}.{target}.ptx"
    if os.environ.get("TIRXH_REGEN_GOLDEN") or not path.exists():
        if os.environ.get("CI") and not path.exists():
            pytest.fail(f"missing golden file {path}")
        path.write_text(ptx)
    assert ptx == path.read_text(), f"PTX of {kernel.name} for {target} changed; see {path}"


@pytest.mark.parametrize("kernel,consts", kg.GOLDEN, ids=[k.name for k, _ in kg.GOLDEN])
def test_golden_assembles(kernel, consts):
    ck = kernel.compile("sm_90a", **consts)
    assert ck.cubin and ck.cubin[:4] == b"\x7fELF"
    assert ck.resources.registers > 0
