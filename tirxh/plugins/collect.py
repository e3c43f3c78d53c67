"""Collection of kernel files as a plugin (``tirxh_collect_file``): a ``.py`` file matched by the
project's ``kernels`` globs becomes a `Module` whose items are its Suites' cases and its kernels."""

from tirxh.core.nodes import Module
from tirxh.core.pluginmanager import hookimpl


@hookimpl(trylast=True)  # trylast: a plugin may collect some files its own way and fall back here
def tirxh_collect_file(path, parent):
    if path.suffix == ".py":
        return Module(path, parent)
    return None
