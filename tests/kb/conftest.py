"""Fixtures for the knowledge base: small zoos written into a temporary directory."""

import textwrap

import pytest

from tirxh.core.registry import default_isa

# two kernels in one module, a helper only the second uses, one used by both, tags both ways
PAIR = '''
"""Two activations: relu and square (f32).

Techniques: elementwise, predicated tail.

Tags: elementwise, tail-handling
"""

import numpy as np

import tirxh.lang as T

TAGS = ("elementwise", "tail-handling")
BLOCK = 64


def load(p, i):
    return T.ptx.ld.global_.f32(p.at(i))


# squares its input
def square_of(x):
    return x * x


@T.kernel(grid=lambda n: T.cdiv(n, BLOCK), block=BLOCK)
def relu(x: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    """out = max(x, 0)"""
    i = T.ctaid.x * BLOCK + T.tid.x
    with T.if_(i < n):
        T.ptx.st.global_.f32(out.at(i), T.ptx.max.f32(load(x, i), 0.0))


@T.kernel(grid=lambda n: T.cdiv(n, BLOCK), block=BLOCK)
def square(x: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * BLOCK + T.tid.x
    with T.if_(i < n):
        T.ptx.st.global_.f32(out.at(i), square_of(load(x, i)))


def inputs(rng, n):
    return dict(x=rng.standard_normal(n, dtype=np.float32), out=np.zeros(n, np.float32), n=n)


RELU = T.suite(relu, inputs=inputs, reference=lambda x, **_: {"out": np.maximum(x, 0)},
               outputs=["out"], cases=[T.case("n100", n=100), T.case("n1M", n=1 << 20,
                                                                      small=False)],
               flops=lambda n: n, bytes=lambda n: 8 * n)
SQUARE = T.suite(square, inputs=inputs, reference=lambda x, **_: {"out": x * x},
                 outputs=["out"], cases=[T.case("n77", n=77)])
'''

# a compile-only kernel with a constant, and one whose trace fails (unknown instruction)
ODD = '''
"""Odd ones: a constant-sized store and a kernel that does not trace."""

import tirxh.lang as T


@T.kernel(block=32)
def fill(out: T.gptr[T.f32], V: T.const = 3):
    T.ptx.st.global_.f32(out.at(T.tid.x), float(V))


@T.kernel(block=32)
def broken(out: T.gptr[T.f32]):
    T.ptx.st.globl.f32(out.at(T.tid.x), 1.0)
'''

# kernels made by a factory (a `name=` on the decorator, bound to module variables)
FACTORY = '''
"""Scaled copies made by a factory: out = k * x (f32)."""

import numpy as np

import tirxh.lang as T


def _make(name: str, k: float):
    @T.kernel(grid=lambda n: T.cdiv(n, 32), block=32, name=name)
    def kernel(x: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
        i = T.ctaid.x * 32 + T.tid.x
        with T.if_(i < n):
            T.ptx.st.global_.f32(out.at(i), T.ptx.ld.global_.f32(x.at(i)) * k)
    return kernel


double = _make("double", 2.0)
triple = _make("triple", 3.0)


def inputs(rng, n):
    return dict(x=rng.standard_normal(n, dtype=np.float32), out=np.zeros(n, np.float32), n=n)


def _suites(k, factor):
    """A small and a large suite for `k` (two suites from one call, as gemm_sm90 makes them)."""
    return tuple(T.suite(k, inputs=inputs, reference=lambda x, **_: {"out": factor * x},
                         outputs=["out"], cases=[T.case(name, n=n, small=small)])
                 for name, n, small in (("n50", 50, True), ("n1M", 1 << 20, False)))


DOUBLE, DOUBLE_LARGE = _suites(double, 2)
TRIPLE, TRIPLE_LARGE = _suites(triple, 3)
'''

README = '''
# A test zoo

| module | what it shows | H200 |
| --- | --- | --- |
| `kernels/pair.py` | two activations \\| one file | 1.0 TB/s |
| `kernels/odd.py` | odd ones | compile-only |
'''

TOML = '[project]\nname = "testzoo"\ntargets = ["sm_90a"]\nkernels = ["kernels/*.py"]\n'


@pytest.fixture
def make_zoo(tmp_path):
    """`make_zoo(pair=..., odd=..., readme=...)`: a zoo directory with those kernel modules."""
    def make(readme: str = README, **modules):
        root = tmp_path / "zoo"
        (root / "kernels").mkdir(parents=True, exist_ok=True)
        (root / "tirx.toml").write_text(TOML)
        (root / "README.md").write_text(readme)
        for name, text in modules.items():
            (root / "kernels" / f"{name}.py").write_text(textwrap.dedent(text).lstrip("\n"))
        return root
    return make


@pytest.fixture(scope="session")
def isa():
    return default_isa()
