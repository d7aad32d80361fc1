"""Config provider references by allow-list (issue 43, point 1): ``ReferenceRule`` and its use in
the one connector config check.

* nothing allowed by default, whatever the provider (the workers' file, env, Secrets);
* ``spec.configProviders.allowed``: the provider by its exact name, paths under the prefix made for
  the namespace, at a segment boundary, never with ``.``/``..`` segments, only for the namespaces
  listed;
* the operator's own references (secretConfig through ``spec.configProvider``): only in the keys it
  wrote, only under the resource's own namespace; a Secret's value is never quoted;
* refusals name the key, the provider and the rule.

In-memory only.
"""

from __future__ import annotations

import pytest
import respx

from connect_offsets.clients.credentials import (
    PROVIDER_CLUSTER_NAMESPACES_ENV,
    CredentialKey,
    CredentialsPolicy,
    CredentialsRefused,
    parse_allowed_hosts,
)
from connect_offsets.clients.reference_policy import ReferenceAllowance, ReferenceRule
from connect_offsets.models.config_references import config_references
from connect_offsets.models.crds import (
    AllowedConfigProvider,
    ConfigProviderSpec,
    ConnectClusterSpec,
    KafkaAccessSpec,
    KafkaMirrorMaker2Resource,
    MirrorClusterSpec,
)
from connect_offsets.reconcile.clusters import ClusterRegistry
from connect_offsets.vocabulary import API_GROUP, CLUSTERS, MIRRORS
from tests.fakes import FakeKube

pytestmark = pytest.mark.unit

SECRETS_PER_NAMESPACE = [AllowedConfigProvider(name="secrets", path_prefix="{namespace}/")]
OWN = ConfigProviderSpec(name="secrets", type="kubernetesSecret")


def check(config: dict[str, str], rule: ReferenceRule, **extra: object) -> None:
    CredentialsPolicy().check_connector_config(
        config, field="spec.config", tenant_keys=config, mirror=False, references=rule, **extra
    )


def refusal(config: dict[str, str], rule: ReferenceRule) -> str:
    with pytest.raises(CredentialsRefused) as caught:
        check(config, rule)
    assert caught.value.reason == "ConfigProviderReference"
    return str(caught.value)


def test_no_provider_is_allowed_by_default() -> None:
    for value in (
        "${file:/etc/kafka/worker.properties:sasl.jaas.config}",
        "${env:AWS_SECRET_ACCESS_KEY}",
        "${secrets:other-ns/db:password}",
        "${nope:x}${secrets:other-ns/db:password}",
    ):
        message = refusal({"topic": "t", "database.password": value}, ReferenceRule(where="ConnectCluster p/c"))
        assert "(database.password)" in message and "spec.configProviders.allowed is empty" in message
        assert "ConnectCluster p/c" in message and "nothing was sent to Connect" in message
    # Dollars and braces that Connect does not read as a reference are text.
    check({"label": "price ${USD}", "other": "${", "json": '{"a": "b"}'}, ReferenceRule())


def test_the_message_names_the_key_the_provider_and_the_rule() -> None:
    rule = ReferenceRule.for_namespace("team-a", SECRETS_PER_NAMESPACE, None, "ConnectCluster platform/shared")
    message = refusal({"k": "${file:/etc/passwd:root}"}, rule)
    assert "spec.config (k)" in message and "'file'" in message
    assert "allows only secrets (paths under 'team-a/') for this namespace" in message


