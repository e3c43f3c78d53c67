"""The transport side of authentication: TLS credentials, and client channels that carry the
token (metadata ``authorization: Bearer <token>``).

Who a token names, and what it may do, is `kcoral.identity`; the servicer checks it on every
call (the standard health service stays open so load balancers and `grpc_health_probe` can
probe it). A daemon bound beyond loopback must have a token or a credentials file.
"""

from __future__ import annotations

import ipaddress

import grpc

def is_loopback(host: str) -> bool:
    h = host.strip("[]")
    if h in ("localhost", ""):
        return h == "localhost"
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


class TokenAuth(grpc.AuthMetadataPlugin):
    """Client side: attach the token to every call."""

    def __init__(self, token: str):
        self._token = token

    def __call__(self, context, callback):
        callback((("authorization", f"Bearer {self._token}"),), None)


def server_credentials(cert_file: str, key_file: str):
    with open(cert_file, "rb") as c, open(key_file, "rb") as k:
        return grpc.ssl_server_credentials([(k.read(), c.read())])


def channel(address: str, token: "str | None" = None, ca_file: "str | None" = None,
            options=()) -> grpc.Channel:
    """A client channel: TLS when `ca_file` is given; the token rides in call metadata (over
    plaintext for loopback/test use, where grpc does not allow call credentials)."""
    opts = [("grpc.max_send_message_length", 8 << 20),
            ("grpc.max_receive_message_length", 64 << 20), *options]
    if ca_file:
        with open(ca_file, "rb") as f:
            creds = grpc.ssl_channel_credentials(f.read())
        if token:
            creds = grpc.composite_channel_credentials(
                creds, grpc.metadata_call_credentials(TokenAuth(token)))
        return grpc.secure_channel(address, creds, options=opts)
    ch = grpc.insecure_channel(address, options=opts)
    if token:
        ch = grpc.intercept_channel(ch, _MetadataAdder(token))
    return ch


class _MetadataAdder(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                     grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    def __init__(self, token):
        self._md = ("authorization", f"Bearer {token}")

    def _details(self, d):
        md = list(d.metadata or []) + [self._md]
        return _Details(d.method, d.timeout, md, d.credentials, getattr(d, "wait_for_ready", None),
                        getattr(d, "compression", None))

    def intercept_unary_unary(self, cont, d, req):
        return cont(self._details(d), req)

    def intercept_unary_stream(self, cont, d, req):
        return cont(self._details(d), req)

    def intercept_stream_unary(self, cont, d, it):
        return cont(self._details(d), it)

    def intercept_stream_stream(self, cont, d, it):
        return cont(self._details(d), it)


class _Details(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method, self.timeout, self.metadata = method, timeout, metadata
        self.credentials, self.wait_for_ready, self.compression = (credentials, wait_for_ready,
                                                                   compression)
