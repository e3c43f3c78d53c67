"""tirxh: a compiler harness for GPU kernels written in TIRx, a PTX-level language in Python."""

__version__ = "0.1.0"

from tirxh.core.pluginmanager import hookimpl  # noqa: E402

__all__ = ["__version__", "hookimpl"]
