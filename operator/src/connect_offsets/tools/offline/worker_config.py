"""A Connect worker's ``.properties`` file, read the way the worker reads it; pure, no network.

Why parse it ourselves rather than ask for flags: the offline tool must find exactly the store the
worker uses (topics, cluster, credentials, or the standalone file), and the worker config is the
one place that says so (KIP-199's design). The file is ``java.util.Properties`` syntax, which is
not INI: ``key=value``, ``key: value`` and ``key value`` are all pairs, ``#``/``!`` start comments,
a line ending in an odd number of backslashes continues on the next (its leading blanks dropped),
``\\uXXXX``/``\\t``/``\\n`` are escapes and any other ``\\x`` is ``x``; Kafka loads it as ISO-8859-1.

Java client settings are then mapped to librdkafka's (confluent-kafka): same names where they
mean the same, PEM/PKCS#12 stores to their librdkafka equivalents, PLAIN/SCRAM/Kerberos JAAS
options to ``sasl.*``. What librdkafka cannot use (a JKS truststore) is refused with a clear
message instead of being dropped, because dropping it would connect without the intended TLS
trust and fail later with an obscure handshake error. ``${file:...}``/``${env:...}``/
``${directory:...}`` references are resolved when ``config.providers`` declares Kafka's standard
providers, as the worker does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from connect_offsets.errors import UserError

__all__ = [
    "WorkerConfig",
    "WorkerConfigError",
    "kafka_client_settings",
    "parse_properties",
    "redact",
    "resolve_config_providers",
]


class WorkerConfigError(UserError, ValueError):
    """The worker config is unusable; the message names the setting (never a secret's value)."""


# --------------------------------------------------------------------------- java.util.Properties

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(line number, logical line) with continuations joined, comments and blank lines dropped."""
    physical = re.split(r"\r\n|\r|\n", text)
    result: list[tuple[int, str]] = []
    i = 0
    while i < len(physical):
        start = i
        line = physical[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(physical):
            line = line[:-1] + physical[i].lstrip(_WHITESPACE)
            i += 1
        if _continues(line):  # a continuation at end of file: Java drops the backslash
            line = line[:-1]
        result.append((start + 1, line))
    return result


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _unescape(raw: str, line_number: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        char = raw[i]
        if char != "\\" or i + 1 >= len(raw):
            out.append(char)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise WorkerConfigError(f"line {line_number}: malformed \\uxxxx escape {raw[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _split_pair(line: str) -> tuple[str, str]:
    """Key ends at the first unescaped ``=``, ``:`` or blank; one separator, blanks around it."""
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in "=:" or char in _WHITESPACE:
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def parse_properties(text: str) -> dict[str, str]:
    """``java.util.Properties.load`` semantics; later keys win, as in Java."""
    result: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split_pair(line)
        result[_unescape(key, number)] = _unescape(value, number)
    return result


# --------------------------------------------------------------------------- config providers

_REFERENCE = re.compile(r"\$\{([^}:]+):(?:([^}]*):)?([^}]*)\}")
_PROVIDERS = {
    "org.apache.kafka.common.config.provider.FileConfigProvider": "file",
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": "env",
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": "directory",
}


def resolve_config_providers(props: Mapping[str, str], *, base_dir: Path | None = None) -> dict[str, str]:
    """Replace ``${provider:path:key}`` references for Kafka's file/env/directory providers.

    Unknown providers leave the reference as it is (the worker would fail on it; a setting we
    never use should not stop an export).
    """
    kinds: dict[str, str] = {}
    for name in (n.strip() for n in props.get("config.providers", "").split(",") if n.strip()):
        cls = props.get(f"config.providers.{name}.class", "")
        if cls in _PROVIDERS:
            kinds[name] = _PROVIDERS[cls]
    if not kinds:
        return dict(props)
    cache: dict[str, dict[str, str]] = {}

    def lookup(match: re.Match[str]) -> str:
        provider, path, key = match.group(1), match.group(2), match.group(3)
        kind = kinds.get(provider)
        if kind is None:
            return match.group(0)
        if kind == "env":
            if key not in os.environ:
                raise WorkerConfigError(f"${{{provider}:...}}: environment variable {key} is not set")
            return os.environ[key]
        if path is None:
            return match.group(0)
        target = Path(path) if base_dir is None or Path(path).is_absolute() else base_dir / path
        try:
            if kind == "directory":
                return (target / key).read_text()
            if str(target) not in cache:
                cache[str(target)] = parse_properties(target.read_text(encoding="latin-1"))
        except OSError as error:
            raise WorkerConfigError(f"config provider {provider}: cannot read {target}: {error.strerror}") from None
        values = cache[str(target)]
        if key not in values:
            raise WorkerConfigError(f"config provider {provider}: {target} has no key {key}")
        return values[key]

    return {k: _REFERENCE.sub(lookup, v) if not k.startswith("config.providers") else v for k, v in props.items()}


# --------------------------------------------------------------------------- Kafka client settings

#: Java client settings with the same name and meaning in librdkafka.
_SAME = {
    "security.protocol",
    "client.id",
    "sasl.kerberos.service.name",
    "sasl.kerberos.kinit.cmd",
    "ssl.key.password",
    "ssl.cipher.suites",
    "ssl.keystore.location",
    "ssl.keystore.password",
}
_RENAMED = {"sasl.mechanism": "sasl.mechanisms"}
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')
_SECRET_WORDS = ("password", "secret", "jaas", "token", "key")


def _jaas_options(value: str) -> dict[str, str]:
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _JAAS_OPTION.finditer(value)}


def kafka_client_settings(props: Mapping[str, str], bootstrap_servers: str | None = None) -> dict[str, Any]:
    """confluent-kafka settings for the cluster a worker config describes (top-level settings)."""
    bootstrap = bootstrap_servers or props.get("bootstrap.servers", "localhost:9092")
    config: dict[str, Any] = {"bootstrap.servers": bootstrap.replace(" ", "")}
    for key, value in props.items():
        if key in _SAME:
            config[key] = value
        elif key in _RENAMED:
            config[_RENAMED[key]] = value
    if "ssl.endpoint.identification.algorithm" in props:
        algorithm = props["ssl.endpoint.identification.algorithm"].strip().lower()
        config["ssl.endpoint.identification.algorithm"] = algorithm or "none"
    _map_truststore(props, config)
    _map_keystore(props, config)
    if "sasl.jaas.config" in props:
        _map_jaas(props["sasl.jaas.config"], props.get("sasl.mechanism", "GSSAPI"), config)
    return config


def _map_truststore(props: Mapping[str, str], config: dict[str, Any]) -> None:
    kind = props.get("ssl.truststore.type", "JKS").upper()
    if "ssl.truststore.certificates" in props:
        config["ssl.ca.pem"] = props["ssl.truststore.certificates"]
        return
    location = props.get("ssl.truststore.location")
    if not location:
        return
    if kind == "PEM" or location.endswith((".pem", ".crt")):
        config["ssl.ca.location"] = location
    elif kind == "PKCS12":
        raise WorkerConfigError(
            "ssl.truststore.location: a PKCS12 truststore cannot be used by librdkafka; "
            "export its CA certificates to PEM and set ssl.truststore.type=PEM"
        )
    else:
        raise WorkerConfigError(
            f"ssl.truststore.location: a {kind} truststore cannot be used by librdkafka; export the CA "
            "certificates to a PEM file (keytool -exportcert -rfc) and set ssl.truststore.type=PEM"
        )


def _map_keystore(props: Mapping[str, str], config: dict[str, Any]) -> None:
    kind = props.get("ssl.keystore.type", "JKS").upper()
    if "ssl.keystore.certificate.chain" in props:
        config["ssl.certificate.pem"] = props["ssl.keystore.certificate.chain"]
        if "ssl.keystore.key" in props:
            config["ssl.key.pem"] = props["ssl.keystore.key"]
        config.pop("ssl.keystore.location", None)
        config.pop("ssl.keystore.password", None)
        return
    if "ssl.keystore.location" not in props:
        return
    if kind == "PEM":
        # A PEM keystore file holds the key and the chain; librdkafka reads both from one file.
        config["ssl.certificate.location"] = props["ssl.keystore.location"]
        config["ssl.key.location"] = props["ssl.keystore.location"]
        config.pop("ssl.keystore.location", None)
        config.pop("ssl.keystore.password", None)
    elif kind != "PKCS12":
        raise WorkerConfigError(
            f"ssl.keystore.location: a {kind} keystore cannot be used by librdkafka; convert it to PKCS12 "
            "(keytool -importkeystore -deststoretype PKCS12) and set ssl.keystore.type=PKCS12"
        )


def _map_jaas(jaas: str, mechanism: str, config: dict[str, Any]) -> None:
    options = _jaas_options(jaas)
    mechanism = mechanism.upper()
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        if "username" not in options or "password" not in options:
            raise WorkerConfigError(f'sasl.jaas.config: {mechanism} needs username="..." and password="..."')
        config["sasl.username"], config["sasl.password"] = options["username"], options["password"]
    elif mechanism == "GSSAPI":
        if "keyTab" in options:
            config["sasl.kerberos.keytab"] = options["keyTab"]
        if "principal" in options:
            config["sasl.kerberos.principal"] = options["principal"]
    elif mechanism == "OAUTHBEARER":
        config["sasl.oauthbearer.method"] = "oidc" if "clientId" in options else "default"
        if "clientId" in options:
            config["sasl.oauthbearer.client.id"] = options["clientId"]
            config["sasl.oauthbearer.client.secret"] = options.get("clientSecret", "")
        if "scope" in options:
            config["sasl.oauthbearer.scope"] = options["scope"]


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """Settings safe to print: anything that may hold a secret is replaced by ``***``."""
    return {k: ("***" if any(w in k for w in _SECRET_WORDS) and "location" not in k else v) for k, v in config.items()}


# --------------------------------------------------------------------------- the worker


@dataclass(frozen=True)
class WorkerConfig:
    """What the offline tool needs from a worker config."""

    path: Path
    properties: dict[str, str]
    mode: Literal["distributed", "standalone"]

    @classmethod
    def load(cls, path: Path) -> WorkerConfig:
        try:
            text = path.read_bytes().decode("latin-1")  # as Kafka's Utils.loadProps reads it
        except OSError as error:
            raise WorkerConfigError(f"cannot read worker config {path}: {error.strerror}") from None
        return cls.from_text(text, path)

    @classmethod
    def from_text(cls, text: str, path: Path = Path("worker.properties")) -> WorkerConfig:
        props = resolve_config_providers(parse_properties(text), base_dir=path.parent)
        if props.get("group.id"):
            for required in ("offset.storage.topic", "config.storage.topic", "bootstrap.servers"):
                if not props.get(required):
                    raise WorkerConfigError(f"{path}: distributed worker config (group.id is set) lacks {required}")
            return cls(path, props, "distributed")
        if props.get("offset.storage.file.filename"):
            return cls(path, props, "standalone")
        raise WorkerConfigError(
            f"{path}: not a Connect worker config: expected group.id and offset.storage.topic (distributed) "
            "or offset.storage.file.filename (standalone)"
        )

    @property
    def group_id(self) -> str:
        return self.properties["group.id"]

    @property
    def offsets_topic(self) -> str:
        return self.properties["offset.storage.topic"]

    @property
    def config_topic(self) -> str:
        return self.properties["config.storage.topic"]

    @property
    def offsets_file(self) -> Path:
        file = Path(self.properties["offset.storage.file.filename"])
        return file if file.is_absolute() else Path.cwd() / file

    def kafka_settings(self, bootstrap_servers: str | None = None) -> dict[str, Any]:
        return kafka_client_settings(self.properties, bootstrap_servers)

    def rest_endpoints(self) -> list[tuple[str, int]]:
        """(host, port) of each REST listener (``listeners``; Connect's default ``http://:8083``)."""
        listeners = self.properties.get("listeners") or "http://:8083"
        endpoints = []
        for listener in (item.strip() for item in listeners.split(",") if item.strip()):
            match = re.fullmatch(r"\w+://\[?([^\]]*?)\]?:(\d+)", listener)
            if match:
                endpoints.append((match.group(1) or "127.0.0.1", int(match.group(2))))
        return endpoints
