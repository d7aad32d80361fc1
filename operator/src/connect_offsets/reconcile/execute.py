"""Carry out a plan's actions in order, each by the module that owns its kind.

Why separate: the dispatch is the one place that shows what a plan can ask and in which order it
happens (a refused request first, then each action); the steps themselves live in
``offsets_changes``, ``initial`` and ``lifecycle``, and the pass around it in ``runner``.
"""

from __future__ import annotations

from connect_offsets.faults import fault_point
from connect_offsets.planning import Action, Plan
from connect_offsets.planning.outcomes import OFFSETS_OPS
from connect_offsets.reconcile.context import Pass, StepUnavailable
from connect_offsets.reconcile.initial import initial_offsets
from connect_offsets.reconcile.lifecycle import lifecycle_action
from connect_offsets.reconcile.offsets_changes import (
    direct_change,
    dry_run,
    finish_change,
    report_refusal,
    staged_change,
)
from connect_offsets.reconcile.pins import pin_copy, pin_document, pin_initial


async def execute(p: Pass, plan: Plan) -> None:
    """Run the plan's actions; stops early when a direct offsets change failed for good."""
    await report_refusal(p, plan)
    if p.health is not None and p.health[0] != "healthy" and any(_changes_offsets(a) for a in plan.actions):
        # The worker itself says it cannot serve requests now: an offsets change waits (the
        # resource is checked again with back-off, 2 s ... 60 s), rather than being tried and
        # half-done against a worker that is starting or stuck.
        raise StepUnavailable(
            f"offsets changes wait: the Connect worker reports {p.health[0]} at GET /health: {p.health[1][:512]}",
            reason="ConnectWorkerNotReady",
        )
    if any(_begins_change(action) for action in plan.actions):
        await p.confirm_request()  # planned from the cache: the request must still stand
    for action in plan.actions:
        if action.kind in OFFSETS_OPS and action.pending is not None:
            await staged_change(p, action)
        elif action.kind in OFFSETS_OPS:
            if not await direct_change(p, plan, action):
                return
        elif action.kind == "dry_run_offsets":
            await dry_run(p, plan, action)
        elif action.kind == "begin_offsets_change":
            # The document an alter applies is pinned first, and the intent names the pin.
            pending = await pin_document(p, plan, action)
            if pending is None:
                return  # the pin was refused: the request failed, the connector is not stopped
            # The intent is in status before the connector is touched: a restarted operator
            # finds it and finishes the change (or resumes the connector), never forgets it.
            await p.sink.pending(pending)
            fault_point("after-intent")
            p.event(
                "Normal",
                "OffsetsChangeStarted",
                f"{p.target.name}: stopping the connector for {pending.operation}",
            )
        elif action.kind == "update_pending":
            assert action.pending is not None
            await p.sink.pending(action.pending)
        elif action.kind == "finish_offsets_change":
            await finish_change(p, action)
        elif action.kind in ("create_with_initial_offsets", "apply_initial_offsets"):
            await initial_offsets(p, plan, action)
        elif action.kind == "pin_offsets":
            await pin_copy(p, plan, action)
        elif action.kind == "pin_initial_offsets":
            await pin_initial(p, action)
        elif action.kind in ("remove_annotation", "mark_handled"):
            # Done after the status write (TargetRunner.finish_requests): once the annotation is
            # gone, the status already tells how the request ended.
            p.sink.removals.append(action)
        else:
            await lifecycle_action(p, action)
            if action.kind == "stop" and plan.hold_stopped:
                fault_point("after-stop")


def _changes_offsets(action: Action) -> bool:
    """An action of an offsets change (not a list, not a dry run): begins, continues or makes it."""
    if action.kind in (
        "begin_offsets_change",
        "update_pending",
        "create_with_initial_offsets",
        "apply_initial_offsets",
    ):
        return True
    return action.kind in OFFSETS_OPS and action.kind != "list_offsets"


def _begins_change(action: Action) -> bool:
    """An action that starts changing offsets for a request read from annotations: a direct
    alter, reset or restore, or the intent that begins stop -> change -> resume. (A pending
    change continues from our own status, which the request was confirmed for when it began.)"""
    if action.kind == "begin_offsets_change":
        return True
    return action.kind in OFFSETS_OPS and action.pending is None and action.kind != "list_offsets"
