"""The planner: a pure function from (resource, observed Connect state, clock) to actions and conditions.

Why pure: every decision the operator makes about a connector — create it, fix its config, move
it to the desired state, restart it, run an offsets request or refuse one — is taken here, with no
I/O, so it is unit-tested exhaustively and fuzzed. The service gathers the observed state, calls
``plan``, executes the actions in order and writes the status the plan describes.

Offsets requests are level-based but run once: a request whose annotations already have a terminal
outcome in status is never carried out again (only its annotations are removed, if that was
interrupted); a request that failed permanently waits until its inputs change (its fingerprint:
operation, annotation value, resource generation, ConfigMap resourceVersion).

The package, one concern per module (import-linter keeps the arrows in this order): ``lifecycle``
(``plan_target``, the entry point: existence, config, state, restarts) -> ``offsets_requests``,
``initial_offsets``, ``failover`` (MirrorMaker 2's translation of a consumer group) and
``failover_requests`` (a KafkaMirrorMaker2's group failovers, exactly once) -> ``mirrors``,
``binding`` and ``copies`` (who may copy a connector's offsets, and which document a copy applies)
-> ``targets`` (``ConnectorTarget``, fingerprints)
-> ``plan`` (``Observed``, ``Plan``, ``Action``: what the planner is shown and returns). ``outcomes``
(how a step's result is reported) is read by the reconcile layer only and is not re-exported. The
names below are re-exported so there is one import path for the rest of the package's users.
"""

from connect_offsets.planning.binding import (
    BindingRefusal,
    check_binding,
    connector_name_prefix,
    leftovers_owned_elsewhere,
)
from connect_offsets.planning.lifecycle import (
    plan_connector,
    plan_target,
)
from connect_offsets.planning.mirrors import (
    BYTES,
    MirrorClusterIds,
    MirrorPlan,
    mirror_configmap_key,
    mirror_connector_name,
    mirror_direction,
    mirror_targets,
    producer_override,
)
from connect_offsets.planning.plan import (
    CONNECT_READ_ONLY,
    HANDLED_REQUEST_IDS,
    SETTLE_DELAY_S,
    Action,
    ConditionSpec,
    Observed,
    OffsetsConfigMap,
    Plan,
    RestoreSource,
    SeekOffsets,
    SourceOffsets,
)
from connect_offsets.planning.targets import (
    ConnectorTarget,
    auto_restart_backoff,
    content_hash,
    desired_config,
    offsets_request_fingerprint,
    request_key,
    target_for_connector,
)

__all__ = [
    "BYTES",
    "CONNECT_READ_ONLY",
    "HANDLED_REQUEST_IDS",
    "SETTLE_DELAY_S",
    "Action",
    "BindingRefusal",
    "ConditionSpec",
    "ConnectorTarget",
    "MirrorClusterIds",
    "MirrorPlan",
    "Observed",
    "OffsetsConfigMap",
    "Plan",
    "RestoreSource",
    "SeekOffsets",
    "SourceOffsets",
    "auto_restart_backoff",
    "check_binding",
    "connector_name_prefix",
    "content_hash",
    "desired_config",
    "leftovers_owned_elsewhere",
    "mirror_configmap_key",
    "mirror_connector_name",
    "mirror_direction",
    "mirror_targets",
    "offsets_request_fingerprint",
    "plan_connector",
    "plan_target",
    "producer_override",
    "request_key",
    "target_for_connector",
]
