"""Where and how to reach one Connect cluster: URL, credentials, TLS, and keeping secrets out of text.

Separate because it is configuration, not transport: :class:`ConnectEndpoint` and :class:`ConnectAuth`
are built by the reconciler from a ConnectCluster and its Secrets, and this is the one place that
knows which values are secret (``_secrets_of``), how they are masked in reprs and URLs, and how PEM
text becomes an ``ssl.SSLContext``. The client only consumes what is built here.
"""

from __future__ import annotations

import base64
import functools
import os
import ssl
import tempfile
from collections.abc import Generator
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import urlsplit, urlunsplit

import certifi
import httpx

_MASK: Final = "***"
#: Secrets shorter than this are not scrubbed from messages (it would mangle ordinary text).
_MIN_SCRUB_LEN: Final = 4


@dataclass(frozen=True, repr=False)
class ConnectAuth:
    """Credentials for one Connect cluster. ``repr`` masks the password/token."""

    kind: Literal["basic", "bearer"]
    username: str | None = None
    password: str | None = None
    token: str | None = None

    def __post_init__(self) -> None:
        if self.kind == "basic":
            if self.username is None or self.password is None:
                raise ValueError("basic auth needs username and password")
        elif self.kind == "bearer":
            if not self.token:
                raise ValueError("bearer auth needs a token")
        else:
            raise ValueError(f"unknown auth kind {self.kind!r}; expected 'basic' or 'bearer'")

    @classmethod
    def basic(cls, username: str, password: str) -> ConnectAuth:
        return cls(kind="basic", username=username, password=password)

    @classmethod
    def bearer(cls, token: str) -> ConnectAuth:
        return cls(kind="bearer", token=token)

    def __repr__(self) -> str:
        if self.kind == "basic":
            password = _MASK if self.password is not None else "None"
            return f"ConnectAuth(kind='basic', username={self.username!r}, password={password})"
        token = _MASK if self.token is not None else "None"
        return f"ConnectAuth(kind={self.kind!r}, token={token})"


@dataclass(frozen=True, repr=False)
class ConnectEndpoint:
    """Where and how to reach one Connect cluster.

    ``ca_pem``: PEM text of the CA bundle that signs Connect's certificate; it *replaces* the default
    (certifi) trust store.  ``client_cert_pem``/``client_key_pem``: PEM text for mutual TLS (the key may
    also be appended to the certificate PEM).  Encrypted keys are not supported.
    """

    url: str
    auth: ConnectAuth | None = None
    ca_pem: str | None = None
    client_cert_pem: str | None = None
    client_key_pem: str | None = None
    insecure_skip_verify: bool = False
    timeout_seconds: float = 30.0

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"Connect URL must start with http:// or https://: {_redact_url(self.url)!r}")
        if not self.timeout_seconds > 0:
            raise ValueError("timeout_seconds must be > 0")
        if self.client_key_pem and not self.client_cert_pem:
            raise ValueError("client_key_pem given without client_cert_pem")

    def __repr__(self) -> str:
        return (
            f"ConnectEndpoint(url={_redact_url(self.url)!r}, auth={self.auth!r}, "
            f"ca_pem={_presence(self.ca_pem)}, client_cert_pem={_presence(self.client_cert_pem)}, "
            f"client_key_pem={_MASK if self.client_key_pem else None}, "
            f"insecure_skip_verify={self.insecure_skip_verify!r}, timeout_seconds={self.timeout_seconds!r})"
        )


def _presence(value: str | None) -> str:
    return "<set>" if value else "None"


