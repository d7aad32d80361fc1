"""The reconcile layer: everything that does I/O to bring one resource to what it asks for.

Driven by the controller's work queue (``connect_offsets.controller``) and importing no kopf, so
the same code runs in tests and tools. One reconcile of a KafkaConnector:

1. read the resource fresh from the API (never act on a stale body: an annotation already
   handled must not run twice) — ``status.load_resource``;
2. resolve its ConnectCluster into a long-lived Connect client — ``clusters.ClusterRegistry``;
3. observe the connector in Connect (config, status, and the ConfigMap an alter reads), let the
   pure planner (``connect_offsets.planning``) decide, execute its actions in order —
   ``runner.TargetRunner``;
4. write status only if it changed, and record each outcome as an Event — ``status.write_status``.

Errors decide what happens next (``settings.Outcome``): transient ones (Connect unreachable, 5xx,
409) come back with a retry delay; the ones a person must fix are recorded and wait for a change.

The rooms, from the top of the import contract down (pyproject.toml, "Inside reconcile"):
``connectors`` (KafkaConnector), ``mirrormaker2`` (KafkaMirrorMaker2) -> ``runner`` (one pass over
one planned connector), ``group_failover`` (a KafkaMirrorMaker2's consumer-group failovers) ->
``execute`` (the plan's actions in order), ``observe`` (every read the planner needs) ->
``offsets_changes`` (list/alter/reset/restore, staged changes, dry runs), ``initial`` (initial
offsets), ``lifecycle`` (create, stop, resume, restart ...), ``sources`` (where a copy reads its
source) -> ``backups``, ``pins`` (a copy's source kept at its first attempt), ``owners`` (last owner
of a connector name) -> ``context`` (``Pass``, the per-pass context every
step receives) -> ``clusters`` (Connect clients per ConnectCluster, the ConnectCluster reconcile)
-> ``status`` (the one status writer, refusals, Events) -> ``outcomes`` (pure decisions about
results), ``settings`` (environment, ``Outcome``).
"""
