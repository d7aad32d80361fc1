"""clients.kubernetes.retry_on_conflict: the one optimistic-concurrency loop around ConfigMap writes.

Both writers that read a ConfigMap and write it at the resourceVersion they read use it: the
operator's single-key write (``KubernetesApi.write_configmap_key``: a dry run's diff) and the
offsets store's switch to a new form (``OffsetsConfigMapStore``). A 409 means someone changed the
ConfigMap in between: read again and write again, five times at most; any other error at once.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from connect_offsets.clients.kubernetes import (
    CONFLICT_ATTEMPTS,
    ConfigMapData,
    KubernetesApi,
    KubernetesRejected,
    KubernetesUnavailable,
    retry_on_conflict,
)
from connect_offsets.clients.offsets_configmaps import OffsetsConfigMapStore
from tests.fakes import FakeKube

pytestmark = pytest.mark.unit

CONFLICT = KubernetesUnavailable("patch ConfigMap ns/cm: 409 the object has been modified", 409)


class Attempts:
    """An attempt that fails with the given errors first, then answers "done"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


async def test_a_conflict_is_tried_again_until_the_write_goes_through() -> None:
    attempt = Attempts(CONFLICT, CONFLICT)
    assert await retry_on_conflict("patch ConfigMap ns/cm", attempt) == "done"
    assert attempt.calls == 3


@pytest.mark.parametrize(
    "error",
    [KubernetesUnavailable("patch ConfigMap ns/cm: 503", 503), KubernetesRejected("patch ConfigMap ns/cm: 403", 403)],
)
async def test_any_other_error_reaches_the_caller_at_once(error: Exception) -> None:
    attempt = Attempts(error)
    with pytest.raises(type(error)) as raised:
        await retry_on_conflict("patch ConfigMap ns/cm", attempt)
    assert raised.value is error and attempt.calls == 1


async def test_conflicts_without_end_are_given_up_after_five_attempts() -> None:
    attempt = Attempts(*[CONFLICT] * 10)
    with pytest.raises(KubernetesUnavailable) as raised:
        await retry_on_conflict("patch ConfigMap ns/cm", attempt)
    assert str(raised.value) == "patch ConfigMap ns/cm: kept conflicting with other writers"
    assert attempt.calls == CONFLICT_ATTEMPTS == 5


# --- its users -----------------------------------------------------------------------------------


class ConflictingKube(FakeKube):
    """Another writer changes the ConfigMap between each read and the next ``conflicts`` patches."""

    def __init__(self, conflicts: int) -> None:
        super().__init__()
        self.conflicts = conflicts
        self.patches = 0

    async def patch_configmap(
        self, namespace: str, name: str, patch: dict[str, Any], *, resource_version: str | None = None
    ) -> ConfigMapData:
        self.patches += 1
        if self.conflicts:
            self.conflicts -= 1
            raise CONFLICT
        return await super().patch_configmap(namespace, name, patch, resource_version=resource_version)


async def test_the_offsets_store_writes_through_a_few_conflicts() -> None:
    kube = ConflictingKube(conflicts=2)
    await kube.create_configmap_uid("ns", {"metadata": {"name": "cm"}, "data": {"other": "x"}})
    store = OffsetsConfigMapStore(kube)  # type: ignore[arg-type]
    await store.write("ns", "cm", "offsets.json", b'{"offsets":[]}', pretty=False)
    assert kube.patches == 3
    read = await store.read("ns", "cm", "offsets.json")
    assert read is not None and read.document == b'{"offsets":[]}'


async def test_the_offsets_store_gives_up_on_a_configmap_that_keeps_changing() -> None:
    kube = ConflictingKube(conflicts=100)
    await kube.create_configmap_uid("ns", {"metadata": {"name": "cm"}, "data": {"other": "x"}})
    with pytest.raises(KubernetesUnavailable, match="kept conflicting with other writers"):
        await OffsetsConfigMapStore(kube).write("ns", "cm", "offsets.json", b"{}")  # type: ignore[arg-type]
    assert kube.patches == CONFLICT_ATTEMPTS


async def test_a_single_key_write_patches_a_configmap_created_meanwhile() -> None:
    """The ConfigMap is missing, but someone creates it before us (409 on create): read again and
    patch it at its resourceVersion."""
    api = KubernetesApi(client.ApiClient())
    existing = ConfigMapData("cm", "7", {"app": "keep"}, {}, {}, [])
    reads = iter([None, existing])
    calls: list[tuple[str, Any]] = []

    async def get_configmap(namespace: str, name: str) -> ConfigMapData | None:
        return next(reads)

    async def call(what: str, func: Any, *args: Any, **kwargs: Any) -> None:
        calls.append((what, args[-1]))
        if what.startswith("create"):
            raise KubernetesUnavailable(f"{what}: 409 AlreadyExists", 409)

    api.get_configmap = get_configmap  # type: ignore[method-assign]
    api._call = call  # type: ignore[method-assign]
    await api.write_configmap_key("ns", "cm", "diff.json", "{}", labels={"l": "v"}, owner={"uid": "u"})
    assert [what for what, _ in calls] == ["create ConfigMap ns/cm", "patch ConfigMap ns/cm"]
    assert calls[1][1] == {"metadata": {"resourceVersion": "7"}, "data": {"diff.json": "{}"}}