def _redact_url(url: str) -> str:
    """Mask the password of ``scheme://user:password@host`` URLs."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        userinfo, _, hostport = parts.netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        return urlunsplit(parts._replace(netloc=f"{user}:{_MASK}@{hostport}"))
    except ValueError:
        return "<unparsable url>"


def _secrets_of(endpoint: ConnectEndpoint) -> tuple[str, ...]:
    secrets: list[str] = []
    auth = endpoint.auth
    if auth is not None:
        if auth.password:
            secrets.append(auth.password)
            basic = f"{auth.username or ''}:{auth.password}".encode()
            secrets.append(base64.b64encode(basic).decode("ascii"))
        if auth.token:
            secrets.append(auth.token)
    if endpoint.client_key_pem:
        secrets.append(endpoint.client_key_pem.strip())
    try:
        url_password = urlsplit(endpoint.url).password
    except ValueError:
        url_password = None
    if url_password:
        secrets.append(url_password)
    # Longest first so that a secret containing another is masked whole.
    return tuple(sorted({s for s in secrets if len(s) >= _MIN_SCRUB_LEN}, key=len, reverse=True))


# --------------------------------------------------------------------------------------------------
# TLS
# --------------------------------------------------------------------------------------------------


def build_ssl_context(endpoint: ConnectEndpoint) -> ssl.SSLContext:
    """Build the TLS context for ``endpoint``. Raises ``ValueError`` for unusable PEM material.

    Client certificate and key are written to a private temporary directory (files mode 0600) only for
    the duration of ``load_cert_chain`` -- the ``ssl`` module cannot load them from memory.
    """
    if not (endpoint.ca_pem or endpoint.client_cert_pem or endpoint.insecure_skip_verify):
        return _public_ca_context()
    try:
        if endpoint.ca_pem:
            ctx = ssl.create_default_context(cadata=endpoint.ca_pem)
        else:
            ctx = ssl.create_default_context(cafile=certifi.where())
    except ssl.SSLError as e:
        raise ValueError(f"invalid ca_pem: {e.reason or e}") from e
    if endpoint.client_cert_pem:
        _load_client_cert(ctx, endpoint.client_cert_pem, endpoint.client_key_pem)
    if endpoint.insecure_skip_verify:
        ctx.check_hostname = False  # must come before verify_mode = CERT_NONE
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


@functools.cache
def _public_ca_context() -> ssl.SSLContext:
    """The one context of every endpoint that trusts the public CAs and sends no certificate.

    Why shared: loading certifi's bundle costs ~30 ms of CPU, paid again by every client built (one
    per ConnectCluster and change of it; the CLI and the plugin build one per run), and a context is
    safe to share between connections and threads once configured; nothing changes it after this.
    """
    return ssl.create_default_context(cafile=certifi.where())


def _load_client_cert(ctx: ssl.SSLContext, cert_pem: str, key_pem: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="connect-offsets-tls-") as tmp:  # mkdtemp: mode 0700
        cert_path = os.path.join(tmp, "tls.crt")
        _write_private(cert_path, cert_pem)
        key_path: str | None = None
        if key_pem:
            key_path = os.path.join(tmp, "tls.key")
            _write_private(key_path, key_pem)
        try:
            ctx.load_cert_chain(cert_path, key_path, password=_refuse_password)
        except ssl.SSLError as e:
            raise ValueError(f"invalid client certificate or key: {e.reason or e}") from e


def _write_private(path: str, text: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _refuse_password() -> str:
    # Without a callback OpenSSL would prompt on the terminal for an encrypted key.
    raise ValueError("encrypted client keys are not supported")


class _BearerAuth(httpx.Auth):
    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header
        yield request

    def __repr__(self) -> str:
        return f"_BearerAuth(token={_MASK})"


def _httpx_auth(auth: ConnectAuth | None) -> httpx.Auth | None:
    if auth is None:
        return None
    if auth.kind == "basic":
        return httpx.BasicAuth(auth.username or "", auth.password or "")
    return _BearerAuth(auth.token or "")


#: TLS alerts a worker with ``ssl.client.auth=required`` sends when it refuses the client's
#: certificate (or its absence). OpenSSL's wording names neither side; the hint says what to check.
_CLIENT_CERTIFICATE_ALERTS: Final = ("ALERT_BAD_CERTIFICATE", "ALERT_CERTIFICATE_REQUIRED", "ALERT_UNKNOWN_CA")
_CLIENT_CERTIFICATE_HINT: Final = (
    "the Connect worker refused the client certificate, or its absence: check spec.tls.clientCertificate"
)