def test_an_allowed_provider_only_under_its_prefix() -> None:
    rule = ReferenceRule.for_namespace("team-a", SECRETS_PER_NAMESPACE, None, "ConnectCluster platform/shared")
    check({"database.password": "${secrets:team-a/db:password}"}, rule)
    check({"u": "${secrets:team-a/db:user}", "p": "pw ${secrets:team-a/db:pw} end"}, rule)
    # Every reference of a value counts, the second as much as the first.
    message = refusal({"p": "${secrets:team-a/db:pw}${secrets:team-b/db:pw}"}, rule)
    assert "'team-b/db' is not under 'team-a/'" in message
    for path in ("team-b/db", "team-ab/db", "team-a/../team-b/db", "./team-a/db", "team-a/./db", "team-a\\..\\x"):
        refusal({"p": f"${{secrets:{path}:pw}}"}, rule)
    # The name is exact: another spelling is another provider, which the workers may have.
    for provider in ("Secrets", " secrets", "secrets "):
        refusal({"p": f"${{{provider}:team-a/db:pw}}"}, rule)
    # A reference without a path has the empty path: not under the prefix.
    refusal({"p": "${secrets:pw}"}, rule)


def test_a_prefix_ends_at_a_segment() -> None:
    assert ReferenceAllowance("s", "team-a").covers("team-a/db")
    assert not ReferenceAllowance("s", "team-a").covers("team-a")  # a Secret of the workers' namespace
    assert not ReferenceAllowance("s", "team-a").covers("team-ab/db")
    assert ReferenceAllowance("s", "/mnt/secrets/team-a/").covers("/mnt/secrets/team-a/db")
    assert not ReferenceAllowance("s", "/mnt/secrets/team-a/").covers("/mnt/secrets/team-a")
    assert ReferenceAllowance("s", None).covers("/anything")


def test_entries_for_listed_namespaces_only() -> None:
    allowed = [AllowedConfigProvider(name="vault", path_prefix="kv/{namespace}/", namespaces=["team-a"])]
    check({"p": "${vault:kv/team-a/db:pw}"}, ReferenceRule.for_namespace("team-a", allowed, None, "c"))
    refusal({"p": "${vault:kv/team-b/db:pw}"}, ReferenceRule.for_namespace("team-b", allowed, None, "c"))


def test_the_operators_own_references_only_where_it_wrote_them() -> None:
    rule = ReferenceRule.for_namespace("team-a", [], OWN, "ConnectCluster platform/shared")
    use = CredentialKey("source.cluster.sasl.jaas.config", "source.cluster.", "east-jaas")
    written = {"source.cluster.sasl.jaas.config": "${secrets:team-a/east-jaas:jaas}"}
    CredentialsPolicy(allow_plaintext=True).check_connector_config(
        written, field="f", tenant_keys=(), mirror=True, credential_keys=[use], references=rule
    )
    # A tenant's own value may not use the operator's provider.
    message = refusal({"topic": "${secrets:team-a/east-jaas:jaas}"}, rule)
    assert "use secretConfig instead" in message
    # Nor may a written value point at another namespace, or hold another provider.
    for value in ("${secrets:team-b/db:pw}", "${secrets:team-a/x:y}${file:/etc/kafka/worker.properties:z}"):
        with pytest.raises(CredentialsRefused) as caught:
            CredentialsPolicy(allow_plaintext=True).check_connector_config(
                {use.key: value}, field="f", tenant_keys=(), mirror=True, credential_keys=[use], references=rule
            )
        assert caught.value.reason == "ConfigProviderReference"
        # The value came from a Secret: no part of it is shown.
        assert "team-b" not in str(caught.value) and "worker.properties" not in str(caught.value)


def test_the_directory_provider_of_the_operator() -> None:
    own = ConfigProviderSpec(name="mounted", type="directory", path="/mnt/secrets/{namespace}")
    rule = ReferenceRule.for_namespace("team-a", [], own, "c")
    assert rule.own == ReferenceAllowance("mounted", "/mnt/secrets/team-a/")
    [reference] = config_references(own.reference("team-a", "db", "pw"))
    assert rule.refusal(reference, written=True) is None
    assert rule.refusal(reference, written=False) is not None


def test_the_spec_field() -> None:
    spec = ConnectClusterSpec.model_validate(
        {
            "url": "https://connect.svc:8083",
            "configProviders": {"allowed": [{"name": "secrets", "pathPrefix": "{namespace}/"}]},
        }
    )
    assert spec.config_providers is not None and spec.config_providers.allowed == SECRETS_PER_NAMESPACE
    with pytest.raises(ValueError, match="must not contain"):
        AllowedConfigProvider(name="secrets", path_prefix="a:b")
    with pytest.raises(ValueError):
        AllowedConfigProvider(name="bad name")


