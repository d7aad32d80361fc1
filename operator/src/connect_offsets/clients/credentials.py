"""Where credentials may go, and what text from a Connect URL may come back into status.

Why this module exists: whoever can create a ConnectCluster or a KafkaMirrorMaker2 chooses a URL
(or Kafka bootstrap servers) and names Secrets; the operator then connects with its own identity and
its own Secret read permission. Without these rules a tenant who may not read a Secret could point
``spec.url`` at their own server and receive the Secret as an ``Authorization`` header. So:

* **The Secret's owner opts in.** A Secret is used only if it carries the label
  ``connect-offsets.io/credentials=true`` (the same idea as Argo CD's
  ``argocd.argoproj.io/secret-type`` label). The check lives where Secrets are read
  (``KubernetesApi.get_secret_data``), so no reader can forget it.
* **Credentials travel over TLS only**: an ``https://`` Connect URL, Kafka ``security.protocol``
  ``SSL`` or ``SASL_SSL``, unless the operator runs with
  ``CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS=true`` (a platform decision, off by default).
* **An optional allow-list of hosts** (``CONNECT_OFFSETS_ALLOWED_HOSTS``): a Connect URL or a
  bootstrap server outside it is refused before any connection is made.
* **Reflected text is capped and redacted** (:func:`reflect`): whatever a Connect URL answers
  (error bodies, server info) goes into status and Events at most 1 KiB long, with every credential
  the operator holds for that cluster replaced by ``***`` and URL user info removed.

Every refusal is a :class:`CredentialsRefused` with a condition ``reason`` and a message that says
what to change; none of them is retried (a change of the resource or the Secret is needed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from connect_offsets.errors import UserError
from connect_offsets.vocabulary import (
    API_GROUP,
)

__all__ = [
    "ALLOWED_HOSTS_ENV",
    "ALLOW_PLAINTEXT_ENV",
    "CREDENTIALS_LABEL",
    "MAX_REFLECTED_BYTES",
    "CredentialsPolicy",
    "CredentialsRefused",
    "HostPattern",
    "kafka_hosts",
    "parse_allowed_hosts",
    "reflect",
    "strip_userinfo",
]

#: The label a Secret carries to let the operator use it as credentials (value ``true``).
CREDENTIALS_LABEL: Final = f"{API_GROUP}/credentials"
ALLOW_PLAINTEXT_ENV: Final = "CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS"
ALLOWED_HOSTS_ENV: Final = "CONNECT_OFFSETS_ALLOWED_HOSTS"
#: Text a Connect URL sends back is cut to this many UTF-8 bytes before it reaches status or Events.
MAX_REFLECTED_BYTES: Final = 1024
MASK: Final = "***"
#: Shorter values are not masked: replacing every "a" of a message would hide it, not a secret.
MIN_SECRET_LEN: Final = 4
#: Kafka protocols that encrypt: only these may carry secretConfig values.
TLS_KAFKA_PROTOCOLS: Final = frozenset({"SSL", "SASL_SSL"})

#: ``scheme://userinfo@``: the scheme and the user info are bounded, so the scan stays linear
#: whatever a hostile body holds.
_USERINFO: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/\s@]{0,512}@")
_HOST_PORT: Final = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]@]+)(?::([0-9]{1,5}))?$")
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"", "0", "false", "no", "off"})


class CredentialsRefused(UserError):
    """A rule of this module refused a Secret, a URL or a Kafka address; ``reason`` is the condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class HostPattern:
    """One allow-list entry: an exact host or ``*.suffix`` (any depth below it), optionally a port."""

    host: str
    port: int | None = None

    def matches(self, host: str, port: int | None) -> bool:
        if self.port is not None and port != self.port:
            return False
        host = _normal_host(host)
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host

    def __str__(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"


def _normal_host(host: str) -> str:
    return host.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


def parse_allowed_hosts(raw: str) -> tuple[HostPattern, ...]:
    """``host``, ``*.suffix``, each with an optional ``:port``, comma-separated; empty: any host."""
    patterns = []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        match = _HOST_PORT.match(entry)
        if match is None:
            raise ValueError(f"{ALLOWED_HOSTS_ENV}: {entry!r} is not host[:port] or *.suffix[:port]")
        host = _normal_host(match.group(1))
        if "*" in host and not (host.startswith("*.") and "*" not in host[1:] and len(host) > 2):
            raise ValueError(f"{ALLOWED_HOSTS_ENV}: {entry!r}: a wildcard is only allowed as a leading '*.'")
        port = int(match.group(2)) if match.group(2) else None
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"{ALLOWED_HOSTS_ENV}: {entry!r}: port out of range")
        patterns.append(HostPattern(host, port))
    return tuple(patterns)


def _flag(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"{name}={raw!r}: expected true or false")


