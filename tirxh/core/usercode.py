"""Calling the user's host-side code (a suite's ``inputs()``, ``reference()``, grid and the kernel
body at trace time): an exception there is the user's mistake, reported at the user's line with
a one-line cause, like a trace error, instead of as a crash with tirxh's and pluggy's frames.

`user_frame` finds the innermost frame that is the user's (not tirxh, not the standard library,
not an installed package such as numpy); the full traceback stays on the exception's cause, for
``--tb=long``.
"""

from __future__ import annotations

import os
import sysconfig
import traceback

from . import ir

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIB_DIRS = tuple({os.path.realpath(p) + os.sep for k in ("stdlib", "platstdlib", "purelib",
                                                         "platlib")
                   if (p := sysconfig.get_paths().get(k))})


def _is_users(filename: str) -> bool:
    if filename.startswith(_PKG_DIR) or filename.startswith("<"):
        return False
    return not os.path.realpath(filename).startswith(_LIB_DIRS)


def user_frame(exc: BaseException) -> "ir.Loc | None":
    """The innermost frame of `exc`'s traceback in the user's code, as an `ir.Loc`."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _is_users(f.filename)]
    if not frames:
        return None
    f = frames[-1]
    return ir.Loc(f.filename, f.lineno or 0, f.name)


def cause(exc: BaseException) -> str:
    """``NameError: name 'x' is not defined``: the exception in one line."""
    lines = traceback.format_exception_only(type(exc), exc)
    return " ".join(ln.strip() for ln in lines if ln.strip())
