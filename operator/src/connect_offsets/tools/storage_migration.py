"""``connect-offsets migrate-storage``: rewrite every stored object in the CRDs' storage version.

Why: an object stays in etcd in the version it was last written in. After an upgrade that moves the
storage version (v1alpha1 -> v1beta1, docs/api-versions.md), objects nobody has written since are
still stored as v1alpha1, and the CRD's ``status.storedVersions`` still lists v1alpha1. A later
release can stop serving v1alpha1 only once no object is stored in it: the API server refuses to
drop a version from ``spec.versions`` that ``storedVersions`` still names.

What it does, per CRD (the three kinds of connect-offsets.io), as kube-storage-version-migrator does:

1. reads the three CRDs: the storage version is the one with ``storage: true``; unless each stores
   this package's ``API_VERSION``, it refuses before any write (the new CRDs were not applied, or
   this tool is of another release);
2. waits until the API server's discovery reports that version's storage hash (the switch is made
   by the API server when it sees the new CRD; an object written before that would be stored in
   the old version again);
3. lists every object of the kind in every namespace through the storage version, and writes each
   back unchanged (a PUT with its resourceVersion). The API server stores it in the storage version;
   an object already stored so is left as it is (the API server skips a write of identical bytes).
   A conflict means someone wrote the object after the list, which stored it in the new version too;
   not found means it was deleted since: both count as done;
4. sets ``status.storedVersions`` to the storage version alone, with a JSON patch that first tests
   the list it read (so a version added meanwhile is not dropped).

A failure in 3 (say, an object the current schema refuses) stops before 4 and names the object with
the API server's message: ``storedVersions`` keeps the old version until every object is rewritten.
Running it again is safe. ``--dry-run`` sends each write as a server-side dry run and changes nothing.

RBAC: docs/api-versions.md#storage-migration (list and update on the three kinds, cluster-wide; get
on the three CRDs; patch on their ``status``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, TextIO
from urllib.parse import quote

from connect_offsets import __version__
from connect_offsets.errors import ConnectOffsetsError
from connect_offsets.tools.exit_codes import ExitCode
from connect_offsets.vocabulary import API_GROUP, API_VERSION, CLUSTERS, CONNECTORS, MAX_QUOTED_TEXT, MIRRORS

__all__ = ["MigrationError", "StorageMigration", "migrate_storage", "register", "storage_version_hash"]

#: The CRDs to migrate, by plural.
PLURALS: Final = (CLUSTERS, CONNECTORS, MIRRORS)
#: Objects per list page.
PAGE: Final = 250


class MigrationError(ConnectOffsetsError):
    """Ends the command with ``code`` and a one-line message."""

    def __init__(self, message: str, code: int = int(ExitCode.KUBERNETES)) -> None:
        super().__init__(message)
        self.code = code


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """What discovery reports as ``storageVersionHash`` for a resource stored as group/version/kind.

    The API server's own formula (k8s.io/apiserver/pkg/endpoints/discovery.StorageVersionHash): the
    first 8 bytes of the SHA-256 of ``group/version/kind``, base64. Kubernetes says clients should not
    depend on it; here it only decides how long to wait, and a server that reports no hash is not
    waited for.
    """
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


#: Sends one request: (method, path, query, body, content type) -> the decoded JSON answer.
Request = Callable[[str, str, dict[str, str], Any, str], Any]


class ApiError(ConnectOffsetsError):
    """An answer other than 2xx: its status code and the API server's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class MigrationOutcome:
    """What the migration did for one CRD."""

    crd: str
    storage: str
    rewritten: int = 0
    changed_meanwhile: int = 0
    deleted_meanwhile: int = 0
    stored_before: list[str] = field(default_factory=list)
    stored_after: list[str] = field(default_factory=list)

    def line(self, dry_run: bool) -> str:
        counted = f"{self.rewritten} object(s) written back as {self.storage}"
        if dry_run:
            counted = f"{self.rewritten} object(s) would be written back as {self.storage} (server-side dry run)"
        extras = [
            f"{n} {what}"
            for n, what in (
                (self.changed_meanwhile, "written by someone else meanwhile (stored as the new version already)"),
                (self.deleted_meanwhile, "deleted meanwhile"),
            )
            if n
        ]
        stored = f"storedVersions {self.stored_before} -> {self.stored_after}"
        if dry_run or self.stored_before == self.stored_after:
            stored = f"storedVersions {self.stored_before}" + (" (unchanged: dry run)" if dry_run else "")
        return f"{self.crd}: {counted}" + (f" ({'; '.join(extras)})" if extras else "") + f"; {stored}"


