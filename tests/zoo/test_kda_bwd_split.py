"""zoo/kernels/kda_bwd_split.py: the three pieces of the chunked backward together equal the
recurrence's gradient (and kda_ref's chunked reverse) for every gate regime and a chunk tail;
piece 3's decayed products in float32 with the block-local factors stay finite and close under
saturated gates where the naive factorization overflows; bad chunk sizes are refused."""

import numpy as np
import pytest

from tests.zoo.zoo_modules import load

S = load("kda_bwd_split")
R = load("kda_ref")
SCALE = 128 ** -0.5


def _sequence(gate, T_=150, H=2, seed=0):
    """One sequence's normalized, gated inputs (time first, float64), output gradients, h0."""
    rng = np.random.default_rng(seed)
    x = R.raw_inputs(rng, 1, T_, H, gate=gate)
    q, k, g, beta = R._prepare(x["q"], x["k"], x["g_raw"], x["beta"], x["A_log"], x["dt_bias"],
                               0, 0, T_)
    v = np.asarray(x["v"][0], np.float64)
    do = rng.standard_normal((T_, H, 128))
    dht = rng.standard_normal((H, 128, 128))
    return (q, k, v, g, beta, x["h0"][0].astype(np.float64), SCALE, do, dht)


def _close(a, b, tol):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float((np.abs(a - b) / (1.0 + np.abs(b))).max()) < tol


@pytest.mark.parametrize("gate", R.GATES)
def test_split_equals_the_recurrence_gradient(gate):
    args = _sequence(gate)
    split = S.split_backward(*args)
    rec = R._recurrent_backward(*args)
    chk = R._chunked_backward(*args)
    for name, a, b, c in zip(("dq", "dk", "dv", "dg", "dbeta", "dh0"), split, rec, chk):
        assert a.shape == b.shape, name
        assert _close(a, b, 1e-9), (name, gate)
        assert _close(a, c, 1e-11), (name, gate)


def test_chunk_states_end_in_the_forward_final_state():
    q, k, v, g, beta, h0, scale, _, _ = _sequence("mixed", T_=130)
    S0, last = S.chunk_states(k, v, g, beta, h0)
    _, ht = R.recurrent(q, k, v, g, beta, h0, scale)
    assert S0.shape == (2, 3, 128, 128)
    np.testing.assert_array_equal(S0[:, 0], h0)
    np.testing.assert_allclose(last, ht, rtol=1e-10, atol=1e-10)
    _, mid = R.recurrent(q[:64], k[:64], v[:64], g[:64], beta[:64], h0, scale)
    np.testing.assert_allclose(S0[:, 1], mid, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("gate", R.GATES)
def test_the_chain_split_equals_the_reverse_pass(gate):
    """Piece 2 as chain_operands -> chain -> chunk_pieces (kda_bwd_chain.py's split) gives
    chunk_reverse's every output; the chain's dS1 is the dS chunk_reverse walks with."""
    q, k, v, g, beta, h0, scale, do, dht = _sequence(gate)
    S0, _ = S.chunk_states(k, v, g, beta, h0)
    rev = S.chunk_reverse(q, k, v, g, beta, S0, scale, do, dht)
    ops = S.chain_operands(q, k, g, beta, scale, do)
    assert ops["N"].shape == (2, 3, 128, 128) and ops["eg"].shape == (2, 3, 128)
    dS1, dh0 = S.chain(ops["eg"], ops["N"], ops["B"], dht)
    np.testing.assert_array_equal(dS1[:, -1], dht)
    assert _close(dh0, rev["dh0"], 1e-12), gate
    got = S.chunk_pieces(q, k, v, g, beta, S0, scale, do, dS1)
    for name in ("dv",) + S.PIECES:
        assert _close(got[name], rev[name], 1e-12), (name, gate)
    # a wrong sign on N is not the reverse pass
    _, bad = S.chain(ops["eg"], -ops["N"], ops["B"], dht)
    assert not _close(bad, rev["dh0"], 1e-3)


def _pieces(gate, T_=128):
    args = _sequence(gate, T_=T_)
    q, k, v, g, beta, h0, scale, do, dht = args
    S0, _ = S.chunk_states(k, v, g, beta, h0)
    rev = S.chunk_reverse(q, k, v, g, beta, S0, scale, do, dht)
    return args, {n: rev[n] for n in S.PIECES}


def test_piece_3_in_float32_stays_finite_and_close_under_saturated_gates():
    """The kernels' arithmetic: block-local factors in float32 (deep gates: G reaches -320 in a
    chunk) give every gradient within 1e-4 of float64 relative to 1 + |ref|."""
    (q, k, v, g, beta, h0, scale, do, dht), pieces = _pieces("deep")
    G = R._cumulative(R._blocks(g, 2, 64))
    assert G.min() < -250            # saturated: exp(-G) overflows float32 (max ~e^88)
    ref = S.chunk_local(q, k, g, beta, scale, pieces)
    f32 = S.chunk_local(q, k, g, beta, scale, pieces, dtype=np.float32)
    for name, a, b in zip(("dq", "dk", "dg", "dbeta"), f32, ref):
        assert np.isfinite(a).all(), name
        assert _close(a, b, 1e-4), name


def test_the_naive_factorization_overflows_in_float32():
    """What the block-local factors avoid: (dX (k exp(-G))) exp(G) in float32 under saturated
    gates is inf or nan (so the float32 test above is not vacuous)."""
    (q, k, v, g, beta, h0, scale, do, dht), pieces = _pieces("deep")
    G = R._cumulative(R._blocks(g, 2, 64)).astype(np.float32)
    kc = R._blocks(k, 2, 64).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        naive = (pieces["dm"].astype(np.float32) @ (kc * np.exp(-G))) * np.exp(G)
    assert not np.isfinite(naive).all()


def test_pair_grads_match_the_direct_sums():
    rng = np.random.default_rng(1)
    C, K = 32, 8
    G = np.cumsum(-5.0 * rng.random((C, K)), 0)
    a, b = rng.standard_normal((C, K)), rng.standard_normal((C, K))
    dX = np.tril(rng.standard_normal((C, C)))
    E = np.exp(G[:, None, :] - G[None, :, :])            # [i, j, d]
    da = np.einsum("ij,jd,ijd->id", dX, b, E)
    db = np.einsum("ij,id,ijd->jd", dX, a, E)
    got = S.pair_grads(dX, a, b, G)
    np.testing.assert_allclose(got[0], da, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[1], db, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[2], a * da - b * db, rtol=1e-12, atol=1e-12)


def test_pair_grads_refuse_a_chunk_not_made_of_16_row_blocks():
    G = np.zeros((24, 4))
    with pytest.raises(ValueError, match=r"the chunk \(24 rows\) must be a multiple of 16"):
        S.pair_grads(np.zeros((24, 24)), G, G, G)


def test_the_forward_state_is_the_same_chain_walked_forward():
    """state_operands + chain over the chunks in order give chunk_states' S0 of every chunk
    and the final state (kda_bwd_chain.py's FORWARD walk)."""
    q, k, v, g, beta, h0, scale, _, _ = _sequence("deep", T_=150)
    S0, last = S.chunk_states(k, v, g, beta, h0)
    ops = S.state_operands(k, v, g, beta)
    xs, xn = S.chain(*(ops[n][:, ::-1] for n in ("eg", "N", "B")), h0)
    assert _close(xs[:, ::-1], S0, 1e-12) and _close(xn, last, 1e-12)
