"""The kubectl plugin without a cluster: argument parsing, local validation, completion detection, rendering."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from connect_offsets.offsets import FILE_STREAM_SOURCE_CLASS
from connect_offsets.tools import kubectl as kp
from connect_offsets.tools.exit_codes import epilog
from connect_offsets.tools.kubectl.render import render_wide
from connect_offsets.vocabulary import API_GROUP, API_VERSION
from tests.plugin_bodies import east_to_west_spec

NS = "kafka"


def connector_body(
    name: str = "src",
    *,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    list_cm: str | None = "src-offsets",
    alter_cm: str | None = "src-offsets",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"class": FILE_STREAM_SOURCE_CLASS, "config": {"file": "/data/in.txt", "topic": "t"}}
    if list_cm:
        spec["listOffsets"] = {"toConfigMap": {"name": list_cm}}
    if alter_cm:
        spec["alterOffsets"] = {"fromConfigMap": {"name": alter_cm}}
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "KafkaConnector",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": "u-1",
            "resourceVersion": "7",
            "annotations": annotations or {},
            "labels": {"connect-offsets.io/cluster": "c"},
        },
        "spec": spec,
        "status": status or {},
    }


def mirror_body(annotations: dict[str, str] | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "kind": "KafkaMirrorMaker2",
        "metadata": {
            "name": "e2w",
            "namespace": NS,
            "uid": "u-2",
            "resourceVersion": "3",
            "annotations": annotations or {},
        },
        "spec": east_to_west_spec(),
        "status": status or {},
    }


def options(argv: list[str]) -> kp.Options:
    return kp.parse_options(argv)[0]


def opts_json() -> kp.Options:
    return options(["list", "src", "-o", "json"])


def request(operation: str = "alter", **fields: Any) -> kp.Request:
    return kp.Request(operation=operation, request_id="kubectl-1", **fields)


# --- parsing ---------------------------------------------------------------------------


def test_options_before_or_after_the_command_and_defaults() -> None:
    first = options(["-n", "x", "list", "src"])
    second = options(["list", "src", "-n", "x"])
    assert (first.namespace, first.names, first.operation) == ("x", ["src"], "list")
    assert (second.namespace, second.names) == ("x", ["src"])
    assert (first.wait, first.timeout, first.output, first.kind) == (True, 120.0, "text", kp.CONNECTOR)
    assert options(["reset", "src", "--no-wait"]).wait is False


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("2m", 120.0), ("1m30s", 90.0), ("1h", 3600.0), ("1.5s", 1.5)]
)
def test_durations(text: str, seconds: float) -> None:
    assert kp.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "5x", "0s", "-1"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        kp.parse_duration(text)


@pytest.mark.parametrize(
    ("name", "kind", "resource"),
    [
        ("src", None, ("KafkaConnector", "src")),
        ("cokc/src", None, ("KafkaConnector", "src")),
        ("kafkaconnectors.connect-offsets.io/src", None, ("KafkaConnector", "src")),
        ("mm2/e2w", None, ("KafkaMirrorMaker2", "e2w")),
        ("comm2/e2w", "kafkamirrormaker2", ("KafkaMirrorMaker2", "e2w")),
        ("e2w", "mm2", ("KafkaMirrorMaker2", "e2w")),
    ],
)
def test_resource_names(name: str, kind: str | None, resource: tuple[str, str]) -> None:
    found, plain = kp.split_name(name, kind)
    assert (found.kind, plain) == resource


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["list"], "give a resource NAME or -l SELECTOR"),
        (["list", "src", "-l", "a=b"], "either NAME or -l SELECTOR"),
        (["list", "src", "-A"], "-A/--all-namespaces needs -l SELECTOR"),
        (["list", "-l", "a=b", "-A", "-n", "x"], "either -n NAMESPACE or -A"),
        (["list", "pods/src"], "unknown resource type 'pods'"),
        (["list", "cokc/src", "--kind", "mm2"], "names a KafkaConnector but --kind says KafkaMirrorMaker2"),
        (["list", "mm2/e2w"], "need --mirrormaker-connector"),
        (["list", "src", "--mirrormaker-connector", "x"], "only applies to KafkaMirrorMaker2"),
        (["reset", "src", "--dry-run", "--stop-connector"], "drop one"),
        (["alter", "src", "--from-file", "/no/such/file.json"], "--from-file /no/such/file.json: No such file"),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(argv: list[str], fragment: str) -> None:
    with pytest.raises(kp.PluginError) as caught:
        kp.parse_options(argv)
    assert caught.value.code == kp.EXIT_USAGE
    assert fragment in str(caught.value)
    assert "\n" not in str(caught.value)


def test_main_reports_usage_errors_without_a_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert kp.main(["list"]) == kp.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: list: give a resource NAME") and err.count("\n") == 1


def test_bad_kubeconfig_is_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    assert kp.main(["list", "src", "--kubeconfig", str(missing)]) == kp.EXIT_KUBE
    assert capsys.readouterr().err.startswith(f"error: cannot load the kubeconfig ({missing})")


def test_help_has_examples_and_exit_codes_on_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["list"], ["alter"], ["reset"], ["restore"]):
        with pytest.raises(SystemExit) as caught:
            kp.build_parser().parse_args([*argv, "--help"])
        assert caught.value.code == 0
        text = capsys.readouterr().out
        assert "examples" in text and "kubectl connect-offsets" in text
        assert epilog("kubectl") in text
        assert "  3   timed out waiting for the operator" in text and "  4   the Kubernetes API" in text


def test_read_file_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO('{"offsets": []}'))
    parsed = options(["alter", "src", "-f", "-"])
    assert (parsed.offsets_text, parsed.offsets_source) == ('{"offsets": []}', "file <stdin>")


# --- requests and local checks -------------------------------------------------------


def test_request_annotations() -> None:
    plain = request("list").annotations()
    assert plain == {"connect-offsets.io/connector-offsets": "list", "connect-offsets.io/request-id": "kubectl-1"}
    full = request(
        "restore", mirror_connector="east->west.MirrorSourceConnector", dry_run=True, from_backup="b1"
    ).annotations()
    assert full["connect-offsets.io/mirrormaker-connector"] == "east->west.MirrorSourceConnector"
    assert full["connect-offsets.io/dry-run"] == "true"
    assert full["connect-offsets.io/restore-from"] == "b1"
    assert "connect-offsets.io/stop-connector" not in full
    assert request("reset", stop_connector=True).annotations()["connect-offsets.io/stop-connector"] == "true"


def test_request_ids_are_unique() -> None:
    assert len({kp.new_request_id() for _ in range(50)}) == 50


def test_alter_file_validated_with_the_operators_rules() -> None:
    resolved = kp.resolve(kp.CONNECTOR, connector_body(), None)
    good = json.dumps({"offsets": [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 4}}]})
    kp.check_request(resolved, request(offsets_text=good, offsets_source="file o.json"))
    bad = json.dumps({"offsets": [{"partition": {"filename": "/other.txt"}, "offset": {"position": -1}}]})
    with pytest.raises(kp.PluginError) as caught:
        kp.check_request(resolved, request(offsets_text=bad, offsets_source="file o.json"))
    # every problem, each on its own line with its path, without --verbose
    assert str(caught.value).splitlines() == [
        "file o.json is not valid for KafkaConnector kafka/src (2 problems); nothing was changed:",
        '  offsets[0].partition.filename: expected the connector\'s file "/data/in.txt", got "/other.txt" (string)',
        "  offsets[0].offset.position: expected an integer >= 0, got -1 (integer)",
    ]
    with pytest.raises(kp.PluginError) as caught:
        kp.check_request(resolved, request(offsets_text="{nope", offsets_source="file o.json"))
    assert str(caught.value).startswith("file o.json is not valid for KafkaConnector kafka/src: $: not valid JSON")


def test_missing_spec_blocks_say_what_to_add() -> None:
    resolved = kp.resolve(kp.CONNECTOR, connector_body(list_cm=None, alter_cm=None), None)
    with pytest.raises(kp.PluginError) as caught:
        kp.check_request(resolved, request("list"))
    assert "has no spec.listOffsets" in str(caught.value)
    assert """-p '{"spec":{"listOffsets":{"toConfigMap":{"name":"src-offsets"}}}}'""" in str(caught.value)
    with pytest.raises(kp.PluginError) as caught:
        kp.check_request(resolved, request("alter"))
    assert """{"alterOffsets":{"fromConfigMap":{"name":"src-offsets"}}}""" in str(caught.value)
    kp.check_request(resolved, request("reset", dry_run=True))  # a dry run needs no listOffsets


def test_a_pending_request_is_never_overwritten() -> None:
    body = connector_body(annotations={"connect-offsets.io/connector-offsets": "reset"})
    with pytest.raises(kp.PluginError) as caught:
        kp.check_request(kp.resolve(kp.CONNECTOR, body, None), request("list"))
    assert "already has a pending request connect-offsets.io/connector-offsets=reset" in str(caught.value)
    assert str(caught.value).endswith(
        "cancel it with: kubectl annotate kafkaconnectors.connect-offsets.io src -n kafka "
        "connect-offsets.io/connector-offsets-"
    )
    # the hint removes the whole request: a request-id left behind would join the next request
    pending = {
        "connect-offsets.io/connector-offsets": "reset",
        "connect-offsets.io/request-id": "INC-4711",
        "connect-offsets.io/stop-connector": "true",
        "app": "kept",
    }
    with pytest.raises(kp.PluginError) as caught:
        kp.check_request(kp.resolve(kp.CONNECTOR, connector_body(annotations=pending), None), request("list"))
    assert str(caught.value).endswith(
        "src -n kafka connect-offsets.io/connector-offsets- connect-offsets.io/stop-connector- "
        "connect-offsets.io/request-id-"
    )


def test_a_refusal_before_the_request_is_made_names_no_request_id() -> None:
    """-v prints the request id of a request that was made; a refused one never was."""
    body = connector_body(annotations={"connect-offsets.io/connector-offsets": "reset"})
    opts = options(["reset", "src", "-n", "kafka", "-v"])
    refused = asyncio.run(kp.Runner(cast(Any, None), opts).run(kp.CONNECTOR, NS, "src", body))
    assert (refused.result, refused.code, refused.request_id) == ("Invalid", kp.EXIT_USAGE, "")
    _, err = kp.render_single(refused, opts)
    assert "already has a pending request" in err and "request id" not in err
    as_json = json.loads(kp.render_single(refused, options(["reset", "src", "-o", "json"]))[0])
    assert "requestId" not in as_json


def test_mirrormaker_connector_is_resolved_and_checked() -> None:
    with pytest.raises(kp.PluginError) as caught:
        kp.resolve(kp.MIRROR, mirror_body(), "east->west.Typo")
    assert "valid: east->west.MirrorSourceConnector, east->west.MirrorCheckpointConnector" in str(caught.value)
    resolved = kp.resolve(kp.MIRROR, mirror_body(), "east->west.MirrorSourceConnector")
    assert resolved.target.configmap_key == "east--west.MirrorSourceConnector.json"
    assert resolved.target.list_configmap == "mm2-offsets"
    # replayFrom is accepted (the operator translates it), the source alias is checked
    replay = {
        "offsets": [{"partition": {"cluster": "east", "partition": 0, "topic": "t"}, "offset": {"replayFrom": 5}}]
    }
    kp.check_request(resolved, request(offsets_text=json.dumps(replay), offsets_source="file m.json"))
    replay["offsets"][0]["partition"]["cluster"] = "west"  # type: ignore[index]
    with pytest.raises(kp.PluginError, match="cluster"):
        kp.check_request(resolved, request(offsets_text=json.dumps(replay), offsets_source="file m.json"))
    checkpoint = kp.resolve(kp.MIRROR, mirror_body(), "east->west.MirrorCheckpointConnector")
    with pytest.raises(kp.PluginError, match="alterOffsets"):
        kp.check_request(checkpoint, request("alter"))
    with pytest.raises(kp.PluginError, match="only applies to a MirrorSourceConnector"):
        kp.check_request(checkpoint, request("reset", reset_offset_syncs=True))


def test_dry_run_key_follows_the_operator() -> None:
    assert kp.dry_run_key("offsets.json") == "dry-run.json"
    assert kp.dry_run_key("east--west.MirrorSourceConnector.json") == "dry-run.east--west.MirrorSourceConnector.json"


def test_a_dry_run_of_a_file_keeps_it_in_its_own_configmap() -> None:
    """alter --from-file F --dry-run writes F to <resource>-dry-run-input and names it with
    dry-run-from; the alterOffsets ConfigMap (the user's document) is never written."""
    preview = request("alter", dry_run=True, offsets_text='{"offsets": []}', dry_run_from="src-dry-run-input")
    assert preview.previews_a_file
    assert preview.annotations()["connect-offsets.io/dry-run-from"] == "src-dry-run-input"
    assert not request("alter", offsets_text="{}").previews_a_file  # a real alter writes alterOffsets
    assert not request("alter", dry_run=True).previews_a_file  # previews the alterOffsets document
    assert kp.dry_run_input_name("src") == "src-dry-run-input"
    long = kp.dry_run_input_name("a" * 240 + "." + "b" * 12)
    assert len(long) <= 253 and long.endswith("-dry-run-input") and long != kp.dry_run_input_name("a" * 253)
    # a preview needs no alterOffsets (nothing reads it); a real alter does
    bare = kp.resolve(kp.CONNECTOR, connector_body(alter_cm=None), None)
    good = json.dumps({"offsets": [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 4}}]})
    kp.check_request(bare, request("alter", dry_run=True, offsets_text=good, offsets_source="file o.json"))
    with pytest.raises(kp.PluginError, match=r"has no spec\.alterOffsets"):
        kp.check_request(bare, request("alter", offsets_text=good, offsets_source="file o.json"))


