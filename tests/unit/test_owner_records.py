"""reconcile/owners.py: owner records a tenant cannot forge (issue 31, point 5).

* with a records namespace (the chart's release namespace): ``record_owner`` writes there, one record
  per connector name naming the last owner; ``check_leftovers_owner`` reads it and nothing a tenant
  wrote outweighs it;
* records of earlier versions in the tenants' namespaces are read only where the records namespace
  has none, only to refuse, and each only about its own namespace;
* without one (outside a cluster, no variable): the records in the resources' namespaces, as
  before, with the same "a namespace speaks only for itself" rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from connect_offsets.clients.kubernetes import ConfigMapData, ConfigMapMeta, KubernetesUnavailable
from connect_offsets.reconcile import owners, settings
from connect_offsets.reconcile.context import OffsetsRequestInvalid
from connect_offsets.vocabulary import API_GROUP, LAST_OWNER_LABEL, short_hash

pytestmark = pytest.mark.unit

RECORDS = "connect-offsets-system"
NAME = "orders"


class Kube:
    """ConfigMaps by (namespace, name): the calls owner records make."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}

    async def create_configmap(self, namespace: str, body: dict[str, Any]) -> None:
        key = (namespace, body["metadata"]["name"])
        if key in self.objects:
            raise KubernetesUnavailable("409 already exists", 409)
        self.objects[key] = {"metadata": {**body["metadata"], "namespace": namespace}}

    async def patch_configmap(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.objects[(namespace, name)]["metadata"]["annotations"].update(patch["metadata"]["annotations"])

    async def get_configmap(self, namespace: str, name: str) -> ConfigMapData | None:
        obj = self.objects.get((namespace, name))
        if obj is None:
            return None
        meta = obj["metadata"]
        return ConfigMapData(name, "1", {}, {}, dict(meta.get("labels", {})), [], "", dict(meta["annotations"]))

    async def list_configmap_metadata(self, namespace: str | None, label_selector: str) -> list[ConfigMapMeta]:
        key, _, value = label_selector.partition("=")
        return [
            ConfigMapMeta(name, "", o["metadata"]["labels"], o["metadata"]["annotations"], ns)
            for (ns, name), o in self.objects.items()
            if (namespace is None or ns == namespace) and o["metadata"].get("labels", {}).get(key) == value
        ]

    def tenant_record(self, namespace: str, owner: str, time: str = "2999-01-01T00:00:00+00:00") -> None:
        """A record as earlier versions wrote them (or a tenant forges them), in ``namespace``."""
        digest = short_hash(NAME)
        self.objects[(namespace, f"connect-offsets-owner-{digest}-{len(self.objects)}")] = {
            "metadata": {
                "labels": {LAST_OWNER_LABEL: digest},
                "annotations": {f"{API_GROUP}/connector": NAME, f"{API_GROUP}/owner": owner, f"{API_GROUP}/time": time},
            }
        }


@dataclass
class FakePass:
    namespace: str
    kube: Kube
    body: dict[str, Any] = field(default_factory=lambda: {"metadata": {"name": NAME}})
    events: list[str] = field(default_factory=list)

    async def event(self, kind: str, reason: str, message: str) -> None:
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
