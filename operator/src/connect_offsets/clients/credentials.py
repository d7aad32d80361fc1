"""Where credentials may go, and what text from a Connect URL may come back into status.

Why this module exists: whoever can create a ConnectCluster or a KafkaMirrorMaker2 chooses a URL
(or Kafka bootstrap servers) and names Secrets; the operator then connects with its own identity and
its own Secret read permission. Without these rules a tenant who may not read a Secret could point
``spec.url`` at their own server and receive the Secret as an ``Authorization`` header. So:

* **The Secret's owner opts in, and says where it may go.** A Secret is used only if it carries the
  label ``connect-offsets.io/credentials=true`` (the same idea as Argo CD's
  ``argocd.argoproj.io/secret-type`` label); with the annotation
  ``connect-offsets.io/allowed-hosts`` its values go only to those hosts (:func:`check_secret_use`).
  The check lives where Secrets are read (``KubernetesApi.get_secret_data``, whose caller must
  say where the values will be sent), so no reader can forget it.
* **Credentials travel over verified TLS only**: an ``https://`` Connect URL without
  ``insecureSkipVerify``, Kafka ``security.protocol`` ``SSL`` or ``SASL_SSL`` with hostname
  verification, unless the operator runs with ``CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS=true``
  (a platform decision, off by default).
* **An optional allow-list of hosts** (``CONNECT_OFFSETS_ALLOWED_HOSTS``): a Connect URL or a
  bootstrap server outside it is refused before any connection is made.
* **A connector's final config is checked as a whole** (:meth:`CredentialsPolicy.check_connector_config`),
  whatever part of a resource each key came from: where and how Connect's own Kafka clients connect
  is not a tenant's to set (the reserved keys, :func:`reserved_key`), every other Kafka address in it
  is held to the allow-list, and the clients that carry secretConfig values to verified TLS.
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

from connect_offsets.clients.reference_policy import ReferenceRule
from connect_offsets.errors import UserError
from connect_offsets.vocabulary import (
    API_GROUP,
)

__all__ = [
    "ALLOWED_HOSTS_ENV",
    "ALLOW_PLAINTEXT_ENV",
    "CREDENTIALS_LABEL",
    "MAX_REFLECTED_BYTES",
    "OAUTH_URL_SETTINGS",
    "OVERRIDE_PREFIXES",
    "PROVIDER_CLUSTER_NAMESPACES_ENV",
    "SECRET_HOSTS_ANNOTATION",
    "CredentialKey",
    "CredentialsPolicy",
    "CredentialsRefused",
    "Destination",
    "HostPattern",
    "check_secret_use",
    "kafka_destinations",
    "kafka_hosts",
    "parse_allowed_hosts",
    "reflect",
    "reserved_key",
    "secret_parts",
    "strip_userinfo",
    "url_destination",
]

#: The label a Secret carries to let the operator use it as credentials (value ``true``).
CREDENTIALS_LABEL: Final = f"{API_GROUP}/credentials"
#: The annotation a Secret's owner sets to say where its values may be sent: ``host[:port]`` or
#: ``*.suffix[:port]``, comma-separated (the syntax of ``CONNECT_OFFSETS_ALLOWED_HOSTS``).
SECRET_HOSTS_ANNOTATION: Final = f"{API_GROUP}/allowed-hosts"
ALLOW_PLAINTEXT_ENV: Final = "CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS"
ALLOWED_HOSTS_ENV: Final = "CONNECT_OFFSETS_ALLOWED_HOSTS"
#: Namespaces whose ConnectClusters may allow config providers (``spec.configProviders``), comma-
#: separated, ``*`` for any; empty (the default): none.
PROVIDER_CLUSTER_NAMESPACES_ENV: Final = "CONNECT_OFFSETS_CONFIG_PROVIDER_CLUSTER_NAMESPACES"
#: Text a Connect URL sends back is cut to this many UTF-8 bytes before it reaches status or Events.
MAX_REFLECTED_BYTES: Final = 1024
MASK: Final = "***"
#: Shorter values are not masked: replacing every "a" of a message would hide it, not a secret.
MIN_SECRET_LEN: Final = 4
#: Kafka protocols that encrypt: only these may carry secretConfig values.
TLS_KAFKA_PROTOCOLS: Final = frozenset({"SSL", "SASL_SSL"})

#: Prefixes under which Connect builds a connector's Kafka clients from the *worker's* own client
#: settings, credentials included (KIP-458): what a connector sets there changes where the worker's
#: credentials go.
OVERRIDE_PREFIXES: Final = ("producer.override.", "consumer.override.", "admin.override.")
#: Kafka client settings that say where a client connects and how it authenticates and encrypts.
_CONNECTION_SETTINGS: Final = ("bootstrap.servers", "security.protocol", "sasl.", "ssl.", "client.dns.lookup")
#: Kafka client settings naming an HTTP endpoint the client sends its SASL credentials to
#: (OAUTHBEARER/OIDC): a Secret's values go there as much as to the brokers.
OAUTH_URL_SETTINGS: Final = ("sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.jwks.endpoint.url")
#: The prefixes of a MirrorMaker 2 connector's two clusters: the operator writes them from
#: ``spec.clusters`` (where the policy checks them), so a connector's config may not.
_MIRROR_CLUSTER_PREFIXES: Final = ("source.cluster.", "target.cluster.")

#: The reference rule of a cluster that allows tenants no config provider: the default.
NO_REFERENCES: Final = ReferenceRule()
#: ``scheme://userinfo@``: the scheme and the user info are bounded, so the scan stays linear
#: whatever a hostile body holds.
_USERINFO: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/\s@]{0,512}@")
_HOST_PORT: Final = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]@]+)(?::([0-9]{1,5}))?$")
_NAMESPACE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
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


def _is_connection_setting(key: str) -> bool:
    """Whether the last part of ``key``, after any prefix, is a connection setting."""
    segments = key.split(".")
    return any(".".join(segments[start:]).startswith(_CONNECTION_SETTINGS) for start in range(len(segments)))


def reserved_key(key: str, *, mirror: bool) -> str | None:
    """Why a tenant may not write ``key`` in a connector's config, or None when it may.

    The rule: where and how a connector's Kafka clients connect (``bootstrap.servers``,
    ``security.protocol``, ``sasl.*``, ``ssl.*``) may not be set under the override prefixes, whose
    clients carry the Connect worker's credentials, nor anywhere in a MirrorMaker 2 connector's
    config, whose clients carry ``spec.clusters``' secretConfig (``source.cluster.*`` and
    ``target.cluster.*`` are written by the operator from ``spec.clusters``).
    """
    for prefix in OVERRIDE_PREFIXES:
        if key.startswith(prefix) and key[len(prefix) :].startswith(_CONNECTION_SETTINGS):
            return (
                "where and how a connector's Kafka clients connect is not set in its config: its clients use the "
                f"Connect worker's own credentials ({prefix}* overrides the worker's settings)"
            )
    if not mirror:
        return None
    if key.strip() == "group.filter.class":
        return (
            "checkpoint connectors keep MirrorMaker 2's own group filter, whose groups.exclude the operator "
            "extends so that no group id holding '${' reaches a task's config"
        )
    if key.startswith(_MIRROR_CLUSTER_PREFIXES):
        return "the operator writes the clusters' settings from spec.clusters; set them there"
    if _is_connection_setting(key):
        return (
            "where and how a connector's Kafka clients connect is not set in its config: MirrorMaker 2's clients "
            "connect with spec.clusters' settings and credentials; set them there"
        )
    return None


@dataclass(frozen=True)
class Destination:
    """Where a credential would be sent: a host (and port), and what sends it there (for messages)."""

    what: str
    host: str
    port: int | None

    def __str__(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"


def url_destination(what: str, url: str) -> Destination:
    """The host and port an ``http(s)://`` URL connects to (the scheme's port when none is given)."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return Destination(what, _normal_host(parts.hostname or ""), port)
    except ValueError as error:
        raise CredentialsRefused("InvalidURL", f"{what}: not a valid URL ({error})") from None