# --- completion ------------------------------------------------------------------------

STARTED = datetime(2026, 11, 22, 1, 0, 0, tzinfo=UTC)
PENDING = {"connect-offsets.io/connector-offsets": "alter", "connect-offsets.io/request-id": "kubectl-1"}


def record(result: str = "Succeeded", time: str = "2026-11-22T01:00:05Z", **extra: Any) -> dict[str, Any]:
    return {"operation": "alter", "result": result, "time": time, "message": "m", **extra}


def waiting(before: dict[str, Any] | None = None, fingerprint: str | None = None) -> kp.Waiting:
    return kp.Waiting(request("alter"), before, STARTED, fingerprint)


def classify(annotations: dict[str, str], last: dict[str, Any] | None, wait: kp.Waiting) -> Any:
    status = {"lastOffsetsOperation": last} if last else {}
    return kp.classify(kp.CONNECTOR, connector_body(annotations=annotations, status=status), "src", wait)


def test_pending_until_the_operator_answers() -> None:
    old = record("Succeeded", "2026-11-21T00:00:00Z")
    assert classify(PENDING, old, waiting(old)) is None
    assert classify(PENDING, None, waiting()) is None
    # a success is final only once the annotation is gone (the status is written first)
    assert classify(PENDING, record(requestId="kubectl-1"), waiting(old)) is None