class StorageMigration:
    """The steps above, over any ``Request`` (the kubernetes client's in the command, a fake in unit tests)."""

    def __init__(
        self,
        request: Request,
        *,
        dry_run: bool = False,
        wait_seconds: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.request, self.dry_run, self.wait_seconds, self.sleep, self.clock = (
            request,
            dry_run,
            wait_seconds,
            sleep,
            clock,
        )

    def run(self, plurals: tuple[str, ...] = PLURALS) -> list[MigrationOutcome]:
        """Every CRD checked before the first write, then each migrated in turn."""
        read = [(plural, self._read_crd(plural)) for plural in plurals]
        return [self.migrate(plural, crd) for plural, crd in read]

    def _read_crd(self, plural: str) -> dict[str, Any]:
        name = f"{plural}.{API_GROUP}"
        crd: dict[str, Any] = self._call(
            "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", what=f"read CRD {name}"
        )
        stored = [v["name"] for v in crd["spec"]["versions"] if v.get("storage")]
        if len(stored) != 1:
            raise MigrationError(f"CRD {name}: expected exactly one version with storage: true, found {stored}")
        if stored[0] != API_VERSION:
            # The CRDs of another release than this tool's: most often the new CRDs were not applied
            # (Helm does not upgrade them). Rewriting everything as the old version helps nobody.
            raise MigrationError(
                f"refused: CRD {name} stores {stored[0]}, but this connect-offsets ({__version__}) stores "
                f"{API_VERSION}; apply the CRDs of the release you upgrade to first (kubectl apply --server-side "
                "-f charts/connect-offsets-operator/crds/; docs/api-versions.md#upgrading-from-v1alpha1) or run "
                "the connect-offsets of the installed release. Nothing was changed",
                int(ExitCode.REFUSED),
            )
        return crd

    def migrate(self, plural: str, crd: dict[str, Any]) -> MigrationOutcome:
        name = f"{plural}.{API_GROUP}"
        storage = API_VERSION
        kind = crd["spec"]["names"]["kind"]
        outcome = MigrationOutcome(
            crd=name, storage=storage, stored_before=list(crd.get("status", {}).get("storedVersions", []))
        )
        outcome.stored_after = outcome.stored_before
        self._wait_for_storage_switch(plural, storage, kind)
        for item in self._list(plural, storage):
            self._write_back(plural, storage, item, outcome)
        if outcome.stored_before != [storage] and not self.dry_run:
            self._call(
                "PATCH",
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}/status",
                body=[
                    {"op": "test", "path": "/status/storedVersions", "value": outcome.stored_before},
                    {"op": "replace", "path": "/status/storedVersions", "value": [storage]},
                ],
                content_type="application/json-patch+json",
                what=f"set status.storedVersions of CRD {name} to [{storage}]",
            )
            outcome.stored_after = [storage]
        return outcome

    def _wait_for_storage_switch(self, plural: str, storage: str, kind: str) -> None:
        want = storage_version_hash(API_GROUP, storage, kind)
        deadline = self.clock() + self.wait_seconds
        while True:
            resources = self._call("GET", f"/apis/{API_GROUP}/{storage}", what=f"discover {API_GROUP}/{storage}")
            found = next((r for r in resources.get("resources", []) if r.get("name") == plural), None)
            if found is None:
                raise MigrationError(f"{API_GROUP}/{storage} does not serve {plural}: is the CRD established?")
            reported = found.get("storageVersionHash")
            if reported is None or reported == want:
                return
            if self.clock() >= deadline:
                raise MigrationError(
                    f"{plural}.{API_GROUP}: the API server still stores another version than {storage} after "
                    f"{self.wait_seconds:g} s (discovery's storageVersionHash {reported}, want {want}); "
                    "with several API servers, one may not have seen the new CRD yet: run again later"
                )
            self.sleep(1.0)

    def _list(self, plural: str, storage: str) -> Iterator[dict[str, Any]]:
        token = ""
        while True:
            query = {"limit": str(PAGE)} | ({"continue": token} if token else {})
            page = self._call("GET", f"/apis/{API_GROUP}/{storage}/{plural}", query=query, what=f"list {plural}")
            yield from page.get("items", [])
            token = page.get("metadata", {}).get("continue", "")
            if not token:
                return

    def _write_back(self, plural: str, storage: str, item: dict[str, Any], outcome: MigrationOutcome) -> None:
        meta = item["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        body = {**item, "apiVersion": f"{API_GROUP}/{storage}"}
        query = {"dryRun": "All"} if self.dry_run else {}
        path = f"/apis/{API_GROUP}/{storage}/namespaces/{quote(namespace)}/{plural}/{quote(name)}"
        try:
            self.request("PUT", path, query, body, "application/json")
        except ApiError as error:
            if error.status == 409:
                outcome.changed_meanwhile += 1
                return
            if error.status == 404:
                outcome.deleted_meanwhile += 1
                return
            raise MigrationError(
                f"write back {plural} {namespace}/{name}: {error} (HTTP {error.status}); nothing else changed: "
                "status.storedVersions keeps the old version until every object is written back",
                int(ExitCode.FAILED) if error.status == 422 else int(ExitCode.KUBERNETES),
            ) from error
        outcome.rewritten += 1

    def _call(
        self,
        method: str,
        path: str,
        *,
        what: str,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        try:
            return self.request(method, path, query or {}, body, content_type)
        except ApiError as error:
            hint = ""
            if error.status == 403:
                hint = " (a permission is missing: docs/api-versions.md#storage-migration lists the RBAC rules)"
            raise MigrationError(f"{what}: {error} (HTTP {error.status}){hint}") from error


def kubernetes_request(kubeconfig: str | None, context: str | None) -> Request:
    """A ``Request`` over the kubernetes client, with credentials found as kubectl finds them
    (``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``), or in-cluster ones in a pod."""
    import urllib3
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    try:
        in_pod = "KUBERNETES_SERVICE_HOST" in os.environ
        default_file = os.path.expanduser("~/.kube/config")
        if kubeconfig is None and not os.environ.get("KUBECONFIG") and not os.path.exists(default_file) and in_pod:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            api_client = client.ApiClient()
        else:
            api_client = config.new_client_from_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError) as error:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise MigrationError(f"cannot load the kubeconfig ({where}): {error}") from error
    if not api_client.configuration.verify_ssl:
        # The kubeconfig asked for insecure-skip-tls-verify; kubectl does not warn on every call either.
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)

    def request(method: str, path: str, query: dict[str, str], body: Any, content_type: str) -> Any:
        try:
            serialized = api_client.param_serialize(
                method=method,
                resource_path=path,
                query_params=list(query.items()),
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
            )
            response = api_client.call_api(*serialized, _request_timeout=30)
            data = response.read()  # type: ignore[no-untyped-call]
        except OSError as error:  # urllib3's connection errors are OSErrors
            raise MigrationError(f"{method} {path}: the API server could not be reached: {error}") from error
        if not 200 <= response.status <= 299:
            raise ApiError(int(response.status), _message(data))
        return json.loads(data or b"null")

    return request


