"""Every Kafka and HTTP endpoint a tenant's config makes the operator or Connect use obeys the
platform's policy, and a Secret goes only where its owner allows (issue 31, points 1 and 3).

The operator runs as the chart installs it (``chart_operator``: its ServiceAccount token, RBAC and
settings) for two tenant namespaces. Every "elsewhere" a tenant points at is a listener on
127.0.0.2 (``hostile.CountingListener``, ``hostile.ConnectLike``) that counts the connections it
accepts, so "nothing was sent" is checked where it matters: at the receiving end.

* KafkaConnector: ``producer.override.*`` / ``consumer.override.*`` / ``admin.override.*`` keys that
  say where or how the connector's Kafka clients connect (they inherit the worker's credentials)
  are refused (``ReservedConfigKey``), nothing reaches Connect, and not one connection is made; any
  other key ending in ``bootstrap.servers`` (Debezium's schema history, say) is checked against
  ``allowedHosts`` (``HostNotAllowed``).
* KafkaMirrorMaker2: a connector's ``config`` cannot re-point a cluster whose ``secretConfig`` it
  carries (``source.cluster.bootstrap.servers`` + ``SASL_PLAINTEXT``) past ``allowedHosts``: refused
  before the operator's own cluster-id check connects, and before Connect gets the config.
* With the chart's defaults (no ``allowedHosts``, ``credentials.allowPlaintext=false``): credentials
  are never sent with ``insecureSkipVerify`` (``InsecureCredentials``), and a Secret annotated with
  ``connect-offsets.io/allowed-hosts`` goes only to those hosts (``SecretHostNotAllowed``), for a
  ConnectCluster's authentication and for a mirror's ``secretConfig`` alike.
"""

from __future__ import annotations

import base64
import secrets
import ssl
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, tenant_namespaces
from tests.integration.hostile import ELSEWHERE, ConnectLike, CountingListener
from tests.integration.support import (
    FILE_SINK,
    GROUP,
    VERSION,
    condition,
    connect_get,
    connector_config,
    create_cluster,
    create_connector,
    create_mm2,
    file_source_spec,
    get_connector,
    wait_condition,
    wait_mm2_condition,
)
from tests.integration.tls_material import Authority

LABEL = {f"{GROUP}/credentials": "true"}
HOSTS_ANNOTATION = f"{GROUP}/allowed-hosts"


def host_port(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}"


def stack_hosts(stack: dict[str, Any]) -> str:
    """allowedHosts for exactly the stack's Connect and Kafka brokers, as the issue measured it."""
    return "allowedHosts={" + ",".join([host_port(stack["connect_url"]), stack["kafka_a"], stack["kafka_b"]]) + "}"


def put_secret(
    core: Any, namespace: str, name: str, data: dict[str, str], annotations: dict[str, str] | None = None
) -> None:
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": name, "labels": LABEL, "annotations": annotations or {}},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        },
    )


def ready(custom: Any, namespace: str, name: str) -> dict[str, Any] | None:
    return condition(get_connector(custom, namespace, name), "Ready")


def cluster_ready(custom: Any, namespace: str, name: str) -> dict[str, Any] | None:
    body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "connectclusters", name)
    return condition(body, "Ready")


