"""Property-based tests of the planner against bad input (issue 10, "Bad input").

Why: everything the operator acts on is written by someone else -- resource bodies, annotations,
status fields left by other operator versions, ConfigMap contents, Connect's answers. The planner
is the one place that decides, so it is fuzzed here with whole generated inputs:

* KafkaConnector bodies, valid and corrupted (wrong types, reserved or nested config values, unknown
  fields, bad enums, empty names); ``model_validate`` must accept them or raise pydantic's
  ``ValidationError``, never anything else;
* every ``connect-offsets.io/*`` annotation with valid, empty, whitespace-padded, unicode and long
  values; status with pending stop -> change -> resume records in any step (also hand-edited ones),
  handled request ids, appliedOffsets and initialOffsets records;
* what Connect reports (absent, owned, drifted, foreign; any state, tasks, type) and ConfigMap
  contents: valid documents, malformed JSON, wrong types, NaN/Infinity/1e999, duplicate keys, nested
  values, unicode (BOM, NUL, unpaired surrogate escapes), huge documents (a few MB);
* KafkaMirrorMaker2 resources with the connector selector (known, unknown, empty names).

Properties (``check_target_plan``): the planner never raises; an offsets request that is not
executed is explained by a specific condition (or a transient refusal with a retry); alter, reset
and restore run only on a STOPPED connector without tasks, alter only with a document that
validates for the connector; ``begin_offsets_change`` only with valid input and valid flags (bad
input never stops a connector); ``stop`` only for spec.state stopped or a change that holds the
connector; dry runs never change anything; every document the executor would send is valid JSON
that encodes as UTF-8; annotations are only removed when their request was acted on.

Deterministic (``derandomize=True``, no example database) so CI sees the same examples every run.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from connect_offsets.models.connect import ConnectorStatus
from connect_offsets.models.crds import ConnectorState, KafkaConnectorResource, KafkaMirrorMaker2Resource
from connect_offsets.offsets import (
    OffsetsValidationError,
    parse_offsets_document,
    translate_replay_from,
    validate_for_connector,
)
from connect_offsets.planning import (
    ConnectorTarget,
    Observed,
    OffsetsConfigMap,
    Plan,
    RestoreSource,
    SeekOffsets,
    content_hash,
    mirror_targets,
    offsets_request_fingerprint,
    plan_target,
    target_for_connector,
)
from connect_offsets.vocabulary import (
    ANNOTATION_ADOPT,
    ANNOTATION_DRY_RUN,
    ANNOTATION_MM2_CONNECTOR,
    ANNOTATION_OFFSETS,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_RESTART,
    ANNOTATION_RESTART_TASK,
    ANNOTATION_SEEK_TO,
    ANNOTATION_STOP_CONNECTOR,
    MIRROR_CLASSES,
    OWNER_CONFIG_KEY,
)
from tests.offsets_documents import SPECIAL_DOCS
from tests.unit.planning_fixtures import FAMILIES, NOW, iso

pytestmark = pytest.mark.unit

PREFIX = "connect-offsets.io/"
ANNOTATION_RESTORE_FROM = PREFIX + "restore-from"
ANNOTATION_RESET_OFFSET_SYNCS = PREFIX + "reset-offset-syncs"
ALL_ANNOTATIONS = (
    ANNOTATION_OFFSETS,
    ANNOTATION_RESTART,
    ANNOTATION_RESTART_TASK,
    ANNOTATION_ADOPT,
    ANNOTATION_DRY_RUN,
    ANNOTATION_STOP_CONNECTOR,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_RESTORE_FROM,
    ANNOTATION_SEEK_TO,
    ANNOTATION_MM2_CONNECTOR,
    ANNOTATION_RESET_OFFSET_SYNCS,
)
OPERATIONS = ("list", "alter", "reset", "restore")
CHANGE_KINDS = {"alter_offsets": "alter", "reset_offsets": "reset", "restore_offsets": "restore"}
ACTED = {"list_offsets", "dry_run_offsets", "begin_offsets_change", "update_pending", "finish_offsets_change"}
ACTED |= set(CHANGE_KINDS)
#: Conditions that explain what became of an offsets request.
REQUEST_CONDITIONS = {
    "OffsetsOperationFailed",
    "InvalidAnnotation",
    "OffsetsRequestIgnored",
    "OffsetsOperationInProgress",
    "OffsetsApplied",
}
#: Ready reasons under which no offsets request can be taken yet, and which say why.
NOT_TAKING_REQUESTS = {
    "ConnectClusterUnavailable",
    "Creating",
    "ConnectorOwnedElsewhere",
    "InitialOffsetsInvalid",
    "InitialOffsetsUnsupported",
    "InitialOffsetsFailed",
    "StoppedForOffsetsChange",
}
ALTER_CM = "offsets-in"
BACKUP = "orders-backup-1a2b3c4d-20240501t120000z-0001"
CONNECT_STATES = ("RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING")
TASK_STATES = ("RUNNING", "PAUSED", "FAILED", "UNASSIGNED", "RESTARTING", "STOPPED")
SINK_DOC = {"offsets": [{"partition": {"kafka_topic": "orders", "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]}

# --------------------------------------------------------------------------- scalar strategies


def pick(values: Sequence[Any]) -> st.SearchStrategy[Any]:
    """``st.sampled_from`` built once per list of values: strategies made anew on every draw (and
    validated anew) cost more than the planner itself."""
    try:
        return _pick(tuple(values))
    except TypeError:  # unhashable values
        return st.sampled_from(list(values))


@functools.cache
def _pick(values: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


unicode_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=24)
weird_strings = st.sampled_from(
    [
        "",
        " ",
        "\t",
        "\n",
        "\u200b",
        "\ufeff",
        "\x00",
        "true ",
        " true",
        "TRUE",
        "True",
        "yes",
        "1",
        "null",
        "None",
        "alter\n",
        "ALTER",
        "réset",
        "altér",
        "list,alter",
        "🚀",
        "מחק",
        "x" * 5000,
        "é" * 3000,
        "-1",
        "²",
        "9" * 40,
    ]
)
request_ids = pick(["INC-1", "INC-2", "ticket/42", "日本", "", " ", "a" * 300])
annotation_values = st.one_of(
    pick([*OPERATIONS, "true", "false", "includeTasks", "onlyFailed", "0", "3"]),
    weird_strings,
    unicode_text,
    request_ids,
)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | unicode_text
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(unicode_text, children, max_size=3),
    max_leaves=10,
)
times = st.one_of(pick([iso(NOW), "2024-05-01T11:00:00+02:00", "", "yesterday"]), unicode_text)
MAYBE_TEXT = st.one_of(st.none(), unicode_text)
MINUTES = st.integers(0, 180)
HANDLED_IDS = st.lists(st.one_of(request_ids, request_ids.map(lambda i: f"{i}/dry-run")), max_size=4)
ANY_ANNOTATIONS = st.dictionaries(st.one_of(pick(ALL_ANNOTATIONS), unicode_text), annotation_values, max_size=5)
ANY_OPERATION = st.one_of(pick(OPERATIONS), st.none(), annotation_values)
TASK_LISTS = st.lists(pick(TASK_STATES), max_size=3)
PARTITION_LISTS = st.lists(st.dictionaries(unicode_text, json_scalars, min_size=1, max_size=2), max_size=3)
CONFIGS = st.dictionaries(
    unicode_text.filter(lambda k: k not in ("name", "connector.class", "tasks.max")),
    st.one_of(unicode_text, st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False)),
    max_size=3,
)

# --------------------------------------------------------------------------- offsets documents


def _big_documents() -> list[str]:
    """A few MB each, built once: a huge value, many entries, many invalid entries, deep nesting."""
    file_doc = {"offsets": [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 1}}]}
    huge_value = {"offsets": [{"partition": {"table": "t" * 3_000_000}, "offset": {"id": 1}}]}
    many = {"offsets": [{"partition": {"table": f"t{i}"}, "offset": {"id": i}} for i in range(60_000)]}
    many_sink = {
        "offsets": [
            {"partition": {"kafka_topic": "orders", "kafka_partition": i}, "offset": {"kafka_offset": i}}
            for i in range(40_000)
        ]
    }
    many_bad = {"offsets": [{"partition": {"table": i}, "offset": {"id": "x" * 40}} for i in range(40_000)]}
    huge_key = {"offsets": [{"partition": {"k" * 500_000: 1}, "offset": {"id": 1}}] * 2}
    return [
        json.dumps(huge_value),
        json.dumps(many),
        json.dumps(many_sink),
        json.dumps(many_bad),
        json.dumps(huge_key),
        "[" * 200_000,
        '{"offsets": [' + "1," * 1_000_000 + "1]}",
        json.dumps(file_doc) + " " * 2_000_000,
    ]


BIG_DOCUMENTS = _big_documents()
VALID_DOCS = [json.dumps(doc) for _, _, doc in FAMILIES.values()]


def _mutated(text: str, cut: int, tail: str) -> str:
    return text[: cut % (len(text) + 1)] + tail


offsets_texts = st.one_of(
    st.sampled_from(VALID_DOCS),
    st.sampled_from(SPECIAL_DOCS),
    st.builds(_mutated, st.sampled_from(VALID_DOCS), st.integers(0, 400), pick(["", "}", "]]", "x", ","])),
    unicode_text,
    json_values.map(json.dumps),
    st.lists(st.fixed_dictionaries({"partition": json_values, "offset": json_values}), max_size=3).map(
        lambda entries: json.dumps({"offsets": entries}, ensure_ascii=False)
    ),
)
VALID_OR_ANY_DOC = st.one_of(pick(VALID_DOCS), offsets_texts)
#: Rarely (parsing a few MB takes a while): one of the big documents.
rarely = pick([False] * 40 + [True])


def with_indent(text: str, indent: int | None) -> str:
    """The same document pretty-printed (valid JSON only), as people write ConfigMaps."""
    try:
        return json.dumps(json.loads(text), indent=indent, ensure_ascii=False)
    except (ValueError, RecursionError):
        return text


@st.composite
def configmaps(
    draw: st.DrawFn, name: str, key: str, valid: str, *, focus: bool = False, big: bool = False
) -> OffsetsConfigMap | None:
    kind = draw(pick(["document"] * (30 if focus else 6) + ["none", "missing", "other-keys"]))
    if kind == "none":
        return None
    if kind == "missing":
        return OffsetsConfigMap(name, False)
    rv = draw(pick(["1", "2", ""]))
    if kind == "other-keys":
        data = draw(st.dictionaries(unicode_text, unicode_text, max_size=2))
        data.pop(key, None)
        return OffsetsConfigMap(name, True, rv, data)
    if big and draw(rarely):
        return OffsetsConfigMap(name, True, rv, {key: draw(pick(BIG_DOCUMENTS))})
    text = draw(pick([valid] * 3 + [""])) if focus else ""
    text = text or draw(st.one_of(st.just(valid), offsets_texts))
    text = with_indent(text, draw(pick([None, None, 2]))) if len(text) < 10_000 else text
    data = {key: text}
    if draw(st.booleans()):
        data[draw(pick(["note", "dry-run.json", "offsets.yaml"]))] = draw(unicode_text)
    return OffsetsConfigMap(name, True, rv, data)


# --------------------------------------------------------------------------- status strategies


PENDING_OPTIONAL: dict[str, st.SearchStrategy[Any]] = {
    "request": st.one_of(st.none(), st.text("0123456789abcdef", min_size=16, max_size=16)),
    "requestId": st.one_of(st.none(), request_ids),
    "contentHash": st.one_of(st.none(), st.text("0123456789abcdef", max_size=16)),
    "restoreFrom": st.one_of(st.none(), st.just(BACKUP)),
    "backup": st.one_of(st.none(), st.just(BACKUP)),
    "seekTo": st.one_of(st.none(), st.none(), times),
    "result": st.one_of(st.none(), pick(["Succeeded", "Failed"])),
    "reason": pick(["", "ConnectRejected"]),
    "message": st.one_of(st.just(""), unicode_text),
}


@st.composite
def pending_records(draw: st.DrawFn) -> dict[str, Any]:
    record: dict[str, Any] = {
        "operation": draw(pick(["alter", "reset", "restore", "alter", "list", "bogus", ""])),
        "step": draw(pick(["Stopping", "Changing", "Resuming"])),
        "source": draw(pick(["annotation", "annotation", "applyOnChange"])),
        "started": draw(times),
    }
    for key, strategy in PENDING_OPTIONAL.items():
        value = draw(strategy)
        if value is not None:
            record[key] = value
    return record


@st.composite
def statuses(draw: st.DrawFn, configmap: OffsetsConfigMap | None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if draw(pick([True, False, False, False])):
        status["pendingOffsetsOperation"] = draw(pending_records())
    if draw(st.booleans()):
        status["handledRequestIds"] = draw(HANDLED_IDS)
    if draw(st.integers(0, 3)) == 0:
        text = configmap.data.get("offsets.json") if configmap is not None else None
        same = content_hash(text) if text is not None else "0000000000000000"
        status["appliedOffsets"] = {
            "configMap": draw(pick([ALTER_CM, "elsewhere"])),
            "contentHash": draw(pick([same, "feedfacefeedface"])),
            "time": draw(times),
            "result": draw(pick(["Succeeded", "Failed"])),
        }
    if draw(st.integers(0, 3)) == 0:
        status["initialOffsets"] = {
            "configMap": "initial",
            "step": draw(pick(["Creating", "Applied", "Failed"])),
            "time": draw(times),
            "request": draw(PENDING_OPTIONAL["request"]),
            "message": draw(pick(["initial offsets failed at step patch: Connect answered 500", "x"])),
        }
    if draw(st.integers(0, 3)) == 0:
        status["autoRestart"] = {"count": draw(st.integers(0, 12)), "lastRestartTime": draw(times)}
    return status


# --------------------------------------------------------------------------- observed Connect state


@st.composite
def connector_statuses(draw: st.DrawFn, name: str, type_: str, focus: bool) -> ConnectorStatus | None:
    if draw(pick([False] * 7 + [True])):
        return None
    state = draw(pick(["STOPPED"] * (6 if focus else 2) + list(CONNECT_STATES)))
    stopped_clean = state == "STOPPED" and draw(pick([True, True, True, False]))
    tasks = [] if stopped_clean else draw(TASK_LISTS)
    return ConnectorStatus.model_validate(
        {
            "name": name,
            "connector": {"state": state, "trace": draw(MAYBE_TEXT)},
            "tasks": [{"id": i, "state": s} for i, s in enumerate(tasks)],
            "type": draw(pick([type_, type_, None, "source", "sink"])),
        }
    )


@st.composite
def restore_sources(draw: st.DrawFn, focus: bool) -> RestoreSource | None:
    kind = draw(pick(["backup"] * 4 + ["absent"] if focus else ["none", "absent", "backup", "backup"]))
    if kind == "none":
        return None
    if kind == "absent":
        return RestoreSource(None)
    partitions = draw(PARTITION_LISTS)
    return RestoreSource(
        name=BACKUP,
        resource_version=draw(pick(["5", "6"])),
        backup_json=draw(pick(VALID_DOCS) if focus else VALID_OR_ANY_DOC),
        current_json=json.dumps({"offsets": [{"partition": p, "offset": {"position": 1}} for p in partitions]}),
    )


seeks = st.one_of(
    st.none(),
    st.builds(
        SeekOffsets,
        document_json=pick([None, json.dumps(SINK_DOC), json.dumps(SINK_DOC), "{", VALID_DOCS[0]]),
        error=st.one_of(st.none(), unicode_text),
        transient=st.booleans(),
        at_end=st.integers(0, 3),
    ),
)


@st.composite
def observations(draw: st.DrawFn, target: ConnectorTarget, type_: str, valid_doc: str, focus: bool) -> Observed:
    """What the service saw; ``focus``: an owned connector on a usable cluster, mostly STOPPED, with
    mostly valid inputs, so that the deeper branches (changes, dry runs, stop -> change -> resume) run."""
    config: dict[str, str] | None = None
    choices = ["owned"] * 12 + ["absent", "drifted"] if focus else ["absent", "owned", "owned", "owned", "drifted"]
    choice = draw(pick([*choices, "foreign", "unowned"]))
    if choice != "absent":
        config = {**target.config, OWNER_CONFIG_KEY: target.owner}
        if choice == "drifted":
            config[draw(unicode_text)] = draw(unicode_text)
        elif choice == "foreign":
            config[OWNER_CONFIG_KEY] = draw(unicode_text)
        elif choice == "unowned":
            del config[OWNER_CONFIG_KEY]
    key = target.configmap_key
    # The service reads only what the request needs; drawing the rest anyway (rarely) keeps the
    # planner honest about ignoring it, without paying for it in every example.
    operation = target.annotations.get(ANNOTATION_OFFSETS)
    needs = {
        "alter": target.alter_configmap is not None or operation == "alter",
        "restore": operation == "restore",
        "initial": target.initial_configmap is not None,
        "seek": target.seek_to() is not None,
    }
    wanted = {name: needed or draw(rarely) for name, needed in needs.items()}
    alter_name = target.alter_configmap or ALTER_CM
    initial_name = target.initial_configmap or "initial"
    return Observed(
        now=NOW + timedelta(minutes=draw(MINUTES)),
        cluster_error=None if focus else draw(pick([None] * 8 + ["Connect unreachable: timed out", ""])),
        supports_initial_state=draw(pick([True, True, False])),
        config=config,
        status=draw(connector_statuses(target.name, type_, focus)) if config is not None else None,
        alter_configmap=draw(configmaps(alter_name, key, valid_doc, focus=focus, big=True))
        if wanted["alter"]
        else None,
        restore=draw(restore_sources(focus)) if wanted["restore"] else None,
        initial_configmap=draw(configmaps(initial_name, key, valid_doc, focus=focus)) if wanted["initial"] else None,
        seek=draw(seeks) if wanted["seek"] else None,
    )


# --------------------------------------------------------------------------- KafkaConnector bodies

SPEC_CORRUPTIONS: list[tuple[str, Any]] = [
    ("class", ""),
    ("class", 42),
    ("class", None),
    ("tasksMax", 0),
    ("tasksMax", -3),
    ("tasksMax", "many"),
    ("tasksMax", 1.5),
    ("state", "Running"),
    ("state", ""),
    ("state", "deleted"),
    ("config", {"name": "x"}),
    ("config", {"connector.class": "x"}),
    ("config", {"tasks.max": 2}),
    ("config", {"nested": {"a": 1}}),
    ("config", {"list": [1, 2]}),
    ("config", "file=/data/in.txt"),
    ("autoRestart", {"maxRestarts": -1}),
    ("autoRestart", "yes"),
    ("listOffsets", {"toConfigMap": {"name": ""}}),
    ("listOffsets", {"toConfigMap": {"name": "n" * 300}}),
    ("listOffsets", {"toConfigMap": {}}),
    ("alterOffsets", {}),
    ("alterOffsets", {"fromConfigMap": {"name": ALTER_CM}, "toTimestamp": "2024-05-01T00:00:00Z"}),
    ("alterOffsets", {"toTimestamp": "yesterday"}),
    ("alterOffsets", {"toTimestamp": "2024-05-01T00:00:00"}),
    ("alterOffsets", {"toTimestamp": "2024-05-01T00:00:00Z", "applyOnChange": True}),
    ("alterOffsets", {"fromConfigMap": {"name": ALTER_CM}, "applyOnChange": "sometimes"}),
    ("offsetsPolicy", {"stopConnector": "maybe"}),
    ("offsetsPolicy", {"stopConnectors": True}),
    ("initialOffsets", {"fromConfigMap": None}),
    ("initialOffsets", "initial"),
    ("unknownField", 1),
]


@st.composite
def request_annotations(draw: st.DrawFn, focus: bool) -> dict[str, str]:
    """``focus``: an offsets request with mostly valid flags; else any connect-offsets.io/* key and value."""
    if not focus:
        annotations = draw(ANY_ANNOTATIONS)
        operation = draw(ANY_OPERATION)
        if operation is not None:
            annotations[ANNOTATION_OFFSETS] = operation
        return annotations
    annotations = {}
    operation = draw(pick(["alter", "alter", "reset", "restore", "list", None]))
    if operation is not None:
        annotations[ANNOTATION_OFFSETS] = operation
    flags = {
        ANNOTATION_DRY_RUN: ["true", "true", "false", "yes", ""],
        ANNOTATION_STOP_CONNECTOR: ["true", "true", "false", "1"],
        ANNOTATION_REQUEST_ID: ["INC-1", "INC-2", ""],
        ANNOTATION_RESTORE_FROM: [BACKUP, "missing-backup"],
        ANNOTATION_SEEK_TO: ["2024-05-01T10:00:00Z", "last tuesday"],
    }
    for key, values in flags.items():
        if draw(pick([True, False, False])):
            annotations[key] = draw(pick(values))
    return annotations


@st.composite
def connector_bodies(draw: st.DrawFn, focus: bool = False) -> tuple[dict[str, Any], str]:
    """A KafkaConnector body (sometimes corrupted) and the connector family it was built for."""
    family = draw(pick(sorted(FAMILIES)))
    family_config, _, _ = FAMILIES[family]
    config: dict[str, Any] = draw(CONFIGS)
    if draw(st.integers(0, 4)):
        config.update(family_config)
    spec: dict[str, Any] = {"class": family, "config": config}
    if draw(st.booleans()):
        spec["tasksMax"] = draw(st.integers(1, 10))
    state = draw(pick([None, "running", "paused", "stopped"]))
    if state is not None:
        spec["state"] = state
    if draw(st.booleans()):
        spec["autoRestart"] = {"enabled": draw(st.booleans()), "maxRestarts": draw(st.integers(0, 5))}
    if draw(st.integers(0, 3)):
        spec["listOffsets"] = {"toConfigMap": {"name": "offsets-out"}}
    alter = draw(pick(["none", "configmap", "configmap", "configmap", "declarative", "timestamp"]))
    if alter in ("configmap", "declarative"):
        spec["alterOffsets"] = {"fromConfigMap": {"name": ALTER_CM}, "applyOnChange": alter == "declarative"}
    elif alter == "timestamp":
        spec["alterOffsets"] = {"toTimestamp": draw(pick(["2024-05-01T10:00:00Z", "2024-05-01T12:00+02:00"]))}
    if draw(st.booleans()):
        spec["offsetsPolicy"] = {"stopConnector": draw(st.booleans())}
    if draw(st.integers(0, 3)) == 0:
        spec["initialOffsets"] = {"fromConfigMap": {"name": "initial"}}
    if not focus and draw(pick([False] * 5 + [True])):
        key, value = draw(pick(SPEC_CORRUPTIONS))
        spec[key] = value
    annotations = draw(request_annotations(focus))
    metadata: dict[str, Any] = {
        "name": draw(pick(["orders", "orders-source", "заказы", "a.b", "x" * 253])),
        "namespace": "team-a",
        "generation": draw(st.integers(0, 3)),
        "annotations": annotations,
    }
    if not focus and draw(pick([False] * 15 + [True])):
        metadata[draw(pick(["annotations", "generation", "name"]))] = draw(pick([{"k": 1}, "two", None, ["a"]]))
    return {
        "apiVersion": "connect-offsets.io/v1beta1",
        "kind": "KafkaConnector",
        "metadata": metadata,
        "spec": spec,
    }, family


@st.composite
def connector_scenarios(
    draw: st.DrawFn,
) -> tuple[KafkaConnectorResource | None, ConnectorTarget | None, Observed | None]:
    focus = draw(st.booleans())
    event(f"focus: {focus}")
    body, family = draw(connector_bodies(focus))
    _, type_, valid = FAMILIES[family]
    valid_text = json.dumps(valid)
    try:
        resource = KafkaConnectorResource.model_validate(body)
    except ValidationError as error:  # anything else fails the test: bad bodies must fail validation cleanly
        assert error.errors()
        event("body: invalid (ValidationError)")
        return None, None, None
    target = target_for_connector(resource)
    observed = draw(observations(target, type_, valid_text, focus))
    status = draw(statuses(observed.alter_configmap))
    if status:
        try:
            resource = KafkaConnectorResource.model_validate({**body, "status": status})
        except ValidationError:
            event("status: invalid (ValidationError)")
            return None, None, None
    if draw(pick([True, False, False, False])):
        # A remembered failure of exactly this request: it must not be repeated.
        source = observed.alter_configmap
        if observed.restore is not None and observed.restore.name is not None:
            source = OffsetsConfigMap(observed.restore.name, True, observed.restore.resource_version)
        status["lastOffsetsOperation"] = {
            "operation": draw(pick(OPERATIONS)),
            "result": draw(pick(["Failed", "Succeeded"])),
            "reason": "ConnectRejected",
            "time": iso(NOW),
            "message": "alter failed: Connect answered 400: bad",
            "request": offsets_request_fingerprint(resource, source),
        }
        resource = KafkaConnectorResource.model_validate({**body, "status": status})
    return resource, target_for_connector(resource), observed


# --------------------------------------------------------------------------- the properties


def _is_sink(observed: Observed) -> bool | None:
    return observed.status.type == "sink" if observed.status and observed.status.type else None


def _validated(target: ConnectorTarget, observed: Observed, text: str, *, seek: bool) -> str:
    """The compact document the planner may send for ``text``; AssertionError if it is invalid."""
    try:
        document = parse_offsets_document(text)
        if seek:
            validate_for_connector(
                document, target.class_name, {**target.config, OWNER_CONFIG_KEY: target.owner}, is_sink=True
            )
            return document.to_compact_json()
        if target.class_name == MIRROR_CLASSES["MirrorSourceConnector"]:
            document = translate_replay_from(document)
        config = {**target.config, OWNER_CONFIG_KEY: target.owner}
        validate_for_connector(document, target.class_name, config, is_sink=_is_sink(observed))
    except OffsetsValidationError as error:
        raise AssertionError(f"planned with a document that does not validate: {error}") from error
    return document.to_compact_json()


def _alter_text(target: ConnectorTarget, observed: Observed) -> tuple[str, bool]:
    if target.seek_to() is not None:
        assert observed.seek is not None and observed.seek.document_json is not None
        return observed.seek.document_json, True
    configmap = observed.alter_configmap
    assert target.alter_configmap is not None and configmap is not None and configmap.exists
    assert configmap.name == target.alter_configmap
    return configmap.data[target.configmap_key], False


def check_target_plan(target: ConnectorTarget, observed: Observed, plan: Plan) -> None:
    annotations = target.annotations
    kinds = [a.kind for a in plan.actions]
    pending = target.pending
    request = annotations.get(ANNOTATION_OFFSETS)
    dry_flag = annotations.get(ANNOTATION_DRY_RUN)
    stop_flag = annotations.get(ANNOTATION_STOP_CONNECTOR)
    event(f"actions: {'+'.join(sorted(set(kinds))) or 'none'}")

    # Well-formed conditions; one Ready; messages of request conditions say something.
    ready = [c for c in plan.conditions if c.type == "Ready"]
    assert len(ready) == 1, plan.conditions
    assert len({c.type for c in plan.conditions}) == len(plan.conditions), plan.conditions
    for condition in plan.conditions:
        assert condition.type and condition.reason and condition.status in ("True", "False", "Unknown")
        if condition.type in REQUEST_CONDITIONS:
            assert condition.message.strip(), condition
    if plan.requeue_after is not None:
        assert plan.requeue_after > 0
    if observed.cluster_error is not None:
        assert plan.actions == []
    if plan.offsets_refusal is not None:
        assert plan.offsets_refusal[1].strip(), plan.offsets_refusal
        if not plan.offsets_refusal[2]:
            assert plan.requeue_after is not None, "a transient refusal must be looked at again"

    # Every document the executor would send is JSON it can encode.
    for action in plan.actions:
        if action.offsets_json is not None:
            json.loads(action.offsets_json)
            action.offsets_json.encode("utf-8")

    # An offsets request that is not acted on is explained.
    if request is not None and not (set(kinds) & ACTED):
        explained = (
            {c.type for c in plan.conditions} & REQUEST_CONDITIONS
            or (plan.offsets_refusal is not None and not plan.offsets_refusal[2])
            or ready[0].reason in NOT_TAKING_REQUESTS
        )
        assert explained, (request, plan)
        event(f"request not acted on: {sorted({c.type for c in plan.conditions} - {'Ready'}) or ready[0].reason}")

    # Change actions: one at most, on a STOPPED connector without tasks, the operation asked for.
    changes = [a for a in plan.actions if a.kind in CHANGE_KINDS]
    assert len(changes) <= 1, kinds
    for action in changes:
        assert observed.status is not None and observed.status.is_stopped, observed.status
        operation = pending.operation if pending is not None else request
        assert CHANGE_KINDS[action.kind] == operation, (action.kind, operation)
        if pending is None:
            assert dry_flag in (None, "false") and stop_flag in (None, "true", "false")
            assert request is not None
            request_id = annotations.get(ANNOTATION_REQUEST_ID)
            assert request_id is None or request_id not in target.handled_request_ids
        else:
            assert action.pending == pending
        if action.kind == "alter_offsets":
            text, seek = _alter_text(target, observed)
            assert action.offsets_json == _validated(target, observed, text, seek=seek)
        elif action.kind == "restore_offsets":
            assert observed.restore is not None and observed.restore.name is not None
            assert action.configmap == observed.restore.name
        else:
            assert action.offsets_json is None

    # begin only with valid input, valid flags, not for a dry run or a handled request id.
    for action in plan.actions:
        if action.kind != "begin_offsets_change":
            continue
        assert pending is None and action.pending is not None
        begun = action.pending
        assert begun.step == "Stopping" and begun.operation in ("alter", "reset", "restore")
        if begun.source == "annotation":
            assert request == begun.operation
            assert dry_flag in (None, "false") and stop_flag in (None, "true", "false")
            assert stop_flag == "true" or target.stop_policy
            assert target.state is not ConnectorState.STOPPED
            assert begun.request_id is None or begun.request_id not in target.handled_request_ids
        else:
            assert target.apply_on_change and request is None and begun.operation == "alter"
            configmap = observed.alter_configmap
            assert configmap is not None and begun.content_hash == content_hash(configmap.data[target.configmap_key])
        if begun.operation == "alter":
            text, seek = _alter_text(target, observed)
            _validated(target, observed, text, seek=seek)
        if begun.operation == "restore":
            assert observed.restore is not None and observed.restore.name == begun.restore_from
        assert plan.hold_stopped

    # stop only for spec.state stopped or a change/initial offsets that holds the connector.
    if "stop" in kinds:
        assert target.state is ConnectorState.STOPPED or plan.hold_stopped, plan
    if plan.hold_stopped:
        assert (
            "begin_offsets_change" in kinds
            or (pending is not None and pending.step != "Resuming")
            or "create_with_initial_offsets" in kinds
            or (target.initial_status is not None and target.initial_status.step == "Creating")
        ), plan

    # Dry runs (and typos in the flag) never change anything; a dry-run action only for dry-run=true.
    # (The flag alone, without a request, means nothing: applyOnChange may then begin its own change.)
    if dry_flag not in (None, "false") and request is not None and pending is None:
        assert not changes and "begin_offsets_change" not in kinds
    for action in plan.actions:
        if action.kind == "dry_run_offsets":
            assert dry_flag == "true" and pending is None and action.operation == request
            assert action.operation in ("alter", "reset", "restore")
            if action.operation == "alter":
                text, seek = _alter_text(target, observed)
                assert action.offsets_json == _validated(target, observed, text, seek=seek)

    # The executor publishes a finished change's result: it must have one.
    for action in plan.actions:
        if action.kind in ("finish_offsets_change", "update_pending"):
            assert action.pending is not None and action.pending.result is not None
            assert action.pending.step == "Resuming"

    # Initial offsets: STOPPED, validated, Connect >= 3.7.
    for action in plan.actions:
        if action.kind == "create_with_initial_offsets":
            assert observed.config is None and observed.supports_initial_state
            assert action.initial_state == "STOPPED" and action.offsets_json is not None
            assert observed.initial_configmap is not None
            parse_offsets_document(action.offsets_json)
        if action.kind == "apply_initial_offsets":
            assert observed.status is not None and observed.status.is_stopped

    # Annotations are removed only with their value, only when the request was acted on.
    removals = [a for a in plan.actions if a.kind == "remove_annotation"]
    for action in removals:
        assert action.annotation is not None
        value = annotations.get(action.annotation, dict(target.companion_annotations).get(action.annotation))
        assert value == action.annotation_value, action
    if any(a.annotation == ANNOTATION_OFFSETS for a in removals):
        assert set(kinds) & {"list_offsets", "dry_run_offsets", "finish_offsets_change", *CHANGE_KINDS}, kinds
        assert plan.offsets_refusal is None


FUZZ = settings(
    max_examples=1000,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@FUZZ
@given(scenario=connector_scenarios())
def test_planner_on_bad_connector_input(
    scenario: tuple[KafkaConnectorResource | None, ConnectorTarget | None, Observed | None],
) -> None:
    resource, target, observed = scenario
    if resource is None or target is None or observed is None:
        return
    plan = plan_target(target, observed)
    check_target_plan(target, observed, plan)


# --------------------------------------------------------------------------- KafkaMirrorMaker2

MM2_NAMES = [
    f"east->west.{kind}" for kind in ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")
]
MM2_DOC = {"offsets": [{"partition": {"cluster": "east", "partition": 0, "topic": "orders"}, "offset": {"offset": 4}}]}


@st.composite
def mm2_scenarios(draw: st.DrawFn) -> tuple[KafkaMirrorMaker2Resource, list[tuple[ConnectorTarget, Observed]]] | None:
    focus = draw(st.booleans())

    def block() -> dict[str, Any]:
        spec: dict[str, Any] = {"state": draw(pick(["running", "paused", "stopped"]))}
        if draw(st.integers(0, 3)):
            spec["listOffsets"] = {"toConfigMap": {"name": "mm2-offsets"}}
        if draw(st.integers(0, 3)):
            spec["alterOffsets"] = {"fromConfigMap": {"name": ALTER_CM}, "applyOnChange": draw(st.booleans())}
        if draw(st.booleans()):
            spec["offsetsPolicy"] = {"stopConnector": draw(st.booleans())}
        return spec

    mirror: dict[str, Any] = {"sourceCluster": "east", "targetCluster": "west"}
    for field in ("sourceConnector", "checkpointConnector", "heartbeatConnector"):
        if draw(st.integers(0, 3)):
            mirror[field] = block()
    annotations = draw(request_annotations(focus))
    if draw(pick([True, True, False])):
        annotations[ANNOTATION_MM2_CONNECTOR] = draw(
            st.one_of(st.sampled_from(MM2_NAMES), pick(["", "east->west", "west->east.MirrorSourceConnector"]))
        )
    connectors = [
        {"name": name, "pendingOffsetsOperation": draw(pending_records())}
        for name in MM2_NAMES
        if draw(st.integers(0, 3)) == 0
    ]
    body = {
        "apiVersion": "connect-offsets.io/v1beta1",
        "kind": "KafkaMirrorMaker2",
        "metadata": {"name": "east-to-west", "namespace": "team-a", "generation": 1, "annotations": annotations},
        "spec": {
            "clusters": [
                {"alias": "east", "bootstrapServers": "east:9092"},
                {"alias": "west", "bootstrapServers": "west:9092"},
            ],
            "mirrors": [mirror],
        },
        "status": {
            "connectors": connectors,
            "handledRequestIds": draw(HANDLED_IDS),
        },
    }
    try:
        resource = KafkaMirrorMaker2Resource.model_validate(body)
    except ValidationError:
        return None
    plan = mirror_targets(resource, {})
    pairs = []
    for target in plan.targets:
        kind = target.name.rsplit(".", 1)[-1]
        valid = json.dumps(MM2_DOC if kind == "MirrorSourceConnector" else {"offsets": []})
        pairs.append((target, draw(observations(target, "source", valid, focus))))
    return resource, pairs


@settings(FUZZ, max_examples=300)
@given(scenario=mm2_scenarios())
def test_planner_on_bad_mirrormaker2_input(
    scenario: tuple[KafkaMirrorMaker2Resource, list[tuple[ConnectorTarget, Observed]]] | None,
) -> None:
    if scenario is None:
        return
    resource, pairs = scenario
    mirror = mirror_targets(resource, {})
    annotations = resource.metadata.annotations
    selected = annotations.get(ANNOTATION_MM2_CONNECTOR)
    operation = annotations.get(ANNOTATION_OFFSETS)
    names = [t.name for t in mirror.targets]
    # Request annotations reach the selected connector only; a bad selector is explained.
    for target in mirror.targets:
        if target.name != selected or operation is None:
            assert target.annotations == {}, target
        else:
            assert target.annotations[ANNOTATION_OFFSETS] == operation
            for key in (ANNOTATION_DRY_RUN, ANNOTATION_STOP_CONNECTOR, ANNOTATION_REQUEST_ID):
                assert target.annotations.get(key) == annotations.get(key)
    reasons = {c.reason for c in mirror.conditions if c.type == "InvalidAnnotation"}
    if operation is not None and selected is None:
        assert "MissingAnnotation" in reasons
    if selected is not None and operation is None:
        assert "MissingAnnotation" in reasons
    if selected is not None and operation is not None and selected not in names:
        assert "UnknownConnector" in reasons
        assert all(c.message.strip() for c in mirror.conditions)
    for target, observed in pairs:
        check_target_plan(target, observed, plan_target(target, observed))


# --------------------------------------------------------------------------- pinned examples


def test_unpaired_surrogate_escape_is_refused_before_anything() -> None:
    """Found by this fuzzer: ``"\\ud800"`` parses to a lone surrogate that validated and later made
    the executor's PATCH (httpx encodes UTF-8) raise UnicodeEncodeError after the backup."""
    text = '{"offsets": [{"partition": {"table": "a\\ud800b"}, "offset": {"id": 1}}]}'
    with pytest.raises(OffsetsValidationError, match="unpaired surrogate"):
        parse_offsets_document(text)
    paired = parse_offsets_document('{"offsets": [{"partition": {"t": "\\ud83d\\ude00"}, "offset": {"id": 1}}]}')
    assert paired.to_compact_json().encode("utf-8")
