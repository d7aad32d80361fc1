"""The plugin as kubectl users expect it (issue 49 item 3), without a cluster.

* ``--dry-run=client|server`` as kubectl defines them: client sends no write; server sends every
  write with ``dryRun=All`` (checked on the HTTP requests the real kubernetes client makes) and does
  not wait for the operator; bare ``--dry-run`` stays the operator's preview.
* ``-o json|yaml|jsonpath=...|wide|name``: one meaning per command, for one resource and with ``-l``;
  wide is the same rows with more columns.
* ``lag NAME`` finds a KafkaConnector or a KafkaMirrorMaker2; both: an error naming both and how to choose.
* Every check before any write: ``alter --from-file`` on a RUNNING connector is refused before the
  ConfigMap is touched (exit 1, ConnectorNotStopped, as the operator would answer).
* A request annotation already on a resource is called what it is: pending, refused, invalid, finished.
"""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import pytest
import urllib3
import yaml

from connect_offsets.offsets import FILE_STREAM_SOURCE_CLASS
from connect_offsets.tools import kubectl as kp
from connect_offsets.tools.kubectl.lag import resolve_lag_target
from connect_offsets.tools.kubectl.main import main
from connect_offsets.vocabulary import API_GROUP, API_VERSION, CONNECTORS, MIRRORS
from tests.fakes import FakeKube
from tests.plugin_bodies import east_to_west_spec

NS = "kafka"
GOOD = json.dumps({"offsets": [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 4}}]})
RUNNING = {
    "connector": {"state": "RUNNING", "worker_id": "w"},
    "tasks": [{"id": 0, "state": "RUNNING"}],
    "type": "source",
}
STOPPED = {"connector": {"state": "STOPPED"}, "tasks": [], "type": "source"}


def connector(
    name: str = "src",
    *,
    state: str | None = None,
    connect: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    stop_policy: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "class": FILE_STREAM_SOURCE_CLASS,
        "config": {"file": "/data/in.txt", "topic": "t"},
        "listOffsets": {"toConfigMap": {"name": f"{name}-offsets"}},
        "alterOffsets": {"fromConfigMap": {"name": f"{name}-offsets"}},
    }
    if state is not None:
        spec["state"] = state
    if stop_policy:
        spec["offsetsPolicy"] = {"stopConnector": True}
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "KafkaConnector",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "annotations": dict(annotations or {}),
            "labels": {"connect-offsets.io/cluster": "c", "team": "t"},
        },
        "spec": spec,
        "status": {**({"connectorStatus": connect} if connect is not None else {}), **(status or {})},
    }


def mirror(annotations: dict[str, str] | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "KafkaMirrorMaker2",
        "metadata": {"name": "e2w", "namespace": NS, "uid": "uid-e2w", "annotations": dict(annotations or {})},
        "spec": east_to_west_spec(),
        "status": status or {},
    }


def kube_with(*bodies: dict[str, Any]) -> FakeKube:
    kube = FakeKube()
    for body in bodies:
        kube.put_resource(MIRRORS if body["kind"] == "KafkaMirrorMaker2" else CONNECTORS, body)
    kube.objects["src-offsets"] = {
        "metadata": {"name": "src-offsets", "uid": "cm", "resourceVersion": "1", "annotations": {}},
        "data": {"offsets.json": GOOD},
    }
    kube.journal.clear()
    return kube


def writes_made(kube: FakeKube) -> list[str]:
    """What the fake API server was asked to change (reads are not journalled)."""
    return [line for line in kube.journal if line.startswith("kube: ")]


def run(kube: Any, argv: list[str], name: str = "src", kind: kp.Kind = kp.CONNECTOR) -> kp.RequestOutcome:
    options, _ = kp.parse_options(argv)
    return asyncio.run(kp.Runner(kube, options).run(kind, NS, name))


@pytest.fixture
def offsets_file(tmp_path: Path) -> str:
    path = tmp_path / "offsets.json"
    path.write_text(GOOD)
    return str(path)