# --- the attacker's review (issue 43, point 4) ----------------------------------------------------


def test_only_clusters_of_the_namespaces_the_platform_names_may_allow_providers() -> None:
    """A tenant may write a ConnectCluster of its own for any worker the operator reaches: its
    allow-list would be the tenant's own word."""
    assert not CredentialsPolicy().honours_config_providers("platform")
    named = CredentialsPolicy.from_env({PROVIDER_CLUSTER_NAMESPACES_ENV: "platform, ops"})
    assert named.honours_config_providers("platform") and not named.honours_config_providers("team-a")
    assert CredentialsPolicy.from_env({PROVIDER_CLUSTER_NAMESPACES_ENV: "*"}).honours_config_providers("team-a")
    with pytest.raises(ValueError, match="not a namespace name"):
        CredentialsPolicy.from_env({PROVIDER_CLUSTER_NAMESPACES_ENV: "Team_A"})


async def test_a_tenants_own_cluster_allows_nothing_unless_its_namespace_is_named() -> None:
    allowed = {"allowed": [{"name": "file"}, {"name": "env"}]}
    for policy, refused in (
        (CredentialsPolicy(), True),
        (CredentialsPolicy(provider_cluster_namespaces=frozenset({"team-a"})), False),
    ):
        kube = FakeKube()
        kube.put_resource(
            CLUSTERS,
            {
                "metadata": {"name": "own", "namespace": "team-a", "generation": 1},
                "spec": {"url": "http://connect:8083", "configProviders": allowed},
            },
        )
        clusters = ClusterRegistry(kube, policy)  # type: ignore[arg-type]
        with respx.mock(assert_all_called=False) as router:
            router.get("http://connect:8083/").respond(json={"version": "4.3.1", "kafka_cluster_id": "k"})
            await clusters.client_for("team-a", "own", for_namespace="team-a")
        rule = clusters.reference_rule("team-a", "own", "team-a")
        [reference] = config_references("${file:/opt/kafka/config/connect-distributed.properties:sasl.jaas.config}")
        why = rule.refusal(reference, written=False)
        assert (why is not None) == refused, why
        if refused:
            assert "is not honoured" in str(why) and PROVIDER_CLUSTER_NAMESPACES_ENV in str(why)
        await clusters.aclose()


def test_a_tenant_may_not_write_a_key_the_operator_writes_from_a_secret() -> None:
    """writeToTarget producerOverride writes target secretConfig under producer.override.*: had the
    tenant's value of the same key won, it would have passed for the operator's own reference. The
    key of the review (client.dns.lookup) is a connection setting, reserved as such; any other key
    the operator writes from a Secret is reserved too."""
    rule = ReferenceRule.for_namespace("team-a", [], OWN, "c")
    for key, says in (
        ("producer.override.client.dns.lookup", "Connect worker's own credentials"),
        ("producer.override.x.custom.secret", "writes it from spec.clusters' secretConfig"),
    ):
        use = CredentialKey(key, "producer.override.", "mine")
        config = {key: "${secrets:team-a/db-admin:password}"}
        with pytest.raises(CredentialsRefused) as caught:
            CredentialsPolicy(allow_plaintext=True).check_connector_config(
                config, field="f", tenant_keys=config, mirror=True, credential_keys=[use], references=rule
            )
        assert caught.value.reason == "ReservedConfigKey" and says in str(caught.value), caught.value


