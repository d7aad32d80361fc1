"""``connect-offsets migrate-storage`` against an in-memory API server: every object written back
through the storage version, page by page, before ``status.storedVersions`` is narrowed; a failure
leaves storedVersions as it was. The real API server runs it in tests/integration/test_storage_migration.py."""

from __future__ import annotations

from typing import Any

import pytest

from connect_offsets.tools.cli import main
from connect_offsets.tools.exit_codes import ExitCode
from connect_offsets.tools.storage_migration import (
    ApiError,
    MigrationError,
    StorageMigration,
    storage_version_hash,
)
from connect_offsets.vocabulary import API_GROUP

pytestmark = pytest.mark.unit

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kafkaconnectors.connect-offsets.io"


class FakeApi:
    """The API server's answers for one kind: the CRD, discovery, a paged list, the writes."""

    def __init__(self, objects: int, stored: list[str], page: int = 2) -> None:
        self.stored = stored
        self.items = [
            {
                "apiVersion": f"{API_GROUP}/v1beta1",
                "kind": "KafkaConnector",
                "metadata": {"namespace": f"ns-{i % 2}", "name": f"c{i}", "resourceVersion": str(100 + i)},
                "spec": {"class": "x"},
            }
            for i in range(objects)
        ]
        self.page = page
        self.hashes = [storage_version_hash(API_GROUP, "v1beta1", "KafkaConnector")]
        self.put_errors: dict[str, ApiError] = {}
        self.storage = "v1beta1"
        self.calls: list[tuple[str, str, dict[str, str], Any]] = []

    def __call__(self, method: str, path: str, query: dict[str, str], body: Any, content_type: str) -> Any:
        self.calls.append((method, path, query, body))
        if method == "GET" and path == CRD_PATH:
            return {
                "spec": {
                    "names": {"kind": "KafkaConnector"},
                    "versions": [
                        {"name": "v1beta1", "storage": self.storage == "v1beta1"},
                        {"name": "v1alpha1", "storage": self.storage == "v1alpha1"},
                    ],
                },
                "status": {"storedVersions": self.stored},
            }
        if method == "GET" and path == f"/apis/{API_GROUP}/v1beta1":
            reported = self.hashes.pop(0) if len(self.hashes) > 1 else self.hashes[0]
            return {"resources": [{"name": "kafkaconnectors", "storageVersionHash": reported}]}
        if method == "GET" and path == f"/apis/{API_GROUP}/v1beta1/kafkaconnectors":
            start = int(query.get("continue") or 0)
            end = start + int(query["limit"]) if self.page == 0 else start + self.page
            return {
                "items": self.items[start:end],
                "metadata": {"continue": str(end) if end < len(self.items) else ""},
            }
        if method == "PUT":
            name = path.rsplit("/", 1)[-1]
            if name in self.put_errors:
                raise self.put_errors[name]
            assert content_type == "application/json"
            return body
        if method == "PATCH" and path == f"{CRD_PATH}/status":
            assert content_type == "application/json-patch+json"
            return {}
        raise AssertionError(f"unexpected {method} {path}")

    def puts(self) -> list[tuple[str, dict[str, str], Any]]:
        return [(path, query, body) for method, path, query, body in self.calls if method == "PUT"]

    def patches(self) -> list[Any]:
        return [body for method, _, _, body in self.calls if method == "PATCH"]


