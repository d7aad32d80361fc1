"""Documents the Kafka Connect REST API returns, parsed leniently, and version rules.

``extra="ignore"``: newer workers add fields (Kafka 4.1 adds plugin versions to status) and must
not break us. These live in ``models`` rather than next to the HTTP client so the pure planner can
reason about them without importing any I/O code.
"""

from __future__ import annotations

import re
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ConnectorStatus",
    "RuntimeState",
    "ServerInfo",
    "TaskState",
    "health_endpoint_supported",
    "offsets_api_refusal",
    "parse_version",
    "plugin_version_refusal",
    "supports_initial_state",
]


class ServerInfo(BaseModel):
    """``GET /``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    version: str
    commit: str | None = None
    kafka_cluster_id: str | None = None


class RuntimeState(BaseModel):
    """What Connect reports for a connector or a task at runtime (``GET /connectors/{name}/status``);
    the state a user asks for is ``models.crds.ConnectorState``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    state: str
    worker_id: str | None = None
    trace: str | None = None
    version: str | None = None  # the plugin version running (Kafka Connect 4.1+, KIP-891)


class TaskState(RuntimeState):
    id: int


#: Tasks listed in a resource's status (the rest are counted in ``tasksOmitted``).
STATUS_MAX_TASKS: Final = 50
#: Characters of a trace's first line kept in status.
STATUS_TRACE_CHARS: Final = 512


def _state_for_status(state: RuntimeState) -> dict[str, Any]:
    document: dict[str, Any] = {"state": state.state}
    if state.worker_id is not None:
        document["worker_id"] = state.worker_id[:253]
    if state.version is not None:
        document["version"] = state.version[:200]
    if state.trace is not None and state.trace.strip():
        first = state.trace.strip().splitlines()[0]
        document["trace"] = first if len(first) <= STATUS_TRACE_CHARS else first[:STATUS_TRACE_CHARS] + "…"
    return document


class ConnectorStatus(BaseModel):
    """``GET /connectors/{name}/status``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    connector: RuntimeState
    tasks: list[TaskState] = Field(default_factory=list)
    type: str | None = None

    @property
    def state(self) -> str:
        """The connector's own state: RUNNING, PAUSED, STOPPED, FAILED, UNASSIGNED, RESTARTING."""
        return self.connector.state

    @property
    def is_stopped(self) -> bool:
        """STOPPED and every task gone -- the precondition of the offsets PATCH/DELETE endpoints."""
        return self.state == "STOPPED" and not self.tasks

    @property
    def failed_task_ids(self) -> list[int]:
        return [t.id for t in self.tasks if t.state == "FAILED"]

    @property
    def any_failed(self) -> bool:
        return self.state == "FAILED" or bool(self.failed_task_ids)

    def for_status(self) -> dict[str, Any]:
        """This status as it goes into a resource's ``status.connectorStatus``, bounded in size.

        Connect's traces are whole Java stack traces (kilobytes each) and a connector may have
        hundreds of tasks: copied as they are, a failing connector pushed its resource's status
        past what the API server accepts, nothing was written, and the restarts that status
        records were repeated. Kept: the first line of each trace (the exception and message, at
        most ``STATUS_TRACE_CHARS``), the first ``STATUS_MAX_TASKS`` tasks, and how many were left
        out (``tasksOmitted``). Worst case about 30 KiB per connector, well under etcd's 1.5 MiB.
        """
        shown = self.tasks[:STATUS_MAX_TASKS]
        document: dict[str, Any] = {
            "name": self.name,
            "connector": _state_for_status(self.connector),
            "tasks": [{"id": task.id, **_state_for_status(task)} for task in shown],
        }
        if self.type is not None:
            document["type"] = self.type
        if len(self.tasks) > len(shown):
            document["tasksOmitted"] = len(self.tasks) - len(shown)
        return document

    def first_trace(self) -> str | None:
        """The first line of the first failure trace (the exception and its message), if any."""
        traces = [self.connector.trace if self.connector.state == "FAILED" else None]
        traces += [task.trace for task in self.tasks if task.state == "FAILED"]
        for trace in traces:
            if trace and trace.strip():
                return trace.strip().splitlines()[0]
        return None


