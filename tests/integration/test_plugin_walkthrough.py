"""Issue 36: what the user reads is true, and reading never writes — docs/kubectl-plugin.md's own
commands on the real stack, as a user follows them.

The walk-through: ``list`` -> edit -> ``alter --from-file --dry-run`` -> ``alter --from-file
--stop-connector`` -> ``reset`` (connector STOPPED) -> ``alter --dry-run`` again (the issue's case:
a dry run right after a reset printed the reset's backup as its undo) -> ``restore`` (newest) ->
``restore --from-backup`` (undoing that restore) -> ``list -o wide`` (refused: one resource, no
table), ``list -l ... -o wide`` and ``-o json``. After each step:

* the printed advice: ``backup of the previous offsets: ConfigMap X (undo: ... --from-backup X)``
  only for alter, reset and restore, naming exactly the backup that step made (a ConfigMap that did
  not exist before it, annotated with that operation, holding the offsets from before it); none for
  list or a dry run; ``-o wide``'s BACKUP ``-`` for a list;
* ``status.lastOffsetsOperation``: a new request id of the plugin's, the step's operation, and the
  fields of that operation only (``backup`` only when it made one, ``dryRun`` only for a dry run);
* a dry run left the user's alterOffsets ConfigMap byte for byte as the user wrote it (same data,
  same resourceVersion), its file being in ``<resource>-dry-run-input`` instead;
* the worker's own request log: no PATCH or DELETE of the connector's offsets for a list or a dry
  run; exactly one for each change.

Also the operator guide's invalid-document example on the real stack: the OffsetsOperationFailed
message is exactly the lines the guide shows (tests/unit/test_docs_examples.py runs it without the
stack, and the plugin's output).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    GROUP,
    OffsetsRequest,
    connect_log,
    connect_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    get_connector,
    offsets_requests,
    patch_connector,
    wait_condition,
)

PLUGIN = str(Path(sys.executable).parent / "kubectl-connect_offsets")
DOCS = Path(__file__).resolve().parents[2] / "docs"
UNDO = re.compile(
    r"backup of the previous offsets: ConfigMap (?P<backup>\S+) "
    r"\(undo: kubectl connect-offsets restore (?P<name>\S+) -n (?P<namespace>\S+) --from-backup (?P<again>\S+)\)"
)
#: What every record has; the rest belongs to one kind of operation only.
#: Fields of every record of an annotation request (requestKey and instance: issue 30's exactly once).
RECORD_KEYS = {"operation", "result", "reason", "time", "message", "request", "requestId", "requestKey", "instance"}


def plugin(stack: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": stack["kubeconfig"]}
    return subprocess.run([PLUGIN, *args], capture_output=True, text=True, env=env, timeout=150)


def entries(path: Path, position: int) -> list[dict[str, Any]]:
    return [{"partition": {"filename": str(path)}, "offset": {"position": position}}]


class Walk:
    """One connector, its ConfigMaps and what the worker's request log says about it."""

    def __init__(self, stack: dict[str, Any], core: Any, custom: Any, namespace: str, name: str) -> None:
        self.stack, self.core, self.custom, self.namespace, self.name = stack, core, custom, namespace, name
        self.log = connect_log(stack)
        self.request_ids: list[str] = []

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = plugin(self.stack, *args[:1], self.name, "-n", self.namespace, *args[1:])
        assert done.returncode == 0, f"{args}: {done.stderr}"
        return done

    def changes(self) -> list[OffsetsRequest]:
        """The PATCH and DELETE requests of this connector's offsets the worker logged, so far."""
        return [r for r in offsets_requests(self.log, {self.name}) if r.method != "GET"]

    def backups(self) -> dict[str, Any]:
        items = self.core.list_namespaced_config_map(
            self.namespace, label_selector=f"{GROUP}/backup-of={self.name}"
        ).items
        return {item.metadata.name: item for item in items}

    def record(self) -> dict[str, Any]:
        body = get_connector(self.custom, self.namespace, self.name)
        return dict(body["status"]["lastOffsetsOperation"])

    def new_record(self, operation: str, *, backup: bool = False, dry_run: bool = False) -> dict[str, Any]:
        """The step's record: this step's own new plugin request id, its operation, and no field
        another operation left (the record is replaced whole per operation: the lead's item 1)."""
        record = self.record()
        assert record["operation"] == operation and record["result"] == "Succeeded", record
        request_id = record.get("requestId")
        assert isinstance(request_id, str) and request_id.startswith("kubectl-"), record
        assert request_id not in self.request_ids, f"{operation}: the record is an earlier request's: {record}"
        self.request_ids.append(request_id)
        handled = get_connector(self.custom, self.namespace, self.name)["status"]["handledRequestIds"]
        assert (f"{request_id}/dry-run" if dry_run else request_id) in handled
        expected = RECORD_KEYS | ({"backup"} if backup else set()) | ({"dryRun"} if dry_run else set())
        assert set(record) <= expected, f"{operation}: fields of another operation: {set(record) - expected}"
        assert ("backup" in record) == backup, record
        assert (record.get("dryRun") is True) == dry_run, record
        return record

    def advice(self, out: str) -> str | None:
        """The backup the undo advice names (checked to be well formed), or None without advice."""
        found = [UNDO.fullmatch(line) for line in out.splitlines() if "backup of the previous offsets" in line]
        if not found:
            assert "--from-backup" not in out and "undo" not in out, out
            return None
        assert len(found) == 1 and found[0] is not None, out
        match = found[0]
        assert (match["name"], match["namespace"]) == (self.name, self.namespace), out
        assert match["backup"] == match["again"], out
        return match["backup"]


