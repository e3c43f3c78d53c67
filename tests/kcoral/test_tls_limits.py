"""Optional TLS (token over an encrypted channel) and message size limits."""

import shutil
import subprocess

import pytest

from kcoral.client import KCoralClient, KCoralError
from kcoral.server import Daemon

from .conftest import fake_job


@pytest.fixture
def cert(tmp_path):
    if not shutil.which("openssl"):
        pytest.skip("needs the openssl command to make a self-signed certificate")
    key, crt = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(crt)], check=True, capture_output=True)
    return crt, key


def test_tls_with_token(tmp_path, cert):
    crt, key = cert
    d = Daemon({"server": {"tls_cert": str(crt), "tls_key": str(key)},
                "boards": {"fake": {"count": 1}}}, state_dir=tmp_path / "s", host="localhost",
               port=0, token="t0k").start()
    try:
        addr = f"localhost:{d.port}"
        with KCoralClient(addr, token="t0k", ca_file=str(crt)) as c:
            assert c.run(fake_job(c))["state"] == "done"
        with KCoralClient(addr, token="bad", ca_file=str(crt)) as c:
            with pytest.raises(KCoralError, match="UNAUTHENTICATED"):
                c.status()
        with KCoralClient(addr, token="t0k", timeout=3) as c:  # plaintext to a TLS port
            with pytest.raises(KCoralError, match="UNAVAILABLE"):
                c.status()
    finally:
        d.stop(1)


def test_message_size_limit(tmp_path):
    d = Daemon({"server": {"max_message_mb": 1}, "boards": {"fake": {"count": 1}}},
               state_dir=tmp_path / "s", port=0).start()
    try:
        with KCoralClient(d.address) as c:
            doc = fake_job(c)
            doc["name"] = "x" * (2 << 20)
            with pytest.raises(KCoralError, match="RESOURCE_EXHAUSTED"):
                c.run(doc)
            # blobs bigger than the limit still travel: they are chunked below it
            data = bytes(3 << 20)
            dg = c.put_blob(data)
            assert c.upload() == [dg]
    finally:
        d.stop(1)


def test_a_port_in_use_is_a_clear_error_and_leaves_no_workers(tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    d = Daemon({"boards": {"fake": {"count": 1}}}, state_dir=tmp_path / "s", port=port)
    try:
        with pytest.raises(Exception, match=f"127.0.0.1:{port}"):
            d.start()
        handles = [b.executor for b in d.scheduler.boards.values()]
        assert handles and all(not h.alive() for h in handles)
    finally:
        s.close()