def test_every_object_is_written_back_through_the_storage_version_then_stored_versions_narrowed() -> None:
    api = FakeApi(objects=5, stored=["v1alpha1", "v1beta1"])
    (outcome,) = StorageMigration(api).run(("kafkaconnectors",))
    puts = api.puts()
    assert [path for path, _, _ in puts] == [
        f"/apis/{API_GROUP}/v1beta1/namespaces/ns-{i % 2}/kafkaconnectors/c{i}" for i in range(5)
    ]
    # unchanged, with its resourceVersion: a write that lost a race is refused, not applied over it
    assert [body for _, _, body in puts] == api.items
    assert all(query == {} for _, query, _ in puts)
    # three pages of two: every page was read
    assert [q.get("continue", "") for m, p, q, _ in api.calls if m == "GET" and p.endswith("/kafkaconnectors")] == [
        "",
        "2",
        "4",
    ]
    assert api.patches() == [
        [
            {"op": "test", "path": "/status/storedVersions", "value": ["v1alpha1", "v1beta1"]},
            {"op": "replace", "path": "/status/storedVersions", "value": ["v1beta1"]},
        ]
    ]
    assert outcome.rewritten == 5
    assert outcome.stored_after == ["v1beta1"]
    assert outcome.line(False) == (
        "kafkaconnectors.connect-offsets.io: 5 object(s) written back as v1beta1; "
        "storedVersions ['v1alpha1', 'v1beta1'] -> ['v1beta1']"
    )


def test_objects_written_or_deleted_by_others_meanwhile_count_as_migrated() -> None:
    api = FakeApi(objects=3, stored=["v1alpha1", "v1beta1"])
    api.put_errors = {"c0": ApiError(409, "the object has been modified"), "c1": ApiError(404, "not found")}
    (outcome,) = StorageMigration(api).run(("kafkaconnectors",))
    assert (outcome.rewritten, outcome.changed_meanwhile, outcome.deleted_meanwhile) == (1, 1, 1)
    assert len(api.patches()) == 1
    assert "1 written by someone else meanwhile" in outcome.line(False)
    assert "1 deleted meanwhile" in outcome.line(False)


def test_an_object_the_api_server_refuses_stops_before_stored_versions_change() -> None:
    api = FakeApi(objects=3, stored=["v1alpha1", "v1beta1"])
    api.put_errors = {
        "c1": ApiError(422, 'KafkaConnector.connect-offsets.io "c1" is invalid: spec.class: Required value')
    }
    with pytest.raises(MigrationError) as caught:
        StorageMigration(api).run(("kafkaconnectors",))
    assert str(caught.value).startswith(
        'write back kafkaconnectors ns-1/c1: KafkaConnector.connect-offsets.io "c1" is invalid: spec.class: '
        "Required value (HTTP 422)"
    )
    assert "storedVersions keeps the old version" in str(caught.value)
    assert caught.value.code == ExitCode.FAILED
    assert api.patches() == []


def test_a_dry_run_asks_the_api_server_to_check_each_write_and_changes_nothing() -> None:
    api = FakeApi(objects=2, stored=["v1alpha1", "v1beta1"])
    (outcome,) = StorageMigration(api, dry_run=True).run(("kafkaconnectors",))
    assert [query for _, query, _ in api.puts()] == [{"dryRun": "All"}, {"dryRun": "All"}]
    assert api.patches() == []
    assert outcome.line(True) == (
        "kafkaconnectors.connect-offsets.io: 2 object(s) would be written back as v1beta1 (server-side dry run); "
        "storedVersions ['v1alpha1', 'v1beta1'] (unchanged: dry run)"
    )


def test_stored_versions_already_narrowed_are_not_patched_again() -> None:
    api = FakeApi(objects=1, stored=["v1beta1"])
    (outcome,) = StorageMigration(api).run(("kafkaconnectors",))
    assert outcome.rewritten == 1
    assert api.patches() == []


def test_it_waits_until_discovery_reports_the_new_storage_version() -> None:
    api = FakeApi(objects=1, stored=["v1alpha1", "v1beta1"])
    old = storage_version_hash(API_GROUP, "v1alpha1", "KafkaConnector")
    api.hashes = [old, old, storage_version_hash(API_GROUP, "v1beta1", "KafkaConnector")]
    slept: list[float] = []
    StorageMigration(api, sleep=slept.append).run(("kafkaconnectors",))
    assert slept == [1.0, 1.0]
    first_put = next(i for i, call in enumerate(api.calls) if call[0] == "PUT")
    discoveries = [i for i, call in enumerate(api.calls) if call[1] == f"/apis/{API_GROUP}/v1beta1"]
    assert len(discoveries) == 3
    assert max(discoveries) < first_put


