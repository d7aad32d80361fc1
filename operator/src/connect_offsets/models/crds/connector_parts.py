"""What a KafkaConnector and each MirrorMaker 2 connector share: desired state, auto-restart, the
offsets request specs (list, alter, policy) and their status records.

Why one module: a MirrorMaker 2 connector takes the same knobs as a KafkaConnector and reports the
same offsets status, so the two kinds must never drift apart.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from connect_offsets.models.crds.base import RFC3339_CEL, ConfigMapRef, Model, StatusModel, cel, parse_rfc3339

#: Keys Connect derives from the resource itself; setting them in ``config`` would be ambiguous.
RESERVED_CONFIG_KEYS = ("name", "connector.class", "tasks.max")


AUTO_RESTART = "Restart the connector or its tasks when they FAIL, with back-off."
LIST_OFFSETS = "Where the `list` request writes the offsets (a ConfigMap, key offsets.json)."
ALTER_OFFSETS = "What the `alter` request applies: a ConfigMap's offsets, or a time to seek to (sinks)."
OFFSETS_POLICY = "Whether alter/reset/restore may stop a running connector and resume it after the change."
CONNECTOR_STATUS = "Connect's GET /connectors/<name>/status answer, as Connect wrote it."


class ConnectorState(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


class AutoRestartSpec(Model):
    """Restart a FAILED connector or its tasks with back-off (Strimzi's autoRestart)."""

    enabled: bool = Field(True, description="Restart a FAILED connector or tasks with back-off.")
    max_restarts: Annotated[int, Field(ge=0, description="Give up after this many restarts.")] | None = None


class ListOffsetsSpec(Model):
    """Where `connect-offsets.io/connector-offsets=list` writes the connector's offsets."""

    to_config_map: ConfigMapRef = Field(description="ConfigMap that `list` writes `offsets.json` to.")


class AlterOffsetsSpec(Model):
    """What `connect-offsets.io/connector-offsets=alter` applies: offsets from a ConfigMap, or a time (sinks)."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("has(self.fromConfigMap) != has(self.toTimestamp)", "set exactly one of fromConfigMap and toTimestamp"),
            (
                "!has(self.applyOnChange) || !self.applyOnChange || has(self.fromConfigMap)",
                "applyOnChange needs fromConfigMap",
            ),
            (
                f"!has(self.toTimestamp) || self.toTimestamp.matches('{RFC3339_CEL}')",
                "toTimestamp must be an RFC 3339 time with a zone, e.g. 2026-11-21T10:00:00Z",
            ),
        )
    )

    from_config_map: ConfigMapRef | None = Field(None, description="ConfigMap whose `offsets.json` `alter` applies.")
    to_timestamp: str | None = Field(
        None,
        max_length=64,
        description=(
            "Sink connectors: `alter` seeks every consumed topic-partition to the first record with a timestamp "
            "at or after this RFC 3339 time (partitions without one: to their end). Needs ConnectCluster "
            "spec.kafka. The annotation connect-offsets.io/seek-to overrides it per request."
        ),
    )
    apply_on_change: bool = Field(
        False,
        description=(
            "Declarative mode: apply the ConfigMap's offsets once whenever their content changes (content hash "
            "recorded in status.appliedOffsets), stopping and resuming the connector around the change. "
            "Re-applying the same content does nothing."
        ),
    )

    @field_validator("to_timestamp")
    @classmethod
    def _rfc3339(cls, value: str | None) -> str | None:
        if value is not None and parse_rfc3339(value) is None:
            raise ValueError(f"{value!r} is not an RFC 3339 time with a zone, e.g. 2026-11-21T10:00:00Z")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> AlterOffsetsSpec:
        if (self.from_config_map is None) == (self.to_timestamp is None):
            raise ValueError("set exactly one of fromConfigMap and toTimestamp")
        if self.apply_on_change and self.from_config_map is None:
            raise ValueError("applyOnChange needs fromConfigMap")
        return self


class OffsetsPolicySpec(Model):
    """How offsets changes treat a connector that is not STOPPED."""

    stop_connector: bool = Field(
        False,
        description=(
            "alter/reset/restore on a running or paused connector: stop it, wait for STOPPED, back up, change "
            "the offsets, then bring it back to spec.state. Without it such requests are refused."
        ),
    )


class AutoRestartStatus(StatusModel):
    """Auto-restarts so far; the count resets once the connector stays healthy."""

    count: int = Field(0, description="Restarts made since the connector was last healthy.")
    last_restart_time: str | None = Field(None, description="When the last restart was made (RFC 3339).")


class OffsetsOperationStatus(StatusModel):
    """The outcome of the last offsets request (list, alter, reset or restore)."""

    operation: str = Field(description="list, alter, reset or restore.")
    result: Literal["Succeeded", "Failed"] = Field(description="Succeeded or Failed.")
    reason: str = Field("", description="Why it failed (the condition reason), empty on success.")
    time: str = Field(description="When it finished (RFC 3339).")
    message: str = Field("", description="What was done, or Connect's error verbatim (capped).")
    request: str | None = Field(None, description="Fingerprint of the request this result belongs to.")
    request_id: str | None = Field(None, description="The connect-offsets.io/request-id of the request, if any.")
    request_key: str | None = Field(
        None,
        description="Identity of the annotations that asked for it (not of the spec or a ConfigMap): while they "
        "stay, the request is never carried out again.",
    )
    instance: str | None = Field(
        None,
        description="Identifies this handling of the request (the resourceVersion the outcome was decided at). "
        "Written into the connect-offsets.io/last-handled annotation with the removal of the request's "
        "annotations: an interrupted removal is finished without running the request again, and a new "
        "identical request runs.",
    )
    backup: str | None = Field(None, description="ConfigMap holding the offsets from before this change.")
    dry_run: bool | None = Field(None, description="True: a dry run; nothing was changed.")


class PendingOffsetsOperation(StatusModel):
    """An offsets change in progress with stop -> change -> resume; survives operator restarts."""

    operation: str = Field(description="alter, reset or restore.")
    step: Literal["Stopping", "Changing", "Resuming"] = Field(
        description="Stopping: waiting for STOPPED; Changing: backup and change; Resuming: back to spec.state."
    )
    source: Literal["annotation", "applyOnChange"] = Field(
        "annotation", description="What asked for the change: the annotation or spec.alterOffsets.applyOnChange."
    )
    request: str | None = Field(None, description="Fingerprint of the request being carried out.")
    request_id: str | None = Field(None, description="The connect-offsets.io/request-id of the request, if any.")
    request_key: str | None = Field(None, description="Identity of the annotations that asked for it.")
    content_hash: str | None = Field(None, description="applyOnChange: hash of the offsets being applied.")
    restore_from: str | None = Field(None, description="restore: the backup chosen when the request started.")
    seek_to: str | None = Field(None, description="alter by timestamp: the RFC 3339 time sought.")
    pinned: str | None = Field(
        None,
        description="alter-from-connector: the ConfigMap holding the source's offsets as read at the first attempt.",
    )
    backup: str | None = Field(None, description="Backup taken before the change (set once it exists).")
    started: str = Field(description="When the request started (RFC 3339).")
    result: Literal["Succeeded", "Failed"] | None = Field(None, description="Outcome of the change, once made.")
    reason: str = Field("", description="Why the change failed (the condition reason), once made.")
    message: str = Field("", description="The change's outcome message, reported once the connector is resumed.")


class AppliedOffsetsStatus(StatusModel):
    """applyOnChange: the ConfigMap content last applied, so the same content is never applied twice."""

    config_map: str = Field(description="The ConfigMap applied.")
    content_hash: str = Field(description="Hash of the offsets applied.")
    time: str = Field(description="When they were applied (RFC 3339).")
    result: Literal["Succeeded", "Failed", "Listed", "Adopted"] = Field(
        description="Succeeded or Failed: applied (by applyOnChange or an alter request); Listed: the operator's "
        "own list wrote this content, which is never applied; Adopted: the content found when applyOnChange was "
        "turned on, which is not applied (edit the ConfigMap, or annotate alter, to apply it)."
    )


OFFSETS_PROGRESS = (
    "Progress of an offsets change on a STOPPED connector: its request and backup, and for a chunked alter "
    "the chunks applied of total; a retry or a restarted operator continues from here."
)


class OffsetsProgressStatus(StatusModel):
    """Progress of an offsets change on a STOPPED connector, written before each step.

    Why in status: a retry or a restarted operator must continue the same request, reusing its
    backup (a new backup would hold half-changed offsets) and, for a chunked alter, skipping the
    chunks Connect already applied. The kubectl plugin reads it for its progress line.
    """

    request: str | None = Field(None, description="Fingerprint of the request being carried out.")
    request_key: str | None = Field(None, description="Identity of the annotations that asked for it.")
    restore_from: str | None = Field(
        None,
        description="restore: the backup chosen at the first attempt; every retry restores this one (never a "
        "backup the same request wrote), and retention never prunes it.",
    )
    backup: str | None = Field(None, description="The backup taken before the change; a retry reuses it.")
    pinned: str | None = Field(
        None,
        description="alter-from-connector: the ConfigMap holding the source connector's offsets as read at the first "
        "attempt; every retry applies this copy, never a newer position of the source.",
    )
    fingerprint: str | None = Field(
        None, description="Chunked alter: fingerprint of its chunk plan (a changed document starts over)."
    )
    applied_chunks: int | None = Field(None, description="Chunked alter: PATCH requests Connect applied so far.")
    total_chunks: int | None = Field(None, description="Chunked alter: PATCH requests in all.")
    applied_partitions: int | None = Field(None, description="Chunked alter: partitions applied so far.")
    total_partitions: int | None = Field(None, description="Chunked alter: partitions in all.")
    failed_chunk: int | None = Field(None, description="Chunked alter: the chunk (1-based) Connect refused.")
