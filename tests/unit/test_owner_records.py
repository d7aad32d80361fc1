"""reconcile/owners.py: owner records a tenant cannot forge (issue 31, point 5), keyed by the Connect
cluster's Kafka cluster id and the connector name (issue 43).

* with a records namespace (the chart's release namespace): ``record_owner`` writes there, one record
  per connector name naming the last owner; ``check_leftovers_owner`` reads it and nothing a tenant
  wrote outweighs it;
* records of earlier versions in the tenants' namespaces are read only where the records namespace
  has none, only to refuse, and each only about its own namespace;
* without one (outside a cluster, no variable): the records in the resources' namespaces, as
  before, with the same "a namespace speaks only for itself" rule;
* a same-named connector on another Connect cluster (another Kafka cluster id) writes its own record,
  never the one of this cluster; records of the name alone (earlier versions) are still believed
  where this cluster has none; a worker without an id keeps the name-only key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from connect_offsets.models.connect import ServerInfo
from connect_offsets.reconcile import owners, settings
from connect_offsets.reconcile.context import OffsetsRequestInvalid
from connect_offsets.vocabulary import API_GROUP, LAST_OWNER_LABEL, short_hash
from tests.owner_records import RecordsKube as SharedRecordsKube

pytestmark = pytest.mark.unit

RECORDS = "connect-offsets-system"
NAME = "orders"
CLUSTER = "kafka-a-cluster-id"
OTHER = "kafka-b-cluster-id"


class Kube(SharedRecordsKube):
    """The shared ConfigMap store (``tests/owner_records.py``), with records written as tests need them."""

    def tenant_record(self, namespace: str, owner: str, time: str = "2999-01-01T00:00:00+00:00") -> None:
        """A record as earlier versions wrote them (or a tenant forges them), in ``namespace``."""
        digest = short_hash(NAME)
        self.objects[(namespace, f"connect-offsets-owner-{digest}-{len(self.objects)}")] = {
            "metadata": {
                "labels": {LAST_OWNER_LABEL: digest},
                "annotations": {f"{API_GROUP}/connector": NAME, f"{API_GROUP}/owner": owner, f"{API_GROUP}/time": time},
            }
        }

    def record(self, namespace: str, key: owners.RecordKey, owner: str, *, cluster: str | None = None) -> None:
        """A record under ``key``'s name whose annotations say ``cluster`` (another key of the same
        hash, when it differs from ``key.cluster``), as the operator writes them."""
        annotations = {f"{API_GROUP}/connector": key.name, f"{API_GROUP}/owner": owner, f"{API_GROUP}/time": "1"}
        if cluster is not None:
            annotations[f"{API_GROUP}/kafka-cluster-id"] = cluster
        self.objects[(namespace, key.record_name)] = {
            "metadata": {"labels": {LAST_OWNER_LABEL: key.digest}, "annotations": annotations}
        }

    def owner_of(self, namespace: str, key: owners.RecordKey) -> str:
        return str(self.objects[(namespace, key.record_name)]["metadata"]["annotations"][f"{API_GROUP}/owner"])


@dataclass
class FakePass:
    namespace: str
    kube: Kube
    #: The worker's ``GET /``: the Kafka cluster id is what the records are keyed by.
    cluster: str | None = CLUSTER
    body: dict[str, Any] = field(default_factory=lambda: {"metadata": {"name": NAME}})
    events: list[str] = field(default_factory=list)

    @property
    def info(self) -> ServerInfo:
        return ServerInfo(version="3.9.0", kafka_cluster_id=self.cluster)

    def event(self, kind: str, reason: str, message: str) -> None:
        self.events.append(reason)


@pytest.fixture
def trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.OWNER_RECORDS_NAMESPACE_ENV, RECORDS)


async def refusal(p: FakePass) -> str | None:
    try:
        await owners.check_leftovers_owner(p, NAME, 3)  # type: ignore[arg-type]
    except OffsetsRequestInvalid as error:
        return f"{error.reason}: {error}"
    return None


@pytest.mark.usefixtures("trusted")
async def test_records_live_in_the_records_namespace_and_name_the_last_owner() -> None:
    kube = Kube()
    await owners.record_owner(FakePass("team-a", kube), NAME)  # type: ignore[arg-type]
    [(namespace, _)] = kube.objects
    assert namespace == RECORDS
    assert await refusal(FakePass("team-a", kube)) is None
    refused = await refusal(FakePass("team-b", kube))
    assert refused is not None and refused.startswith("LeftoverOffsetsOwnedElsewhere") and "team-a/orders" in refused
    await owners.record_owner(FakePass("team-b", kube), NAME)  # type: ignore[arg-type]
    assert len(kube.objects) == 1  # one record per name: the last owner
    assert await refusal(FakePass("team-b", kube)) is None
    assert await refusal(FakePass("team-a", kube)) is not None


@pytest.mark.usefixtures("trusted")
async def test_a_forged_record_in_a_tenants_namespace_changes_nothing() -> None:
    kube = Kube()
    await owners.record_owner(FakePass("team-a", kube), NAME)  # type: ignore[arg-type]
    kube.tenant_record("team-b", "team-b/evil")  # newer than anything, claiming A's name
    kube.tenant_record("team-b", "team-a/orders")  # claiming to speak for A
    assert await refusal(FakePass("team-a", kube)) is None


@pytest.mark.usefixtures("trusted")
async def test_earlier_records_only_refuse_and_only_speak_for_their_namespace() -> None:
    kube = Kube()
    kube.tenant_record("team-a", "team-a/orders", "2026-01-01T00:00:00+00:00")  # written by an earlier version
    refused = await refusal(FakePass("team-b", kube))
    assert refused is not None and "team-a/orders" in refused
    # team-b's own (newer, or forged) record cannot outweigh it ...
    kube.tenant_record("team-b", "team-b/orders")
    assert await refusal(FakePass("team-b", kube)) is not None
    # ... and blocks team-a only as long as no record in the records namespace speaks.
    assert await refusal(FakePass("team-a", kube)) is not None
    await owners.record_owner(FakePass("team-a", kube), NAME)  # type: ignore[arg-type]
    assert await refusal(FakePass("team-a", kube)) is None
    # A record claiming another namespace's resource is not believed.
    only_forged = Kube()
    only_forged.tenant_record("team-b", "team-a/orders")
    assert await refusal(FakePass("team-c", only_forged)) is None


async def test_without_a_records_namespace_the_tenants_namespaces_hold_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.OWNER_RECORDS_NAMESPACE_ENV, raising=False)
    monkeypatch.setattr(settings, "SERVICE_ACCOUNT_NAMESPACE", settings.Path("/nonexistent/namespace"))
    assert settings.owner_records_namespace() is None
    kube = Kube()
    await owners.record_owner(FakePass("team-a", kube), NAME)  # type: ignore[arg-type]
    [(namespace, _)] = kube.objects
    assert namespace == "team-a"
    assert await refusal(FakePass("team-b", kube)) is not None
    assert await refusal(FakePass("team-a", kube)) is None


def test_the_pods_namespace_is_the_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv(settings.OWNER_RECORDS_NAMESPACE_ENV, raising=False)
    pod = tmp_path / "namespace"
    pod.write_text("operators\n")
    monkeypatch.setattr(settings, "SERVICE_ACCOUNT_NAMESPACE", pod)
    assert settings.owner_records_namespace() == "operators"
    monkeypatch.setenv(settings.OWNER_RECORDS_NAMESPACE_ENV, RECORDS)
    assert settings.owner_records_namespace() == RECORDS


# --- keyed by the Connect cluster (issue 43) ---------------------------------------------------

THIS = owners.RecordKey(CLUSTER, NAME)
THAT = owners.RecordKey(OTHER, NAME)
NAME_ONLY = owners.RecordKey(None, NAME)


@pytest.mark.usefixtures("trusted")
async def test_a_same_named_connector_on_another_cluster_does_not_rewrite_the_record() -> None:
    kube = Kube()
    await owners.record_owner(FakePass("team-a", kube, CLUSTER), NAME)  # type: ignore[arg-type]
    # The attacker creates the same name on a Connect cluster of its own (another Kafka cluster).
    await owners.record_owner(FakePass("team-b", kube, OTHER), NAME)  # type: ignore[arg-type]
    assert sorted(kube.objects) == sorted([(RECORDS, THIS.record_name), (RECORDS, THAT.record_name)])
    assert kube.owner_of(RECORDS, THIS) == "team-a/orders"
    assert (RECORDS, NAME_ONLY.record_name) not in kube.objects  # the name-only record is not written
    # The victim's initialOffsets on its cluster is decided by its own record ...
    assert await refusal(FakePass("team-a", kube, CLUSTER)) is None
    # ... and the attacker's on the victim's cluster (shared, no name prefix) is still refused.
    refused = await refusal(FakePass("team-b", kube, CLUSTER))
    assert refused is not None and refused.startswith("LeftoverOffsetsOwnedElsewhere") and "team-a/orders" in refused
    assert await refusal(FakePass("team-b", kube, OTHER)) is None  # its own leftovers on its own cluster
    assert await refusal(FakePass("team-a", kube, OTHER)) is not None


@pytest.mark.usefixtures("trusted")
async def test_name_only_records_are_believed_where_this_cluster_has_none() -> None:
    kube = Kube()
    kube.record(RECORDS, NAME_ONLY, "team-a/orders")  # written by an earlier version
    refused = await refusal(FakePass("team-b", kube, CLUSTER))
    assert refused is not None and "team-a/orders" in refused
    assert await refusal(FakePass("team-a", kube, CLUSTER)) is None  # believed to allow, too
    # Creating the name on this cluster writes this cluster's record, which decides from then on ...
    await owners.record_owner(FakePass("team-b", kube, CLUSTER), NAME)  # type: ignore[arg-type]
    assert kube.owner_of(RECORDS, NAME_ONLY) == "team-a/orders"  # untouched
    assert await refusal(FakePass("team-b", kube, CLUSTER)) is None
    assert await refusal(FakePass("team-a", kube, CLUSTER)) is not None
    # ... and only on this cluster: elsewhere the name-only record still speaks.
    assert await refusal(FakePass("team-b", kube, OTHER)) is not None
    # A trusted record of either key outweighs the tenants' records of earlier versions.
    kube.tenant_record("team-c", "team-c/orders")
    assert await refusal(FakePass("team-b", kube, CLUSTER)) is None
    assert await refusal(FakePass("team-a", kube, OTHER)) is None


@pytest.mark.usefixtures("trusted")
async def test_a_server_without_a_cluster_id_writes_no_record_and_reads_the_name_only_one() -> None:
    """Every Connect the operator supports reports its Kafka cluster id; a tenant's own server need
    not. Writing the name-only key for it would let that server rewrite every record of earlier
    versions (the attacker's review of issue 43): nothing is written, the records are still read."""
    kube = Kube()
    kube.record(RECORDS, NAME_ONLY, "team-a/orders")
    await owners.record_owner(FakePass("team-b", kube, None), NAME)  # type: ignore[arg-type]
    assert list(kube.objects) == [(RECORDS, NAME_ONLY.record_name)]
    assert kube.owner_of(RECORDS, NAME_ONLY) == "team-a/orders"  # untouched
    assert await refusal(FakePass("team-b", kube, None)) is not None
    assert await refusal(FakePass("team-a", kube, None)) is None
    # A worker that does give an id believes it too, where its cluster has no record.
    assert await refusal(FakePass("team-b", kube, CLUSTER)) is not None


@pytest.mark.usefixtures("trusted")
async def test_a_record_of_another_key_with_the_same_hash_is_not_believed() -> None:
    kube = Kube()
    # Under this cluster's record name, a record of another cluster (a colliding hash) ...
    kube.record(RECORDS, THIS, "team-b/orders", cluster=OTHER)
    # ... and under the name-only record name, a record of a cluster (not one of the name alone).
    kube.record(RECORDS, NAME_ONLY, "team-b/orders", cluster=OTHER)
    assert await refusal(FakePass("team-a", kube, CLUSTER)) is None
    # Writing this cluster's record over it makes it this cluster's (the colliding one is lost).
    await owners.record_owner(FakePass("team-a", kube, CLUSTER), NAME)  # type: ignore[arg-type]
    assert (
        kube.objects[(RECORDS, THIS.record_name)]["metadata"]["annotations"][f"{API_GROUP}/kafka-cluster-id"] == CLUSTER
    )
    assert await refusal(FakePass("team-b", kube, CLUSTER)) is not None


async def test_without_a_records_namespace_this_clusters_records_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.OWNER_RECORDS_NAMESPACE_ENV, raising=False)
    monkeypatch.setattr(settings, "SERVICE_ACCOUNT_NAMESPACE", settings.Path("/nonexistent/namespace"))
    kube = Kube()
    kube.tenant_record("team-b", "team-b/orders")  # name-only, newer than anything
    assert await refusal(FakePass("team-a", kube, CLUSTER)) is not None
    await owners.record_owner(FakePass("team-a", kube, CLUSTER), NAME)  # type: ignore[arg-type]
    assert (("team-a", THIS.record_name)) in kube.objects
    assert await refusal(FakePass("team-a", kube, CLUSTER)) is None  # this cluster's record decides
    assert await refusal(FakePass("team-a", kube, OTHER)) is not None  # elsewhere, the name-only ones
    # Another cluster's record (the attacker's own cluster) says nothing about this one.
    await owners.record_owner(FakePass("team-b", kube, OTHER), NAME)  # type: ignore[arg-type]
    assert await refusal(FakePass("team-a", kube, CLUSTER)) is None
    # A record claiming this cluster's key with another cluster's annotation is not believed.
    kube.record("team-b", THIS, "team-b/orders", cluster=OTHER)
    assert await refusal(FakePass("team-a", kube, CLUSTER)) is None


@pytest.mark.usefixtures("trusted")
async def test_tenant_records_of_either_key_only_refuse() -> None:
    kube = Kube()
    kube.record("team-b", THIS, "team-b/orders", cluster=CLUSTER)
    refused = await refusal(FakePass("team-a", kube, CLUSTER))
    assert refused is not None and "team-b/orders" in refused
    kube.record("team-a", THIS, "team-b/orders", cluster=CLUSTER)  # speaking for another namespace
    kube.objects.pop(("team-b", THIS.record_name))
    assert await refusal(FakePass("team-c", kube, CLUSTER)) is None
