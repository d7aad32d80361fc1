"""The plan's connector lifecycle actions: create, update config, stop, pause, resume, restart.

Why separate: each is one Connect request plus its Event; none touches offsets. The offsets
requests (``offsets_changes``) and initial offsets (``initial``) have their own, longer rules.
"""

from __future__ import annotations

from connect_offsets import metrics
from connect_offsets.faults import fault_point
from connect_offsets.models.crds import PLUGIN_VERSION_KEY, KafkaConnectorStatus, PluginUpgradeStatus
from connect_offsets.planning import Action
from connect_offsets.reconcile.backups import backup
from connect_offsets.reconcile.context import Pass
from connect_offsets.reconcile.owners import record_owner
from connect_offsets.vocabulary import iso


async def lifecycle_action(p: Pass, action: Action) -> None:
    client, target = p.client, p.target
    name = target.name
    if action.kind == "create":
        assert action.config is not None
        await client.create_connector(name, action.config, initial_state=action.initial_state)
        if action.initial_state is None and target.state.value != "running":
            # Workers before 3.7 have no initial_state: create, then move to the desired state.
            if target.state.value == "stopped":
                await client.stop_connector(name)
            else:
                await client.pause_connector(name)
        p.event("Normal", "ConnectorCreated", f"Created connector {name} in Connect")
        await record_owner(p, name)
    elif action.kind == "update_config":
        assert action.config is not None
        upgrade = await _plugin_upgrade(p, action.config)
        await client.put_connector_config(name, action.config)
        p.event("Normal", "ConnectorConfigUpdated", f"Updated the config of connector {name}")
        if upgrade is not None:
            p.event(
                "Normal",
                "PluginVersionChanged",
                f"{name}: {PLUGIN_VERSION_KEY} {upgrade.from_version or '(default)'} -> "
                f"{upgrade.to_version or '(default)'}; its offsets were backed up first in ConfigMap {upgrade.backup}",
            )
    elif action.kind == "stop":
        await client.stop_connector(name)
    elif action.kind == "pause":
        if target.pending is not None:
            fault_point("before-resume")
        await client.pause_connector(name)
    elif action.kind == "resume":
        if target.pending is not None:
            fault_point("before-resume")
        await client.resume_connector(name)
    elif action.kind == "restart":
        await client.restart_connector(name, include_tasks=action.include_tasks, only_failed=action.only_failed)
        reason = "ConnectorAutoRestarted" if action.automatic else "ConnectorRestarted"
        if action.automatic:
            metrics.AUTO_RESTARTS.labels(p.kind).inc()
        p.event(
            "Normal",
            reason,
            f"Restarted connector {name} (includeTasks={action.include_tasks}, onlyFailed={action.only_failed})",
        )
    elif action.kind == "restart_task":
        assert action.task_id is not None
        await client.restart_task(name, action.task_id)
        p.event("Normal", "TaskRestarted", f"Restarted task {action.task_id} of {name}")


async def _plugin_upgrade(p: Pass, desired: dict[str, str]) -> PluginUpgradeStatus | None:
    """A config change that changes ``connector.plugin.version`` (spec.version) is an upgrade (or a
    downgrade) of the code that reads the offsets: back them up first, once, and record it in
    ``status.pluginUpgrade`` before the new config is sent. A retry after a crash finds the record
    for the same change and reuses its backup. None: the version does not change."""
    current = await p.client.get_connector_config(p.target.name)
    if current is None:
        return None
    before, after = current.get(PLUGIN_VERSION_KEY), desired.get(PLUGIN_VERSION_KEY)
    if before == after:
        return None
    recorded = KafkaConnectorStatus.model_validate(p.body.get("status") or {}).plugin_upgrade
    if recorded is not None and (recorded.from_version, recorded.to_version) == (before, after) and recorded.backup:
        return recorded
    taken = await backup(p, "plugin-upgrade")
    upgrade = PluginUpgradeStatus(from_version=before, to_version=after, backup=taken, time=iso(p.now))
    await p.sink.fields(KafkaConnectorStatus(plugin_upgrade=upgrade))
    return upgrade
