"""offline/worker_config.py: java.util.Properties syntax, config providers, client settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_offsets.tools.offline.worker_config import (
    WorkerConfig,
    WorkerConfigError,
    kafka_client_settings,
    parse_properties,
    redact,
)

pytestmark = pytest.mark.unit


def test_properties_syntax() -> None:
    text = (
        "# comment\n"
        "! also a comment \\\n"
        "a=1\n"
        "  b : two  \n"
        "c three\n"
        "d=line one \\\n"
        "     continued\n"
        "e=\\u0041\\t\\=x\\\\\n"
        "key\\ with\\ space=v\n"
        "f=trailing\\\\\n"
        "g=\n"
        "h\r\n"
        "a=last wins\n"
    )
    assert parse_properties(text) == {
        "a": "last wins",
        "b": "two  ",
        "c": "three",
        "d": "line one continued",
        "e": "A\t=x\\",
        "key with space": "v",
        "f": "trailing\\",
        "g": "",
        "h": "",
    }


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(WorkerConfigError, match=r"line 2: malformed \\uxxxx"):
        parse_properties("a=1\nb=\\u12\n")


def test_distributed_and_standalone_detection(tmp_path: Path) -> None:
    dist = WorkerConfig.from_text(
        "bootstrap.servers=k:9092\ngroup.id=g\noffset.storage.topic=o\nconfig.storage.topic=c\n", tmp_path / "w"
    )
    assert dist.mode == "distributed" and dist.offsets_topic == "o" and dist.config_topic == "c"
    alone = WorkerConfig.from_text(f"offset.storage.file.filename={tmp_path}/offsets\n", tmp_path / "w")
    assert alone.mode == "standalone" and alone.offsets_file == tmp_path / "offsets"
    with pytest.raises(WorkerConfigError, match=r"lacks offset\.storage\.topic"):
        WorkerConfig.from_text("bootstrap.servers=k:9092\ngroup.id=g\nconfig.storage.topic=c\n")
    with pytest.raises(WorkerConfigError, match="not a Connect worker config"):
        WorkerConfig.from_text("foo=bar\n")


def test_rest_endpoints() -> None:
    config = WorkerConfig.from_text("offset.storage.file.filename=/x\nlisteners=http://:8084, https://10.0.0.1:8443\n")
    assert config.rest_endpoints() == [("127.0.0.1", 8084), ("10.0.0.1", 8443)]
    assert WorkerConfig.from_text("offset.storage.file.filename=/x\n").rest_endpoints() == [("127.0.0.1", 8083)]


def test_file_and_env_providers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secrets.properties").write_text("pw=s3cret\n")
    monkeypatch.setenv("KAFKA_USER", "alice")
    text = (
        "config.providers=file,env\n"
        "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n"
        "config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        "offset.storage.file.filename=/x\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="${env:KAFKA_USER}" '
        f'password="${{file:{tmp_path}/secrets.properties:pw}}";\n'
        "sasl.mechanism=PLAIN\n"
    )
    config = WorkerConfig.from_text(text, tmp_path / "w.properties")
    settings = config.kafka_settings()
    assert settings["sasl.username"] == "alice" and settings["sasl.password"] == "s3cret"
    assert redact(settings)["sasl.password"] == "***"
    with pytest.raises(WorkerConfigError, match="has no key nope"):
        WorkerConfig.from_text(text.replace(":pw}", ":nope}"), tmp_path / "w.properties")


def test_ssl_and_sasl_mapping() -> None:
    settings = kafka_client_settings(
        {
            "bootstrap.servers": "a:9093, b:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": (
                'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p;w";'
            ),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/ca.pem",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": "/client.p12",
            "ssl.keystore.password": "ks",
            "ssl.endpoint.identification.algorithm": "",
            "linger.ms": "5",
        }
    )
    assert settings == {
        "bootstrap.servers": "a:9093,b:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "p;w",
        "ssl.ca.location": "/ca.pem",
        "ssl.keystore.location": "/client.p12",
        "ssl.keystore.password": "ks",
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_pem_strings_and_kerberos() -> None:
    settings = kafka_client_settings(
        {
            "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----...",
            "ssl.keystore.certificate.chain": "CHAIN",
            "ssl.keystore.key": "KEY",
            "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            "sasl.jaas.config": (
                'com.sun.security.auth.module.Krb5LoginModule required keyTab="/k.keytab" principal="c@R";'
            ),
        }
    )
    assert settings["ssl.ca.pem"].startswith("-----BEGIN") and settings["ssl.certificate.pem"] == "CHAIN"
    assert settings["ssl.key.pem"] == "KEY" and settings["sasl.kerberos.keytab"] == "/k.keytab"
    assert settings["sasl.kerberos.principal"] == "c@R" and settings["sasl.kerberos.service.name"] == "kafka"


def test_jks_stores_are_refused_with_a_fix() -> None:
    with pytest.raises(WorkerConfigError, match=r"ssl\.truststore\.location: a JKS truststore .* PEM"):
        kafka_client_settings({"ssl.truststore.location": "/t.jks"})
    with pytest.raises(WorkerConfigError, match=r"ssl\.keystore\.location: a JKS keystore .* PKCS12"):
        kafka_client_settings({"ssl.keystore.location": "/k.jks"})


def test_plain_without_password_is_refused_without_echoing_the_jaas() -> None:
    with pytest.raises(WorkerConfigError, match="needs username") as info:
        kafka_client_settings({"sasl.mechanism": "PLAIN", "sasl.jaas.config": 'x required username="secretuser";'})
    assert "secretuser" not in str(info.value)