_VERSION_RE: Final = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_CONFLUENT_SUFFIX_RE: Final = re.compile(r"-(ccs|ce)\b")


def parse_version(v: str) -> tuple[int, int, int]:
    """Leniently parse a version: ``"3.7.0"``, ``"4.1.1"``, ``"3.9.0-SNAPSHOT"`` -> ``(3, 9, 0)``.

    Missing parts are 0; anything without a leading number is ``(0, 0, 0)``.
    """
    m = _VERSION_RE.match(v or "")
    if m is None:
        return (0, 0, 0)
    major, minor, patch = (int(g) if g else 0 for g in m.groups())
    return (major, minor, patch)


def _apache_kafka_version(v: str) -> tuple[int, int, int]:
    """Like :func:`parse_version`, but maps Confluent Platform versions (``7.7.0-ccs``, ``8.0.0-ce``,
    reported by CP's Connect instead of the Kafka version) to the Apache Kafka release they ship:
    CP 7.x -> AK 3.x, CP 8.x -> AK 4.x."""
    parsed = parse_version(v)
    if _CONFLUENT_SUFFIX_RE.search(v or "") and parsed[0] >= 7:
        return (parsed[0] - 4, parsed[1], parsed[2])
    return parsed


def supports_initial_state(version: str) -> bool:
    """``initial_state`` in ``POST /connectors`` exists since Kafka 3.7 (KIP-980)."""
    return _apache_kafka_version(version) >= (3, 7, 0)


#: The offsets REST API (``GET/PATCH/DELETE /connectors/{name}/offsets``, KIP-875) exists since Kafka 3.6.
MIN_OFFSETS_API_VERSION: Final = (3, 6, 0)


def offsets_api_refusal(version: str) -> str | None:
    """Why a worker reporting ``version`` cannot serve this operator, or ``None`` if it can.

    Only a version that parses to a real release older than 3.6 is refused: an unparsable one
    (``(0, 0, 0)``, a custom build) is given the benefit of the doubt, as before.
    """
    parsed = _apache_kafka_version(version)
    if parsed == (0, 0, 0) or parsed >= MIN_OFFSETS_API_VERSION:
        return None
    # The parsed release, not the raw text: whatever a URL answers must not reach status unredacted.
    found, minimum = (".".join(map(str, v)) for v in (parse_version(version), MIN_OFFSETS_API_VERSION))
    return (
        f"Connect {found} has no offsets REST API (KIP-875); this operator needs Kafka Connect "
        f"{minimum} or newer: upgrade the Connect workers"
    )


#: ``GET /health`` (KIP-1017) exists since Kafka Connect 3.9.
MIN_HEALTH_VERSION: Final = (3, 9, 0)
#: ``connector.plugin.version`` (KIP-891) is read since Kafka Connect 4.1.
MIN_PLUGIN_VERSION_VERSION: Final = (4, 1, 0)


def health_endpoint_supported(version: str) -> bool:
    """Whether a worker reporting ``version`` has ``GET /health`` (3.9+); an unparsable version is
    not asked (``GET /`` stays its readiness)."""
    return _apache_kafka_version(version) >= MIN_HEALTH_VERSION


def plugin_version_refusal(version: str) -> str | None:
    """Why ``spec.version`` cannot be used on a worker reporting ``version``, or None if it can.

    Older workers ignore ``connector.plugin.version`` silently (an unknown config key), so the
    version asked would not be the one running: refused, naming the version needed. An unparsable
    version gets the benefit of the doubt (a custom build), as for the offsets API.
    """
    parsed = _apache_kafka_version(version)
    if parsed == (0, 0, 0) or parsed >= MIN_PLUGIN_VERSION_VERSION:
        return None
    found, minimum = (".".join(map(str, v)) for v in (parse_version(version), MIN_PLUGIN_VERSION_VERSION))
    return (
        f"spec.version needs Kafka Connect {minimum} or newer (KIP-891, connector.plugin.version); this worker "
        f"is {found}: remove spec.version or upgrade the Connect workers"
    )
