"""torch baselines for the zoo's reductions, scans and decode attention, eager and compiled.

``torch.softmax``, ``torch.topk``, ``torch.cumsum``, ``torch.sum`` (row sums),
``torch.cross_entropy`` (per row, no reduction) and ``torch.decode_sdpa`` (SDPA over the KV gathered from a paged cache), each also as
``torch.compile.<op>`` (``torch.compile`` of the same function, compiled in ``prepare()`` by one
call, outside the timed region). Registered only when
torch imports; like `torch_ops`, they run on torch tensors that alias the job's device buffers.

Each times the operation as a user would call it: it returns a new tensor from torch's caching
allocator rather than writing the job's output buffer (torch.softmax/topk/cumsum have no ``out=``
that inductor keeps), so these are timing baselines, not correctness references.
"""

from __future__ import annotations

from kcoral.baselines.torch_ops import TorchBaseline, torch_available
from kcoral.errors import JobFailure
from kcoral.plugins import hookimpl


def _int_arg(name: str, args: dict, key: str) -> int:
    v = args.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise JobFailure("validation.baseline", f"baseline {name!r}: args.{key} must be a "
                         f"positive integer; got {v!r}")
    return v


class _Zoo2Baseline(TorchBaseline):
    """One torch function of the role tensors; ``compiled=True`` wraps it in torch.compile and
    names it ``torch.compile.<op>`` (as kcoral/baselines/torch_zoo.py does)."""

    def __init__(self, compiled: bool = False):
        self.compiled = compiled
        if compiled:
            self.name = "torch.compile." + self.name[len("torch."):]

    def available(self, device):
        why = super().available(device)
        if why or not self.compiled:
            return why
        try:
            import triton  # noqa: F401  (optional dependency: inductor's GPU code generator)
        except Exception as e:
            return f"torch.compile needs triton on CUDA, which does not import: {e}"
        return None

    def function(self, args, tensors):  # pragma: no cover - interface
        """A function of the role tensors (in `roles` order) that runs the operation once;
        `tensors` (the same, filled with the timing inputs) for what is built once."""
        raise NotImplementedError

    def make(self, t, args):
        import torch  # optional dependency: the module imports without torch
        tensors = [t[r] for r in self.roles]
        fn = self.function(args, tensors)
        if self.compiled:
            fn = torch.compile(fn, dynamic=False)

        def run():
            return fn(*tensors)
        if self.compiled:
            run()  # compile now (prepare runs before timing), so no sample pays for it
        return run


class RowOp(_Zoo2Baseline):
    """args: the role buffers (``x``, rows x cols, and e.g. ``target``) and the integers in
    `int_args`; the run is ``op(torch, args, *tensors)`` over the last dimension."""

    def __init__(self, name: str, op, int_args=(), roles=("x",), compiled: bool = False):
        self.name, self.op, self.int_args, self.roles = name, op, tuple(int_args), tuple(roles)
        super().__init__(compiled)

    def function(self, args, tensors):
        import torch  # optional dependency (registered when installed; imported only where it runs)
        for key in self.int_args:
            _int_arg(self.name, args, key)
        return lambda *t: self.op(torch, args, *t)


def _cross_entropy(torch, a, x, target):
    import torch.nn.functional as F  # optional dependency, as above
    return F.cross_entropy(x, target, reduction="none")


ROW_OPS = (  # name, op(torch, args, *tensors), integer args, roles
    ("torch.softmax", lambda torch, a, x: torch.softmax(x, dim=-1), (), ("x",)),
    ("torch.topk", lambda torch, a, x: torch.topk(x, a["k"], dim=-1, largest=True, sorted=True),
     ("k",), ("x",)),
    ("torch.cumsum", lambda torch, a, x: torch.cumsum(x, dim=-1), (), ("x",)),
    ("torch.sum", lambda torch, a, x: torch.sum(x, dim=-1), (), ("x",)),
    ("torch.cross_entropy", _cross_entropy, (), ("x", "target")),
)


class DecodeSdpa(_Zoo2Baseline):
    """Decode attention through SDPA over the gathered paged KV.

    args: buffers ``q`` [B, Hq, D], ``k_cache``/``v_cache`` [pages * Hkv * page_size, D] (page-major,
    then head, then token: the zoo kernel's layout), ``block_table`` [B, max_pages] (int32) and
    ``seq_lens`` [B] (int32); integers ``kv_heads`` and ``page_size``. The run gathers each
    sequence's pages (``cache[block_table]``), masks tokens past ``seq_lens`` (no mask when every
    sequence fills its table, so SDPA may pick the flash kernel) and calls
    ``scaled_dot_product_attention`` with ``enable_gqa``.
    """

    name = "torch.decode_sdpa"
    roles = ("q", "k_cache", "v_cache", "block_table", "seq_lens")

    def function(self, args, tensors):
        hkv = _int_arg(self.name, args, "kv_heads")
        page = _int_arg(self.name, args, "page_size")
        import torch  # optional dependency (registered when installed; imported only where it runs)
        import torch.nn.functional as F  # optional dependency: torch
        q, _, _, block_table, seq_lens = tensors
        full = block_table.shape[1] * page
        lens = seq_lens.long()
        # built once from the timing inputs (prepare runs after they are filled): no mask when
        # every sequence fills its block table, so SDPA may choose its flash kernel
        mask = None if bool((lens == full).all()) else (
            torch.arange(full, device=q.device)[None, :] < lens[:, None])[:, None, None, :]

        def decode(q, k_cache, v_cache, block_table, seq_lens):
            b, hq, d = q.shape
            bt = block_table.long()

            def gather(cache):
                pages = cache.view(-1, hkv, page, d)[bt]          # [B, pages, Hkv, P, D]
                return pages.permute(0, 2, 1, 3, 4).reshape(b, hkv, full, d)
            return F.scaled_dot_product_attention(
                q.view(b, hq, 1, d), gather(k_cache), gather(v_cache), attn_mask=mask,
                enable_gqa=hq != hkv).view(b, hq, d)
        return decode



def baselines() -> list:
    """Every baseline of this module, eager and compiled."""
    out = []
    for compiled in (False, True):
        out += [RowOp(name, op, ints, roles, compiled) for name, op, ints, roles in ROW_OPS]
        out.append(DecodeSdpa(compiled))
    return out


@hookimpl
def kcoral_register_baselines(registry):
    if torch_available():
        for b in baselines():
            registry.add(b, owner="kcoral.baselines.torch_zoo2")