def test_it_gives_up_naming_both_hashes_when_the_switch_never_shows() -> None:
    api = FakeApi(objects=1, stored=["v1alpha1", "v1beta1"])
    old = storage_version_hash(API_GROUP, "v1alpha1", "KafkaConnector")
    api.hashes = [old]
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(MigrationError) as caught:
        StorageMigration(api, wait_seconds=3, sleep=sleep, clock=lambda: now[0]).run(("kafkaconnectors",))
    assert f"storageVersionHash {old}, want {storage_version_hash(API_GROUP, 'v1beta1', 'KafkaConnector')}" in str(
        caught.value
    )
    assert api.puts() == []


def test_the_storage_version_hash_is_the_api_servers() -> None:
    # Read from a kube-apiserver 1.35's discovery for this CRD stored as v1beta1.
    assert storage_version_hash(API_GROUP, "v1beta1", "KafkaConnector") == "rzj8RRpKX5w="


def test_a_missing_permission_names_the_rbac_rules() -> None:
    def forbidden(method: str, path: str, query: dict[str, str], body: Any, content_type: str) -> Any:
        raise ApiError(
            403,
            'customresourcedefinitions.apiextensions.k8s.io "kafkaconnectors.connect-offsets.io" is '
            'forbidden: User "bob" cannot get resource',
        )

    with pytest.raises(MigrationError) as caught:
        StorageMigration(forbidden).run(("kafkaconnectors",))
    assert str(caught.value).startswith("read CRD kafkaconnectors.connect-offsets.io: customresourcedefinitions")
    assert "docs/api-versions.md#storage-migration" in str(caught.value)
    assert caught.value.code == ExitCode.KUBERNETES


def test_the_command_reports_an_unreadable_kubeconfig_with_exit_code_4(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    assert main(["migrate-storage", "--kubeconfig", str(missing)]) == ExitCode.KUBERNETES
    err = capsys.readouterr().err
    assert err.startswith(f"connect-offsets: error: cannot load the kubeconfig ({missing}):")


def test_crds_that_still_store_the_old_version_are_refused_before_any_write() -> None:
    """The new CRDs not applied yet (Helm does not upgrade crds/): rewriting every object as
    v1alpha1 again would help nobody, and storedVersions must not lose v1beta1's future."""
    api = FakeApi(objects=2, stored=["v1alpha1"])
    api.storage = "v1alpha1"
    with pytest.raises(MigrationError) as caught:
        StorageMigration(api).run(("kafkaconnectors",))
    assert str(caught.value).startswith(
        "refused: CRD kafkaconnectors.connect-offsets.io stores v1alpha1, but this connect-offsets"
    )
    assert "stores v1beta1; apply the CRDs of the release you upgrade to first" in str(caught.value)
    assert caught.value.code == ExitCode.REFUSED
    assert [call[0] for call in api.calls] == ["GET"]


def test_every_crd_is_checked_before_the_first_write() -> None:
    """One CRD of another release among the three: nothing is written to any of them."""
    api = FakeApi(objects=2, stored=["v1alpha1", "v1beta1"])
    answers = iter([None, "v1alpha1"])  # the first CRD read stores v1beta1, the second v1alpha1

    def request(method: str, path: str, query: dict[str, str], body: Any, content_type: str) -> Any:
        if method == "GET" and path == CRD_PATH:
            api.storage = next(answers) or "v1beta1"
        return api(method, path, query, body, content_type)

    with pytest.raises(MigrationError):
        StorageMigration(request).run(("kafkaconnectors", "kafkaconnectors"))
    assert [call[0] for call in api.calls] == ["GET", "GET"]