def _message(body: Any) -> str:
    """The API server's Status message, verbatim and capped."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body or "")
    with contextlib.suppress(ValueError, AttributeError):  # not a Status: the body as sent
        text = str(json.loads(text).get("message") or text)
    return text[:MAX_QUOTED_TEXT]


def migrate_storage(args: argparse.Namespace, out: TextIO) -> int:
    migration = StorageMigration(
        kubernetes_request(args.kubeconfig, args.context), dry_run=args.dry_run, wait_seconds=args.wait
    )
    for outcome in migration.run():
        print(outcome.line(args.dry_run), file=out, flush=True)
    return int(ExitCode.OK)


_EXAMPLES = """\
examples:
  # after applying the new CRDs and upgrading the chart (docs/api-versions.md#upgrading)
  connect-offsets migrate-storage
  # what would be written, checked by the API server; nothing changes
  connect-offsets migrate-storage --dry-run
"""


def register(sub: Any, run: Callable[[argparse.Namespace], int], exit_codes: str) -> None:
    """Add ``migrate-storage`` to the ``connect-offsets`` sub-commands."""
    parser = sub.add_parser(
        "migrate-storage",
        help="write every ConnectCluster, KafkaConnector and KafkaMirrorMaker2 back in the stored version",
        description="Rewrite every object of the three kinds (all namespaces) in the CRDs' storage version, then "
        "drop the older versions from each CRD's status.storedVersions, as kube-storage-version-migrator does. "
        "Run it after an upgrade that changes the stored version (docs/api-versions.md).",
        epilog=_EXAMPLES + "\n" + exit_codes,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    parser.add_argument(
        "--dry-run", action="store_true", help="server-side dry run of every write; storedVersions unchanged"
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=60.0,
        metavar="S",
        help="how long to wait for the API server to switch to the new storage version (60)",
    )
    parser.set_defaults(func=run)