# --- 2. --dry-run=client|server --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "operator_preview", "strategy"),
    [
        (["reset", "src"], False, "none"),
        (["reset", "src", "--dry-run"], True, "none"),  # bare: the operator's preview, as before
        (["reset", "src", "--dry-run=operator"], True, "none"),
        (["reset", "src", "--dry-run=client"], False, "client"),
        (["reset", "src", "--dry-run", "server"], False, "server"),  # kubectl's "--dry-run server" too
        (["reset", "--dry-run", "client", "src"], False, "client"),
        (["reset", "src", "--dry-run=none"], False, "none"),
        (["list", "src", "--dry-run=server"], False, "server"),
        (["reset", "src", "--dry-run=server", "--stop-connector"], False, "server"),
    ],
)
def test_dry_run_strategies_are_read_as_kubectl_reads_them(
    argv: list[str], operator_preview: bool, strategy: str
) -> None:
    options = kp.parse_options(argv)[0]
    assert (options.dry_run, options.dry_run_strategy, options.names) == (operator_preview, strategy, ["src"])


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["reset", "src", "--dry-run=maybe"], 'invalid --dry-run value \'maybe\': must be "none", "client", "server"'),
        (["list", "src", "--dry-run"], "list changes no offsets, so there is nothing for the operator to preview"),
        (["reset", "src", "--dry-run", "--stop-connector"], "drop one"),
    ],
)
def test_dry_run_usage_errors(argv: list[str], words: str) -> None:
    with pytest.raises(kp.PluginError) as caught:
        kp.parse_options(argv)
    assert caught.value.code == kp.EXIT_USAGE and words in str(caught.value)


def test_a_client_dry_run_sends_no_write(offsets_file: str) -> None:
    kube = kube_with(connector(connect=STOPPED))
    before = json.dumps(kube.objects["src-offsets"])
    outcome = run(kube, ["alter", "src", "-n", NS, "--from-file", offsets_file, "--dry-run=client"])
    assert (outcome.result, outcome.code, outcome.dry_run_strategy) == ("DryRun", kp.EXIT_OK, "client")
    assert writes_made(kube) == [] and json.dumps(kube.objects["src-offsets"]) == before
    assert kube.resource(CONNECTORS, NS, "src")["metadata"]["annotations"] == {}
    assert [(w["verb"], w["kind"], w["name"]) for w in outcome.writes] == [
        ("patch", "ConfigMap", "src-offsets"),
        ("annotate", "KafkaConnector", "src"),
    ]
    annotations = outcome.writes[1]["body"]["metadata"]["annotations"]
    assert annotations["connect-offsets.io/connector-offsets"] == "alter"
    assert outcome.request_id == ""  # no request was made
    options = kp.parse_options(["alter", "src", "--dry-run=client"])[0]
    out, err = kp.render_single(outcome, options)
    assert out.splitlines() == [
        "configmap/src-offsets configured (client dry run)",
        "kafkaconnector.connect-offsets.io/src annotated (client dry run)",
    ]
    assert err == ""
    record = json.loads(kp.render_single(outcome, kp.parse_options(["alter", "src", "-o", "json"])[0])[0])
    assert (record["result"], record["dryRunStrategy"], len(record["writes"])) == ("DryRun", "client", 2)


def test_a_client_dry_run_of_a_failover_sends_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    from connect_offsets.tools.kubectl.moving import _failover
    from connect_offsets.tools.kubectl.parser import DEFAULTS, parse_args

    kube = kube_with(mirror())
    args = {**DEFAULTS, **vars(parse_args(["failover-group", "app", "--mirror", "e2w", "--dry-run=client"]))}
    assert asyncio.run(_failover(cast(Any, kube), args, NS, "e2w", "app")) == kp.EXIT_OK
    assert writes_made(kube) == []
    assert capsys.readouterr().out == "kafkamirrormaker2.connect-offsets.io/e2w annotated (client dry run)\n"


# A fake API server at the level the kubernetes client sends its requests (its pool manager): the
# real client builds the URLs, so the dryRun parameter is checked where it matters.


@dataclass
class Sent:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


class FakeApiServer:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.sent: list[Sent] = []

    def put(self, path: str, body: dict[str, Any]) -> None:
        self.objects[path] = body

    @staticmethod
    def answer(status: int, data: Any) -> urllib3.HTTPResponse:
        return urllib3.HTTPResponse(
            body=io.BytesIO(json.dumps(data).encode()),
            status=status,
            headers={"Content-Type": "application/json"},
            preload_content=False,
            reason="OK" if status < 400 else "Not Found",
        )

    def __call__(self, method: str, url: str, **kwargs: Any) -> urllib3.HTTPResponse:
        split = urlsplit(url)
        body = kwargs.get("body")
        sent = Sent(method, split.path, parse_qs(split.query), json.loads(body) if body else None)
        self.sent.append(sent)
        if method == "GET":
            found = self.objects.get(split.path)
            if found is None:
                return self.answer(404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"})
            return self.answer(200, found)
        if method == "POST":
            return self.answer(201, {**sent.body, "metadata": {**sent.body["metadata"], "uid": "server-made"}})
        current = json.loads(json.dumps(self.objects.get(split.path) or {}))
        current.setdefault("metadata", {}).setdefault("annotations", {}).update(
            (sent.body.get("metadata") or {}).get("annotations") or {}
        )
        return self.answer(200, current)

    def writes(self) -> list[Sent]:
        return [s for s in self.sent if s.method != "GET"]


def api_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, FakeApiServer]:
    config = tmp_path / "kubeconfig"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "u", "user": {"token": "secret-token-1234"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": NS}}],
                "current-context": "x",
            }
        )
    )
    kube, _ = kp.load_kube(kp.Connection(str(config)))
    server = FakeApiServer()
    monkeypatch.setattr(kube.core.api_client.rest_client.pool_manager, "request", server)
    return kube, server


