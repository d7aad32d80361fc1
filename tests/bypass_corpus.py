"""The bypass corpus (issue 43, item 3): every hostile input a security review found, in one table.

The operator is shared by many tenants, and everything a tenant writes (KafkaConnector,
KafkaMirrorMaker2 and ConnectCluster specs, ConfigMaps, annotations) is hostile. Each review found a
new way past a rule; each way is a row here, with the rule (function) that refuses it and the
reason it refuses with, so that a change which lets one through again fails a test naming it.
Controls (``reason=None``) are inputs the rule must accept: what Connect does not read as a
reference, a tenant's own Secret, a record that is not believed. A refusal of a control is a
regression as much as an acceptance of a bypass.

Each row's ``attempt`` runs the rule on the hostile input, in memory (fakes, no network); the input
is written out in the row, the helpers below only build the fakes around it. ``attempt`` raises
the refusal (an error whose ``reason`` is the condition reason; for errors without one, such as
``PatternRefused`` or pydantic's ``ValidationError``, the class name is the reason), or returns
(accepted; may return a coroutine, which the test awaits). Rules that return their refusal
instead of raising it (``check_binding``, the planner's ``offsets_refusal``) go through
:func:`raise_refusal`. Run by ``tests/unit/test_bypass_corpus.py``, which also holds the
generated connector configs checked against a model of what Connect resolves.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import json
import re
import tracemalloc
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import pytest
import respx

from connect_offsets.clients.credentials import (
    CREDENTIALS_LABEL,
    SECRET_HOSTS_ANNOTATION,
    CredentialKey,
    CredentialsPolicy,
    Destination,
    check_secret_use,
    parse_allowed_hosts,
)
from connect_offsets.clients.kubernetes import label_value
from connect_offsets.clients.offsets_configmaps import OffsetsConfigMapStore
from connect_offsets.clients.offsets_configmaps.layout import FORMAT, FORMAT_VERSION
from connect_offsets.clients.reference_policy import ReferenceRule
from connect_offsets.lag.secrets import check_mirror_configs
from connect_offsets.models.connect import ServerInfo
from connect_offsets.models.crds import (
    AllowedConfigProvider,
    ConfigProviderSpec,
    ConnectClusterSpec,
    KafkaConnectorResource,
    KafkaMirrorMaker2Resource,
    MirrorClusterSpec,
)
from connect_offsets.models.crds.base import DNS1123_SUBDOMAIN
from connect_offsets.models.java_regex import compile_java
from connect_offsets.planning import (
    OffsetsConfigMap,
    check_binding,
    mirror_targets,
    plan_connector,
    target_for_connector,
)
from connect_offsets.planning.mirror_topics import mirrored_topic_filter
from connect_offsets.reconcile import owners, settings
from connect_offsets.reconcile.clusters import ClusterRegistry
from connect_offsets.reconcile.deletion import final_backup_name
from connect_offsets.vocabulary import (
    ANNOTATION_DRY_RUN,
    ANNOTATION_DRY_RUN_FROM,
    ANNOTATION_OFFSETS,
    API_GROUP,
    CLUSTERS,
    LAST_OWNER_LABEL,
    short_hash,
)
from tests.fakes import FakeKube
from tests.owner_records import RecordsKube as SharedRecordsKube
from tests.unit.planning_fixtures import VALID_DOC, make_resource, observe

__all__ = ["ANY", "CORPUS", "NAMESPACE", "SECRETS_UNDER_NAMESPACE", "Bypass", "Refusal", "reason_of"]


#: ``Bypass.returns`` of a control whose result does not matter.
ANY: Final = object()


@dataclass(frozen=True)
class Bypass:
    """One hostile input: ``rule`` refuses it with ``reason`` (None: a control, accepted).

    ``says``: a fragment the refusal's message must hold (which key, which reference). ``returns``:
    for a control, what the attempt must return (``ANY``: anything).
    """

    name: str
    rule: str
    attempt: Callable[[], object]
    reason: str | None
    says: str = ""
    returns: object = ANY

    @property
    def family(self) -> str:
        return self.rule.split(" ", 1)[0]


class Refusal(Exception):
    """A rule's refusal that the rule returns rather than raises (see :func:`raise_refusal`)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def reason_of(error: BaseException) -> str:
    """The refusal reason of ``error``: its ``reason`` (a condition reason), else its class name."""
    reason = getattr(error, "reason", None)
    return reason if isinstance(reason, str) else type(error).__name__


def raise_refusal(found: Any) -> None:
    """For rules that return a refusal (an object with ``reason`` and ``message``) or None."""
    if found is not None:
        raise Refusal(found.reason, found.message)


# --- the rules' settings ---------------------------------------------------------------------------

NAMESPACE: Final = "team-a"
WHERE: Final = "ConnectCluster platform/shared"
#: What the reviews assume a platform sets: ``secrets`` (Strimzi's Kubernetes Secret provider) for
#: each namespace's own Secrets.
SECRETS_UNDER_NAMESPACE: Final = [AllowedConfigProvider(name="secrets", path_prefix="{namespace}/")]
#: No provider allowed: the default.
NOTHING: Final = ReferenceRule(where=WHERE)
TEAM_A: Final = ReferenceRule.for_namespace(NAMESPACE, SECRETS_UNDER_NAMESPACE, None, WHERE)
#: The prefix without a trailing slash: it ends at a whole segment.
TEAM_A_SEGMENT: Final = ReferenceRule.for_namespace(
    NAMESPACE, [AllowedConfigProvider(name="secrets", pathPrefix="{namespace}")], None, WHERE
)
#: ``nope`` allowed anywhere beside ``secrets`` under the namespace: only the second reference of a
#: value can be refused, so a refusal proves it was seen.
NOPE_AND_TEAM_A: Final = ReferenceRule.for_namespace(
    NAMESPACE, [AllowedConfigProvider(name="nope"), *SECRETS_UNDER_NAMESPACE], None, WHERE
)
#: The operator's own provider for secretConfig, nothing allowed to tenants.
OWN: Final = ReferenceRule.for_namespace(
    NAMESPACE, [], ConfigProviderSpec(name="secrets", type="kubernetesSecret"), WHERE
)
#: The allow-list of the platform in the reviews.
LISTED: Final = CredentialsPolicy(allowed_hosts=parse_allowed_hosts("connect.svc:443,*.kafka.svc"))
STRICT: Final = CredentialsPolicy()
#: The secretConfig key the operator writes into a mirror's source connector.
JAAS_KEY: Final = CredentialKey("source.cluster.sasl.jaas.config", "source.cluster.", "east-jaas")