def test_the_plugin_guide_walk_through_says_only_what_is_true(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    source = tmp_path / "source.txt"
    source.write_text("".join(f"line-{i}\n" for i in range(5)))
    size = source.stat().st_size
    name, listed_cm, users_cm = f"walk-{unique}", f"walk-{unique}-listed", f"walk-{unique}-offsets"
    spec = file_source_spec(source, name, listed_cm)
    spec["alterOffsets"] = {"fromConfigMap": {"name": users_cm}}  # the user's document, apart from list's
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, spec)
    walk = Walk(stack, core, custom, namespace, name)
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
        wait_for("offsets at end of file", lambda: connect_offsets(connect, name) == entries(source, size))

        # 1. list: the document on stdout and nothing else; no undo advice; nothing changed in Connect
        listed = walk.run("list")
        assert json.loads(listed.stdout) == {"offsets": entries(source, size)}
        assert listed.stderr == "" and walk.advice(listed.stdout) is None
        walk.new_record("list")
        time.sleep(3)  # an alter caused by the list's own write (issue 36) came 84 ms after it
        assert walk.changes() == []

        # 2. edit: the user's alterOffsets ConfigMap holds a hand edit; the file another position
        hand_edit = json.dumps({"offsets": entries(source, 3)}, indent=4) + "\n  \n"
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": users_cm}, "data": {"offsets.json": hand_edit}}
        )
        users_before = core.read_namespaced_config_map(users_cm, namespace)
        offsets_file = tmp_path / "offsets.json"
        offsets_file.write_text(json.dumps({"offsets": entries(source, 6)}, indent=2))

        # 3. alter --from-file --dry-run: the diff, no advice; the user's ConfigMap untouched
        preview = walk.run("alter", "--from-file", str(offsets_file), "--dry-run")
        report = json.loads(preview.stdout)
        assert report["changed"] == [
            {"partition": {"filename": str(source)}, "old": {"position": size}, "new": {"position": 6}}
        ]
        assert walk.advice(preview.stdout) is None
        walk.new_record("alter", dry_run=True)
        users_after = core.read_namespaced_config_map(users_cm, namespace)
        assert users_after.data == users_before.data and users_after.data["offsets.json"] == hand_edit
        assert users_after.metadata.resource_version == users_before.metadata.resource_version
        kept = core.read_namespaced_config_map(f"{name}-dry-run-input", namespace)
        assert json.loads(kept.data["offsets.json"]) == {"offsets": entries(source, 6)}
        assert [o.uid for o in kept.metadata.owner_references] == [
            get_connector(custom, namespace, name)["metadata"]["uid"]
        ]
        assert connect_offsets(connect, name) == entries(source, size)
        assert walk.changes() == [] and walk.backups() == {}

        # 4. alter --from-file --stop-connector: the advice names the backup this alter made. (Once
        # resumed, the task reads on from position 6 to the end of the file, so Connect's offsets
        # are back at the end a second later: the change itself is in the request log.)
        before = set(walk.backups())
        altered = walk.run("alter", "--from-file", str(offsets_file), "--stop-connector")
        assert "altered successfully" in altered.stdout, altered.stdout
        first = walk.advice(altered.stdout)
        assert first is not None and first not in before and set(walk.backups()) - before == {first}
        assert walk.new_record("alter", backup=True)["backup"] == first
        made = walk.backups()[first]
        assert made.metadata.annotations[f"{GROUP}/operation"] == "alter"
        assert json.loads(made.data["offsets.json"])["offsets"] == entries(source, size)
        assert [(r.method, r.status // 100) for r in walk.changes()] == [("PATCH", 2)]

        # 5. reset, the connector already STOPPED (as the guide's example says)
        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        wait_for("offsets at end of file again", lambda: connect_offsets(connect, name) == entries(source, size))
        before = set(walk.backups())
        reset = walk.run("reset")
        assert connect_offsets(connect, name) == []
        second = walk.advice(reset.stdout)
        assert second is not None and set(walk.backups()) - before == {second}
        assert walk.new_record("reset", backup=True)["backup"] == second
        assert walk.backups()[second].metadata.annotations[f"{GROUP}/operation"] == "reset"
        assert json.loads(walk.backups()[second].data["offsets.json"])["offsets"] == entries(source, size)
        assert [r.method for r in walk.changes()] == ["PATCH", "DELETE"]

        # 6. a dry run right after it: the case, where the reset's backup was printed as undo
        again = walk.run("alter", "--from-file", str(offsets_file), "--dry-run")
        assert json.loads(again.stdout)["added"] == entries(source, 6)
        assert walk.advice(again.stdout) is None
        walk.new_record("alter", dry_run=True)
        assert [r.method for r in walk.changes()] == ["PATCH", "DELETE"]

        # 7. restore (the newest backup, the reset's): the advice names the backup the restore made
        before = set(walk.backups())
        restored = walk.run("restore")
        assert connect_offsets(connect, name) == entries(source, size)
        third = walk.advice(restored.stdout)
        assert third is not None and set(walk.backups()) - before == {third} and third not in (first, second)
        assert walk.new_record("restore", backup=True)["backup"] == third
        assert json.loads(walk.backups()[third].data["offsets.json"])["offsets"] == []

        # 8. restore --from-backup the restore's own backup (no offsets): undone exactly; a new backup
        before = set(walk.backups())
        named = walk.run("restore", "--from-backup", third)
        assert connect_offsets(connect, name) == []
        fourth = walk.advice(named.stdout)
        assert fourth is not None and set(walk.backups()) - before == {fourth} and fourth != third
        assert walk.new_record("restore", backup=True)["backup"] == fourth
        assert json.loads(walk.backups()[fourth].data["offsets.json"])["offsets"] == entries(source, size)

        # 9. list -o wide: one resource prints the offsets document, no table, so -o wide is refused
        # before anything is written; with -l, the table's BACKUP column is empty ("-") for a list
        # although earlier records had one
        refused = plugin(stack, "list", name, "-n", namespace, "-o", "wide")
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.startswith("error: -o wide widens a table, and list on one resource prints none")
        wide = plugin(stack, "list", "-l", f"{GROUP}/cluster=local", "-n", namespace, "-o", "wide")
        assert wide.returncode == 0, wide.stderr
        header, row = wide.stdout.splitlines()
        columns = re.split(r" {3,}", header.strip())
        cells = re.split(r" {3,}", row.strip())
        assert cells[columns.index("BACKUP")] == "-"
        assert cells[columns.index("REQUEST ID")] == walk.new_record("list")["requestId"]
        as_json = json.loads(walk.run("list", "-o", "json").stdout)
        assert as_json["offsets"] == [] and "backup" not in as_json  # the entries, not {"offsets": {...}}
        walk.new_record("list")

        # the worker's request log, whole: one change per alter, reset and restore, none for the rest
        # (a 409 is the worker's "momentarily stale configuration" while it rebalances: nothing was
        # applied, and the operator asks again - seen when the busy neighbour made the worker rebalance)
        time.sleep(2)
        assert [(r.method, r.status // 100) for r in walk.changes() if r.status != 409] == [
            ("PATCH", 2),
            ("DELETE", 2),
            ("PATCH", 2),
            ("PATCH", 2),
        ]
        assert (
            core.read_namespaced_config_map(users_cm, namespace).data["offsets.json"]
            == json.dumps({"offsets": entries(source, 6)}, indent=2) + "\n"
        )  # the real alter (step 4) wrote the file there, as documented; no dry run did
    finally:
        connect.delete(f"/connectors/{name}")


def guide_example() -> tuple[str, str]:
    """The operator guide's invalid offsets.json and the condition message it shows for it."""
    text = (DOCS / "operator-guide.md").read_text()
    start = text.index("whose `file` is `/data/orders.txt`, has four problems:")
    document, message = re.findall(r"```[a-z]*\n(.*?)```", text[start:], flags=re.DOTALL)[:2]
    return document, message.rstrip("\n")


def test_the_guides_invalid_document_is_refused_with_exactly_the_lines_shown(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    unique: str,
) -> None:
    """Every problem at once (issue 36: only the unknown key was reported; fixing it revealed the next)."""
    document, shown = guide_example()
    name = f"orders-{unique}"  # connector names are global on the worker: the ConfigMap keeps the guide's name
    create_cluster(custom, namespace, connect_url)
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "orders-offsets"}, "data": {"offsets.json": document}}
    )
    spec = {
        "class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasksMax": 1,
        "state": "stopped",
        "config": {"file": "/data/orders.txt", "topic": name},
        "alterOffsets": {"fromConfigMap": {"name": "orders-offsets"}},
    }
    create_connector(custom, namespace, name, spec, annotations={f"{GROUP}/connector-offsets": "alter"})
    try:
        failed = wait_condition(custom, namespace, name, "OffsetsOperationFailed", reason="InvalidOffsets")
        assert failed["message"] == shown
        assert [r for r in offsets_requests(connect_log(stack), {name}) if r.method != "GET"] == []
    finally:
        connect.delete(f"/connectors/{name}")


