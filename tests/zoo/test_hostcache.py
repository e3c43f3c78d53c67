"""zoo/kernels/hostcache.py: large inputs kept per generator state (a few keys, read-only), each
reference computed once per cached input set and name, uncached inputs recomputed."""

import numpy as np
import pytest

from ._zoo import load

H = load("hostcache")


def test_keys_follow_the_generator_state():
    a, b = np.random.default_rng(1), np.random.default_rng(1)
    assert H.rng_key(a, 4, 5) == H.rng_key(b, 4, 5)
    assert H.rng_key(a, 4, 5) != H.rng_key(np.random.default_rng(2), 4, 5)
    a.standard_normal(3)                          # a draw moves the state: another key
    assert H.rng_key(a, 4, 5) != H.rng_key(b, 4, 5)
    assert H.rng_key(b, 4, 5) != H.rng_key(b, 4, 6)


def test_arrays_are_made_once_per_key_read_only_and_the_oldest_evicted():
    cache, made = H.Cache(2), []

    def make(tag):
        made.append(tag)
        return {"x": np.full(3, float(len(made)))}
    x1 = cache.arrays("k1", lambda: make("k1"))
    assert cache.arrays("k1", lambda: make("again")) is x1 and made == ["k1"]
    with pytest.raises(ValueError, match="read-only"):
        x1["x"][0] = 5.0
    cache.arrays("k2", lambda: make("k2"))
    cache.arrays("k3", lambda: make("k3"))         # size 2: k1 goes
    assert cache.arrays("k1", lambda: make("k1 again"))["x"][0] == 4.0
    assert made == ["k1", "k2", "k3", "k1 again"]


def test_references_are_computed_once_per_cached_inputs_and_name():
    cache, calls = H.Cache(1), []
    arrays = cache.arrays("k", lambda: {"a": np.ones(2), "b": np.zeros(2)})

    def compute(tag):
        calls.append(tag)
        return tag
    assert cache.reference(arrays, "c", lambda: compute("c1")) == "c1"
    assert cache.reference({"a": arrays["a"]}, "c", lambda: compute("c2")) == "c1"
    assert cache.reference(arrays, "other", lambda: compute("o")) == "o"
    assert calls == ["c1", "o"]
    fresh = {"a": np.ones(2)}                      # equal values, not the cached object
    assert cache.reference(fresh, "c", lambda: compute("f1")) == "f1"
    assert cache.reference(fresh, "c", lambda: compute("f2")) == "f2"