def test_success_by_request_id_and_without_one() -> None:
    done = record(requestId="kubectl-1")
    assert classify({}, done, waiting()) == ("Succeeded", done)
    assert classify({}, record(), waiting(record("Failed", "2026-11-21T00:00:00Z")))[0] == "Succeeded"
    # identical to the record before, but written since the request: a repeat of the same success
    same = record()
    assert classify({}, same, waiting(dict(same)))[0] == "Succeeded"


def test_someone_else_removing_the_request_is_not_a_success() -> None:
    old = record("Succeeded", "2026-11-21T00:00:00Z")
    assert classify({}, old, waiting(old)) == ("Withdrawn", {})
    assert classify({}, record(requestId="someone-else"), waiting()) == ("Withdrawn", {})
    assert classify({}, None, waiting()) == ("Withdrawn", {})


def test_failures_are_matched_to_this_request() -> None:
    failed = record("Failed", reason="ConnectRejected", requestId="kubectl-1")
    assert classify(PENDING, failed, waiting()) == ("Failed", failed)
    # another request's failure (other id) is not ours
    assert classify(PENDING, record("Failed", requestId="other"), waiting()) is None
    # operators without request ids: a changed record, or this request's fingerprint
    new = record("Failed", reason="ConnectorNotStopped")
    assert classify(PENDING, new, waiting(record("Succeeded", "2026-11-21T00:00:00Z")))[0] == "Failed"
    stale = record("Failed", "2026-11-21T00:00:00Z", request="fp-1")
    assert classify(PENDING, stale, waiting(dict(stale))) is None
    assert classify(PENDING, stale, waiting(dict(stale), fingerprint="fp-1"))[0] == "Failed"