def test_kubectl_explain_describes_every_field_of_the_three_kinds(stack: dict[str, Any]) -> None:
    """`kubectl explain kafkaconnector.spec` (and .status, and the other kinds) showed an empty
    description. What kubectl explain reads, the API server's OpenAPI v3 of the group, now has one
    for every field; and explain itself prints it for spec and status."""
    env = {**os.environ, "KUBECONFIG": stack["kubeconfig"]}

    def kubectl(*args: str) -> str:
        return subprocess.run([stack["kubectl"], *args], capture_output=True, text=True, env=env, check=True).stdout

    published = json.loads(kubectl("get", "--raw", f"/openapi/v3/apis/{GROUP}/v1beta1"))
    schemas = published["components"]["schemas"]
    kinds = (
        ("KafkaConnector", "kafkaconnectors"),
        ("KafkaMirrorMaker2", "kafkamirrormaker2s"),
        ("ConnectCluster", "connectclusters"),
    )
    for kind, plural in kinds:
        key = next(k for k in schemas if k.endswith(f".v1beta1.{kind}"))
        missing = list(undescribed(schemas[key], kind))
        assert missing == [], f"kubectl explain shows no description for: {missing}"
        for part in ("spec", "status"):
            explained = kubectl("explain", f"{plural}.{part}", f"--api-version={GROUP}/v1beta1")
            description = explained.split("DESCRIPTION:", 1)[1].split("FIELDS:", 1)[0].strip()
            assert len(description) > 40 and "<empty>" not in description, explained


def undescribed(node: dict[str, Any], path: str) -> Iterator[str]:
    """The fields of a published schema without a description (metadata is ObjectMeta, a $ref)."""
    for field, child in (node.get("properties") or {}).items():
        if "$ref" in child or "allOf" in child:
            continue
        if not str(child.get("description") or "").strip():
            yield f"{path}.{field}"
        yield from undescribed(child, f"{path}.{field}")
    for nested in ("items", "additionalProperties"):
        if isinstance(node.get(nested), dict):
            yield from undescribed(node[nested], path)
