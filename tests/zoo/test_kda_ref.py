"""zoo/kernels/kda_ref.py: the token-by-token and chunked float64 KDA references agree (mixed,
saturated and slow gates, T not a multiple of the chunk, varlen packs); the hand-derived backward
matches finite differences for every input; FLA's own naive references agree where torch and FLA
import; bad inputs are refused with the rule they break."""

import numpy as np
import pytest

from tests.zoo.zoo_modules import load

R = load("kda_ref")
# the public varlen pack [1300, 547, 2048, 963, 271, 3063] scaled by 1/32 for the CPU: one
# sequence of exactly a chunk, short ones, one of 1.5 chunks
PACK = (41, 17, 64, 30, 8, 96)


def _cu(lens):
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)


@pytest.mark.parametrize("gate", R.GATES)
@pytest.mark.parametrize("T,chunk", [(150, 64), (64, 64), (37, 16)])
def test_chunked_matches_recurrent(gate, T, chunk):
    rng = np.random.default_rng(7)
    x = R.raw_inputs(rng, 2, T, 3, K=32, V=16, gate=gate)
    o1, h1 = R.forward(**x, method="recurrent")
    o2, h2 = R.forward(**x, method="chunked", chunk=chunk)
    np.testing.assert_allclose(o2, o1, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(h2, h1, rtol=1e-9, atol=1e-12)


def test_varlen_pack_is_each_sequence_alone():
    rng = np.random.default_rng(3)
    x = R.raw_inputs(rng, 1, sum(PACK), 2, K=16, V=8, N=len(PACK), gate="deep")
    cu = _cu(PACK)
    o, ht = R.forward(**x, cu_seqlens=cu)
    o_rec, ht_rec = R.forward(**x, cu_seqlens=cu, method="recurrent")
    np.testing.assert_allclose(o, o_rec, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ht, ht_rec, rtol=1e-9, atol=1e-12)
    for n, (a, b) in enumerate(zip(cu, cu[1:])):     # one sequence as a batch of one
        one = {name: x[name][:, a:b] for name in ("q", "k", "v", "g_raw", "beta")}
        o1, h1 = R.forward(**one, A_log=x["A_log"], dt_bias=x["dt_bias"], h0=x["h0"][n:n + 1])
        np.testing.assert_allclose(o[:, a:b], o1, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(ht[n], h1[0], rtol=1e-12, atol=1e-14)


def test_deep_decay_forgets_the_initial_state():
    """With every channel saturated at the bound (a decay of exp(-5) per token) the initial
    state's share of the state after 64 tokens is of order exp(-320), far below float32's
    smallest number: the chunked form (exp(+-G) up to e^320) must still be exact."""
    rng = np.random.default_rng(5)
    x = R.raw_inputs(rng, 1, 64, 1, K=8, V=4, gate="deep")
    x["dt_bias"] = np.full_like(x["dt_bias"], 30.0)
    assert np.allclose(R.safe_gate(x["g_raw"], x["A_log"], x["dt_bias"]), -5.0)
    o, ht = R.forward(**x)
    o0, ht0 = R.forward(**dict(x, h0=np.zeros_like(x["h0"])))
    np.testing.assert_allclose(ht, ht0, rtol=1e-12, atol=1e-100)
    assert np.abs(o[0, 0] - o0[0, 0]).max() > 1e-3        # the first token still sees h0
    o_rec, ht_rec = R.forward(**x, method="recurrent")
    np.testing.assert_allclose(o, o_rec, rtol=1e-9, atol=1e-12)


def test_gate_and_normalization_follow_fla():
    g = R.safe_gate(np.array([[[0.0, 50.0, -50.0]]]), np.array([np.log(2.0)]),
                    np.array([[1.0, 0.0, 0.0]]))
    np.testing.assert_allclose(g[0, 0], [-5 / (1 + np.exp(-2.0)), -5.0, 0.0], atol=1e-15)
    x = np.array([[3.0, 4.0]])
    np.testing.assert_allclose(R.l2norm(x), x / np.sqrt(25 + 1e-6))


def _grad_case(seed, lens, gate, K, V, H=2):
    """float64 inputs of a varlen pack, its cu_seqlens and random output gradients."""
    rng = np.random.default_rng(seed)
    x = R.raw_inputs(rng, 1, sum(lens), H, K=K, V=V, N=len(lens), gate=gate)
    x = {n: np.asarray(a, np.float64) for n, a in x.items()}
    cu = _cu(lens)
    o, ht = R.forward(**x, cu_seqlens=cu)
    return x, cu, rng.standard_normal(o.shape), rng.standard_normal(ht.shape), rng


def _loss(x, do, dht, cu):
    o, ht = R.forward(**x, cu_seqlens=cu, method="recurrent")
    return float((o * do).sum() + (ht * dht).sum())


@pytest.mark.parametrize("gate", ["mixed", "deep"])
def test_backward_matches_finite_differences(gate):
    x, cu, do, dht, rng = _grad_case(11, (7, 13), gate, K=8, V=4)
    grad = R.backward(**x, do=do, dht=dht, cu_seqlens=cu)
    wrt = {"q": "dq", "k": "dk", "v": "dv", "g_raw": "dg", "beta": "dbeta", "h0": "dh0",
           "A_log": "dA_log", "ddt_bias": None, "dt_bias": "ddt_bias"}
    eps = 1e-6
    for name, gname in wrt.items():
        if gname is None:
            continue
        scale = np.abs(grad[gname]).max()
        for _ in range(8):
            idx = tuple(int(rng.integers(0, s)) for s in x[name].shape)
            plus, minus = dict(x), dict(x)
            plus[name], minus[name] = x[name].copy(), x[name].copy()
            plus[name][idx] += eps
            minus[name][idx] -= eps
            fd = (_loss(plus, do, dht, cu) - _loss(minus, do, dht, cu)) / (2 * eps)
            # central differences of a loss of order 1 with eps = 1e-6: ~1e-9 of rounding noise
            assert abs(fd - grad[gname][idx]) <= 1e-8 + 1e-6 * (scale + abs(fd)), (name, idx)


@pytest.mark.parametrize("gate", R.GATES)
def test_chunked_backward_matches_the_recurrence(gate):
    """The chunked algorithm's reverse (dDelta, dR, dTb, dA through (I + A)^-1, the pairwise
    decayed products, dg as a reverse cumulative sum) over sequences of 1, 2 and 3 chunks."""
    x, cu, do, dht, _ = _grad_case(13, (7, 70, 130), gate, K=16, V=8)
    rec = R.backward(**x, do=do, dht=dht, cu_seqlens=cu)
    chk = R.backward(**x, do=do, dht=dht, cu_seqlens=cu, method="chunked")
    for name, want in rec.items():
        np.testing.assert_allclose(chk[name], want, rtol=1e-9, atol=1e-12 * np.abs(want).max())
    with pytest.raises(ValueError, match=r"backward: method must be 'chunked' or 'recurrent'"):
        R.backward(**x, do=do, dht=dht, cu_seqlens=cu, method="fast")


def test_backward_head_groups_give_the_same_gradients():
    """Heads run in groups on a thread pool (each group walks every sequence, its dA_log and
    ddt_bias sums written by it alone): groups of 2 of 5 heads equal one group of all of them."""
    x, cu, do, dht, _ = _grad_case(17, (9, 70), "mixed", K=8, V=4, H=5)
    one = R.backward(**x, do=do, dht=dht, cu_seqlens=cu, method="chunked", heads=5)
    two = R.backward(**x, do=do, dht=dht, cu_seqlens=cu, method="chunked", heads=2)
    for name, want in one.items():   # a sum over a group's heads may round in another order
        np.testing.assert_allclose(two[name], want, rtol=1e-13, atol=0, err_msg=name)


def test_unit_scale_brings_the_smallest_rms_to_one():
    a, b = np.full(10, 0.3), np.full(10, 40.0)
    c = R.unit_scale(a, b)
    assert c == 4.0 and 1 <= 0.3 * c < 2
    with pytest.raises(ValueError, match="all zeros"):
        R.unit_scale(np.zeros(3))


def test_ref_cache_serves_the_same_arrays_only():
    cache = R.RefCache(size=2)
    a, b = np.ones(3), np.zeros(3)
    cache.put({"a": a}, {"o": 1})
    assert cache.get({"a": a, "b": b}) == {"o": 1}
    assert cache.get({"a": a.copy()}) is None
    cache.put({"a": b}, {"o": 2})
    cache.put({"a": b}, {"o": 3})
    assert cache.get({"a": a}) is None           # evicted: two entries kept


@pytest.mark.parametrize("cu,B,match", [
    ([0, 5, 9], 2, r"varlen pack \(cu_seqlens\) has B = 1, got B = 2"),
    ([0, 5, 8], 1, r"cu_seqlens must rise from 0 to T = 9, got \[0, 5, 8\]"),
    ([1, 5, 9], 1, r"must rise from 0"),
    ([0, 6, 5, 9], 1, r"must rise from 0"),
])
def test_bad_cu_seqlens_are_refused(cu, B, match):
    with pytest.raises(ValueError, match=match):
        R.spans(B, 9, np.array(cu))


def test_bad_method_gate_and_unbounded_decay_are_refused():
    rng = np.random.default_rng(0)
    x = R.raw_inputs(rng, 1, 4, 1, K=4, V=4)
    with pytest.raises(ValueError, match=r"method must be 'chunked' or 'recurrent', got 'fast'"):
        R.forward(**x, method="fast")
    with pytest.raises(ValueError, match=r"gate must be one of \('mixed', 'deep', 'slow'\)"):
        R.raw_inputs(rng, 1, 4, 1, gate="steep")
    g = np.full((4, 1, 4), -200.0)
    with pytest.raises(ValueError, match=r"cumulative log-decay reaches -800: exp\(-G\) overflows"):
        R.chunked(R.l2norm(x["q"][0]), R.l2norm(x["k"][0]), np.ones((4, 1, 4)), g,
                  np.ones((4, 1)), np.zeros((1, 4, 4)), 0.5)


def test_matches_fla_naive_references():
    """FLA's naive_recurrent_kda / naive_chunk_kda on the gated, normalized inputs (where torch
    and FLA import: the GPU machine carries them)."""
    torch = pytest.importorskip("torch")
    naive = pytest.importorskip("fla.ops.kda.naive")
    rng = np.random.default_rng(2)
    x = R.raw_inputs(rng, 1, 128, 2, K=32, V=16, gate="deep")
    o, ht = R.forward(**x)
    q, k = R.l2norm(x["q"]), R.l2norm(x["k"])
    g = R.safe_gate(x["g_raw"], x["A_log"], x["dt_bias"])
    args = [torch.from_numpy(np.asarray(a, np.float64)) for a in (q, k, x["v"], g, x["beta"])]
    h0 = torch.from_numpy(x["h0"].astype(np.float64))
    for fn in (naive.naive_recurrent_kda, naive.naive_chunk_kda):
        o_fla, ht_fla = fn(*args, initial_state=h0, output_final_state=True)
        np.testing.assert_allclose(o_fla.double().numpy(), o, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(ht_fla.double().numpy(), ht, rtol=1e-4, atol=1e-5)