GROUP_PATH = f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{NS}"


def test_a_server_dry_run_sends_every_write_with_dry_run_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offsets_file: str
) -> None:
    kube, server = api_server(tmp_path, monkeypatch)
    server.put(
        f"{GROUP_PATH}/kafkaconnectors/src",
        {**connector(connect=STOPPED), "metadata": {**connector()["metadata"], "resourceVersion": "7"}},
    )
    server.put(
        f"/api/v1/namespaces/{NS}/configmaps/src-offsets",
        {"metadata": {"name": "src-offsets", "namespace": NS, "resourceVersion": "3"}, "data": {"offsets.json": "{}"}},
    )
    outcome = run(kube, ["alter", "src", "-n", NS, "--from-file", offsets_file, "--dry-run=server"])
    assert (outcome.result, outcome.code, outcome.dry_run_strategy) == ("DryRun", kp.EXIT_OK, "server"), outcome
    writes = server.writes()
    assert [(w.method, w.path) for w in writes] == [
        ("PATCH", f"/api/v1/namespaces/{NS}/configmaps/src-offsets"),
        ("PATCH", f"{GROUP_PATH}/kafkaconnectors/src"),
    ]
    assert all(w.query.get("dryRun") == ["All"] for w in writes), writes
    assert writes[0].body == {"metadata": {"resourceVersion": "3"}, "data": {"offsets.json": GOOD + "\n"}}
    assert writes[1].body["metadata"]["resourceVersion"] == "7"
    assert writes[1].body["metadata"]["annotations"]["connect-offsets.io/connector-offsets"] == "alter"
    # no wait: nothing was kept, so the operator has nothing to answer (no watch, no GET after the writes)
    assert server.sent[-1].method == "PATCH"
    out, _ = kp.render_single(outcome, kp.parse_options(["alter", "src", "--dry-run=server"])[0])
    assert out.splitlines()[1] == "kafkaconnector.connect-offsets.io/src annotated (server dry run)"
    assert "secret-token" not in out


def test_a_server_dry_run_of_a_new_configmap_and_of_a_new_copy_creates_with_dry_run_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offsets_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kube, server = api_server(tmp_path, monkeypatch)
    body = connector(connect=STOPPED)
    body["metadata"]["resourceVersion"] = "7"
    server.put(f"{GROUP_PATH}/kafkaconnectors/src", body)
    run(kube, ["alter", "src", "-n", NS, "--from-file", offsets_file, "--dry-run=server"])
    create = server.writes()[0]
    assert (create.method, create.query.get("dryRun")) == ("POST", ["All"])
    assert create.body["metadata"]["ownerReferences"][0]["uid"] == "uid-src"

    from connect_offsets.tools.kubectl.moving import _copy
    from connect_offsets.tools.kubectl.parser import DEFAULTS, parse_args

    server.sent.clear()
    values = {**DEFAULTS, **vars(parse_args(["copy", "src", "dst", "--dry-run=server", "-o", "name"]))}
    assert asyncio.run(_copy(kube, values, NS, NS, "src", "dst")) == kp.EXIT_OK
    (created,) = server.writes()
    assert (created.method, created.path, created.query.get("dryRun")) == (
        "POST",
        f"{GROUP_PATH}/kafkaconnectors",
        ["All"],
    )
    assert created.body["spec"]["initialOffsets"] == {"fromConnector": {"name": "src"}}
    assert capsys.readouterr().out == "kafkaconnector.connect-offsets.io/dst\n"  # -o name: the name, not YAML


# --- 3. output formats -----------------------------------------------------------------------------


def outcome(name: str, result: str = "Succeeded", code: int = 0, **extra: Any) -> kp.RequestOutcome:
    return kp.RequestOutcome(NS, name, "KafkaConnector", name, "reset", result, code, message="reset: ok", **extra)