def wait_cluster(custom: Any, namespace: str, name: str, status: str, reason: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        found = cluster_ready(custom, namespace, name)
        return found if found and (found["status"], found["reason"]) == (status, reason) else None

    return wait_for(f"ConnectCluster {namespace}/{name} Ready={status} ({reason})", check, 60)


@pytest.mark.local_stack
@pytest.mark.timeout(400)
def test_connector_overrides_cannot_point_kafka_clients_elsewhere(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    source = tmp_path / "in.txt"
    source.write_text("".join(f"line {i}\n" for i in range(20)))
    with (
        CountingListener() as elsewhere,
        tenant_namespaces(core, custom, namespace) as (tenant_a, tenant_b),
        chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b], values=[stack_hosts(stack)]) as op,
    ):
        assert op.chart_env["CONNECT_OFFSETS_ALLOWED_HOSTS"].count(",") == 2
        create_cluster(custom, tenant_a, connect_url)
        topic = f"policy-{unique}"
        specs: dict[str, dict[str, Any]] = {}
        producer = file_source_spec(source, topic, "p-offsets")
        specs["producer"] = producer
        consumer: dict[str, Any] = {
            "class": FILE_SINK,
            "tasksMax": 1,
            "config": {"topics": topic, "file": str(tmp_path / "out.txt")},
        }
        specs["consumer"] = consumer
        admin = file_source_spec(source, f"{topic}-admin", "a-offsets")
        admin["config"].update({"topic.creation.default.replication.factor": 1, "topic.creation.default.partitions": 1})
        specs["admin"] = admin
        names = {client: f"{client}-{unique}" for client in specs}
        for client, spec in specs.items():
            spec["config"][f"{client}.override.bootstrap.servers"] = elsewhere.address
            spec["config"][f"{client}.override.security.protocol"] = "PLAINTEXT"
            create_connector(custom, tenant_a, names[client], spec)
        # A key outside the override prefixes that names a Kafka address: checked, not reserved.
        history = f"history-{unique}"
        history_spec = file_source_spec(source, f"{topic}-history", "h-offsets")
        history_spec["config"]["schema.history.internal.kafka.bootstrap.servers"] = elsewhere.address
        create_connector(custom, tenant_a, history, history_spec)
        # Control: an override that does not redirect anything is the tenant's to set.
        control = f"control-{unique}"
        control_spec = file_source_spec(source, f"{topic}-control", "c-offsets")
        control_spec["config"]["producer.override.compression.type"] = "gzip"
        create_connector(custom, tenant_a, control, control_spec)
        try:
            wait_for(
                "a Ready condition on every connector", lambda: all(ready(custom, tenant_a, n) for n in names.values())
            )
            wait_condition(custom, tenant_a, control, "Ready", reason="ConnectorRunning", timeout=90)
            time.sleep(15)  # three drift intervals: time for Connect's clients to connect, had they been told to
            assert elsewhere.connections == 0, f"{elsewhere.connections} connections to {elsewhere.address}"
            for client, name in names.items():
                refused = wait_condition(custom, tenant_a, name, "Ready", "False", reason="ReservedConfigKey")
                assert f"spec.config.{client}.override.bootstrap.servers" in refused["message"], refused
                assert connect_get(connect, f"/connectors/{name}").status_code == 404
            refused = wait_condition(custom, tenant_a, history, "Ready", "False", reason="HostNotAllowed")
            assert "schema.history.internal.kafka.bootstrap.servers" in refused["message"], refused
            assert elsewhere.address in refused["message"]
            assert connect_get(connect, f"/connectors/{history}").status_code == 404
            assert connector_config(connect, control)["producer.override.compression.type"] == "gzip"
        finally:
            for name in [*names.values(), history, control]:
                connect.delete(f"/connectors/{name}")


@pytest.mark.local_stack
@pytest.mark.timeout(300)
def test_mirror_connector_config_cannot_repoint_a_cluster_with_credentials(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    password = secrets.token_hex(12)
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="mm2" password="{password}";'
    # The stack has no TLS: plaintext credentials allowed (chart_operator's default); the allow-list
    # is what the redirect walked around. (The TLS-only rule on the same final config: unit tests.)
    values = [stack_hosts(stack)]
    with (
        CountingListener() as elsewhere,
        tenant_namespaces(core, custom, namespace) as (tenant_a, tenant_b),
        chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b], values=values) as op,
    ):
        create_cluster(custom, tenant_a, connect_url)
        put_secret(core, tenant_a, "east-jaas", {"jaas": jaas})
        east, west = f"east{unique}", f"west{unique}"
        clusters = [
            {
                "alias": east,
                "bootstrapServers": stack["kafka_b"],
                "config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
                "secretConfig": {"sasl.jaas.config": {"name": "east-jaas", "key": "jaas"}},
            },
            {"alias": west, "bootstrapServers": stack["kafka_a"]},
        ]
        redirect = {
            "source.cluster.bootstrap.servers": elsewhere.address,
            "source.cluster.security.protocol": "SASL_PLAINTEXT",
        }
        mirrors = [{"sourceCluster": east, "targetCluster": west, "sourceConnector": {"config": redirect}}]
        create_mm2(custom, tenant_a, "mm2", clusters, mirrors, replicationLag={"intervalSeconds": 2})
        name = f"{east}->{west}.MirrorSourceConnector"
        try:
            wait_for("a Ready condition", lambda: condition(_mm2(custom, tenant_a), "Ready"))
            time.sleep(15)
            assert elsewhere.connections == 0, f"{elsewhere.connections} connections to {elsewhere.address}"
            refused = wait_mm2_condition(custom, tenant_a, "mm2", "Ready", "ReservedConfigKey", status="False")
            assert "spec.mirrors[0].sourceConnector.config.source.cluster.bootstrap.servers" in refused["message"]
            assert connect_get(connect, f"/connectors/{name}").status_code == 404
            for text in (op.operator.log(), str(_mm2(custom, tenant_a).get("status"))):
                assert password not in text
        finally:
            connect.delete(f"/connectors/{name}")


def _mm2(custom: Any, namespace: str) -> dict[str, Any]:
    body: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "kafkamirrormaker2s", "mm2")
    return body


