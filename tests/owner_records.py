"""An in-memory ConfigMap store with just the calls owner records make (``reconcile/owners.py``):
shared by the owner records' unit tests and the bypass corpus' forged-record rows."""

from __future__ import annotations

from typing import Any

from connect_offsets.clients.kubernetes import ConfigMapData, ConfigMapMeta, KubernetesUnavailable

__all__ = ["RecordsKube"]


class RecordsKube:
    """ConfigMaps by (namespace, name): create (409 when it exists), merge-patch labels and
    annotations, get, and list metadata by ``key=value`` or ``key in (v1,v2)``."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}

    async def create_configmap(self, namespace: str, body: dict[str, Any]) -> None:
        key = (namespace, body["metadata"]["name"])
        if key in self.objects:
            raise KubernetesUnavailable("409 already exists", 409)
        self.objects[key] = {"metadata": {**body["metadata"], "namespace": namespace}}

    async def patch_configmap(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """A JSON merge patch of labels and annotations (None deletes a key)."""
        meta = self.objects[(namespace, name)]["metadata"]
        for part in ("labels", "annotations"):
            meta.setdefault(part, {}).update(patch["metadata"].get(part, {}))
            meta[part] = {k: v for k, v in meta[part].items() if v is not None}

    async def get_configmap(self, namespace: str, name: str) -> ConfigMapData | None:
        obj = self.objects.get((namespace, name))
        if obj is None:
            return None
        meta = obj["metadata"]
        return ConfigMapData(name, "1", {}, {}, dict(meta.get("labels", {})), [], "", dict(meta["annotations"]))

    async def list_configmap_metadata(self, namespace: str | None, label_selector: str) -> list[ConfigMapMeta]:
        if " in (" in label_selector:
            key, _, rest = label_selector.partition(" in (")
            values = set(rest.rstrip(")").split(","))
        else:
            key, _, value = label_selector.partition("=")
            values = {value}
        return [
            ConfigMapMeta(name, "", o["metadata"]["labels"], o["metadata"]["annotations"], ns)
            for (ns, name), o in self.objects.items()
            if (namespace is None or ns == namespace) and o["metadata"].get("labels", {}).get(key) in values
        ]
