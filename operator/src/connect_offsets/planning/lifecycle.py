"""The entry point ``plan_target``: the connector's existence, config, state, readiness and
auto-restarts; it hands offsets requests to ``offsets_requests`` and initial offsets to
``initial_offsets``. Why here: the order in which those run is the one lifecycle decision.
"""

from __future__ import annotations

from connect_offsets.models.crds import (
    AutoRestartStatus,
    ConnectorState,
    KafkaConnectorResource,
)
from connect_offsets.planning.initial_offsets import initial_offsets_due, plan_initial, plan_initial_resume
from connect_offsets.planning.offsets_requests import plan_annotation_conditions, plan_offsets
from connect_offsets.planning.plan import (
    RESTART_VALUES,
    SETTLE_DELAY_S,
    Action,
    ConditionSpec,
    Observed,
    Plan,
    state_change_settling,
)
from connect_offsets.planning.targets import (
    CONNECT_STATE,
    ConnectorTarget,
    auto_restart_backoff,
    parse_status_time,
    parse_task_id,
    target_config,
    target_for_connector,
)
from connect_offsets.vocabulary import (
    ANNOTATION_ADOPT,
    ANNOTATION_OFFSETS,
    ANNOTATION_RESTART,
    ANNOTATION_RESTART_TASK,
    MAX_QUOTED_TEXT,
    OFFSETS_OPERATIONS,
    OWNER_CONFIG_KEY,
    iso,
)


def plan_connector(resource: KafkaConnectorResource, observed: Observed) -> Plan:
    """Decide what to do for one KafkaConnector. Pure: no I/O, no clock but ``observed.now``."""
    return plan_target(target_for_connector(resource), observed)


def plan_target(target: ConnectorTarget, observed: Observed) -> Plan:
    """Decide what to do for one connector. Pure: no I/O, no clock but ``observed.now``."""
    plan = Plan()
    annotations = target.annotations
    if observed.cluster_error is not None:
        plan.conditions.append(ConditionSpec("Ready", "False", observed.cluster_error_reason, observed.cluster_error))
        return plan

    desired = target_config(target)
    spec_state = target.state
    if observed.config is None:
        if initial_offsets_due(target):
            plan_initial(target, observed, desired, plan)
        else:
            initial = CONNECT_STATE[spec_state] if observed.supports_initial_state else None
            plan.actions.append(Action("create", config=desired, initial_state=initial))
            plan.conditions.append(ConditionSpec("Ready", "False", "Creating", "Creating the connector in Connect"))
            plan.requeue(SETTLE_DELAY_S)
        plan_annotation_conditions(target, plan)
        return plan

    owner = observed.config.get(OWNER_CONFIG_KEY)
    # Adopt takes over only a connector nobody here owns (created by hand, by another tool). A
    # connector that names another resource as owner stays that resource's whatever the
    # annotation says: on a shared Connect cluster the other owner may be another tenant, and
    # adopting would let this resource reset or rewrite that tenant's offsets.
    if owner != target.owner and (owner or annotations.get(ANNOTATION_ADOPT) != "true"):
        if owner:
            hint = (
                f"the {ANNOTATION_ADOPT} annotation applies only to connectors without an owner; "
                f"delete {owner} (which deletes the connector) or rename this resource"
            )
            who = f"by {owner}"
        else:
            hint = (
                f"rename this resource, or annotate it with {ANNOTATION_ADOPT}=true to take the existing connector over"
            )
            who = "by something other than this operator"
        plan.conditions.append(
            ConditionSpec(
                "Ready",
                "False",
                "ConnectorOwnedElsewhere",
                f"Connector {target.name} already exists in Connect, managed {who}. Connector "
                f"names are global on a Connect cluster; {hint}.",
            )
        )
        return plan

    config_pending = observed.config != desired
    if config_pending:
        plan.actions.append(Action("update_config", config=desired))
        plan.requeue(SETTLE_DELAY_S)

    if target.initial_status is not None and target.initial_status.step == "Creating" and target.initial_configmap:
        # Created STOPPED by an earlier pass (or an operator that died) that did not finish.
        plan_initial_resume(target, observed, plan)
    elif config_pending:
        # Offsets wait for the new config: validating against the old one would refuse (or apply)
        # a request meant for the new one. Strimzi skips offsets in such a pass as well.
        if target.pending is not None:
            plan.hold_stopped = "an offsets change is in progress" if target.pending.step != "Resuming" else None
        if annotations.get(ANNOTATION_OFFSETS) in OFFSETS_OPERATIONS:
            plan.offsets_refusal = ("WaitingForConfig", "waiting for Connect to apply the new config", False)
    else:
        # Offsets first: an alter on a STOPPED connector whose spec says running must run before
        # the resume, or Connect would refuse it.
        plan_offsets(target, observed, plan)

    status = observed.status
    observed_state = status.state if status else None
    effective = ConnectorState.STOPPED if plan.hold_stopped else spec_state
    want = CONNECT_STATE[effective]
    state_actions: list[Action] = []
    if observed_state is not None and observed_state != want:
        if effective is ConnectorState.STOPPED:
            state_actions.append(Action("stop"))
        elif effective is ConnectorState.PAUSED:
            if observed_state != "FAILED":  # Connect cannot pause a failed connector
                state_actions.append(Action("pause"))
        elif observed_state in ("PAUSED", "STOPPED"):
            state_actions.append(Action("resume"))
        if state_actions or observed_state in ("UNASSIGNED", "RESTARTING"):
            plan.requeue(SETTLE_DELAY_S)
        # Sent moments ago and Connect's status has not caught up yet: not again (exactly once).
        state_actions = [a for a in state_actions if not _just_sent(observed, a.kind)]
    elif plan.hold_stopped and status is not None and not status.is_stopped:
        plan.requeue(SETTLE_DELAY_S)  # STOPPED but tasks still listed: Connect is winding them down
    plan.actions += state_actions
    _plan_restarts(target, observed, plan)
    _plan_ready(target, observed, plan, effective)
    plan_annotation_conditions(target, plan)
    return plan