def test_jsonpath_prints_what_json_would_hold(capsys: pytest.CaptureFixture[str]) -> None:
    one = outcome("a", backup="a-backup", request_id="kubectl-1")
    options = kp.parse_options(["reset", "a", "-o", "jsonpath={.result} {.backup}"])[0]
    assert kp.render_single(one, options) == ("Succeeded a-backup", "")
    assert kp.report([one], options) == kp.EXIT_OK
    assert capsys.readouterr().out == "Succeeded a-backup"  # as kubectl: no newline of its own
    many = [one, outcome("b", "Failed", 1, reason="ConnectorNotStopped")]
    template = '{range [*]}{.name}{"\\t"}{.result}{"\\n"}{end}'
    assert kp.report(many, kp.parse_options(["reset", "-l", "t=t", "-o", f"jsonpath={template}"])[0]) == 1
    assert capsys.readouterr().out == "a\tSucceeded\nb\tFailed\n"
    failed = kp.parse_options(["reset", "-l", "t=t", "-o", 'jsonpath={[?(@.result=="Failed")].reason}'])[0]
    kp.report(many, failed)
    assert capsys.readouterr().out == "ConnectorNotStopped"


@pytest.mark.parametrize("template", ["jsonpath={.items[", "jsonpath=", "jsonpath", "jsonpath={range .x}"])
def test_a_bad_jsonpath_is_refused_before_anything_is_done(template: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:  # argparse's usage error, before the kubeconfig is even read
        main(["reset", "src", "-o", template, "--kubeconfig", "/nonexistent"])
    assert caught.value.code == kp.EXIT_USAGE
    err = capsys.readouterr().err
    assert "argument -o/--output" in err and ("jsonpath" in err)


def test_wide_is_the_same_rows_with_more_columns(capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = [outcome("a", backup="a-b", request_id="r1"), outcome("b", "Failed", 1, reason="ConnectRejected")]
    kp.report(outcomes, kp.parse_options(["reset", "-l", "t=t"])[0])
    text = capsys.readouterr().out.splitlines()
    kp.report(outcomes, kp.parse_options(["reset", "-l", "t=t", "-o", "wide"])[0])
    wide = capsys.readouterr().out.splitlines()
    assert len(text) == len(wide) == 3
    for short, long in zip(text[1:], wide[1:], strict=True):
        assert [cell for cell in short.split() if cell not in long.split()] == []
    # the same columns, in the same order, with more between them
    short_headers = [h for h in text[0].split("   ") if h]
    long_headers = [h.strip() for h in wide[0].split("   ") if h.strip()]
    assert [h for h in long_headers if h in short_headers] == [h.strip() for h in short_headers]


@pytest.mark.parametrize(
    ("words", "printed"),
    [
        (["list", "a"], "it prints the offsets document"),
        (["alter", "a", "-f", "-"], "operator's message and the undo command"),
        (["reset", "a", "--dry-run"], "a preview, its report"),
        (["restore", "a"], "undo command"),
        (["copy", "a", "b"], "the KafkaConnector it would create"),
        (["failover-group", "g", "--mirror", "m"], "the translated offsets"),
    ],
)
def test_wide_on_one_resource_is_refused_before_anything_is_read(
    words: list[str], printed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One resource prints the result itself, not a table: -o wide has nothing to widen (kubectl refuses
    wide where it prints no table); no kubeconfig is read (the path does not exist), nothing is written."""
    code = main([*words, "-o", "wide", "--kubeconfig", "/nonexistent/kubeconfig"])
    assert code == kp.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"error: -o wide widens a table, and {words[0]} on one resource prints none (")
    assert printed in err and "-o json or -o yaml print the whole result record" in err
    assert ("with -l SELECTOR it prints the result table" in err) == (words[0] in ("list", "alter", "reset", "restore"))


def test_wide_with_a_selector_and_for_lag_is_accepted() -> None:
    assert kp.parse_options(["list", "-l", "a=b", "-o", "wide"])[0].output == "wide"
    assert kp.parse_options(["reset", "-l", "a=b", "-o", "wide"])[0].output == "wide"


DOC = {
    "kind": "x",
    "items": [{"name": "a", "result": "Failed", "n": 3, "m": {"k": 1}}, {"name": "b", "result": "Succeeded", "n": 5}],
    "a.b": 7,
}


@pytest.mark.parametrize(
    ("template", "printed"),
    [
        ("{.kind}", "x"),
        (".kind", "x"),  # without braces: one expression
        ("{.items[*].name}", "a b"),
        ('{range .items[*]}{.name}{"\\t"}{.result}{"\\n"}{end}', "a\tFailed\nb\tSucceeded\n"),
        ('{.items[?(@.result=="Failed")].name}', "a"),
        ("{.items[?(@.n>4)].name}", "b"),
        ("{.items[?(@.m)].name}", "a"),
        ("{..name}", "a b"),
        ("{.items[-1].name}", "b"),
        ("{.items[0:1].name}", "a"),
        ("{.items[0,1].name}", "a b"),
        ("{['a.b']}", "7"),
        ("{.items[0].m}", '{"k":1}'),
        ("{.missing}", ""),
        ("x{$.kind}y", "xxy"),
    ],
)
def test_jsonpath_templates_as_kubectl_prints_them(template: str, printed: str) -> None:
    from connect_offsets.tools.kubectl.jsonpath import render

    assert render(template, DOC) == printed


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{.items[", "unclosed action"),
        ("{range .items[*]}", "{range} without its {end}"),
        ("{end}", "without a {range}"),
        ("{.a b}", "unexpected text"),
        ("{items}", "expected '.', '..' or '['"),
    ],
)
def test_a_jsonpath_that_does_not_parse_says_where(template: str, problem: str) -> None:
    from connect_offsets.tools.kubectl.jsonpath import JsonPathError, compile_template

    with pytest.raises(JsonPathError) as caught:
        compile_template(template)
    assert problem in str(caught.value)


def test_a_resource_named_like_a_command_or_a_strategy() -> None:
    from connect_offsets.tools.kubectl.parser import normalize

    # a connector named lag is not the lag command: its --dry-run=STRATEGY is still read
    assert normalize(["reset", "lag", "--dry-run=server"]) == ["reset", "lag", "--dry-run-strategy", "server"]
    assert kp.parse_options(["reset", "lag", "--dry-run=server"])[0].names == ["lag"]
    # lag takes no --dry-run: argparse refuses it as it is written
    assert normalize(["lag", "x", "--dry-run=server"]) == ["lag", "x", "--dry-run=server"]
    # a connector named server after a bare --dry-run: written cokc/server
    options = kp.parse_options(["reset", "--dry-run", "cokc/server"])[0]
    assert (options.dry_run, options.names) == (True, ["server"])


def test_lag_prints_json_yaml_and_jsonpath_of_the_same_status() -> None:
    from connect_offsets.tools.kubectl.render import serialize

    progress = {"type": "sink", "totalLag": 20, "partitions": 3}
    assert json.loads(serialize(progress, "json")) == yaml.safe_load(serialize(progress, "yaml")) == progress
    assert serialize(progress, "jsonpath={.totalLag}") == "20"


# --- 4. lag NAME -----------------------------------------------------------------------------------


def test_lag_finds_either_kind_by_name_and_asks_when_both_exist() -> None:
    async def resolve(kube: FakeKube, name: str, kind: kp.Kind | None = None) -> tuple[str, str]:
        found, body = await resolve_lag_target(cast(Any, kube), NS, name, kind)
        return found.kind, body["metadata"]["name"]

    only_connector, only_mirror = kube_with(connector("orders")), kube_with(mirror())
    assert asyncio.run(resolve(only_connector, "orders")) == ("KafkaConnector", "orders")
    assert asyncio.run(resolve(only_mirror, "e2w")) == ("KafkaMirrorMaker2", "e2w")
    both = kube_with(connector("e2w"), mirror())
    with pytest.raises(kp.PluginError) as caught:
        asyncio.run(resolve(both, "e2w"))
    assert caught.value.code == kp.EXIT_USAGE
    assert str(caught.value) == (
        "both KafkaConnector kafka/e2w and KafkaMirrorMaker2 kafka/e2w exist: say which, with cokc/e2w or mm2/e2w "
        "(or --kind kafkaconnector / --kind kafkamirrormaker2)"
    )
    assert asyncio.run(resolve(both, "e2w", kp.MIRROR)) == ("KafkaMirrorMaker2", "e2w")
    assert asyncio.run(resolve(both, "e2w", kp.CONNECTOR)) == ("KafkaConnector", "e2w")
    with pytest.raises(kp.PluginError, match=r"neither a KafkaConnector nor a KafkaMirrorMaker2 kafka/nope exists"):
        asyncio.run(resolve(both, "nope"))
    with pytest.raises(kp.PluginError, match=r"KafkaMirrorMaker2 kafka/orders not found"):
        asyncio.run(resolve(only_connector, "orders", kp.MIRROR))


def test_lag_help_says_what_name_finds(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        kp.build_parser().parse_args(["lag", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "whichever is named NAME" in text and "a KafkaConnector or KafkaMirrorMaker2 name (whichever exists)" in text


# --- 5. every check before any write ---------------------------------------------------------------


def test_alter_from_file_on_a_running_connector_is_refused_before_the_configmap_is_touched(
    offsets_file: str,
) -> None:
    kube = kube_with(connector(connect=RUNNING))
    before = json.dumps(kube.objects["src-offsets"])
    refused = run(kube, ["alter", "src", "-n", NS, "--from-file", offsets_file])
    assert (refused.result, refused.code, refused.reason) == ("Failed", kp.EXIT_FAILED, "ConnectorNotStopped")
    assert writes_made(kube) == [] and json.dumps(kube.objects["src-offsets"]) == before
    assert kube.resource(CONNECTORS, NS, "src")["metadata"]["annotations"] == {}
    _, err = kp.render_single(refused, kp.parse_options(["alter", "src"])[0])
    first, hint = err.splitlines()
    assert first == (
        "error: KafkaConnector kafka/src: alter refused (ConnectorNotStopped): KafkaConnector kafka/src is RUNNING "
        "(its status, as the operator last saw it in Connect) and alter needs it STOPPED; nothing was changed"
    )
    assert hint.startswith("hint: add --stop-connector")  # and no "the request annotations were removed"
    as_json = json.loads(kp.render_single(refused, kp.parse_options(["alter", "src", "-o", "json"])[0])[0])
    assert (as_json["result"], as_json["reason"], as_json["exitCode"]) == ("Failed", "ConnectorNotStopped", 1)
    assert "requestId" not in as_json


@pytest.mark.parametrize(
    ("body", "argv"),
    [
        (connector(connect=RUNNING), ["--stop-connector"]),  # the operator stops it first
        (connector(connect=RUNNING, stop_policy=True), []),  # offsetsPolicy.stopConnector: the same
        (connector(connect=RUNNING, state="stopped"), []),  # spec.state stopped: the operator waits for it
        (connector(connect=STOPPED), []),
        (connector(), []),  # status does not say: the operator decides
    ],
)
def test_what_the_operator_would_take_is_not_refused(body: dict[str, Any], argv: list[str], offsets_file: str) -> None:
    kube = kube_with(body)
    done = run(kube, ["alter", "src", "-n", NS, "--from-file", offsets_file, "--no-wait", *argv])
    assert (done.result, done.code) == ("Requested", kp.EXIT_OK), done
    assert writes_made(kube) == [
        "kube: patch ConfigMap src-offsets",
        "kube: annotate src "
        + str(
            sorted(
                ["connect-offsets.io/connector-offsets", "connect-offsets.io/request-id"]
                + (["connect-offsets.io/stop-connector"] if argv else [])
            )
        ),
    ]


def test_a_preview_of_a_running_connector_is_not_refused() -> None:
    kube = kube_with(connector(connect=RUNNING))
    done = run(kube, ["reset", "src", "-n", NS, "--dry-run", "--no-wait"])
    assert done.result == "Requested", done


def test_a_running_mirror_connector_is_refused_too() -> None:
    name = "east->west.MirrorSourceConnector"
    status = {"connectors": [{"name": name, "connectorStatus": RUNNING}]}
    kube = kube_with(mirror(status=status))
    refused = run(kube, ["reset", "mm2/e2w", "-n", NS, "--mirrormaker-connector", name], "e2w", kp.MIRROR)
    assert (refused.reason, refused.code) == ("ConnectorNotStopped", kp.EXIT_FAILED) and writes_made(kube) == []
    assert "or set spec.mirrors[0].sourceConnector.state: stopped and wait for" in refused.hint


def test_with_a_selector_a_refused_connector_is_one_failed_row(capsys: pytest.CaptureFixture[str]) -> None:
    kube = kube_with(connector("a", connect=STOPPED), connector("b", connect=RUNNING))
    options = kp.parse_options(["reset", "-l", "team=t", "-n", NS, "--no-wait"])[0]
    outcomes = asyncio.run(kp.run(options, cast(Any, kube), NS))
    assert [(o.name, o.result, o.reason) for o in outcomes] == [
        ("a", "Requested", ""),
        ("b", "Failed", "ConnectorNotStopped"),
    ]
    assert kp.report(outcomes, options) == kp.EXIT_FAILED
    assert capsys.readouterr().err == "error: 1 of 2 failed\n"
    assert [line for line in writes_made(kube) if " b " in line] == []


def test_a_preview_never_overwrites_someone_elses_configmap(offsets_file: str) -> None:
    kube = kube_with(connector(connect=STOPPED))
    kube.objects["src-dry-run-input"] = {
        "metadata": {"name": "src-dry-run-input", "uid": "x", "resourceVersion": "1", "annotations": {}},
        "data": {"offsets.json": "theirs"},
    }
    refused = run(kube, ["alter", "src", "-n", NS, "--from-file", offsets_file, "--dry-run"])
    assert refused.result == "Invalid" and "is not owned by KafkaConnector kafka/src" in refused.message
    assert writes_made(kube) == [] and kube.objects["src-dry-run-input"]["data"] == {"offsets.json": "theirs"}


# --- 6. a request already on the resource, called what it is ----------------------------------------

OFFSETS = "connect-offsets.io/connector-offsets"
REQUEST_ID = "connect-offsets.io/request-id"


@pytest.mark.parametrize(
    ("annotations", "status", "words"),
    [
        ({OFFSETS: "reset"}, {}, "already has a pending request connect-offsets.io/connector-offsets=reset; wait"),
        (
            {OFFSETS: "resett"},
            {},
            "has an invalid request annotation connect-offsets.io/connector-offsets='resett' (not one of list, alter, "
            "reset, restore, so the operator does nothing with it). Remove it",
        ),
        (
            {OFFSETS: "reset", REQUEST_ID: "INC-1"},
            {
                "lastOffsetsOperation": {
                    "operation": "reset",
                    "result": "Failed",
                    "reason": "ConnectorNotStopped",
                    "message": "reset refused: the connector is RUNNING",
                    "requestId": "INC-1",
                    "time": "2026-11-22T01:00:00Z",
                }
            },
            "has a refused request connect-offsets.io/connector-offsets=reset (ConnectorNotStopped: reset refused: "
            "the connector is RUNNING); the operator keeps it",
        ),
        (
            {OFFSETS: "reset", REQUEST_ID: "INC-2"},
            {"lastOffsetsOperation": {"operation": "reset", "result": "Failed", "requestId": "INC-1", "time": "t"}},
            "already has a pending request",  # the failure is an earlier request's
        ),
        (
            {OFFSETS: "alter", "connect-offsets.io/dry-run": "sometimes"},
            {
                "lastOffsetsOperation": {
                    "operation": "alter",
                    "result": "Failed",
                    "reason": "InvalidAnnotation",
                    "message": "connect-offsets.io/dry-run='sometimes' must be true or false",
                    "time": "2026-11-22T01:00:00Z",
                }
            },
            "has an invalid request annotation connect-offsets.io/connector-offsets='alter' (InvalidAnnotation:",
        ),
        (
            {OFFSETS: "reset", REQUEST_ID: "INC-3"},
            {"handledRequestIds": ["INC-3"]},
            "has a finished request connect-offsets.io/connector-offsets=reset still annotated (request id INC-3 was "
            "already handled, so the operator ignores it)",
        ),
    ],
)
def test_a_request_already_on_the_resource_is_called_what_it_is(
    annotations: dict[str, str], status: dict[str, Any], words: str
) -> None:
    kube = kube_with(connector(annotations=annotations, status=status, connect=STOPPED))
    refused = run(kube, ["reset", "src", "-n", NS])
    assert (refused.result, refused.code) == ("Invalid", kp.EXIT_USAGE)
    assert words in refused.message, refused.message
    # how to remove it: the whole request, whatever it is
    assert f": kubectl annotate kafkaconnectors.connect-offsets.io src -n kafka {OFFSETS}-" in refused.message
    assert (f"{REQUEST_ID}-" in refused.message) == (REQUEST_ID in annotations)
    assert writes_made(kube) == []


def test_a_failover_request_already_on_the_mirror_is_called_what_it_is() -> None:
    from connect_offsets.tools.kubectl.moving import _check_failover

    failed = {
        "mirror": "east->west",
        "group": "app",
        "source": "annotation",
        "time": "2026-11-22T01:00:00Z",
        "requestId": "r1",
        "result": "Failed",
        "reason": "ConsumerGroupActive",
        "message": "m",
    }
    refused = mirror({"connect-offsets.io/failover-group": "app", REQUEST_ID: "r1"}, {"groupFailovers": [failed]})
    with pytest.raises(kp.PluginError) as caught:
        _check_failover(refused, None)
    assert "has a refused request connect-offsets.io/failover-group=app (ConsumerGroupActive: m)" in str(caught.value)
    assert str(caught.value).endswith(
        "kubectl annotate comm2 e2w -n kafka connect-offsets.io/failover-group- connect-offsets.io/request-id-"
    )
    with pytest.raises(kp.PluginError, match=r"already has a pending request connect-offsets\.io/failover-group=app"):
        _check_failover(mirror({"connect-offsets.io/failover-group": "app"}), None)
    with pytest.raises(
        kp.PluginError, match=r"already has a pending request connect-offsets\.io/connector-offsets=list"
    ):
        _check_failover(mirror({OFFSETS: "list"}), None)


def test_the_documented_wide_refusal_is_the_plugins_own(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/kubectl-plugin.md (Output formats) shows the refusal; it is word for word what the plugin prints."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "kubectl-plugin.md").read_text()
    command = "$ kubectl connect-offsets list orders -n kafka -o wide\n"
    shown = doc[doc.index(command) + len(command) :].split("\n```", 1)[0]
    assert main(["list", "orders", "-n", "kafka", "-o", "wide"]) == kp.EXIT_USAGE
    assert capsys.readouterr().err == shown + "\n"


def test_a_failover_with_allow_partial_asks_for_it_with_the_request(capsys: pytest.CaptureFixture[str]) -> None:
    """``--allow-partial`` puts ``connect-offsets.io/allow-partial=true`` on the resource with the
    request (issue 46: a partial translation is refused without it); without the flag it is absent."""
    from connect_offsets.tools.kubectl.moving import _failover
    from connect_offsets.tools.kubectl.parser import DEFAULTS, parse_args

    for flags, expected in (([], None), (["--allow-partial"], "true")):
        kube = kube_with(mirror())
        argv = ["failover-group", "app", "--mirror", "e2w", "--dry-run=client", "-o", "json", *flags]
        args = {**DEFAULTS, **vars(parse_args(argv))}
        assert asyncio.run(_failover(cast(Any, kube), args, NS, "e2w", "app")) == kp.EXIT_OK
        record = json.loads(capsys.readouterr().out)
        annotations = record["writes"][0]["body"]["metadata"]["annotations"]
        assert annotations.get("connect-offsets.io/allow-partial") == expected, annotations
        assert annotations["connect-offsets.io/failover-group"] == "app"


def test_a_leftover_allow_partial_is_named_in_the_refusal_and_never_inherited(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Attacker review of issue 46, F1: the refusal of a request already on the mirror names
    allow-partial among the annotations to remove; and a plain ``failover-group`` removes an
    allow-partial (and failover-from, dry-run) left on the mirror, so it is never planned as a
    partial failover it did not ask for."""
    from connect_offsets.models.crds import KafkaMirrorMaker2Resource
    from connect_offsets.planning.failover_requests import failover_requests
    from connect_offsets.tools.kubectl.moving import _check_failover, _failover
    from connect_offsets.tools.kubectl.parser import DEFAULTS, parse_args

    pending = {
        "connect-offsets.io/failover-group": "app",
        REQUEST_ID: "r-old",
        "connect-offsets.io/allow-partial": "true",
    }
    with pytest.raises(kp.PluginError) as caught:
        _check_failover(mirror(pending), None)
    assert str(caught.value).endswith(
        "kubectl annotate comm2 e2w -n kafka connect-offsets.io/failover-group- "
        "connect-offsets.io/allow-partial- connect-offsets.io/request-id-"
    ), str(caught.value)
    # the user removed only the request (failover-group, request-id): allow-partial stays
    leftover = {"connect-offsets.io/allow-partial": "true", "connect-offsets.io/failover-from": "north"}
    kube = kube_with(mirror(leftover))
    args = {**DEFAULTS, **vars(parse_args(["failover-group", "app", "--mirror", "e2w", "--no-wait", "-o", "json"]))}
    assert asyncio.run(_failover(cast(Any, kube), args, NS, "e2w", "app")) == kp.EXIT_OK
    capsys.readouterr()
    body = kube.resources[(MIRRORS, NS, "e2w")]
    annotations = body["metadata"]["annotations"]
    assert (
        "connect-offsets.io/allow-partial" not in annotations and "connect-offsets.io/failover-from" not in annotations
    )
    requests, _, _ = failover_requests(KafkaMirrorMaker2Resource.model_validate(body))
    assert [(r.group, r.allow_partial) for r in requests] == [("app", False)]
