"""The operator process: kopf's start-up and shutdown, our watch streams, the entry point. The only
modules that import kopf.

Importing this package registers kopf's start-up and cleanup handlers, so ``kopf run -m
connect_offsets.handlers`` (or the ``connect-offsets-operator`` entry point) runs the whole
operator.

Why watch events and a work queue rather than create/update handlers or a daemon per resource: a
reconcile is level-based and may need to look again a few seconds later (Connect's status lags a
stop), after a back-off (Connect down), or on the drift interval; and a daemon per resource cost
memory and bounded nothing. Watch events only put a resource's key into the controller's work queue
(``connect_offsets.controller``), whose bounded workers run the passes. Deletion (our finalizer) and
which replica works on what (Leases) are the controller's: kopf's finalizer and peering could not be
tied to a Lease (issue 44). The watch streams are ours too (``handlers/watching.py``,
``clients/watch.py``): kopf's per-object tasks made a request wait behind the processing of every
listed resource after a start (issue 45). kopf keeps the process: start-up and cleanup handlers,
signals, the liveness endpoint, logging.
"""

from connect_offsets.handlers import startup, watching

__all__ = ["startup", "watching"]