def kafka_destinations(what: str, bootstrap_servers: str) -> list[Destination]:
    """The brokers of a bootstrap list, as destinations (port 9092 when none is given, as Kafka)."""
    return [
        Destination(what, host, port if port is not None else 9092) for host, port in kafka_hosts(bootstrap_servers)
    ]


def check_secret_use(
    namespace: str,
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    sent_to: Iterable[Destination],
) -> None:
    """May Secret ``name`` be used as credentials, sent to each of ``sent_to``?

    Its owner decides: the label ``connect-offsets.io/credentials=true`` (else ``SecretNotOptedIn``)
    and, when present, the annotation ``connect-offsets.io/allowed-hosts`` listing the hosts its
    values may go to (else ``SecretHostNotAllowed``). Both the label and the annotation can only be
    set by whoever may edit the Secret, not by whoever merely names it in a resource.
    """
    if labels.get(CREDENTIALS_LABEL) != "true":
        raise CredentialsRefused(
            "SecretNotOptedIn",
            f"Secret {name} is not marked for use as credentials: nothing was read or sent. If its owner "
            f"agrees, add the label {CREDENTIALS_LABEL}=true "
            f"(kubectl label secret {name} -n {namespace} {CREDENTIALS_LABEL}=true)",
        )
    raw = annotations.get(SECRET_HOSTS_ANNOTATION)
    if raw is None:
        return
    try:
        allowed = parse_allowed_hosts(raw[:4096])
    except ValueError as error:
        raise CredentialsRefused(
            "SecretHostNotAllowed",
            f"Secret {name}: annotation {SECRET_HOSTS_ANNOTATION} is not a list of host[:port] or "
            f"*.suffix[:port] ({str(error).partition(': ')[2][:200]}); nothing was sent",
        ) from None
    for destination in sent_to:
        if not any(p.matches(destination.host, destination.port) for p in allowed):
            shown = ", ".join(str(p) for p in allowed) or "(none)"
            raise CredentialsRefused(
                "SecretHostNotAllowed",
                f"{destination.what}: Secret {name} may only be sent to {shown[:512]} (its annotation "
                f"{SECRET_HOSTS_ANNOTATION}), not to {str(destination)[:255]}; nothing was sent. Ask the "
                "Secret's owner to add the host, or use another host",
            )