def test_mirror_records_come_from_their_connector_entry() -> None:
    entry = record(requestId="kubectl-1", operation="list")
    status = {"connectors": [{"name": "east->west.MirrorSourceConnector", "lastOffsetsOperation": entry}]}
    wait = kp.Waiting(request("list", mirror_connector="east->west.MirrorSourceConnector"), None, STARTED)
    body = mirror_body(status=status)
    assert kp.classify(kp.MIRROR, body, "east->west.MirrorSourceConnector", wait) == ("Succeeded", entry)
    assert kp.last_operation(kp.MIRROR, body, "east->west.MirrorCheckpointConnector") is None


def test_undo_advice_names_only_the_backup_this_request_made() -> None:
    """Issue 36: a dry run printed "undo: ... --from-backup X" for a backup an earlier reset had made."""

    def own(operation: str, record_fields: dict[str, Any], *, dry_run: bool = False) -> str | None:
        wait = kp.Waiting(request(operation, dry_run=dry_run), None, STARTED)
        return kp.own_backup({"operation": operation, "result": "Succeeded", **record_fields}, wait)

    ours = {"requestId": "kubectl-1", "backup": "src-backup-new", "time": "2026-11-22T01:00:05Z"}
    for operation in ("alter", "reset", "restore"):
        assert own(operation, ours) == "src-backup-new"
    # never for a list or a dry run, whatever the record still says
    assert own("list", ours) is None
    assert own("alter", ours, dry_run=True) is None
    # a record merged into the previous one: a stale dryRun does not hide this alter's own backup,
    # and the backup the record named before the request is never this request's
    assert own("alter", {**ours, "dryRun": True}) == "src-backup-new"
    before = {"operation": "reset", "backup": "src-backup-new", "requestId": "kubectl-0"}
    wait = kp.Waiting(request("alter"), before, STARTED)
    assert kp.own_backup({"operation": "alter", "result": "Failed", **ours}, wait) is None
    # never another request's backup: another id, another operation, an old record without ids
    assert own("reset", {**ours, "requestId": "INC-4711"}) is None
    wait = kp.Waiting(request("reset"), None, STARTED)
    assert kp.own_backup({"operation": "alter", "result": "Succeeded", **ours}, wait) is None
    assert own("reset", {"backup": "src-backup-old", "time": "2026-11-21T23:59:59Z"}) is None
    assert own("reset", {"backup": "src-backup-new", "time": "2026-11-22T01:00:05Z"}) == "src-backup-new"
    assert own("reset", {"requestId": "kubectl-1", "time": "2026-11-22T01:00:05Z"}) is None  # none made


