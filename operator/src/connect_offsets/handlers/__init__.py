"""kopf handlers: the only modules that import kopf.

Importing this package registers every handler, so ``kopf run -m connect_offsets.handlers`` (or
the ``connect-offsets-operator`` entry point) runs the whole operator. Handlers stay thin: they
turn kopf's callbacks into calls of ``connect_offsets.reconcile`` and its outcomes into kopf's retry
semantics.

Why event handlers and a work queue rather than create/update handlers or a daemon per resource:
a reconcile is level-based and may need to look again a few seconds later (Connect's status lags
a stop), after a back-off (Connect down), or on the drift interval; and a daemon per resource
cost memory and bounded nothing. Watch events only put a resource's key into the controller's work
queue (``connect_offsets.controller``), whose bounded workers run the passes. kopf keeps what it is
good at: the watch streams. Deletion (our finalizer) and which replica works on what (Leases) are
the controller's: kopf's finalizer and peering could not be tied to a Lease (issue 44).
"""

from connect_offsets.handlers import clusters, connectors, mirrormaker2, startup

__all__ = ["clusters", "connectors", "mirrormaker2", "startup"]