@pytest.mark.parametrize(
    "key", ["bootstrap.servers", "security.protocol", "ssl.endpoint.identification.algorithm", "client.dns.lookup"]
)
def test_secret_config_may_not_say_where_its_client_connects(key: str) -> None:
    ref = {"name": "mine", "key": "addr"}
    with pytest.raises(ValueError, match=f"secretConfig must not set {key}"):
        MirrorClusterSpec.model_validate(
            {"alias": "e", "bootstrapServers": "e.kafka.svc:9093", "secretConfig": {key: ref}}
        )
    with pytest.raises(ValueError, match=f"secretConfig must not set {key}"):
        KafkaAccessSpec.model_validate({"bootstrapServers": "e.kafka.svc:9093", "secretConfig": {key: ref}})
    MirrorClusterSpec.model_validate(
        {"alias": "e", "bootstrapServers": "e.kafka.svc:9093", "secretConfig": {"sasl.jaas.config": ref}}
    )


def test_checkpoint_connectors_never_checkpoint_a_group_id_with_a_reference() -> None:
    from connect_offsets.models.java_regex import compile_java
    from connect_offsets.planning import mirror_targets

    def checkpoint_exclude(extra: dict[str, str]) -> str:
        resource = KafkaMirrorMaker2Resource.model_validate(
            {
                "metadata": {"name": "mm2", "namespace": "team-a"},
                "spec": {
                    "clusters": [
                        {"alias": "e", "bootstrapServers": "e:9092"},
                        {"alias": "w", "bootstrapServers": "w:9092"},
                    ],
                    "mirrors": [{"sourceCluster": "e", "targetCluster": "w", "checkpointConnector": {"config": extra}}],
                },
            }
        )
        [checkpoint] = [
            t for t in mirror_targets(resource, {}).targets if t.class_name.endswith("MirrorCheckpointConnector")
        ]
        return checkpoint.config["groups.exclude"]

    default = checkpoint_exclude({})
    assert default == ".*\\$\\{.*, console-consumer-.*, connect-.*, __.*"
    # First: a tenant's entry joined after it by "|" cannot change it (a trailing backslash, \\Q, (?x)).
    assert checkpoint_exclude({"groups.exclude": "tmp-.*"}) == ".*\\$\\{.*, tmp-.*"
    assert checkpoint_exclude({"groups.exclude": "zz\\"}).startswith(".*\\$\\{.*, ")
    pattern = compile_java("|".join(p.strip() for p in default.split(",")), "groups.exclude")
    assert pattern.full_match("x${file:/etc/kafka/worker.properties:sasl.jaas.config}")
    assert not pattern.full_match("orders-app") and not config_references(default)


def test_oauth_endpoints_are_destinations_of_the_secrets() -> None:
    """A client's OAuth token endpoint receives its SASL credentials (the JAAS clientSecret) as the
    brokers do: allow-lists, https only, never file: (the client reads the file)."""
    listed = CredentialsPolicy(allowed_hosts=parse_allowed_hosts("*.kafka.svc,idp.platform.svc"))
    oauth = {"security.protocol": "SASL_SSL", "sasl.oauthbearer.token.endpoint.url": "https://idp.platform.svc/token"}
    goes_to = listed.check_kafka("clusters[east]", "e.kafka.svc:9093", oauth, credentials=True)
    assert [str(d) for d in goes_to] == ["e.kafka.svc:9093", "idp.platform.svc:443"]
    for url, reason in (
        ("https://attacker.example.com/token", "HostNotAllowed"),
        ("file:///var/run/secrets/kubernetes.io/serviceaccount/token", "InvalidURL"),
        ("http://idp.platform.svc/token", "PlaintextCredentials"),
    ):
        with pytest.raises(CredentialsRefused) as caught:
            listed.check_kafka(
                "clusters[east]",
                "e.kafka.svc:9093",
                {**oauth, "sasl.oauthbearer.token.endpoint.url": url},
                credentials=True,
            )
        assert caught.value.reason == reason, caught.value
    # In a connector's final config, the endpoint of a client that carries a Secret is where it goes.
    use = CredentialKey("source.cluster.sasl.jaas.config", "source.cluster.", "east-jaas")
    final = {
        "source.cluster.bootstrap.servers": "e.kafka.svc:9093",
        "source.cluster.security.protocol": "SASL_SSL",
        "source.cluster.sasl.oauthbearer.token.endpoint.url": "https://idp.platform.svc/token",
        "source.cluster.sasl.jaas.config": "",
    }
    sent = listed.check_connector_config(final, field="f", tenant_keys=(), mirror=True, credential_keys=[use])
    assert [str(d) for d in sent["east-jaas"]] == ["e.kafka.svc:9093", "idp.platform.svc:443"]