@dataclass(frozen=True)
class CredentialKey:
    """A connector config key whose value comes from a Secret: the prefix of the Kafka client
    settings it belongs to (``source.cluster.``, ``producer.override.``), and the Secret."""

    key: str
    client: str
    secret: str


@dataclass(frozen=True)
class CredentialsPolicy:
    """The operator-wide rules, read once at start-up from the environment (the chart sets it)."""

    allow_plaintext: bool = False
    allowed_hosts: tuple[HostPattern, ...] = ()
    #: Namespaces whose ConnectClusters' ``spec.configProviders`` the operator honours (``*``: any).
    provider_cluster_namespaces: frozenset[str] = frozenset()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CredentialsPolicy:
        """Raises ValueError for a malformed setting: the operator must not start with a policy it misread."""
        env = os.environ if environ is None else environ
        namespaces = frozenset(n.strip() for n in env.get(PROVIDER_CLUSTER_NAMESPACES_ENV, "").split(",") if n.strip())
        malformed = sorted(n for n in namespaces if n != "*" and not _NAMESPACE.match(n))
        if malformed:
            raise ValueError(f"{PROVIDER_CLUSTER_NAMESPACES_ENV}: {malformed[0]!r} is not a namespace name or '*'")
        return cls(
            allow_plaintext=_flag(env, ALLOW_PLAINTEXT_ENV),
            allowed_hosts=parse_allowed_hosts(env.get(ALLOWED_HOSTS_ENV, "")),
            provider_cluster_namespaces=namespaces,
        )

    def honours_config_providers(self, cluster_namespace: str) -> bool:
        """Whether a ConnectCluster in ``cluster_namespace`` may allow config providers. Why a
        platform setting: a tenant may write a ConnectCluster of its own for any worker the operator
        reaches, so an allow-list on it would be the tenant's word; the platform names the
        namespaces whose ConnectClusters only it writes."""
        return "*" in self.provider_cluster_namespaces or cluster_namespace in self.provider_cluster_namespaces

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

    def check_connect_url(
        self, url: str, *, credentials: bool, what: str = "spec.url", insecure_skip_verify: bool = False
    ) -> None:
        """The Connect URL may be used (allow-list), and with ``credentials`` only over verified https."""
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
        if credentials and insecure_skip_verify and not self.allow_plaintext:
            # Without verification anyone on the path can pose as the server and read the
            # credentials: no better than plain http, so the same platform setting decides.
            raise CredentialsRefused(
                "InsecureCredentials",
                f"{what} with spec.tls.insecureSkipVerify: credentials are only sent to a server whose "
                f"certificate is verified (the operator runs without {ALLOW_PLAINTEXT_ENV}=true); nothing was "
                "sent. Give spec.tls.ca instead",
            )

    def check_kafka(
        self, what: str, bootstrap_servers: str, config: Mapping[str, object], *, credentials: bool
    ) -> list[Destination]:
        """The bootstrap servers and OAuth endpoints may be used (allow-list), and with ``credentials``
        only over SSL/SASL_SSL. Returns where the client's credentials go: its brokers and the
        HTTP endpoints it sends SASL credentials to (each Secret's ``allowed-hosts`` must cover them)."""
        for host, port in kafka_hosts(bootstrap_servers):
            self.check_host(f"{what} bootstrapServers", host, port if port is not None else 9092)
        if credentials:
            self._check_kafka_transport(what, config, "")
        return [*kafka_destinations(what, bootstrap_servers), *self._oauth_endpoints(what, config, "")]

    def _oauth_endpoints(self, what: str, config: Mapping[str, object], prefix: str) -> list[Destination]:
        """The HTTP endpoints a Kafka client with ``prefix`` sends its SASL credentials to
        (OAUTHBEARER): held to the allow-list, https only (``file:`` is read on the machine that runs
        the client: a Connect worker's own token files), like a Connect URL."""
        found = []
        for setting in OAUTH_URL_SETTINGS:
            raw = config.get(f"{prefix}{setting}")
            url = str(raw).strip() if raw is not None else ""
            if not url:
                continue
            scheme = urlsplit(url).scheme.lower() if "://" in url else ""
            label = f"{what} ({prefix}{setting})"
            if scheme not in ("https", "http"):
                raise CredentialsRefused(
                    "InvalidURL",
                    f"{label}: only an https:// endpoint is allowed, not {url[:100]!r} (a file: URL is read on "
                    "the machine that runs the client); nothing was sent",
                )
            if scheme == "http" and not self.allow_plaintext:
                raise CredentialsRefused(
                    "PlaintextCredentials",
                    f"{label} is http://: credentials are only sent over https (the operator runs without "
                    f"{ALLOW_PLAINTEXT_ENV}=true); nothing was sent",
                )
            destination = url_destination(label, url)
            self.check_host(label, destination.host, destination.port)
            found.append(destination)
        return found

    def _check_kafka_transport(self, what: str, config: Mapping[str, object], prefix: str) -> None:
        """Credentials over Kafka only with TLS (``SSL``/``SASL_SSL``) and hostname verification."""
        if self.allow_plaintext:
            return
        protocol = str(config.get(f"{prefix}security.protocol") or "PLAINTEXT").strip().upper()
        if protocol not in TLS_KAFKA_PROTOCOLS:
            raise CredentialsRefused(
                "PlaintextCredentials",
                f"{what}: security.protocol is {protocol[:40]}: secretConfig values are only sent over SSL or "
                f"SASL_SSL (the operator runs without {ALLOW_PLAINTEXT_ENV}=true); nothing was sent",
            )
        verification = config.get(f"{prefix}ssl.endpoint.identification.algorithm")
        # Java knows "https" and "" (off); librdkafka, the operator's own clients, also takes "none".
        if verification is not None and str(verification).strip().lower() != "https":
            raise CredentialsRefused(
                "InsecureCredentials",
                f"{what}: ssl.endpoint.identification.algorithm is {str(verification).strip()[:40]!r}, so the "
                f"broker's certificate is not checked against its name: secretConfig values are only sent to "
                f"verified brokers (the operator runs without {ALLOW_PLAINTEXT_ENV}=true); nothing was sent",
            )

    def check_connector_config(
        self,
        config: Mapping[str, str],
        *,
        field: str,
        tenant_keys: Iterable[str],
        mirror: bool,
        credential_keys: Iterable[CredentialKey] = (),
        references: ReferenceRule | None = NO_REFERENCES,
    ) -> dict[str, list[Destination]]:
        """The one check of a connector's final config (cluster settings, the resource's config and
        every override merged, as Connect will receive it), before any connection and before the
        config is sent to Connect. Raises CredentialsRefused with the first problem:

        * ``ReservedConfigKey``: a key of ``tenant_keys`` (what the resource's ``config`` wrote, at
          ``field``) that :func:`reserved_key` reserves, or that the operator writes from a Secret
          (``credential_keys``);
        * ``HostNotAllowed``: any key ending in ``bootstrap.servers`` names a host outside the
          allow-list (whoever wrote it: a Debezium schema history, a mirror's cluster);
        * ``PlaintextCredentials`` / ``InsecureCredentials``: a client that carries a Secret's value
          (``credential_keys``) without verified TLS;
        * ``ConfigProviderReference``: a value holds a config provider reference (found as Connect
          finds them) that ``references`` does not allow
          (:mod:`connect_offsets.clients.reference_policy`); by default none is. ``None`` only for a
          config that is never sent to Connect (the operator's own Kafka clients resolve no reference).

        Returns, per Secret, where its values go (the brokers of the clients that carry them), for
        the Secret's own ``allowed-hosts`` check when it is read.
        """
        uses = list(credential_keys)
        written = {use.key for use in uses}
        for key in sorted(tenant_keys):
            why = reserved_key(key, mirror=mirror)
            if why is None and key in written:
                # The operator writes this key from a Secret; had the tenant's value won, it would
                # pass for the operator's own (its references allowed where a tenant's are not).
                why = "the operator writes it from spec.clusters' secretConfig; set it there"
            if why is not None:
                raise CredentialsRefused(
                    "ReservedConfigKey",
                    f"{field}.{key[:200]}: {why}. Nothing was sent to Connect",
                )
        for key, value in sorted(config.items()):
            if key == "bootstrap.servers" or key.endswith(".bootstrap.servers"):
                for host, port in kafka_hosts(value):
                    self.check_host(f"{field} ({key[:200]})", host, port if port is not None else 9092)
        sent: dict[str, list[Destination]] = {}
        for key in sorted(config):
            for setting in OAUTH_URL_SETTINGS:
                if key == setting or key.endswith(f".{setting}"):
                    self._oauth_endpoints(f"{field}", config, key[: len(key) - len(setting)])
        for use in uses:
            what = f"{field} ({use.key[:200]} from Secret {use.secret})"
            self._check_kafka_transport(what, config, use.client)
            sent.setdefault(use.secret, []).extend(
                [
                    *kafka_destinations(what, config.get(f"{use.client}bootstrap.servers", "")),
                    *self._oauth_endpoints(what, config, use.client),
                ]
            )
        refused = None
        if references is not None:
            refused = references.first_refusal((key, value, key in written) for key, value in sorted(config.items()))
        if refused is not None:
            key, reference, why = refused
            if key in written:  # the value came from a Secret: none of it is quoted
                raise CredentialsRefused(
                    "ConfigProviderReference",
                    f"{field} ({key[:200]}): the value secretConfig gives it holds a config provider reference "
                    f"that {references.where if references else 'the cluster'} does not allow this namespace (the "
                    "Secret's value is not shown). The Connect workers would resolve it with their own files, "
                    "environment and Secrets; nothing was sent to Connect",
                )
            raise CredentialsRefused(
                "ConfigProviderReference",
                f"{field} ({key[:200]}): refers to config provider {reference.provider[:100]!r} "
                f"({reference.text[:200]}): {why}. The Connect workers resolve such a reference with their own "
                "files, environment and Secrets; nothing was sent to Connect",
            )
        return sent


#: The password of a JAAS config (``password="..."``): masked on its own too, since an answer may
#: quote it without the rest of the config.
_JAAS_SECRET: Final = re.compile(r'password\s*=\s*"([^"]{1,1024})"')


def secret_parts(values: Iterable[str]) -> list[str]:
    """Every credential value, plus the passwords inside JAAS configs among them: what ``reflect``
    masks in text that may quote them."""
    parts: list[str] = []
    for value in values:
        parts.append(value)
        parts += _JAAS_SECRET.findall(value[:65536])
    return parts


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