def _just_sent(observed: Observed, change: str) -> bool:
    return state_change_settling(change, observed.state_change_sent, observed.inherited_term_age)


def _plan_ready(target: ConnectorTarget, observed: Observed, plan: Plan, effective: ConnectorState) -> None:
    status = observed.status
    want = CONNECT_STATE[effective]
    if plan.hold_stopped:
        # Never leave the connector stopped without saying so.
        plan.conditions.append(
            ConditionSpec(
                "Ready",
                "False",
                "StoppedForOffsetsChange",
                f"Connector held STOPPED while {plan.hold_stopped}; it returns to "
                f"{CONNECT_STATE[target.state]} afterwards",
            )
        )
    elif status is None:
        plan.conditions.append(ConditionSpec("Ready", "False", "StatusUnknown", "Connect reports no status yet"))
        plan.requeue(SETTLE_DELAY_S)
    elif status.any_failed:
        trace = status.first_trace()
        failed = ", ".join(str(t) for t in status.failed_task_ids)
        what = "connector" if status.state == "FAILED" else f"task(s) {failed}"
        message = f"Connect reports the {what} FAILED" + (f": {trace}" if trace else "")
        plan.conditions.append(ConditionSpec("Ready", "False", "ConnectorFailed", message[:MAX_QUOTED_TEXT]))
    elif any(a.kind == "update_config" for a in plan.actions):
        plan.conditions.append(ConditionSpec("Ready", "False", "Progressing", "Applying the new config in Connect"))
    elif status.state != want:
        plan.conditions.append(
            ConditionSpec("Ready", "False", "Progressing", f"Connector is {status.state}; moving it to {want}")
        )
    elif want == "RUNNING" and any(t.state != "RUNNING" for t in status.tasks):
        plan.conditions.append(ConditionSpec("Ready", "False", "TasksNotRunning", "Not every task is RUNNING yet"))
        plan.requeue(SETTLE_DELAY_S)
    else:
        reason = {"RUNNING": "ConnectorRunning", "PAUSED": "ConnectorPaused", "STOPPED": "ConnectorStopped"}[want]
        plan.conditions.append(ConditionSpec("Ready", "True", reason, f"Connector is {want} in Connect"))


def _plan_restarts(target: ConnectorTarget, observed: Observed, plan: Plan) -> None:
    annotations = target.annotations
    status = observed.status
    value = annotations.get(ANNOTATION_RESTART)
    if value is not None:
        key = value.replace(" ", "").lower()
        if key in RESTART_VALUES:
            include_tasks, only_failed = RESTART_VALUES[key]
            plan.actions.append(Action("restart", include_tasks=include_tasks, only_failed=only_failed))
            plan.actions.append(Action("remove_annotation", annotation=ANNOTATION_RESTART, annotation_value=value))
    task = annotations.get(ANNOTATION_RESTART_TASK)
    if task is not None and parse_task_id(task) is not None:
        plan.actions.append(Action("restart_task", task_id=parse_task_id(task)))
        plan.actions.append(Action("remove_annotation", annotation=ANNOTATION_RESTART_TASK, annotation_value=task))

    auto = target.auto_restart
    previous = target.auto_restart_status
    if auto is None or not auto.enabled or status is None:
        return
    last = parse_status_time(previous.last_restart_time)
    if status.any_failed and target.state is not ConnectorState.STOPPED:
        if auto.max_restarts is not None and previous.count >= auto.max_restarts:
            plan.conditions.append(
                ConditionSpec(
                    "AutoRestartExhausted",
                    "True",
                    "MaxRestartsReached",
                    f"Restarted {previous.count} time(s), the limit set in spec.autoRestart.maxRestarts; "
                    "fix the cause and restart with the connect-offsets.io/restart annotation",
                )
            )
            return
        due = last is None or observed.now >= last + auto_restart_backoff(previous.count)
        if due:
            plan.actions.append(Action("restart", include_tasks=True, only_failed=True, automatic=True))
            plan.auto_restart = AutoRestartStatus(count=previous.count + 1, last_restart_time=iso(observed.now))
        else:
            assert last is not None
            wait = (last + auto_restart_backoff(previous.count) - observed.now).total_seconds()
            plan.requeue(max(wait, 1.0))
    elif previous.count and last is not None and observed.now >= last + auto_restart_backoff(previous.count):
        # Healthy for longer than the next back-off: start counting from zero again.
        plan.auto_restart = AutoRestartStatus(count=0, last_restart_time=previous.last_restart_time)