# --- rendering -------------------------------------------------------------------------


def outcome(name: str, result: str, code: int, message: str = "", **extra: Any) -> kp.RequestOutcome:
    return kp.RequestOutcome(NS, name, "KafkaConnector", name, "reset", result, code, message=message, **extra)


def test_table_columns_align_and_messages_stay_on_one_line() -> None:
    table = kp.render_table(
        [outcome("a", "Succeeded", 0, "reset: done"), outcome("long-name", "Failed", 1, "refused:\nnot stopped")],
        with_namespace=False,
    )
    lines = table.splitlines()
    assert lines[0].split() == ["NAME", "CONNECTOR", "OPERATION", "RESULT", "MESSAGE"]
    assert lines[2].endswith("Failed      refused: not stopped")
    assert lines[1].index("reset") == lines[2].index("reset") == lines[0].index("OPERATION")
    assert kp.render_table([outcome("a", "Succeeded", 0)], with_namespace=True).startswith("NAMESPACE")


def test_report_exit_code_is_the_worst(capsys: pytest.CaptureFixture[str]) -> None:
    opts = options(["reset", "-l", "a=b"])
    outcomes = [outcome("a", "Succeeded", 0), outcome("b", "Failed", 1, "x"), outcome("c", "Timeout", 3, "y")]
    assert kp.report(outcomes, opts) == kp.EXIT_TIMEOUT
    captured = capsys.readouterr()
    assert "error: 2 of 3 failed" in captured.err
    assert len(captured.out.splitlines()) == 4


