"""Content-addressed blobs: digests verified, chunked frames checked, arrays round-trip."""

import numpy as np
import pytest

from kcoral.blobs import (CHUNK, BlobError, BlobStore, ChunkAssembler, array_bytes,
                          array_from_bytes, chunks, digest)


def test_put_get_missing(tmp_path):
    s = BlobStore(tmp_path)
    d = s.put(b"hello")
    assert d == digest(b"hello") and s.get(d) == b"hello"
    other = digest(b"other")
    assert s.missing([d, other, other]) == [other]
    with pytest.raises(BlobError, match="not in the store"):
        s.get(other)
    with pytest.raises(BlobError, match="has sha256"):
        s.put(b"x", expect=other)
    with pytest.raises(BlobError, match="not a sha256"):
        s.has("../../etc/passwd")


def test_chunked_reassembly(tmp_path):
    s = BlobStore(tmp_path)
    data = np.random.default_rng(0).bytes(2 * CHUNK + 123)
    frames = list(chunks(data))
    assert len(frames) == 3 and all(len(f[3]) <= CHUNK for f in frames)
    assert CHUNK < (4 << 20) // 2  # frames stay well under gRPC's 4 MiB message limit
    a = ChunkAssembler(s)
    for f in frames:
        a.feed(*f)
    assert a.finish() == [digest(data)] and s.get(digest(data)) == data


def test_chunk_errors(tmp_path):
    s = BlobStore(tmp_path)
    data = b"x" * 100
    dg = digest(data)
    a = ChunkAssembler(s)
    with pytest.raises(BlobError, match="offset 10, expected 0"):
        a.feed(dg, 100, 10, data[:10], False)
    a = ChunkAssembler(s)
    a.feed(dg, 100, 0, data[:50], False)
    with pytest.raises(BlobError, match="stream ended after 50 of 100"):
        a.finish()
    a = ChunkAssembler(s)
    with pytest.raises(BlobError, match="has sha256"):
        a.feed(dg, 3, 0, b"abc", True)
    a = ChunkAssembler(s, max_blob=10)
    with pytest.raises(BlobError, match="exceeds the limit"):
        a.feed(dg, 100, 0, data, True)


@pytest.mark.parametrize("dtype", ["float32", "int8", "bfloat16", "float8_e4m3fn"])
def test_array_round_trip(dtype):
    import ml_dtypes
    dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    a = np.arange(12).reshape(3, 4).astype(dt)
    b = array_from_bytes(array_bytes(a))
    assert b.dtype == dt and b.shape == (3, 4)
    assert np.array_equal(a.astype(np.float32), b.astype(np.float32))
