"""Write pipeline documents into ConfigMaps, where the operator's alter flow reads them.

Why: the operator applies offsets from key ``offsets.json`` of the ConfigMap named by
``spec.alterOffsets.fromConfigMap.name``. Writing the as-of answer there directly turns "rewind the
connector to 14:02" into: pipeline ``as-of --to-configmap``, stop the connector, annotate ``alter``.
Other keys, labels and owners of an existing ConfigMap are kept (it may be the one ``list`` fills).
"""

from __future__ import annotations

import json
import os
from typing import Any

from kubernetes import client, config

from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.vocabulary import API_GROUP, OFFSETS_KEY

LABEL = f"{API_GROUP}/generated-by"


def _kubeconfig() -> str | None:
    """``$KUBECONFIG`` as it is now (the client library reads it once, at import)."""
    return os.environ.get("KUBECONFIG") or None


def api_client() -> client.ApiClient:
    """In-cluster credentials in a Pod, else the current ``$KUBECONFIG`` / ``~/.kube/config``."""
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config(config_file=_kubeconfig())  # type: ignore[no-untyped-call]
    return client.ApiClient()


def default_namespace() -> str:
    """The kubeconfig context's namespace (or the Pod's, in-cluster), else ``default``."""
    try:
        _, context = config.list_kube_config_contexts(config_file=_kubeconfig())  # type: ignore[no-untyped-call]
        namespace = (context or {}).get("context", {}).get("namespace")
        if namespace:
            return str(namespace)
    except (config.ConfigException, OSError):
        pass
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as handle:
            return handle.read().strip() or "default"
    except OSError:
        return "default"


async def write_offsets_configmaps(
    namespace: str | None,
    names: dict[str, str],
    documents: dict[str, dict[str, Any]],
    annotations: dict[str, str],
) -> list[str]:
    """Create or update ``names[connector]`` with the connector's document; returns ``ns/name`` written."""
    ns = namespace or default_namespace()
    api = KubernetesApi(api_client())
    written = []
    for connector, name in names.items():
        text = json.dumps(documents[connector], indent=2, ensure_ascii=False) + "\n"
        meta_annotations = {**annotations, f"{API_GROUP}/connector": connector}
        current = await api.get_configmap(ns, name)
        if current is None:
            await api.create_configmap(
                ns,
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "labels": {LABEL: "pipeline"},
                        "annotations": meta_annotations,
                    },
                    "data": {OFFSETS_KEY: text},
                },
            )
        else:
            await api.patch_configmap(
                ns,
                name,
                {
                    "metadata": {"labels": {LABEL: "pipeline"}, "annotations": meta_annotations},
                    "data": {OFFSETS_KEY: text},
                },
                resource_version=current.resource_version,
            )
        written.append(f"{ns}/{name}")
    return written