def test_hostname_verification_must_be_https() -> None:
    for value in ("", "none", "NONE", "http"):
        with pytest.raises(CredentialsRefused) as caught:
            CredentialsPolicy().check_kafka(
                "c",
                "e.kafka.svc:9093",
                {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": value},
                credentials=True,
            )
        assert caught.value.reason == "InsecureCredentials"
    CredentialsPolicy().check_kafka(
        "c",
        "e.kafka.svc:9093",
        {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": " HTTPS "},
        credentials=True,
    )


async def test_a_tenants_own_clusters_config_provider_writes_nothing() -> None:
    """The references the operator writes through spec.configProvider are aimed by whoever wrote the
    ConnectCluster: a directory path of /var/run/secrets/kubernetes.io and a Secret named
    serviceaccount would send the workers' own token. Not honoured: refused, nothing sent (and not
    the values in clear instead)."""
    from connect_offsets.reconcile.mirrormaker2 import MirrorMaker2Service
    from tests.fakes import FakeConnect

    kube = FakeKube()
    kube.add_secret("serviceaccount", {"token": b"tenant-value"})
    kube.put_resource(
        CLUSTERS,
        {
            "metadata": {"name": "own", "namespace": "team-a"},
            "spec": {
                "url": "http://connect:8083",
                "configProvider": {"name": "mounted", "type": "directory", "path": "/var/run/secrets/kubernetes.io"},
            },
        },
    )
    kube.put_resource(
        MIRRORS,
        {
            "metadata": {"name": "m", "namespace": "team-a", "labels": {f"{API_GROUP}/cluster": "own"}},
            "spec": {
                "clusters": [
                    {
                        "alias": "east",
                        "bootstrapServers": "e.kafka.svc:9093",
                        "secretConfig": {"client.id": {"name": "serviceaccount", "key": "token"}},
                    },
                    {"alias": "west", "bootstrapServers": "w.kafka.svc:9092"},
                ],
                "mirrors": [
                    {"sourceCluster": "east", "targetCluster": "west", "sourceConnector": {"state": "stopped"}}
                ],
            },
        },
    )
    connect = FakeConnect("http://connect:8083")
    with respx.mock(assert_all_called=False) as router:
        connect.install(router)
        clusters = ClusterRegistry(kube, CredentialsPolicy(allow_plaintext=True))  # type: ignore[arg-type]
        await MirrorMaker2Service(kube, clusters).reconcile("team-a", "m")  # type: ignore[arg-type]
        assert clusters.reference_rule("team-a", "own", "team-a").own is None
        trusted = ClusterRegistry(kube, CredentialsPolicy(provider_cluster_namespaces=frozenset({"team-a"})))  # type: ignore[arg-type]
        await trusted.client_for("team-a", "own", for_namespace="team-a")
        assert trusted.reference_rule("team-a", "own", "team-a").own is not None
        await clusters.aclose()
        await trusted.aclose()
    ready = next(c for c in kube.resource(MIRRORS, "team-a", "m")["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "ConfigProviderNotHonoured" and "not honoured" in ready["message"], ready
    assert [s for s in connect.sent() if s.method != "GET"] == []
    assert "tenant-value" not in str(kube.resource(MIRRORS, "team-a", "m"))


def test_any_path_only_by_leaving_the_prefix_out() -> None:
    with pytest.raises(ValueError):
        AllowedConfigProvider(name="secrets", path_prefix="")
    assert AllowedConfigProvider(name="env").path_prefix is None
