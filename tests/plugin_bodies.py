"""Bodies the kubectl plugin's unit tests share: a KafkaMirrorMaker2 mirroring east -> west whose
source connector lists to and alters from ConfigMaps (tests may not import each other's modules)."""

from __future__ import annotations

from typing import Any


def east_to_west_spec() -> dict[str, Any]:
    """The spec of the KafkaMirrorMaker2 ``e2w``: one mirror, east -> west."""
    block = {
        "listOffsets": {"toConfigMap": {"name": "mm2-offsets"}},
        "alterOffsets": {"fromConfigMap": {"name": "mm2"}},
    }
    return {
        "clusters": [
            {"alias": "east", "bootstrapServers": "a:9092"},
            {"alias": "west", "bootstrapServers": "b:9092"},
        ],
        "mirrors": [
            {"sourceCluster": "east", "targetCluster": "west", "sourceConnector": block, "checkpointConnector": {}}
        ],
    }
