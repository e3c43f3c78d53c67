"""``fla.chunk_kda``: Flash Linear Attention's chunked Kimi Delta Attention forward, registered
only when ``fla`` (flash-linear-attention) imports."""

from __future__ import annotations

from kcoral.baselines.torch_ops import TorchBaseline, torch_available
from kcoral.plugins import hookimpl


class ChunkKda(TorchBaseline):
    """args: q, k, v, g, beta, out (buffer names; [B, T, H, K] layouts as FLA expects),
    optional ``scale``. Calls ``fla.ops.kda.chunk_kda(q, k, v, g, beta, scale=...)``."""

    name = "fla.chunk_kda"
    roles = ("q", "k", "v", "g", "beta", "out")

    def make(self, t, args):
        from fla.ops.kda import chunk_kda  # optional dependency (operator-installed)
        scale = args.get("scale")

        def run():
            o = chunk_kda(t["q"], t["k"], t["v"], t["g"], t["beta"], scale=scale)
            o = o[0] if isinstance(o, tuple) else o
            t["out"].copy_(o.reshape(t["out"].shape))
        return run


def fla_available() -> bool:
    if not torch_available():
        return False
    try:
        import fla.ops.kda  # noqa: F401 - optional dependency: the import is the availability test
        return True
    except Exception:
        return False


@hookimpl
def kcoral_register_baselines(registry):
    if fla_available():
        registry.add(ChunkKda(), owner="kcoral.baselines.fla_ops")