def tls_server(tmp_path: Path, authority: Authority) -> ssl.SSLContext:
    issued = authority.issue(ELSEWHERE, ip_addresses=(ELSEWHERE,))
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    cert.write_text(issued.cert_pem)
    key.write_text(issued.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


@pytest.mark.local_stack
@pytest.mark.timeout(300)
def test_a_secret_goes_only_where_its_owner_allows_with_the_default_settings(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    tmp_path: Path,
) -> None:
    token, pinned_token, jaas_password = (secrets.token_hex(16) for _ in range(3))
    authority = Authority("policy test CA")
    with (
        ConnectLike(tls_server(tmp_path, authority)) as unverified,
        ConnectLike(tls_server(tmp_path, authority)) as verified,
        CountingListener() as kafka_elsewhere,
        tenant_namespaces(core, custom, namespace) as (tenant_a, tenant_b),
        # The chart's defaults: no allowedHosts (any host), no plaintext credentials.
        chart_operator(
            stack, core, custom, tmp_path, [tenant_a, tenant_b], values=["credentials.allowPlaintext=false"]
        ) as op,
    ):
        assert not op.chart_env.get("CONNECT_OFFSETS_ALLOWED_HOSTS")  # (an empty value reads back as none)
        # 1. https with insecureSkipVerify: the token is never sent.
        put_secret(core, tenant_a, "token", {"token": token})
        create_cluster(
            custom,
            tenant_a,
            unverified.url,
            name="unverified",
            authentication={"type": "bearer", "secretName": "token"},
            tls={"insecureSkipVerify": True},
        )
        refused = wait_cluster(custom, tenant_a, "unverified", "False", "InsecureCredentials")
        assert "insecureSkipVerify" in refused["message"]
        # The same URL without credentials may skip verification (nothing secret travels).
        create_cluster(custom, tenant_a, unverified.url, name="anonymous", tls={"insecureSkipVerify": True})
        wait_cluster(custom, tenant_a, "anonymous", "True", "Reachable")
        assert unverified.authorizations() == []

        # 2. A Secret that names its hosts goes only there, verified TLS or not.
        core.create_namespaced_config_map(
            tenant_a, {"metadata": {"name": "ca"}, "data": {"ca.crt": authority.cert_pem}}
        )
        put_secret(
            core, tenant_a, "pinned", {"token": pinned_token}, {HOSTS_ANNOTATION: "connect.platform.example:443"}
        )
        before = verified.connections
        create_cluster(
            custom,
            tenant_a,
            verified.url,
            name="pinned",
            authentication={"type": "bearer", "secretName": "pinned"},
            tls={"ca": {"configMap": {"name": "ca", "key": "ca.crt"}}},
        )
        refused = wait_cluster(custom, tenant_a, "pinned", "False", "SecretHostNotAllowed")
        assert f"{ELSEWHERE}:{verified.port}" in refused["message"] and "pinned" in refused["message"]
        assert verified.connections == before and verified.authorizations() == []
        # Its owner adds the host: the next pass uses it.
        core.patch_namespaced_secret(
            "pinned",
            tenant_a,
            {"metadata": {"annotations": {HOSTS_ANNOTATION: f"connect.platform.example:443,{ELSEWHERE}"}}},
        )
        wait_cluster(custom, tenant_a, "pinned", "True", "Reachable")
        assert set(verified.authorizations()) == {f"Bearer {pinned_token}"}

        # 3. A mirror's secretConfig: the same annotation, checked before the operator's Kafka clients connect.
        jaas = (
            f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{jaas_password}";'
        )
        put_secret(core, tenant_a, "east-jaas", {"jaas": jaas}, {HOSTS_ANNOTATION: stack["kafka_b"]})
        create_cluster(custom, tenant_a, stack["connect_url"], name="local")
        create_mm2(
            custom,
            tenant_a,
            "mm2",
            [
                {
                    "alias": "east",
                    "bootstrapServers": kafka_elsewhere.address,
                    "config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
                    "secretConfig": {"sasl.jaas.config": {"name": "east-jaas", "key": "jaas"}},
                },
                {"alias": "west", "bootstrapServers": stack["kafka_a"]},
            ],
            [{"sourceCluster": "east", "targetCluster": "west", "sourceConnector": {}}],
            replicationLag={"intervalSeconds": 2},
        )
        refused = wait_mm2_condition(custom, tenant_a, "mm2", "Ready", "SecretHostNotAllowed", status="False")
        assert "east-jaas" in refused["message"] and kafka_elsewhere.address in refused["message"]
        time.sleep(6)
        assert kafka_elsewhere.connections == 0

        for text in [op.operator.log(), *(str(b.get("status")) for b in _all(custom, tenant_a))]:
            for value in (token, pinned_token, jaas_password):
                assert value not in text


def _all(custom: Any, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for plural in ("connectclusters", "kafkaconnectors", "kafkamirrormaker2s"):
        items += custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)["items"]
    return items
