"""``kubectl connect-offsets lag``: the table printed from status.replicationLag, and its arguments."""

from __future__ import annotations

import pytest

from connect_offsets.tools.kubectl import (
    EXIT_USAGE,
    PluginError,
    build_parser,
    lag_command,
    render_connector_lag,
    render_lag,
)

pytestmark = pytest.mark.unit

BODY = {
    "status": {
        "replicationLag": {
            "total": 13,
            "max": 7,
            "stale": True,
            "mirrors": [
                {
                    "sourceCluster": "east",
                    "targetCluster": "west",
                    "connector": "east->west.MirrorSourceConnector",
                    "partitions": 3,
                    "total": 13,
                    "max": 7,
                    "worstPartition": {"topic": "orders", "partition": 1, "lag": 7},
                    "measuredAt": "2026-01-02T03:04:05Z",
                    "stale": True,
                    "message": "source cluster east: unreachable",
                }
            ],
        },
        "conditions": [
            {"type": "ReplicationLagging", "status": "Unknown", "reason": "ReplicationLagUnknown", "message": "x"}
        ],
    }
}


def test_table_has_one_row_per_mirror_the_condition_and_why_it_is_stale() -> None:
    lines = render_lag(BODY).splitlines()
    assert lines[0].split() == [
        "MIRROR",
        "CONNECTOR",
        "PARTITIONS",
        "TOTAL",
        "MAX",
        "WORST",
        "PARTITION",
        "MEASURED",
        "STALE",
    ]
    assert lines[1].split() == [
        "east->west",
        "east->west.MirrorSourceConnector",
        "3",
        "13",
        "7",
        "orders/1",
        "(7)",
        "2026-01-02T03:04:05Z",
        "yes",
    ]
    assert lines[2] == "ReplicationLagging=Unknown (ReplicationLagUnknown): x"
    assert lines[3] == "east->west: source cluster east: unreachable"


def test_nothing_measured_yet() -> None:
    assert render_lag({"status": {}}) == "no replication lag reported: the operator has not measured it yet"


def test_parser_and_kind_check() -> None:
    args = build_parser().parse_args(["lag", "mm2/east-to-west", "-n", "kafka", "-o", "json"])
    assert (args.command, args.name, args.namespace, args.output) == ("lag", "mm2/east-to-west", "kafka", "json")
    args = build_parser().parse_args(["lag", "cokc/orders-sink"])
    assert args.name == "cokc/orders-sink"  # a KafkaConnector's progress (render_connector_lag)


def test_a_connectors_progress_and_its_condition() -> None:
    body = {
        "metadata": {"name": "orders-sink"},
        "status": {
            "connectorStatus": {"connector": {"state": "RUNNING"}},
            "progress": {
                "type": "sink",
                "totalLag": 20,
                "partitionsBehind": 1,
                "partitions": 3,
                "lastMoved": "2026-11-26T10:00:00Z",
            },
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "ConnectorRunning", "message": "ok"},
                {"type": "Progressing", "status": "False", "reason": "NotAdvancing", "message": "20 waiting"},
            ],
        },
    }
    lines = render_connector_lag(body).splitlines()
    assert lines[0].split("  ")[0] == "CONNECTOR" and "PARTITIONS BEHIND" in lines[0]
    assert lines[1].split() == ["orders-sink", "sink", "RUNNING", "20", "1", "3", "2026-11-26T10:00:00Z"]
    assert lines[2] == "Progressing=False (NotAdvancing): 20 waiting"
    assert render_connector_lag({"metadata": {"name": "x"}, "status": {}}).startswith("no progress reported")


def test_wide_puts_each_mirrors_message_in_a_column() -> None:
    lines = render_lag(BODY, wide=True).splitlines()
    assert lines[0].split()[-1] == "MESSAGE"
    assert lines[1].endswith("source cluster east: unreachable")
    assert lines[1].index("source cluster") == lines[0].index("MESSAGE")
    assert lines[2] == "ReplicationLagging=Unknown (ReplicationLagUnknown): x"
    assert len(lines) == 3  # the message is not repeated below the table


def test_lag_help_lists_only_the_options_lag_uses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["lag", "--help"])
    text = capsys.readouterr().out
    assert "--namespace" in text and "--output" in text and "--kubeconfig" in text
    for option in ("--selector", "--all-namespaces", "--mirrormaker-connector", "--wait", "--timeout", "--dry-run"):
        assert option not in text
    with pytest.raises(SystemExit):
        build_parser().parse_args(["lag", "mm2/x", "-l", "a=b"])
    # request options before the command are accepted by the parser, so lag refuses them itself
    with pytest.raises(PluginError) as raised:
        lag_command(["-l", "a=b", "--timeout", "5s", "lag", "mm2/x"])
    assert raised.value.code == EXIT_USAGE
    assert str(raised.value).startswith("lag does not take --selector, --timeout")