def test_single_results() -> None:
    opts = options(["list", "src"])
    listed = outcome("src", "Succeeded", 0, offsets={"offsets": []})
    assert kp.render_single(listed, opts) == (json.dumps({"offsets": []}, indent=2), "")
    # -o json / yaml: the entries under "offsets", not the document ({"offsets": {"offsets": [...]}})
    entries = [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 4}}]
    listed = outcome("src", "Succeeded", 0, offsets={"offsets": entries})
    assert json.loads(kp.render_single(listed, options(["list", "src", "-o", "json"]))[0])["offsets"] == entries
    empty = json.loads(kp.render_single(outcome("src", "Succeeded", 0, offsets={"offsets": []}), opts_json())[0])
    assert empty["offsets"] == []
    failed = outcome("src", "Failed", 1, "alter failed: Connect answered 400: bad", reason="ConnectRejected")
    failed.hint = "add --stop-connector"
    out, err = kp.render_single(failed, opts)
    assert out == ""
    assert err.splitlines()[0] == (
        "error: KafkaConnector kafka/src: reset failed (ConnectRejected): alter failed: Connect answered 400: bad"
    )
    assert "hint: add --stop-connector" in err
    reset = outcome("src", "Succeeded", 0, "reset: ok", backup="src-backup-1")
    out, _ = kp.render_single(reset, opts)
    assert out.splitlines() == [
        "KafkaConnector kafka/src: reset: ok",
        "backup of the previous offsets: ConfigMap src-backup-1 "
        "(undo: kubectl connect-offsets restore src -n kafka --from-backup src-backup-1)",
    ]
    as_json = json.loads(kp.render_single(reset, options(["reset", "src", "-o", "json"]))[0])
    assert as_json["backup"] == "src-backup-1" and as_json["exitCode"] == 0


# --- output formats --------------------------------------------------------------------


def test_single_result_in_every_format() -> None:
    import yaml

    reset = outcome("src", "Succeeded", 0, "reset: ok", backup="src-backup-1", request_id="kubectl-1")
    as_yaml = yaml.safe_load(kp.render_single(reset, options(["reset", "src", "-o", "yaml"]))[0])
    assert as_yaml == json.loads(kp.render_single(reset, options(["reset", "src", "-o", "json"]))[0])
    assert list(as_yaml)[:3] == ["kind", "namespace", "name"]  # the JSON's order, not sorted
    assert kp.render_single(reset, options(["reset", "src", "-o", "name"])) == (
        "kafkaconnector.connect-offsets.io/src",
        "",
    )
    wide = render_wide([reset])  # -o wide: the -l table's row, every column
    header, row = wide.splitlines()
    assert header.split()[:8] == ["NAMESPACE", "KIND", "NAME", "CONNECTOR", "OPERATION", "RESULT", "REASON", "BACKUP"]
    assert "REQUEST ID" in header
    expected = ["kafka", "KafkaConnector", "src", "src", "reset", "Succeeded", "-", "src-backup-1", "kubectl-1"]
    assert row.split()[:9] == expected
    assert row.index("src-backup-1") == header.index("BACKUP") and row.index("kubectl-1") == header.index("REQUEST ID")
    assert row.endswith("reset: ok")
    # a failure: nothing on stdout for -o name, the error on stderr in every format
    failed = outcome("src", "Failed", 1, "refused", reason="ConnectorNotStopped")
    assert kp.render_single(failed, options(["reset", "src", "-o", "name"]))[0] == ""
    for output in ("name", "yaml", "json", "text"):
        assert kp.render_single(failed, options(["reset", "src", "-o", output]))[1].startswith(
            "error: KafkaConnector kafka/src: reset failed (ConnectorNotStopped): refused"
        )


def test_many_results_in_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    outcomes = [outcome("a", "Succeeded", 0, "done"), outcome("b", "Failed", 1, "x", reason="ConnectRejected")]
    assert kp.report(outcomes, options(["reset", "-l", "a=b", "-o", "yaml"])) == kp.EXIT_FAILED
    listed = yaml.safe_load(capsys.readouterr().out)
    assert [(r["name"], r["result"], r["exitCode"]) for r in listed] == [("a", "Succeeded", 0), ("b", "Failed", 1)]
    kp.report(outcomes, options(["reset", "-l", "a=b", "-o", "name"]))
    captured = capsys.readouterr()
    assert captured.out == "kafkaconnector.connect-offsets.io/a\n"
    assert captured.err == "error: 1 of 2 failed\n"
    kp.report(outcomes, options(["reset", "-l", "a=b", "-o", "wide"]))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("NAMESPACE   KIND") and len(lines) == 3
    assert lines[2].split()[5:7] == ["Failed", "ConnectRejected"]


