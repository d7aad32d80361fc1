"""connect-offsets-operator: manage Kafka Connect connectors and their offsets from Kubernetes.

Layers (enforced by import-linter, see ``pyproject.toml``):

* ``handlers``    the process: kopf's start-up and cleanup, our watch streams' wiring, the entry point.
* ``controller``  one work queue, bounded workers, Leases: which pass runs when, on which replica.
* ``reconcile``   I/O for one resource: gather observed state, ask the planner, act, write status.
* ``lag``         MirrorMaker 2 replication lag: measuring, and the decisions about it.
* ``planning``    pure decisions: (spec, annotations, observed state) -> actions and conditions.
* ``clients``     I/O: the Connect REST API, the Kubernetes API, Kafka admin, the offsets ConfigMaps.
* ``models``      pydantic models: our CRDs, Connect documents, offsets documents.
* ``vocabulary``, ``errors``  the shared names and the one error tree; they import nothing of ours.

The CLI reuses models and clients and never imports kopf.
"""

from connect_offsets.vocabulary import API_GROUP, API_VERSION

__version__ = "0.1.0"

__all__ = ["API_GROUP", "API_VERSION", "__version__"]