# --- how each rule is called ------------------------------------------------------------------------


def config(values: Mapping[str, str], rule: ReferenceRule | None = NOTHING, policy: CredentialsPolicy = STRICT) -> Any:
    """A KafkaConnector's final config, every key written by the tenant."""
    return policy.check_connector_config(
        dict(values), field="spec.config", tenant_keys=values, mirror=False, references=rule
    )


def mirror_config(values: Mapping[str, str], policy: CredentialsPolicy = STRICT) -> Any:
    """A MirrorMaker 2 connector's config, every key written by the tenant."""
    return policy.check_connector_config(
        dict(values), field="spec.mirrors[0].sourceConnector.config", tenant_keys=values, mirror=True
    )


def written(value: str, rule: ReferenceRule = OWN) -> Any:
    """A secretConfig value the operator writes (``JAAS_KEY``): a Secret's value, or its reference."""
    return CredentialsPolicy(allow_plaintext=True).check_connector_config(
        {JAAS_KEY.key: value},
        field="spec.mirrors[0]",
        tenant_keys=(),
        mirror=True,
        credential_keys=[JAAS_KEY],
        references=rule,
    )


def connector(spec: Mapping[str, Any], rule: ReferenceRule = TEAM_A) -> Any:
    """A whole KafkaConnector spec, as the reconcile checks it (``target_for_connector``'s config)."""
    resource = KafkaConnectorResource.model_validate(
        {"metadata": {"name": "orders", "namespace": NAMESPACE, "uid": "u1", "generation": 1}, "spec": dict(spec)}
    )
    target = target_for_connector(resource)
    return STRICT.check_connector_config(
        target.config, field="spec.config", tenant_keys=target.tenant_keys, mirror=False, references=rule
    )


def mirror(
    cluster_config: Mapping[str, Any] | None = None,
    source_config: Mapping[str, Any] | None = None,
    rule: ReferenceRule = TEAM_A,
) -> Any:
    """A whole KafkaMirrorMaker2, every connector config as Connect would receive it."""
    resource = KafkaMirrorMaker2Resource.model_validate(
        {
            "metadata": {"name": "m", "namespace": NAMESPACE, "uid": "u1", "generation": 1},
            "spec": {
                "clusters": [
                    {"alias": "east", "bootstrapServers": "e.kafka.svc:9093", "config": dict(cluster_config or {})},
                    {"alias": "west", "bootstrapServers": "w.kafka.svc:9092"},
                ],
                "mirrors": [
                    {
                        "sourceCluster": "east",
                        "targetCluster": "west",
                        "sourceConnector": {"config": dict(source_config or {})},
                    }
                ],
            },
        }
    )
    return check_mirror_configs(resource, STRICT, rule)


def tenant_regex(pattern: str, topic: str) -> bool:
    """A tenant's ``topics.regex``, matched as Connect does (a full match)."""
    return compile_java(pattern, "config[topics.regex]").full_match(topic)


def dry_run_from(name: str) -> None:
    """An alter dry run whose ``dry-run-from`` annotation names ``name``, planned (a ConfigMap of that
    name, holding a valid document, is there to be read)."""
    annotations = {ANNOTATION_OFFSETS: "alter", ANNOTATION_DRY_RUN: "true", ANNOTATION_DRY_RUN_FROM: name}
    resource = make_resource(annotations=annotations, list_to="offsets-out", alter_from="offsets-in")
    preview = OffsetsConfigMap(name, True, "21", {"offsets.json": json.dumps(VALID_DOC)})
    observed = dataclasses.replace(observe(resource, "RUNNING"), dry_run_configmap=preview)
    refusal = plan_connector(resource, observed).offsets_refusal
    if refusal is not None:
        raise Refusal(refusal[0], refusal[1])


def binding(namespace: str, names: list[str], **cluster: Any) -> None:
    """A resource of ``namespace`` with connectors ``names`` on ConnectCluster platform/shared."""
    spec = ConnectClusterSpec.model_validate({"url": "https://connect.svc", **cluster})
    raise_refusal(check_binding(spec, "platform", "shared", namespace, names))


LABEL_VALUE: Final = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and LABEL_VALUE.fullmatch(value) is not None


def is_object_name(value: str) -> bool:
    return len(value) <= 253 and re.fullmatch(DNS1123_SUBDOMAIN, value) is not None


# --- gzip bombs -------------------------------------------------------------------------------------