def test_output_must_be_a_known_format(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        kp.parse_options(["list", "src", "-o", "xml"])
    assert caught.value.code == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


# --- kubectl's connection flags ----------------------------------------------------------


def write_kubeconfig(path: Path, server: str = "https://127.0.0.1:1") -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "kafka"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.mark.parametrize(("text", "seconds"), [("0", 0.0), ("5s", 5.0), ("2", 2.0), ("1m", 60.0), ("1.5s", 1.5)])
def test_request_timeout_values(text: str, seconds: float) -> None:
    assert kp.parse_options(["list", "src", "--request-timeout", text])[1].request_timeout == seconds


def test_connection_flags_reach_every_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--request-timeout, --as and --as-group end up on the HTTP requests the client sends."""
    import urllib3

    config = write_kubeconfig(tmp_path / "config")
    argv = ["list", "src", "--kubeconfig", str(config), "--request-timeout", "5s", "--as", "jane", "--as-group", "ops"]
    options_, connection = kp.parse_options(argv)
    assert connection == kp.Connection(str(config), None, 5.0, "jane", "ops")
    kube, namespace = kp.load_kube(connection)
    assert namespace == "kafka"
    sent: list[dict[str, Any]] = []

    def request(method: str, url: str, **kwargs: Any) -> Any:
        sent.append({"method": method, "url": url, **kwargs})
        raise urllib3.exceptions.NewConnectionError(None, "stop here")  # type: ignore[arg-type]

    monkeypatch.setattr(kube.core.api_client.rest_client.pool_manager, "request", request)
    with pytest.raises(urllib3.exceptions.NewConnectionError):
        kube.core.read_namespaced_config_map("x", "kafka")
    timeout = sent[0]["timeout"]
    assert isinstance(timeout, urllib3.Timeout) and timeout.total == 5.0
    assert sent[0]["headers"]["Impersonate-User"] == "jane" and sent[0]["headers"]["Impersonate-Group"] == "ops"
    # an explicit per-call timeout (the wait's watch sets its own) is kept
    with pytest.raises(urllib3.exceptions.NewConnectionError):
        kube.core.read_namespaced_config_map("x", "kafka", _request_timeout=(1, 30))
    assert sent[1]["timeout"].connect_timeout == 1 and sent[1]["timeout"].read_timeout == 30
    # without the flags: no timeout, no impersonation
    plain, _ = kp.load_kube(kp.Connection(str(config)))
    monkeypatch.setattr(plain.core.api_client.rest_client.pool_manager, "request", request)
    with pytest.raises(urllib3.exceptions.NewConnectionError):
        plain.core.read_namespaced_config_map("x", "kafka")
    assert sent[2]["timeout"] is None and "Impersonate-User" not in sent[2]["headers"]
    assert options_.names == ["src"]


def test_as_group_needs_as() -> None:
    with pytest.raises(kp.PluginError, match="--as-group needs --as USER"):
        kp.parse_options(["list", "src", "--as-group", "ops"])
    with pytest.raises(SystemExit):
        kp.parse_options(["list", "src", "--request-timeout", "soon"])


# --- progress while waiting ------------------------------------------------------------


def progress(status: dict[str, Any], wait: kp.Waiting | None = None) -> str:
    body = connector_body(annotations=PENDING, status=status)
    return kp.progress_text(kp.CONNECTOR, body, "src", wait or waiting())


def test_progress_shows_the_step_and_the_chunks_of_this_request() -> None:
    pending = {"operation": "alter", "requestId": "kubectl-1", "step": "Stopping", "started": "x"}
    assert progress({}) == "waiting for the operator"
    assert progress({"pendingOffsetsOperation": pending}) == "step 1/3, stopping the connector"
    changing = {**pending, "step": "Changing"}
    chunks = {"appliedChunks": 2, "totalChunks": 5, "appliedPartitions": 20, "totalPartitions": 50, "request": "fp"}
    assert progress({"pendingOffsetsOperation": changing, "offsetsProgress": chunks}) == (
        "step 2/3, changing the offsets, 2/5 chunks applied (20/50 partitions)"
    )
    # a stopped connector without --stop-connector: no step, only chunks
    assert progress({"offsetsProgress": {"totalChunks": 4}}) == "0/4 chunks applied"
    assert progress({"pendingOffsetsOperation": {**pending, "step": "Resuming"}}) == "step 3/3, resuming the connector"
    # another request's pending operation or chunk plan is not this one's progress
    assert progress({"pendingOffsetsOperation": {**pending, "requestId": "other"}}) == "waiting for the operator"
    assert progress({"pendingOffsetsOperation": {**pending, "operation": "reset"}}) == "waiting for the operator"
    assert progress({"offsetsProgress": chunks}, waiting(fingerprint="fp-other")) == "waiting for the operator"
    assert progress({"offsetsProgress": chunks}, waiting(fingerprint="fp")) == "2/5 chunks applied (20/50 partitions)"
    # the result is written, the annotation not removed yet
    assert progress({"lastOffsetsOperation": record(requestId="kubectl-1")}) == "result recorded (Succeeded), finishing"


def test_progress_of_a_mirrormaker_connector_comes_from_its_entry() -> None:
    name = "east->west.MirrorSourceConnector"
    entry = {"name": name, "pendingOffsetsOperation": {"operation": "list", "step": "Changing", "started": "x"}}
    wait = kp.Waiting(request("list", mirror_connector=name), None, STARTED)
    body = mirror_body(status={"connectors": [entry]})
    assert kp.progress_text(kp.MIRROR, body, name, wait) == "step 2/3, changing the offsets"
    assert kp.progress_text(kp.MIRROR, body, "east->west.MirrorCheckpointConnector", wait) == (
        "waiting for the operator"
    )


def test_progress_lines_only_when_enabled_and_changed() -> None:
    import io

    stream = io.StringIO()
    shown = kp.WaitProgress(True, stream)
    for text in ("waiting for the operator", "waiting for the operator", "step 1/3, stopping the connector"):
        shown.show("KafkaConnector kafka/src", "alter", text)
    shown.show("KafkaConnector kafka/other", "alter", "waiting for the operator")
    assert stream.getvalue().splitlines() == [
        "KafkaConnector kafka/src: alter: waiting for the operator",
        "KafkaConnector kafka/src: alter: step 1/3, stopping the connector",
        "KafkaConnector kafka/other: alter: waiting for the operator",
    ]
    quiet = io.StringIO()
    kp.WaitProgress(False, quiet).show("KafkaConnector kafka/src", "alter", "x")
    assert quiet.getvalue() == ""


def test_progress_option_defaults_to_whether_stderr_is_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr.isatty", lambda: False)
    assert options(["reset", "src"]).progress is False
    assert options(["reset", "src", "--progress"]).progress is True
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert options(["reset", "src"]).progress is True
    assert options(["reset", "src", "--no-progress"]).progress is False


# --- an API server that cannot be reached ---------------------------------------------


def unreachable(reason: BaseException) -> Any:
    """What KubernetesApi raises when urllib3 gives up: KubernetesUnavailable from MaxRetryError."""
    import urllib3

    from connect_offsets.clients.kubernetes import KubernetesUnavailable

    try:
        try:
            raise urllib3.exceptions.MaxRetryError(None, "/apis/x", reason)  # type: ignore[arg-type]
        except urllib3.exceptions.MaxRetryError as error:
            raise KubernetesUnavailable("get kafkaconnectors kafka/src: MaxRetryError") from error
    except KubernetesUnavailable as wrapped:
        return wrapped


def test_an_unreachable_server_is_one_line_naming_it_and_the_cause() -> None:
    import ssl

    import urllib3

    refused = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection")  # type: ignore[arg-type]
    refused.__cause__ = ConnectionRefusedError(111, "Connection refused")
    error = kp.kube_error(unreachable(refused), "https://127.0.0.1:6443")
    assert str(error) == "cannot reach the API server https://127.0.0.1:6443: connection refused"
    assert error.code == kp.EXIT_KUBE and "MaxRetryError" in error.detail  # the original, for --verbose
    assert kp.connection_cause(
        unreachable(urllib3.exceptions.NameResolutionError("h", None, OSError("x")))  # type: ignore[arg-type]
    ) == ("the host name does not resolve")
    assert kp.connection_cause(unreachable(urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"))) == (  # type: ignore[arg-type]
        "timed out (see --request-timeout)"
    )
    tls = kp.connection_cause(unreachable(urllib3.exceptions.SSLError(ssl.SSLError(1, "WRONG_VERSION_NUMBER"))))
    assert tls is not None and tls.startswith("TLS failed: ") and "WRONG_VERSION_NUMBER" in tls


def test_an_answer_of_the_server_keeps_its_message() -> None:
    from connect_offsets.clients.kubernetes import KubernetesRejected

    forbidden = KubernetesRejected('get kafkaconnectors kafka/src: 403 User "x" cannot get', 403)
    error = kp.kube_error(forbidden, "https://127.0.0.1:6443")
    assert str(error).startswith('Kubernetes API: get kafkaconnectors kafka/src: 403 User "x" cannot get')
    assert "lacks a permission" in str(error) and error.code == kp.EXIT_KUBE
    assert kp.connection_cause(forbidden) is None
