"""kopf handlers: the only modules that import kopf.

Importing this package registers every handler, so ``kopf run -m connect_offsets.handlers`` (or
the ``connect-offsets-operator`` entry point) runs the whole operator. Handlers stay thin: they
turn kopf's callbacks into calls of ``connect_offsets.reconcile`` and its outcomes into kopf's retry
semantics.

Why daemons rather than create/update handlers: a reconcile is level-based and may need to look
again a few seconds later (Connect's status lags a stop), after a back-off (Connect down), or on
the drift interval. One daemon per resource is that loop, serialised by construction; watch events
on the resource or on a ConfigMap it references only wake it up.
"""

from connect_offsets.handlers import clusters, connectors, mirrormaker2, startup

__all__ = ["clusters", "connectors", "mirrormaker2", "startup"]
