"""The Kubernetes side: credentials as kubectl finds them, and API errors as one line for the user."""

from __future__ import annotations

import os
from pathlib import Path

from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError
from connect_offsets.tools.kubectl.common import EXIT_KUBE, PluginError

# --- the Kubernetes side -----------------------------------------------------------------


def is_conflict(error: KubernetesError) -> bool:
    return error.status == 409


def kube_error(error: KubernetesError) -> PluginError:
    text = str(error)
    hint = ""
    if error.status == 403:
        hint = " (your Kubernetes user lacks a permission: see the README section 'kubectl plugin' for the RBAC rules)"
    elif error.status == 401:
        hint = " (the credentials in your kubeconfig were refused)"
    return PluginError(f"Kubernetes API: {text}{hint}", EXIT_KUBE)


def load_kube(kubeconfig: str | None, context: str | None) -> tuple[KubernetesApi, str]:
    """Credentials as kubectl finds them; returns the API and the context's default namespace."""
    import urllib3
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    in_cluster = (
        kubeconfig is None
        and context is None
        and not os.environ.get("KUBECONFIG")
        and not os.path.exists(os.path.expanduser("~/.kube/config"))
        and os.environ.get("KUBERNETES_SERVICE_HOST")
    )
    try:
        if in_cluster:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            api_client = client.ApiClient()
            namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
            namespace = Path(namespace_file).read_text().strip() if os.path.exists(namespace_file) else "default"
        else:
            api_client = config.new_client_from_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call]
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
            chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
            namespace = ((chosen or {}).get("context") or {}).get("namespace") or "default"
    except (ConfigException, OSError, TypeError, ValueError) as error:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise PluginError(f"cannot load the kubeconfig ({where}): {error}", EXIT_KUBE) from error
    if not api_client.configuration.verify_ssl:
        # The kubeconfig asked for insecure-skip-tls-verify; kubectl does not warn on every call either.
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    return KubernetesApi(api_client), namespace