def kafka_hosts(bootstrap_servers: str) -> list[tuple[str, int | None]]:
    """(host, port) of each ``host:port`` of a bootstrap list (a ``PLAINTEXT://`` prefix is allowed, as in Kafka)."""
    hosts = []
    for entry in (e.strip() for e in bootstrap_servers.split(",")):
        if not entry:
            continue
        entry = entry.split("://", 1)[-1]
        match = _HOST_PORT.match(entry)
        if match is None:
            raise CredentialsRefused("InvalidBootstrapServers", f"bootstrap server {entry[:200]!r} is not host:port")
        hosts.append((_normal_host(match.group(1)), int(match.group(2)) if match.group(2) else None))
    return hosts


@dataclass(frozen=True)
class CredentialsPolicy:
    """The operator-wide rules, read once at start-up from the environment (the chart sets it)."""

    allow_plaintext: bool = False
    allowed_hosts: tuple[HostPattern, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CredentialsPolicy:
        """Raises ValueError for a malformed setting: the operator must not start with a policy it misread."""
        env = os.environ if environ is None else environ
        return cls(
            allow_plaintext=_flag(env, ALLOW_PLAINTEXT_ENV),
            allowed_hosts=parse_allowed_hosts(env.get(ALLOWED_HOSTS_ENV, "")),
        )

    def check_host(self, what: str, host: str, port: int | None) -> None:
        """Refuse a host outside the allow-list (HostNotAllowed); any host when the list is empty."""
        if not self.allowed_hosts or any(p.matches(host, port) for p in self.allowed_hosts):
            return
        shown = host if port is None else f"{host}:{port}"
        allowed = ", ".join(str(p) for p in self.allowed_hosts)
        raise CredentialsRefused(
            "HostNotAllowed",
            f"{what}: host {shown[:255]} is not in the operator's allow-list ({ALLOWED_HOSTS_ENV}: {allowed[:512]}); "
            "nothing was sent. Use an allowed host or ask the platform team to allow it",
        )

    def check_connect_url(self, url: str, *, credentials: bool, what: str = "spec.url") -> None:
        """The Connect URL may be used (allow-list), and with ``credentials`` only over https."""
        try:
            parts = urlsplit(url)
            host, port = parts.hostname or "", parts.port
        except ValueError as error:
            raise CredentialsRefused("InvalidURL", f"{what}: not a valid URL ({error})") from None
        if parts.username is not None or parts.password is not None:
            raise CredentialsRefused(
                "InvalidSpec", f"{what} must not contain user info (user:password@): use spec.authentication"
            )
        if port is None:
            port = 443 if parts.scheme == "https" else 80
        self.check_host(what, host, port)
        if credentials and parts.scheme != "https" and not self.allow_plaintext:
            raise CredentialsRefused(
                "PlaintextCredentials",
                f"{what} is {parts.scheme}://: credentials are only sent over https (the operator runs without "
                f"{ALLOW_PLAINTEXT_ENV}=true); nothing was sent. Use an https:// URL",
            )

    def check_kafka(
        self, what: str, bootstrap_servers: str, config: Mapping[str, object], *, credentials: bool
    ) -> None:
        """The bootstrap servers may be used (allow-list), and with ``credentials`` only over SSL/SASL_SSL."""
        for host, port in kafka_hosts(bootstrap_servers):
            self.check_host(f"{what} bootstrapServers", host, port if port is not None else 9092)
        protocol = str(config.get("security.protocol") or "PLAINTEXT").strip().upper()
        if credentials and protocol not in TLS_KAFKA_PROTOCOLS and not self.allow_plaintext:
            raise CredentialsRefused(
                "PlaintextCredentials",
                f"{what}: security.protocol is {protocol[:40]}: secretConfig values are only sent over SSL or "
                f"SASL_SSL (the operator runs without {ALLOW_PLAINTEXT_ENV}=true); nothing was sent",
            )


def strip_userinfo(text: str) -> str:
    """Remove ``user:password@`` from every URL in ``text``."""
    return _USERINFO.sub(r"\1", text)


def reflect(text: str, secrets: Iterable[str] = (), limit: int = MAX_REFLECTED_BYTES) -> str:
    """Text that came from a Connect URL, made fit for status and Events.

    The one helper every writer of such text uses: URL user info removed, each of ``secrets`` (the
    credentials the operator holds for that cluster, longest first so one containing another is
    masked whole) replaced by ``***``, then cut to ``limit`` UTF-8 bytes with a marker. Redaction
    comes before the cut, so a secret straddling the cut is never half shown.
    """
    values = sorted({s for s in secrets if len(s) >= MIN_SECRET_LEN}, key=len, reverse=True)
    # Work on a bounded prefix: what is beyond it is cut anyway (plus room for a masked secret).
    room = limit * 4 + (len(values[0]) if values else 0)
    total = len(text)
    text = strip_userinfo(text[:room])
    for value in values:
        text = text.replace(value, MASK)
    encoded = text.encode("utf-8")
    if len(encoded) <= limit and total <= room:
        return text
    marker = " ... (cut)"
    head = encoded[: max(limit - len(marker), 0)].decode("utf-8", errors="ignore")
    return head + marker
