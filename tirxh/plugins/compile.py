"""The compile step as a plugin (``tirxh_compile``): the compile pipeline of
`tirxh.core.compiler` with the run's instruction set, artifact cache and IR transforms."""

from tirxh.core.compiler import Pipeline
from tirxh.core.pluginmanager import hookimpl


@hookimpl(trylast=True)  # trylast: a plugin may provide its own compiler and still fall back here
def tirxh_compile(item, target, config):
    pipeline = Pipeline(target, isa=getattr(config, "isa", None),
                        cache=getattr(config, "cache", None),
                        registry=getattr(config, "transforms", None))
    return pipeline.build(item.kernel, item.consts, assemble=getattr(config, "assemble", True))
