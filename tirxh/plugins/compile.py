"""The compile step as a plugin: tracer + PTX emitter + nvJitLink (``tirxh_compile``)."""

from tirxh.core.compiler import compile_kernel
from tirxh.core.pluginmanager import hookimpl


@hookimpl(trylast=True)  # trylast: a plugin may provide its own compiler and still fall back here
def tirxh_compile(item, target, config):
    isa = getattr(config, "isa", None)
    cache = getattr(config, "cache", None)
    return compile_kernel(item.kernel, target, item.consts, isa=isa, cache=cache,
                          assemble=getattr(config, "assemble", True))