def gzip_of_zeros(inflated: int) -> bytes:
    """gzip of ``inflated`` zero bytes, made a MiB at a time (about 1/1000 of the size)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    return b"".join([*(packer.compress(zeros) for _ in range(inflated >> 20)), packer.flush()])


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def read_offsets(
    binary_data: Mapping[str, bytes], data: Mapping[str, str] | None = None, *, cap: int, shards: Mapping[str, bytes]
) -> None:
    """Read key ``k`` of a tenant's ConfigMap ``cm`` (and shard ConfigMaps ``shards``: name -> the
    bytes under their key ``k``) with document cap ``cap``; Python's allocations must stay under the
    cap plus a few MiB (a bomb is never inflated whole)."""
    kube = FakeKube()
    for name, payload in shards.items():
        await kube.create_configmap_uid("ns", {"metadata": {"name": name}, "binaryData": {"k": _b64(payload)}})
    body = {"metadata": {"name": "cm"}, "binaryData": {k: _b64(v) for k, v in binary_data.items()}}
    if data:
        body["data"] = dict(data)
    await kube.create_configmap_uid("ns", body)
    store = OffsetsConfigMapStore(kube, max_document_bytes=cap)  # type: ignore[arg-type]
    tracemalloc.start()
    try:
        await store.read("ns", "cm", "k")
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < cap + (8 << 20), f"{peak} bytes allocated reading it"


def shard_index(claimed_size: int, shards: Mapping[str, bytes]) -> str:
    """A shard index as a tenant may write one: ``claimed_size`` for the whole document, the shards'
    real sizes and hashes (so only the inflated size lies)."""
    return json.dumps(
        {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "key": "k",
            "encoding": "gzip",
            "size": claimed_size,
            "sha256": "0" * 64,
            "compressedSize": sum(len(v) for v in shards.values()),
            "partitions": 1,
            "generation": "g1",
            "shards": [
                {"name": name, "key": "k", "size": len(v), "sha256": hashlib.sha256(v).hexdigest()}
                for name, v in shards.items()
            ],
        }
    )


def sharded_bomb(claimed_size: int, inflated: int, *, cap: int) -> Any:
    bomb = {"cm-shard-g1-0000": gzip_of_zeros(inflated)}
    return read_offsets({}, {"k.shards": shard_index(claimed_size, bomb)}, cap=cap, shards=bomb)


# --- owner records --------------------------------------------------------------------------------

RECORDS_NAMESPACE: Final = "connect-offsets-system"
CONNECTOR: Final = "orders"
#: The Kafka cluster ids of the victim's Connect cluster and of one the attacker runs.
VICTIMS_CLUSTER: Final = "kafka-a-cluster-id"
ATTACKERS_CLUSTER: Final = "kafka-b-cluster-id"


class RecordsKube(SharedRecordsKube):
    """The shared ConfigMap store (``tests/owner_records.py``), with records written as tests need them."""

    def forge(self, namespace: str, owner: str, cluster: str | None) -> None:
        """A record written straight into ``namespace`` (a tenant's), claiming ``owner``, newer than
        anything; keyed as the operator keys them (name alone, or ``cluster`` and name)."""
        digest = short_hash(CONNECTOR if cluster is None else f"{cluster}/{CONNECTOR}")
        annotations = {
            f"{API_GROUP}/connector": CONNECTOR,
            f"{API_GROUP}/owner": owner,
            f"{API_GROUP}/time": "2999-01-01T00:00:00+00:00",
        }
        if cluster is not None:
            annotations[f"{API_GROUP}/kafka-cluster-id"] = cluster
        name = f"connect-offsets-owner-{digest}-{len(self.objects)}"
        self.objects[(namespace, name)] = {
            "metadata": {"labels": {LAST_OWNER_LABEL: digest}, "annotations": annotations}
        }


@dataclass
class RecordsPass:
    """What owner records use of a reconcile pass: the resource, its namespace, its worker's ``GET /``."""

    namespace: str
    kube: RecordsKube
    cluster: str | None
    body: dict[str, Any] = field(default_factory=lambda: {"metadata": {"name": CONNECTOR}})

    @property
    def info(self) -> ServerInfo:
        return ServerInfo(version="3.9.0", kafka_cluster_id=self.cluster)

    def event(self, kind: str, reason: str, message: str) -> None:
        pass


@contextmanager
def _records_namespace() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(settings.OWNER_RECORDS_NAMESPACE_ENV, RECORDS_NAMESPACE)
        yield


async def wipe_leftovers(
    namespace: str,
    cluster: str | None,
    *,
    created: tuple[tuple[str, str | None], ...] = (),
    forged: tuple[tuple[str, str, str | None], ...] = (),
) -> None:
    """``namespace``'s initialOffsets would wipe leftovers of connector ``orders`` on Connect cluster
    ``cluster``, after each (namespace, cluster) of ``created`` created it (``record_owner``, in the
    records namespace) and each (namespace, owner, cluster) of ``forged`` wrote a record of its own
    in its namespace. Raises ``LeftoverOffsetsOwnedElsewhere`` when the records refuse it."""
    kube = RecordsKube()
    with _records_namespace():
        for creator, on in created:
            await owners.record_owner(RecordsPass(creator, kube, on), CONNECTOR)  # type: ignore[arg-type]
        for where, owner, on in forged:
            kube.forge(where, owner, on)
        await owners.check_leftovers_owner(RecordsPass(namespace, kube, cluster), CONNECTOR, 3)  # type: ignore[arg-type]


async def rewrite_legacy_record(creator: str, cluster: str | None, then: str) -> None:
    """A name-only record of ``team-a/orders`` in the records namespace (an earlier version's);
    ``creator`` creates ``orders`` on a server reporting ``cluster`` as its Kafka cluster id; then
    ``then``'s initialOffsets on the victim's cluster would wipe leftovers."""
    kube = RecordsKube()
    kube.objects[(RECORDS_NAMESPACE, f"connect-offsets-owner-{short_hash(CONNECTOR)}")] = {
        "metadata": {
            "labels": {LAST_OWNER_LABEL: short_hash(CONNECTOR)},
            "annotations": {f"{API_GROUP}/connector": CONNECTOR, f"{API_GROUP}/owner": "team-a/orders"},
        }
    }
    with _records_namespace():
        await owners.record_owner(RecordsPass(creator, kube, cluster), CONNECTOR)  # type: ignore[arg-type]
        await owners.check_leftovers_owner(RecordsPass(then, kube, VICTIMS_CLUSTER), CONNECTOR, 3)  # type: ignore[arg-type]


async def own_cluster_reference(policy: CredentialsPolicy, value: str) -> None:
    """A tenant's own ConnectCluster (namespace team-b) for a shared worker, allowing itself every
    provider; a KafkaConnector of team-b on it holds ``value``."""
    kube = FakeKube()
    kube.put_resource(
        CLUSTERS,
        {
            "metadata": {"name": "own", "namespace": "team-b"},
            "spec": {
                "url": "http://connect.svc:8083",
                "configProviders": {"allowed": [{"name": "file"}, {"name": "env"}, {"name": "secrets"}]},
            },
        },
    )
    clusters = ClusterRegistry(kube, policy)  # type: ignore[arg-type]
    try:
        with respx.mock(assert_all_called=False) as router:
            router.get("http://connect.svc:8083/").respond(json={"version": "4.3.1", "kafka_cluster_id": "k"})
            await clusters.client_for("team-b", "own", for_namespace="team-b")
        policy.check_connector_config(
            {"k": value},
            field="spec.config",
            tenant_keys=["k"],
            mirror=False,
            references=clusters.reference_rule("team-b", "own", "team-b"),
        )
    finally:
        await clusters.aclose()


def checkpointed(group: str, exclude: str | None = None) -> bool:
    """Whether a mirror's checkpoint connector (default settings, or the tenant's ``groups.exclude``)
    would checkpoint ``group``, a group id a source cluster the tenant runs may choose; its task
    config holds the ids it assigns. The list is joined with ``|`` into one Java pattern, as
    MirrorMaker 2's DefaultGroupFilter does; one that does not compile checkpoints nothing."""
    resource = KafkaMirrorMaker2Resource.model_validate(
        {
            "metadata": {"name": "m", "namespace": NAMESPACE},
            "spec": {
                "clusters": [
                    {"alias": "east", "bootstrapServers": "e:9092"},
                    {"alias": "west", "bootstrapServers": "w:9092"},
                ],
                "mirrors": [
                    {
                        "sourceCluster": "east",
                        "targetCluster": "west",
                        "checkpointConnector": {"config": {} if exclude is None else {"groups.exclude": exclude}},
                    }
                ],
            },
        }
    )
    [target] = [t for t in mirror_targets(resource, {}).targets if t.class_name.endswith("MirrorCheckpointConnector")]
    first, *rest = (p.strip() for p in target.config["groups.exclude"].split(","))
    # Java's Matcher.matches() on "first|rest...": true when the first alternative matches the whole
    # id, whatever the rest holds (a rest that does not compile fails the connector: nothing is
    # checkpointed either).
    if re.fullmatch(first, group):
        return False
    try:
        return not any(re.fullmatch(pattern, group) for pattern in rest)
    except re.error:
        return False


# --- the corpus -------------------------------------------------------------------------------------

REFERENCES: Final = "references (CredentialsPolicy.check_connector_config, ReferenceRule)"
RESERVED: Final = "override-keys (credentials.reserved_key via CredentialsPolicy.check_connector_config)"
MIRROR_KEYS: Final = "mirror-keys (credentials.reserved_key(mirror=True) via CredentialsPolicy.check_connector_config)"
URLS: Final = "urls (ConnectClusterSpec.url, CredentialsPolicy.check_connect_url / check_kafka)"
REGEX: Final = "regex (models.java_regex.compile_java)"
GZIP: Final = "gzip (OffsetsConfigMapStore.read, offsets_configmaps.codec bounded inflate)"
OWNERS: Final = "owner-records (reconcile.owners.check_leftovers_owner)"
INPUTS: Final = "inputs (CRD models, vocabulary.label_value, planning dry-run-from, reconcile.deletion names)"
SECRETS: Final = "secrets (credentials.check_secret_use)"
BINDING: Final = "binding (planning.check_binding)"

REF: Final = "ConfigProviderReference"
HOSTILE_TOPIC: Final = "a" * 100_000 + "!"
#: A valid object name (a DNS subdomain of 253 characters) whose 200th character is a dot.
DOT_AT_200: Final = "a" * 199 + "." + "b" * 53

CORPUS: Final[list[Bypass]] = [
    # --- 1. config provider references, found as Kafka's ConfigTransformer finds them -------------
    Bypass(
        "ref: a disallowed reference first, the other namespace's Secret second",
        REFERENCES,
        lambda: config({"p": "${nope:x}${secrets:other-ns/db:password}"}, TEAM_A),
        REF,
        says="'nope'",
    ),
    Bypass(
        "ref: the same value where nope is allowed: the second reference is seen",
        REFERENCES,
        lambda: config({"p": "${nope:x}${secrets:other-ns/db:password}"}, NOPE_AND_TEAM_A),
        REF,
        says="'other-ns/db' is not under 'team-a/'",
    ),
    Bypass(
        "ref: the second reference of a value (Java's matcher finds two)",
        REFERENCES,
        lambda: config({"p": "${nope:x:y}${secrets:other-ns/db:password}"}, NOPE_AND_TEAM_A),
        REF,
        says="'other-ns/db' is not under 'team-a/'",
    ),
    Bypass(
        "ref: an allowed reference first, another namespace's second",
        REFERENCES,
        lambda: config({"p": "${secrets:team-a/db:pw}${secrets:team-b/db:pw}"}, TEAM_A),
        REF,
        says="'team-b/db'",
    ),
    Bypass(
        "ref: FileConfigProvider reading the worker's own config",
        REFERENCES,
        lambda: config({"database.password": "${file:/etc/kafka/worker.properties:sasl.jaas.config}"}),
        REF,
        says="spec.configProviders.allowed is empty",
    ),
    Bypass(
        "ref: FileConfigProvider where only secrets is allowed",
        REFERENCES,
        lambda: config({"k": "${file:/etc/kafka/worker.properties:sasl.jaas.config}"}, TEAM_A),
        REF,
        says="allows only secrets",
    ),
    Bypass(
        "ref: EnvVarConfigProvider",
        REFERENCES,
        lambda: config({"k": "${env:AWS_SECRET}"}, TEAM_A),
        REF,
        says="'env'",
    ),
    Bypass(
        "ref: another namespace's Secret through the allowed provider",
        REFERENCES,
        lambda: config({"k": "${secrets:other-ns/db:password}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: the operator's own provider in a tenant's key, even under its namespace",
        REFERENCES,
        lambda: config({"topic": "${secrets:team-a/east-jaas:jaas}"}, OWN),
        REF,
        says="use secretConfig instead",
    ),
    Bypass(
        "ref: a secretConfig key name injecting a second reference into the operator's",
        REFERENCES,
        lambda: written("${secrets:team-a/east-jaas:jaas}${secrets:team-b/db:pw}"),
        REF,
        says="is not shown",
    ),
    Bypass(
        "ref: a Secret's value holding a reference, written in clear",
        REFERENCES,
        lambda: written("${file:/etc/kafka/worker.properties:sasl.jaas.config}"),
        REF,
    ),
    Bypass(
        "ref: path with a '..' segment out of the prefix",
        REFERENCES,
        lambda: config({"k": "${secrets:team-a/../other/db:pw}"}, TEAM_A),
        REF,
        says="'.' or '..' segment",
    ),
    Bypass(
        "ref: path with a '.' segment",
        REFERENCES,
        lambda: config({"k": "${secrets:team-a/./db:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: path ending in '..'",
        REFERENCES,
        lambda: config({"k": "${secrets:team-a/..:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: path with backslashes",
        REFERENCES,
        lambda: config({"k": "${secrets:team-a/..\\other\\db:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: a namespace whose name starts with the allowed one (prefix '{namespace}/')",
        REFERENCES,
        lambda: config({"k": "${secrets:team-ab/db:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: a namespace whose name starts with the allowed one (prefix '{namespace}', no slash)",
        REFERENCES,
        lambda: config({"k": "${secrets:team-ab/db:pw}"}, TEAM_A_SEGMENT),
        REF,
        says="is not under 'team-a'",
    ),
    Bypass(
        "ref: no path at all (the empty path is not under the prefix)",
        REFERENCES,
        lambda: config({"k": "${secrets:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: leading whitespace in the provider's name",
        REFERENCES,
        lambda: config({"k": "${ secrets:team-a/db:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: trailing whitespace in the provider's name",
        REFERENCES,
        lambda: config({"k": "${secrets :team-a/db:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: the provider's name in another case",
        REFERENCES,
        lambda: config({"k": "${Secrets:team-a/db:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: no escaping in Kafka ($$)",
        REFERENCES,
        lambda: config({"k": "$${secrets:other/db:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: no escaping in Kafka (backslash)",
        REFERENCES,
        lambda: config({"k": "\\${secrets:other/db:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: nested, the inner reference as the path",
        REFERENCES,
        lambda: config({"k": "${secrets:${x:y}}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: nested, '${' inside the provider's name",
        REFERENCES,
        lambda: config({"k": "${${secrets:other/db:pw}}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: a reference across U+2028 ([^}] matches Java's line terminators)",
        REFERENCES,
        lambda: config({"k": "${secrets:a\u2028b:c}"}, TEAM_A),
        REF,
        says="is not under 'team-a/'",
    ),
    Bypass(
        "ref: a reference across a newline",
        REFERENCES,
        lambda: config({"k": "${secrets:other/db\n:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: the allowed prefix on a line of its own",
        REFERENCES,
        lambda: config({"k": "${secrets:team-a/\n../../team-b/db:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: a brace closing early does not hide the next reference",
        REFERENCES,
        lambda: config({"k": "${secrets:team-a/x}${secrets:other/db:pw}"}, TEAM_A),
        REF,
    ),
    Bypass(
        "ref: in spec.class (connector.class is a config value too)",
        REFERENCES,
        lambda: connector({"class": "${file:/etc/kafka/worker.properties:sasl.jaas.config}", "config": {}}),
        REF,
        says="(connector.class)",
    ),
    Bypass(
        "ref: in spec.version (the plugin version is a config value too)",
        REFERENCES,
        lambda: connector({"class": "org.example.Source", "version": "${env:AWS_SECRET}", "config": {}}),
        REF,
    ),
    Bypass(
        "ref: in a mirror cluster's config (source.cluster.*)",
        REFERENCES,
        lambda: mirror(cluster_config={"client.id": "${file:/etc/kafka/worker.properties:sasl.jaas.config}"}),
        REF,
        says="source.cluster.client.id",
    ),
    Bypass(
        "ref: in a mirror connector's config",
        REFERENCES,
        lambda: mirror(source_config={"topics": "${env:AWS_SECRET}"}),
        REF,
    ),
    # controls: what Connect does not read as a reference, or may read
    Bypass(
        "ref control: fullwidth dollar and braces (Java sees no reference)",
        REFERENCES,
        lambda: config({"k": "\uff04\uff5bsecrets:other/db:pw\uff5d"}, TEAM_A),
        None,
    ),
    Bypass(
        "ref control: fullwidth colons (Java sees no reference)",
        REFERENCES,
        lambda: config({"k": "${secrets\uff1aother/db\uff1apw}"}, TEAM_A),
        None,
    ),
    Bypass(
        "ref control: fullwidth dollar before an ASCII brace",
        REFERENCES,
        lambda: config({"k": "\uff04{secrets:other/db:pw}"}, TEAM_A),
        None,
    ),
    Bypass(
        "ref control: a brace inside the provider's name ends the candidate",
        REFERENCES,
        lambda: config({"k": "${sec}rets:other/db:pw}"}, TEAM_A),
        None,
    ),
    Bypass(
        "ref control: a reference split over two keys (Connect transforms each value alone)",
        REFERENCES,
        lambda: config({"a": "${secrets:other/db", "b": ":pw}"}, TEAM_A),
        None,
    ),
    Bypass("ref control: price ${USD}", REFERENCES, lambda: config({"label": "price ${USD}"}), None, returns={}),
    Bypass("ref control: a lone ${", REFERENCES, lambda: config({"k": "${"}), None, returns={}),
    Bypass("ref control: {a:b}", REFERENCES, lambda: config({"json": "{a:b}", "j": '{"a": "b"}'}), None, returns={}),
    Bypass(
        "ref control: plain values", REFERENCES, lambda: config({"topic": "orders", "tasks": "3"}), None, returns={}
    ),
    Bypass(
        "ref control: the tenant's own Secret through the allowed provider",
        REFERENCES,
        lambda: config({"database.password": "${secrets:team-a/db:pw}", "u": "x ${secrets:team-a/db:user} y"}, TEAM_A),
        None,
        returns={},
    ),
    Bypass(
        "ref control: the namespace itself under a segment prefix",
        REFERENCES,
        lambda: config({"k": "${secrets:team-a/db:pw}"}, TEAM_A_SEGMENT),
        None,
    ),
    Bypass(
        "ref control: the operator's own reference where it wrote it",
        REFERENCES,
        lambda: written("${secrets:team-a/east-jaas:jaas}"),
        None,
    ),
    # --- 2. override keys: the clients that carry the Connect worker's credentials ----------------
    *(
        Bypass(
            f"override: {key}",
            RESERVED,
            lambda key=key: config({key: "evil.example:9092", "topic": "t"}),
            "ReservedConfigKey",
            says=f"spec.config.{key}",
        )
        for key in (
            "producer.override.bootstrap.servers",
            "consumer.override.sasl.jaas.config",
            "admin.override.security.protocol",
            "producer.override.ssl.truststore.location",
            "consumer.override.sasl.oauthbearer.token.endpoint.url",
            "admin.override.sasl.mechanism",
        )
    ),
    Bypass(
        "override: a Debezium-style bootstrap.servers outside the allow-list",
        RESERVED,
        lambda: config(
            {"schema.history.internal.kafka.bootstrap.servers": "k1.kafka.svc:9092,127.0.0.2:9092"}, None, LISTED
        ),
        "HostNotAllowed",
        says="127.0.0.2:9092",
    ),
    Bypass(
        "override control: a non-connection override",
        RESERVED,
        lambda: config({"producer.override.compression.type": "zstd", "consumer.override.max.poll.records": "5"}),
        None,
        returns={},
    ),
    # --- 3. a MirrorMaker 2 connector's connection keys --------------------------------------------
    *(
        Bypass(
            f"mirror: {key}",
            MIRROR_KEYS,
            lambda key=key: mirror_config({key: "127.0.0.2:9092"}),
            "ReservedConfigKey",
            says=key,
        )
        for key in (
            "source.cluster.bootstrap.servers",
            "target.cluster.security.protocol",
            "source.cluster.client.id",
            "consumer.bootstrap.servers",
            "x.bootstrap.servers",
            "source.consumer.sasl.jaas.config",
            "target.admin.ssl.endpoint.identification.algorithm",
            "ssl.truststore.location",
            "offset-syncs.source.producer.bootstrap.servers",
            "producer.override.bootstrap.servers",
        )
    ),
    Bypass(
        "mirror: a connector config repointing its source cluster (whole resource)",
        MIRROR_KEYS,
        lambda: mirror(source_config={"source.cluster.bootstrap.servers": "127.0.0.2:9092"}),
        "ReservedConfigKey",
        says="spec.mirrors[0].sourceConnector.config.source.cluster.bootstrap.servers",
    ),
    Bypass(
        "mirror control: replication settings",
        MIRROR_KEYS,
        lambda: mirror_config({"replication.factor": "3", "sync.topic.acls.enabled": "false"}),
        None,
        returns={},
    ),
    # --- 4. URLs and transports ---------------------------------------------------------------------
    Bypass(
        "url: credentials in the ConnectCluster's URL (the CRD model)",
        URLS,
        lambda: ConnectClusterSpec.model_validate({"url": "https://user:pw@connect"}),
        "ValidationError",
        says="must not contain user info",
    ),
    Bypass(
        "url: credentials in the URL, before the path only in appearance",
        URLS,
        lambda: ConnectClusterSpec.model_validate({"url": "http://u:pw@c:1/path@x"}),
        "ValidationError",
        says="must not contain user info",
    ),
    Bypass(
        "url: credentials in the URL (the policy)",
        URLS,
        lambda: STRICT.check_connect_url("https://user:pw@connect", credentials=False),
        "InvalidSpec",
    ),
    Bypass(
        "url: credentials over http://",
        URLS,
        lambda: STRICT.check_connect_url("http://connect:8083", credentials=True),
        "PlaintextCredentials",
    ),
    Bypass(
        "url: credentials with insecureSkipVerify",
        URLS,
        lambda: STRICT.check_connect_url("https://connect", credentials=True, insecure_skip_verify=True),
        "InsecureCredentials",
    ),
    *(
        Bypass(
            f"url: {url} outside the allow-list",
            URLS,
            lambda url=url: LISTED.check_connect_url(url, credentials=False),
            "HostNotAllowed",
        )
        for url in (
            "https://connect.svc.evil.test",
            "https://connect.svc:8443",
            "http://connect.svc",
            "https://kafka.svc",
            "https://evil-kafka.svc",
            "https://evil.test#@connect.svc",
            "https://evil.test?connect.svc",
        )
    ),
    Bypass(
        "url control: the allowed host in another case, with a trailing dot",
        URLS,
        lambda: LISTED.check_connect_url("https://CONNECT.svc.", credentials=True),
        None,
    ),
    Bypass(
        "kafka: secretConfig over SASL_PLAINTEXT",
        URLS,
        lambda: STRICT.check_kafka(
            "clusters[east]", "b.kafka.svc:9093", {"security.protocol": "SASL_PLAINTEXT"}, credentials=True
        ),
        "PlaintextCredentials",
    ),
    Bypass(
        "kafka: secretConfig without hostname verification (blank, as Java trims it)",
        URLS,
        lambda: STRICT.check_kafka(
            "clusters[east]",
            "b.kafka.svc:9093",
            {"security.protocol": "SASL_SSL", "ssl.endpoint.identification.algorithm": " "},
            credentials=True,
        ),
        "InsecureCredentials",
    ),
    Bypass(
        "kafka: a broker outside the allow-list behind a protocol prefix",
        URLS,
        lambda: LISTED.check_kafka(
            "clusters[east]", "b.kafka.svc:9092, PLAINTEXT://evil.test:9092", {}, credentials=False
        ),
        "HostNotAllowed",
        says="evil.test:9092",
    ),
    Bypass(
        "kafka control: SASL_SSL in lower case, padded (Kafka trims and ignores case)",
        URLS,
        lambda: STRICT.check_kafka(
            "clusters[east]", "b.kafka.svc:9093", {"security.protocol": " sasl_ssl "}, credentials=True
        ),
        None,
    ),
    # --- 5. regular expressions: RE2 or nothing -----------------------------------------------------
    Bypass(
        "regex: back-reference", REGEX, lambda: tenant_regex(r"(a)\1", "aa"), "PatternRefused", says="back-references"
    ),
    Bypass("regex: lookahead", REGEX, lambda: tenant_regex(r"a(?=b)", "ab"), "PatternRefused"),
    Bypass("regex: lookbehind", REGEX, lambda: tenant_regex(r"(?<=a)b", "ab"), "PatternRefused"),
    Bypass("regex: negative lookahead", REGEX, lambda: tenant_regex(r"(?!x).*", "ab"), "PatternRefused"),
    Bypass("regex: possessive quantifier", REGEX, lambda: tenant_regex("a++", "aa"), "PatternRefused"),
    Bypass("regex: atomic group", REGEX, lambda: tenant_regex("(?>a+)b", "ab"), "PatternRefused"),
    Bypass(
        "regex: over the length cap",
        REGEX,
        lambda: tenant_regex("a" * 4097, "a"),
        "PatternRefused",
        says="4097 characters",
    ),
    Bypass(
        "regex: a back-reference in a mirror's topics",
        REGEX,
        lambda: mirrored_topic_filter({"topics": "orders, (x)\\1"}),
        "PatternRefused",
        says="topics: the pattern",
    ),
    Bypass(
        "regex control: (a+)+$ on 100k characters completes (linear time)",
        REGEX,
        lambda: tenant_regex("(a+)+$", HOSTILE_TOPIC),
        None,
        returns=False,
    ),
    Bypass(
        "regex control: (a|aa)*c on 100k characters completes",
        REGEX,
        lambda: tenant_regex("(a|aa)*c", HOSTILE_TOPIC),
        None,
        returns=False,
    ),
    Bypass(
        "regex control: (.*a){20} on 100k characters completes",
        REGEX,
        lambda: tenant_regex("(.*a){20}", HOSTILE_TOPIC),
        None,
        returns=False,
    ),
    # --- 6. gzip bombs in a tenant's offsets ConfigMap ----------------------------------------------
    Bypass(
        "gzip: 64 MiB of zeros in k.gz, cap 4 MiB",
        GZIP,
        lambda: read_offsets({"k.gz": gzip_of_zeros(64 << 20)}, cap=4 << 20, shards={}),
        "DocumentTooLarge",
        says="inflates beyond 4194304 bytes",
    ),
    Bypass(
        "gzip: a shard index claiming more than the cap",
        GZIP,
        lambda: sharded_bomb(claimed_size=(4 << 20) + 1, inflated=1 << 20, cap=4 << 20),
        "DocumentTooLarge",
    ),
    Bypass(
        "gzip: a shard that is a bomb under an index claiming 1 KiB",
        GZIP,
        lambda: sharded_bomb(claimed_size=1024, inflated=64 << 20, cap=4 << 20),
        "DocumentTooLarge",
    ),
    Bypass(
        "gzip control: a small gzip document is read",
        GZIP,
        lambda: read_offsets({"k.gz": gzip.compress(b'{"offsets": []}')}, cap=4 << 20, shards={}),
        None,
    ),
    # --- 7. owner records: forged in a tenant's namespace -------------------------------------------
    Bypass(
        "owners: a forged newer record of the attacker's cannot allow wiping the victim's leftovers",
        OWNERS,
        lambda: wipe_leftovers(
            "team-b",
            VICTIMS_CLUSTER,
            created=(("team-a", VICTIMS_CLUSTER),),
            forged=(("team-b", "team-b/orders", VICTIMS_CLUSTER), ("team-b", "team-b/orders", None)),
        ),
        "LeftoverOffsetsOwnedElsewhere",
        says="team-a/orders",
    ),
    Bypass(
        "owners: the same name created on the attacker's own Connect cluster does not rewrite the victim's",
        OWNERS,
        lambda: wipe_leftovers(
            "team-b", VICTIMS_CLUSTER, created=(("team-a", VICTIMS_CLUSTER), ("team-b", ATTACKERS_CLUSTER))
        ),
        "LeftoverOffsetsOwnedElsewhere",
        says="team-a/orders",
    ),
    Bypass(
        "owners control: a forged record cannot block the owner's own wipe",
        OWNERS,
        lambda: wipe_leftovers(
            "team-a",
            VICTIMS_CLUSTER,
            created=(("team-a", VICTIMS_CLUSTER),),
            forged=(("team-b", "team-b/evil", VICTIMS_CLUSTER), ("team-b", "team-b/evil", None)),
        ),
        None,
    ),
    Bypass(
        "owners control: a record in team-b naming team-a's resource is not believed",
        OWNERS,
        lambda: wipe_leftovers("team-c", VICTIMS_CLUSTER, forged=(("team-b", "team-a/orders", None),)),
        None,
    ),
    Bypass(
        "owners control: ... nor when keyed by the cluster",
        OWNERS,
        lambda: wipe_leftovers("team-c", VICTIMS_CLUSTER, forged=(("team-b", "team-a/orders", VICTIMS_CLUSTER),)),
        None,
    ),
    Bypass(
        "owners: a server reporting no Kafka cluster id cannot rewrite an earlier version's name-only record",
        OWNERS,
        lambda: rewrite_legacy_record("team-b", None, then="team-b"),
        "LeftoverOffsetsOwnedElsewhere",
        says="team-a/orders",
    ),
    Bypass(
        "owners control: the earlier version's record still lets its own namespace wipe",
        OWNERS,
        lambda: rewrite_legacy_record("team-b", None, then="team-a"),
        None,
    ),
    # --- 7b. the attacker's review of issue 43 ---------------------------------------------------------
    Bypass(
        "ref: a tenant's own ConnectCluster allowing itself every provider",
        REFERENCES,
        lambda: own_cluster_reference(
            STRICT, "${file:/opt/kafka/config/connect-distributed.properties:sasl.jaas.config}"
        ),
        REF,
        says="is not honoured",
    ),
    Bypass(
        "ref control: ... honoured where the platform named the cluster's namespace",
        REFERENCES,
        lambda: own_cluster_reference(
            CredentialsPolicy(provider_cluster_namespaces=frozenset({"team-b"})), "${env:HOME}"
        ),
        None,
    ),
    Bypass(
        "ref: the bare prefix, a Secret of the workers' own namespace for Strimzi's provider",
        REFERENCES,
        lambda: config({"k": "${secrets:team-a:password}"}, TEAM_A_SEGMENT),
        REF,
    ),
    Bypass(
        "ref: a tenant's value under a key the operator writes from secretConfig (producerOverride)",
        REFERENCES,
        lambda: CredentialsPolicy(allow_plaintext=True).check_connector_config(
            {"producer.override.client.dns.lookup": "${secrets:team-a/db-admin:password}"},
            field="spec.mirrors[0].sourceConnector.config",
            tenant_keys=["producer.override.client.dns.lookup"],
            mirror=True,
            credential_keys=[CredentialKey("producer.override.client.dns.lookup", "producer.override.", "mine")],
            references=OWN,
        ),
        "ReservedConfigKey",
        says="Connect worker's own credentials",
    ),
    Bypass(
        "ref: a tenant's group.filter.class in a checkpoint connector (no groups.exclude at all)",
        MIRROR_KEYS,
        lambda: mirror_config({"group.filter.class": "org.example.AllGroups"}),
        "ReservedConfigKey",
        says="group filter",
    ),
    *(
        Bypass(
            f"ref: a group id with a reference behind a tenant's groups.exclude {exclude!r}",
            REFERENCES,
            lambda exclude=exclude: checkpointed("x${file:/etc/kafka/worker.properties:sasl.jaas.config}", exclude),
            None,
            returns=False,
        )
        for exclude in ("zz\\", "zz\\Q", "(?x)zz#")
    ),
    Bypass(
        "kafka: an OAuth token endpoint outside the allow-list (a Secret's clientSecret would go there)",
        URLS,
        lambda: LISTED.check_kafka(
            "clusters[east]",
            "e.kafka.svc:9093",
            {"sasl.oauthbearer.token.endpoint.url": "https://attacker.example.com/token"},
            credentials=False,
        ),
        "HostNotAllowed",
    ),
    Bypass(
        "kafka: an OAuth token endpoint as a file: URL (CVE-2025-27817: the client reads the file)",
        URLS,
        lambda: STRICT.check_kafka(
            "clusters[east]",
            "e.kafka.svc:9093",
            {"sasl.oauthbearer.token.endpoint.url": "file:///var/run/secrets/kubernetes.io/serviceaccount/token"},
            credentials=False,
        ),
        "InvalidURL",
    ),
    Bypass(
        "kafka: ssl.endpoint.identification.algorithm none (librdkafka: no hostname check)",
        URLS,
        lambda: STRICT.check_kafka(
            "clusters[east]",
            "e.kafka.svc:9093",
            {"security.protocol": "SASL_SSL", "ssl.endpoint.identification.algorithm": "none"},
            credentials=True,
        ),
        "InsecureCredentials",
    ),
    *(
        Bypass(
            f"secretConfig: {key} from a Secret (another Secret's credentials sent where no check looked)",
            MIRROR_KEYS,
            lambda key=key: MirrorClusterSpec.model_validate(
                {
                    "alias": "east",
                    "bootstrapServers": "e.kafka.svc:9093",
                    "secretConfig": {key: {"name": "mine", "key": "a"}},
                }
            ),
            "ValidationError",
            says=f"secretConfig must not set {key}",
        )
        for key in (
            "bootstrap.servers",
            "security.protocol",
            "ssl.endpoint.identification.algorithm",
            "client.dns.lookup",
        )
    ),
    Bypass(
        "ref: a group id with a reference, from a source cluster the tenant runs, into a checkpoint task's config",
        REFERENCES,
        lambda: checkpointed("orders${file:/opt/kafka/config/connect-distributed.properties:sasl.jaas.config}"),
        None,
        returns=False,
    ),
    Bypass(
        "ref control: an ordinary group is checkpointed",
        REFERENCES,
        lambda: checkpointed("orders-app"),
        None,
        returns=True,
    ),
    # --- 8. input the API server accepts -----------------------------------------------------------
    Bypass(
        "inputs: a 253-character name as a label value",
        INPUTS,
        lambda: is_label_value(label_value("a" * 252 + "b")),
        None,
        returns=True,
    ),
    Bypass(
        "inputs: a 64-character name cut at a dash, as a label value",
        INPUTS,
        lambda: is_label_value(label_value("a" * 49 + "-" + "b" * 14)),
        None,
        returns=True,
    ),
    Bypass(
        "inputs: a name with a dot where the label value is cut",
        INPUTS,
        lambda: is_label_value(label_value(DOT_AT_200[150:])),
        None,
        returns=True,
    ),
    Bypass(
        "inputs: the final backup of a resource whose 200th character is a dot",
        INPUTS,
        lambda: is_object_name(final_backup_name(DOT_AT_200, "0b9c6f1e-1a2b-4c3d-8e9f-001122334455", "orders")),
        None,
        returns=True,
    ),
    *(
        Bypass(
            f"inputs: dry-run-from {name!r}",
            INPUTS,
            lambda name=name: dry_run_from(name),
            "InvalidAnnotation",
            says="is not a ConfigMap name",
        )
        for name in ("../other-ns/cm", "Upper", "a_b", "-a", "a" * 254, "", "cm/../x", "cm\n")
    ),
    Bypass(
        "inputs control: dry-run-from a ConfigMap of the namespace",
        INPUTS,
        lambda: dry_run_from("orders-dry-run-input"),
        None,
    ),
    Bypass(
        "inputs: listOffsets into a ConfigMap name with a path",
        INPUTS,
        lambda: make_resource(list_to="../other-ns/x"),
        "ValidationError",
        says="listOffsets.toConfigMap.name",
    ),
    Bypass(
        "inputs: the ConnectCluster's Secret name with a path",
        INPUTS,
        lambda: ConnectClusterSpec.model_validate(
            {"url": "https://connect.svc", "authentication": {"type": "bearer", "secretName": "../x"}}
        ),
        "ValidationError",
        says="authentication.secretName",
    ),
    Bypass(
        "inputs: a config provider path prefix with ':' (ends a reference)",
        INPUTS,
        lambda: AllowedConfigProvider(name="secrets", pathPrefix="{namespace}:x/"),
        "ValidationError",
    ),
    # --- Secrets: the owner opts in, and says where they may go -----------------------------------
    Bypass(
        "secrets: not labelled",
        SECRETS,
        lambda: check_secret_use("platform", "admin", {}, {}, [Destination("spec.url", "evil.test", 443)]),
        "SecretNotOptedIn",
    ),
    Bypass(
        "secrets: labelled True, not true",
        SECRETS,
        lambda: check_secret_use("platform", "admin", {CREDENTIALS_LABEL: "True"}, {}, []),
        "SecretNotOptedIn",
    ),
    *(
        Bypass(
            f"secrets: sent to {host}:{port} when only *.kafka.svc:9093, connect.svc:443",
            SECRETS,
            lambda host=host, port=port: check_secret_use(
                "platform",
                "admin",
                {CREDENTIALS_LABEL: "true"},
                {SECRET_HOSTS_ANNOTATION: "*.kafka.svc:9093, connect.svc:443"},
                [Destination("spec.url", host, port)],
            ),
            "SecretHostNotAllowed",
        )
        for host, port in (
            ("connect.svc.evil.test", 443),
            ("evilconnect.svc", 443),
            ("connect.svc", 8443),
            ("kafka.svc", 9093),
            ("b.kafka.svc", 9092),
        )
    ),
    Bypass(
        "secrets: a malformed allowed-hosts annotation allows nothing",
        SECRETS,
        lambda: check_secret_use(
            "platform", "admin", {CREDENTIALS_LABEL: "true"}, {SECRET_HOSTS_ANNOTATION: "a b"}, []
        ),
        "SecretHostNotAllowed",
    ),
    Bypass(
        "secrets control: a broker under the allowed suffix",
        SECRETS,
        lambda: check_secret_use(
            "platform",
            "admin",
            {CREDENTIALS_LABEL: "true"},
            {SECRET_HOSTS_ANNOTATION: "*.kafka.svc:9093"},
            [Destination("brokers", "B.kafka.svc.", 9093)],
        ),
        None,
    ),
    # --- sharing one Connect cluster ----------------------------------------------------------------
    Bypass(
        "binding: a namespace the cluster does not list",
        BINDING,
        lambda: binding("team-b", ["team-b.orders"], allowedNamespaces=["team-a"]),
        "ClusterNotAllowed",
    ),
    Bypass(
        "binding: another namespace's connector name",
        BINDING,
        lambda: binding("team-a", ["team-b.orders"], allowedNamespaces=["team-a"], connectorNamePrefix="{namespace}."),
        "ConnectorNameNotAllowed",
    ),
    Bypass(
        "binding: a namespace whose name extends the tenant's ('team-a-b.' under 'team-a.')",
        BINDING,
        lambda: binding(
            "team-a", ["team-a-b.orders"], allowedNamespaces=["team-a"], connectorNamePrefix="{namespace}."
        ),
        "ConnectorNameNotAllowed",
    ),
    Bypass(
        "binding control: the tenant's own prefix",
        BINDING,
        lambda: binding("team-a", ["team-a.orders"], allowedNamespaces=["team-a"], connectorNamePrefix="{namespace}."),
        None,
    ),
]
