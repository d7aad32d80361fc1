"""The connector config policy and where credentials may go (issue 31, points 1, 3 and 6).

* ``reserved_key``: connection settings under the override prefixes (a KafkaConnector) and anywhere
  in a MirrorMaker 2 connector's config are the tenant's to write only elsewhere;
* ``CredentialsPolicy.check_connector_config`` on final configs: reserved keys, every key ending in
  ``bootstrap.servers`` against the allow-list, credentials over verified TLS only, references to
  the cluster's config provider written by a tenant;
* ``check_secret_use``: the opt-in label and the ``allowed-hosts`` annotation, with the
  destinations each reader declares (a ConnectCluster's URL, a mirror's brokers, Connect's host
  when values go into connector configs);
* ``insecureSkipVerify`` with credentials;
* a KafkaConnector refused by the policy: a condition naming the key, nothing sent to Connect;
* ``secret_parts`` and validate messages: what Connect quotes back is redacted.

In-memory fakes only.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from connect_offsets.clients.connect import ConnectClient, ConnectEndpoint
from connect_offsets.clients.credentials import (
    CREDENTIALS_LABEL,
    SECRET_HOSTS_ANNOTATION,
    CredentialKey,
    CredentialsPolicy,
    CredentialsRefused,
    Destination,
    check_secret_use,
    parse_allowed_hosts,
    reserved_key,
    secret_parts,
)
from connect_offsets.clients.reference_policy import ReferenceRule
from connect_offsets.lag import MirrorSecrets, mirror_secrets
from connect_offsets.models.crds import ConfigProviderSpec, ConnectClusterSpec, KafkaMirrorMaker2Resource
from connect_offsets.reconcile.clusters import ClusterRegistry, ClusterUnusable
from connect_offsets.reconcile.mirrormaker2 import MirrorMaker2Service
from connect_offsets.vocabulary import API_GROUP, CLUSTERS, MIRRORS
from tests.fakes import FakeConnect, FakeKube
from tests.reconcile_pass import NAME, Stack

pytestmark = pytest.mark.unit

PLATFORM = CredentialsPolicy(allowed_hosts=parse_allowed_hosts("*.kafka.svc,connect.svc"))
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="pw-4f9a2c";'


# --- reserved keys -------------------------------------------------------------------------------


@pytest.mark.parametrize("client", ["producer", "consumer", "admin"])
@pytest.mark.parametrize(
    "setting",
    ["bootstrap.servers", "security.protocol", "sasl.jaas.config", "sasl.mechanism", "ssl.truststore.location"],
)
def test_override_connection_settings_are_reserved(client: str, setting: str) -> None:
    why = reserved_key(f"{client}.override.{setting}", mirror=False)
    assert why is not None and "worker's own credentials" in why


@pytest.mark.parametrize(
    "key",
    [
        "producer.override.compression.type",
        "consumer.override.max.poll.records",
        "admin.override.request.timeout.ms",
        "schema.history.internal.kafka.bootstrap.servers",  # checked against allowedHosts instead
        "source.cluster.bootstrap.servers",  # a KafkaConnector running MM2's class: the tenant's own settings
        "value.converter.schema.registry.ssl.truststore.location",
    ],
)
def test_other_connector_keys_are_the_tenants(key: str) -> None:
    assert reserved_key(key, mirror=False) is None


@pytest.mark.parametrize(
    "key",
    [
        "source.cluster.bootstrap.servers",
        "target.cluster.security.protocol",
        "source.cluster.client.id",  # anything under the cluster prefixes: spec.clusters sets them
        "consumer.bootstrap.servers",  # MM2's client overrides
        "source.consumer.sasl.jaas.config",
        "target.admin.ssl.endpoint.identification.algorithm",
        "producer.override.bootstrap.servers",
    ],
)
def test_mirror_connection_settings_are_reserved_under_any_prefix(key: str) -> None:
    assert reserved_key(key, mirror=True) is not None


@pytest.mark.parametrize("key", ["replication.factor", "sync.topic.acls.enabled", "consumer.poll.timeout.ms"])
def test_other_mirror_keys_are_the_tenants(key: str) -> None:
    assert reserved_key(key, mirror=True) is None


# --- the final config ----------------------------------------------------------------------------


def test_a_reserved_key_is_refused_naming_the_field() -> None:
    config = {"producer.override.bootstrap.servers": "evil.example:9092", "topic": "t"}
    with pytest.raises(CredentialsRefused) as caught:
        PLATFORM.check_connector_config(config, field="spec.config", tenant_keys=config, mirror=False)
    assert caught.value.reason == "ReservedConfigKey"
    assert "spec.config.producer.override.bootstrap.servers" in str(caught.value)


def test_every_bootstrap_servers_key_is_held_to_the_allow_list() -> None:
    ok = {"schema.history.internal.kafka.bootstrap.servers": "k1.kafka.svc:9092"}
    assert PLATFORM.check_connector_config(ok, field="spec.config", tenant_keys=ok, mirror=False) == {}
    bad = {"schema.history.internal.kafka.bootstrap.servers": "k1.kafka.svc:9092,127.0.0.2:9092"}
    with pytest.raises(CredentialsRefused) as caught:
        PLATFORM.check_connector_config(bad, field="spec.config", tenant_keys=bad, mirror=False)
    assert caught.value.reason == "HostNotAllowed"
    assert "schema.history.internal.kafka.bootstrap.servers" in str(caught.value) and "127.0.0.2:9092" in str(
        caught.value
    )
    # Without an allow-list any host may be named (the defaults).
    assert CredentialsPolicy().check_connector_config(bad, field="spec.config", tenant_keys=bad, mirror=False) == {}


def mirror_config(protocol: str, **extra: str) -> dict[str, str]:
    return {
        "source.cluster.bootstrap.servers": "a.kafka.svc:9093,b.kafka.svc:9093",
        "source.cluster.security.protocol": protocol,
        "source.cluster.sasl.jaas.config": "",
        "target.cluster.bootstrap.servers": "t.kafka.svc:9092",
        **extra,
    }


USE = CredentialKey("source.cluster.sasl.jaas.config", "source.cluster.", "east-jaas")


def test_credentials_only_over_verified_tls_and_where_they_go() -> None:
    field = "spec.mirrors[0].sourceConnector.config"
    for protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        with pytest.raises(CredentialsRefused) as plain:
            PLATFORM.check_connector_config(
                mirror_config(protocol), field=field, tenant_keys=(), mirror=True, credential_keys=[USE]
            )
        assert plain.value.reason == "PlaintextCredentials" and "east-jaas" in str(plain.value)
    unverified = mirror_config("SASL_SSL", **{"source.cluster.ssl.endpoint.identification.algorithm": ""})
    with pytest.raises(CredentialsRefused) as insecure:
        PLATFORM.check_connector_config(unverified, field=field, tenant_keys=(), mirror=True, credential_keys=[USE])
    assert insecure.value.reason == "InsecureCredentials"
    sent = PLATFORM.check_connector_config(
        mirror_config("SASL_SSL"), field=field, tenant_keys=(), mirror=True, credential_keys=[USE]
    )
    assert {str(d) for d in sent["east-jaas"]} == {"a.kafka.svc:9093", "b.kafka.svc:9093"}
    # The platform's own decision still lets them over plaintext.
    lenient = CredentialsPolicy(allow_plaintext=True)
    lenient.check_connector_config(
        mirror_config("SASL_PLAINTEXT"), field=field, tenant_keys=(), mirror=True, credential_keys=[USE]
    )


def test_a_tenant_may_not_refer_to_the_clusters_secret_provider() -> None:
    """Through the provider the operator uses for secretConfig a tenant would read any Secret the
    workers can: a value the operator did not write may not refer to it, nor to any provider the
    cluster does not allow (the workers may have others: file, env)."""
    rule = ReferenceRule.for_namespace("team-a", [], ConfigProviderSpec(name="secrets", type="kubernetesSecret"), "c")
    for value in ("${secrets:platform/admin:pw}", "${mounted:/mnt/x:y}"):
        config = {"topic": value, "file": "/tmp/x"}
        with pytest.raises(CredentialsRefused) as caught:
            CredentialsPolicy().check_connector_config(
                config, field="spec.config", tenant_keys=config, mirror=False, references=rule
            )
        assert caught.value.reason == "ConfigProviderReference" and "(topic)" in str(caught.value)
    # The operator's own references (secretConfig) pass.
    ours = {**mirror_config("SASL_SSL"), "source.cluster.sasl.jaas.config": "${secrets:team-a/east-jaas:jaas}"}
    CredentialsPolicy().check_connector_config(
        ours, field="f", tenant_keys=(), mirror=True, credential_keys=[USE], references=rule
    )


def test_insecure_skip_verify_never_carries_credentials() -> None:
    with pytest.raises(CredentialsRefused) as caught:
        CredentialsPolicy().check_connect_url("https://c.example", credentials=True, insecure_skip_verify=True)
    assert caught.value.reason == "InsecureCredentials" and "insecureSkipVerify" in str(caught.value)
    CredentialsPolicy().check_connect_url("https://c.example", credentials=False, insecure_skip_verify=True)
    CredentialsPolicy(allow_plaintext=True).check_connect_url(
        "https://c.example", credentials=True, insecure_skip_verify=True
    )


# --- Secrets: the opt-in label and the allowed hosts ----------------------------------------------


def test_a_secret_goes_only_to_the_hosts_its_owner_allows() -> None:
    labels = {CREDENTIALS_LABEL: "true"}
    hosts = {SECRET_HOSTS_ANNOTATION: "*.kafka.svc:9093, connect.svc:443"}
    check_secret_use(
        "ns", "s", labels, hosts, [Destination("x", "b.kafka.svc", 9093), Destination("y", "connect.svc", 443)]
    )
    with pytest.raises(CredentialsRefused) as caught:
        check_secret_use("ns", "s", labels, hosts, [Destination("spec.url", "127.0.0.2", 8443)])
    assert caught.value.reason == "SecretHostNotAllowed"
    assert "spec.url" in str(caught.value) and "127.0.0.2:8443" in str(caught.value)
    with pytest.raises(CredentialsRefused) as malformed:
        check_secret_use("ns", "s", labels, {SECRET_HOSTS_ANNOTATION: "a b"}, [])
    assert malformed.value.reason == "SecretHostNotAllowed" and "not a list" in str(malformed.value)
    # No annotation: any host the platform allows; no label: never.
    check_secret_use("ns", "s", labels, {}, [Destination("x", "anywhere", 1)])
    with pytest.raises(CredentialsRefused) as unlabelled:
        check_secret_use("ns", "s", {}, hosts, [])
    assert unlabelled.value.reason == "SecretNotOptedIn"


async def test_a_connect_clusters_secret_is_checked_against_its_url() -> None:
    kube = FakeKube()
    kube.add_secret("token", {"token": b"t0ken-value"}, annotations={SECRET_HOSTS_ANNOTATION: "connect.svc"})
    registry = ClusterRegistry(kube, CredentialsPolicy())  # type: ignore[arg-type]
    auth = {"authentication": {"type": "bearer", "secretName": "token"}}
    with pytest.raises(ClusterUnusable) as caught:
        await registry.endpoint("ns", ConnectClusterSpec.model_validate({"url": "https://other.svc", **auth}))
    assert caught.value.reason == "SecretHostNotAllowed"
    endpoint = await registry.endpoint("ns", ConnectClusterSpec.model_validate({"url": "https://connect.svc", **auth}))
    assert endpoint.auth is not None and endpoint.auth.token == "t0ken-value"
    with pytest.raises(ClusterUnusable) as insecure:
        spec = {"url": "https://connect.svc", "tls": {"insecureSkipVerify": True}, **auth}
        await registry.endpoint("ns", ConnectClusterSpec.model_validate(spec))
    assert insecure.value.reason == "InsecureCredentials"


def mirror_resource(source_config: dict[str, Any] | None = None, **mirror: Any) -> KafkaMirrorMaker2Resource:
    return KafkaMirrorMaker2Resource.model_validate(
        {
            "metadata": {"name": "m", "namespace": "team-a", "uid": "u1", "generation": 1},
            "spec": {
                "clusters": [
                    {
                        "alias": "east",
                        "bootstrapServers": "e.kafka.svc:9093",
                        "config": {"security.protocol": "SASL_SSL"},
                        "secretConfig": {"sasl.jaas.config": {"name": "east-jaas", "key": "jaas"}},
                    },
                    {"alias": "west", "bootstrapServers": "w.kafka.svc:9092"},
                ],
                "mirrors": [
                    {
                        "sourceCluster": "east",
                        "targetCluster": "west",
                        "sourceConnector": {"config": source_config or {}},
                        **mirror,
                    }
                ],
            },
        }
    )


async def test_a_mirror_connector_cannot_repoint_its_cluster_and_no_secret_is_read() -> None:
    kube = FakeKube()
    kube.add_secret("east-jaas", {"jaas": JAAS.encode()})
    redirect = {
        "source.cluster.bootstrap.servers": "127.0.0.2:9092",
        "source.cluster.security.protocol": "SASL_PLAINTEXT",
    }
    with pytest.raises(CredentialsRefused) as caught:
        await mirror_secrets(kube, mirror_resource(redirect), PLATFORM)  # type: ignore[arg-type]
    assert caught.value.reason == "ReservedConfigKey"
    assert "spec.mirrors[0].sourceConnector.config.source.cluster.bootstrap.servers" in str(caught.value)
    assert kube.secret_destinations == {}  # refused before any Secret was read
    values = await mirror_secrets(kube, mirror_resource(), PLATFORM)  # type: ignore[arg-type]
    assert values == {("east-jaas", "jaas"): JAAS}
    assert {str(d) for d in kube.secret_destinations["east-jaas"]} == {"e.kafka.svc:9093"}


async def test_secret_values_sent_to_connect_need_connects_host_too() -> None:
    kube = FakeKube()
    kube.add_secret("east-jaas", {"jaas": JAAS.encode()}, annotations={SECRET_HOSTS_ANNOTATION: "*.kafka.svc"})
    reader = MirrorSecrets(kube, CredentialsPolicy())  # type: ignore[arg-type]
    resource = mirror_resource()
    assert await reader.read(resource) == {("east-jaas", "jaas"): JAAS}  # the lag monitor: the brokers only
    with pytest.raises(CredentialsRefused) as caught:  # into the connectors' config: Connect's host too
        await reader.read(resource, connect_url="https://connect.platform:8083")
    assert caught.value.reason == "SecretHostNotAllowed" and "connect.platform:8083" in str(caught.value)
    # With a config provider only references go to Connect: the brokers are all the Secret must allow.
    assert await reader.read(resource, references=ReferenceRule()) == {("east-jaas", "jaas"): JAAS}


def test_producer_override_secrets_are_known_with_their_client() -> None:
    from connect_offsets.planning import mirror_targets

    target = mirror_targets(mirror_resource(writeToTarget="producerOverride"), {}).targets[0]
    assert set(target.secret_keys) == {("source.cluster.sasl.jaas.config", "source.cluster.", "east-jaas")}
    with_target = KafkaMirrorMaker2Resource.model_validate(
        {
            **mirror_resource().model_dump(by_alias=True, exclude_none=True),
            "spec": {
                "clusters": [
                    {"alias": "east", "bootstrapServers": "e:9092"},
                    {
                        "alias": "west",
                        "bootstrapServers": "w:9093",
                        "secretConfig": {"sasl.jaas.config": {"name": "w-jaas", "key": "jaas"}},
                    },
                ],
                "mirrors": [
                    {
                        "sourceCluster": "east",
                        "targetCluster": "west",
                        "writeToTarget": "producerOverride",
                        "sourceConnector": {},
                    }
                ],
            },
        }
    )
    keys = set(mirror_targets(with_target, {}).targets[0].secret_keys)
    assert keys == {
        ("target.cluster.sasl.jaas.config", "target.cluster.", "w-jaas"),
        ("producer.override.sasl.jaas.config", "producer.override.", "w-jaas"),
    }


# --- config providers ----------------------------------------------------------------------------


def test_config_provider_references() -> None:
    strimzi = ConfigProviderSpec.model_validate({"name": "secrets", "type": "kubernetesSecret"})
    assert strimzi.reference("team-a", "east-jaas", "jaas") == "${secrets:team-a/east-jaas:jaas}"
    mounted = ConfigProviderSpec.model_validate({"name": "dir", "type": "directory", "path": "/mnt/s/{namespace}/"})
    assert mounted.reference("team-a", "east-jaas", "jaas") == "${dir:/mnt/s/team-a/east-jaas:jaas}"
    for bad in ({"name": "d", "type": "directory"}, {"name": "d", "type": "directory", "path": "/a:b"}):
        with pytest.raises(ValueError):
            ConfigProviderSpec.model_validate(bad)


# --- a KafkaConnector refused by the policy -------------------------------------------------------


async def test_a_refused_connector_config_reaches_no_connect_call(stack: Stack) -> None:
    stack.connector(config={"file": "/f", "topic": "t", "consumer.override.bootstrap.servers": "127.0.0.2:9092"})
    await stack.reconcile()
    ready = stack.condition("Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("False", "ReservedConfigKey")
    assert "spec.config.consumer.override.bootstrap.servers" in ready["message"]
    assert NAME not in stack.connect.connectors
    assert [s for s in stack.connect.sent() if s.method != "GET"] == []


# --- what Connect quotes back ---------------------------------------------------------------------


def test_secret_parts_include_jaas_passwords() -> None:
    assert secret_parts([JAAS, "plain-token"]) == [JAAS, "pw-4f9a2c", "plain-token"]


async def test_validate_messages_are_redacted() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        config = json.loads(request.content)
        configs = [
            {"value": {"name": k, "errors": [f"value {v} refused", "password pw-4f9a2c is weak"]}}
            for k, v in config.items()
        ]
        return httpx.Response(200, json={"name": "x", "error_count": 2, "groups": [], "configs": configs})

    client = ConnectClient(ConnectEndpoint(url="http://c"), transport=httpx.MockTransport(answer))
    client.also_redact(secret_parts([JAAS]))
    problems = await client.validate_config({"connector.class": "X", "sasl.jaas.config": JAAS})
    assert problems and all(JAAS not in p and "pw-4f9a2c" not in p for p in problems)
    assert "sasl.jaas.config: value *** refused" in problems
    await client.aclose()


async def test_the_lag_monitor_reuses_what_the_reconcile_read() -> None:
    """One read of each Secret per minute for both: the lag monitor's read (brokers only) reuses the
    reconcile's (brokers and Connect's host), never the other way round."""
    kube = FakeKube()
    kube.add_secret("east-jaas", {"jaas": JAAS.encode()})
    reader = MirrorSecrets(kube, CredentialsPolicy(), clock=lambda: 100.0)  # type: ignore[arg-type]
    resource = mirror_resource()
    await reader.read(resource, connect_url="https://connect.platform:8083")
    checked = list(kube.secret_destinations["east-jaas"])
    assert "connect.platform:8083" in {str(d) for d in checked}
    await reader.read(resource)
    assert kube.secret_destinations["east-jaas"] == checked  # reused: not read again
    other = MirrorSecrets(kube, CredentialsPolicy(), clock=lambda: 100.0)  # type: ignore[arg-type]
    await other.read(resource)
    brokers_only = kube.secret_destinations["east-jaas"][len(checked) :]
    assert brokers_only and "connect.platform:8083" not in {str(d) for d in brokers_only}
    await other.read(resource, connect_url="https://connect.platform:8083")  # read again, for Connect's host
    assert "connect.platform:8083" in {str(d) for d in kube.secret_destinations["east-jaas"][len(checked) :]}


# --- a KafkaMirrorMaker2 whose secretConfig would go into a config sent to Connect -----------------


def mirror_on(kube: FakeKube, url: str, **tls: Any) -> None:
    kube.put_resource(
        CLUSTERS,
        {
            "apiVersion": f"{API_GROUP}/v1beta1",
            "kind": "ConnectCluster",
            "metadata": {"name": "local", "namespace": "team-a"},
            "spec": {"url": url, **tls},
        },
    )
    body = mirror_resource().model_dump(by_alias=True, exclude_none=True, mode="json")
    body["metadata"] = {"name": "m", "namespace": "team-a", "labels": {f"{API_GROUP}/cluster": "local"}}
    kube.put_resource(MIRRORS, {"apiVersion": f"{API_GROUP}/v1beta1", "kind": "KafkaMirrorMaker2", **body})


async def test_secret_config_never_goes_to_an_unverified_connect() -> None:
    kube = FakeKube()
    kube.add_secret("east-jaas", {"jaas": JAAS.encode()})
    url = "https://connect.test:8443"
    mirror_on(kube, url, tls={"insecureSkipVerify": True})
    connect = FakeConnect(url)
    with respx.mock(assert_all_called=False) as router:
        connect.install(router)
        clusters = ClusterRegistry(kube, CredentialsPolicy())  # type: ignore[arg-type]
        await MirrorMaker2Service(kube, clusters).reconcile("team-a", "m")  # type: ignore[arg-type]
        await clusters.aclose()
    conditions = kube.resource(MIRRORS, "team-a", "m")["status"]["conditions"]
    ready = next(c for c in conditions if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InsecureCredentials")
    assert connect.changes() == []  # no connector created: its config would carry the value
