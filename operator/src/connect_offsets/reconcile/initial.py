"""Initial offsets: create a connector STOPPED, wipe leftovers of an earlier same-named connector
(only this namespace's), PATCH the requested offsets, then let the plan move it to spec.state.

Why separate: unlike the offsets requests on an existing connector, a failure here deletes the
half-created connector, and which errors count as passing differs (see ``_transient_for_initial``).
"""

from __future__ import annotations

import asyncio
import time

from connect_offsets.clients.connect import ConnectClient, ConnectConflict, ConnectError, ConnectHTTPError
from connect_offsets.faults import fault_point
from connect_offsets.models.crds import InitialOffsetsStatus, KafkaConnectorStatus
from connect_offsets.offsets import parse_offsets_document, parse_offsets_obj
from connect_offsets.planning import Action, Plan
from connect_offsets.planning.outcomes import initial_offsets_in_place
from connect_offsets.reconcile.context import OffsetsRequestInvalid, Pass
from connect_offsets.reconcile.owners import check_leftovers_owner, record_owner
from connect_offsets.vocabulary import iso


def _transient_for_initial(error: ConnectHTTPError) -> bool:
    """Initial offsets treat only rebalances, rate limits and timeouts as passing: any other error
    (Connect answers 500 for offsets Kafka rejects) would otherwise keep a half-created connector
    STOPPED forever, so it fails the step and cleans up."""
    return (
        isinstance(error, ConnectConflict)
        or error.status_code == 429
        or getattr(error, "is_request_timeout", False)
        or getattr(error, "is_rebalance", False)
    )


async def initial_offsets(p: Pass, plan: Plan, action: Action) -> None:
    """Create STOPPED, wipe leftovers of an earlier same-named connector, PATCH, record.

    Any failure deletes the half-created connector and names the failed step; transient
    errors propagate, and the recorded ``Creating`` step makes the next pass finish the job.
    """
    client, name = p.client, p.target.name
    assert action.configmap is not None
    configmap, now = action.configmap, iso(p.now)
    current_step = "validate"
    created = action.kind == "apply_initial_offsets"
    try:
        if action.kind == "create_with_initial_offsets":
            assert action.config is not None
            problems = await client.validate_config(action.config)
            if problems:
                raise OffsetsRequestInvalid("InvalidConfig", "Connect rejects the config: " + "; ".join(problems))
            await p.sink.fields(
                KafkaConnectorStatus(
                    initial_offsets=InitialOffsetsStatus(
                        config_map=configmap, step="Creating", time=now, source=action.source
                    )
                )
            )
            current_step = "create"
            await client.create_connector(name, action.config, initial_state="STOPPED")
            created = True
            fault_point("initial-after-create")
        if action.offsets_json is None:
            raise OffsetsRequestInvalid("InvalidOffsets", action.operation or "initial offsets invalid")
        requested = parse_offsets_document(action.offsets_json)
        current_step = "wait-for-stopped"
        await _wait_stopped(client, name)
        current_step = "wipe"
        current = parse_offsets_obj(await client.get_offsets(name), allow_empty=True)
        wiped = _wipe_recorded(p, configmap)
        if initial_offsets_in_place(current, requested):
            message = f"{wiped}initial offsets already in place (applied before the operator restarted)"
        else:
            if len(current):
                await check_leftovers_owner(p, name, len(current))
                await client.reset_offsets(name)
                wiped = f"removed {len(current)} offset(s) left by an earlier connector named {name}; "
                # Recorded at once: a pass cut short after the wipe (a rebalance answering the
                # PATCH) is finished by one that finds nothing left to remove, and would not say it.
                await p.sink.fields(
                    KafkaConnectorStatus(
                        initial_offsets=InitialOffsetsStatus(
                            config_map=configmap, step="Creating", time=now, source=action.source, message=wiped
                        )
                    )
                )
            current_step = "patch"
            answer = await client.alter_offsets(name, requested.to_json_obj())
            fault_point("initial-after-patch")
            where = f"ConfigMap {action.configmap}"
            if action.source is not None:
                where = f"{action.source} (pinned in ConfigMap {action.configmap})"
            message = f"{wiped}applied {len(requested)} initial offset(s) from {where}: {answer}"
    except (ConnectHTTPError, OffsetsRequestInvalid, TimeoutError) as error:
        if isinstance(error, ConnectHTTPError) and _transient_for_initial(error):
            raise
        text = (
            f"Connect answered {error.status_code}: {error.message}"
            if isinstance(error, ConnectHTTPError)
            else str(error)
        )
        cleanup = ""
        if created:
            try:
                await client.delete_connector(name)
                cleanup = "; the half-created connector was deleted"
            except ConnectError as delete_error:
                cleanup = f"; deleting the half-created connector failed: {delete_error}"
        full = f"initial offsets failed at step {current_step}: {text}{cleanup}"
        failed = InitialOffsetsStatus(
            config_map=configmap, step="Failed", time=now, request=action.request, message=full, source=action.source
        )
        await p.sink.fields(KafkaConnectorStatus(initial_offsets=failed))
        p.sink.not_ready("InitialOffsetsFailed", full)
        p.event("Warning", "InitialOffsetsFailed", f"{name}: {full}")
        return
    applied = InitialOffsetsStatus(
        config_map=configmap, step="Applied", time=now, message=message, source=action.source
    )
    await p.sink.fields(KafkaConnectorStatus(initial_offsets=applied))
    # Recorded once the leftovers were judged: before, this very record would be the newest.
    await record_owner(p, name)
    p.event("Normal", "InitialOffsetsApplied", f"{name}: {message}")
    plan.requeue(1.0)  # now move it to spec.state


def _wipe_recorded(p: Pass, configmap: str) -> str:
    """What an earlier pass of this same request already wiped (its ``Creating`` status), or ""."""
    recorded = KafkaConnectorStatus.model_validate(p.body.get("status") or {}).initial_offsets
    if (
        recorded is not None
        and recorded.step == "Creating"
        and recorded.config_map == configmap
        and recorded.message.startswith("removed ")
    ):
        return recorded.message
    return ""


async def _wait_stopped(client: ConnectClient, name: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        status = await client.get_connector_status(name)
        if status is not None and status.is_stopped:
            return
        if time.monotonic() > deadline:
            state = status.state if status else "absent"
            raise TimeoutError(f"connector still {state} after {timeout:.0f}s; expected STOPPED with no tasks")
        await asyncio.sleep(0.5)
