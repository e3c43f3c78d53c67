"""Inputs shared by the tests of kda_bwd_prep3g and piece 3 (kda_bwd_local_lg) that run the
prep on piece 3's small cases: the raw tensors both read, and the prep's arguments."""

from tests.zoo.zoo_modules import load

P3 = load("kda_bwd_prep3")
PTL = load("kda_bwd_prep_tiles")
LT = load("kda_bwd_local_tc")
RAW = ("q", "k", "g_raw", "v", "beta", "A_log", "dt_bias", "do", "chunk_tok", "chunk_rows")


def case(name):
    """Piece 3's small case `name` (kda_bwd_local_tc.SUITE)."""
    return next(c for c in LT.SUITE.cases if c.name == name)


def prep_args(x):
    """kda_bwd_prep3g's arguments from piece 3's inputs `x`: the raw tensors, and zeroed outputs
    and tile buffers of the right sizes."""
    chunks, H = x["dqe"].shape[:2]
    return dict({n: x[n] for n in RAW}, **P3.P2._outputs(H, chunks), **PTL.outputs(H, chunks),
                **PTL.gate_outputs(H, chunks))
