"""The Kubernetes side: credentials as kubectl finds them, kubectl's connection flags, and API errors
as one line for the user.

kubectl's ``--request-timeout`` and ``--as``/``--as-group`` map onto the kubernetes client as far as
it allows: the timeout becomes the default ``_request_timeout`` of every call (urllib3's timeout
for one attempt; the client's few retries of a refused connection come on top), impersonation the
``Impersonate-User`` / ``Impersonate-Group`` headers. One ``--as-group`` only: the client sends each
header once. ``as``/``as-groups`` written in the kubeconfig's user entry are not read (kubectl reads
them; the Python client does not).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError
from connect_offsets.tools.kubectl.common import EXIT_KUBE, PluginError


@dataclass(frozen=True)
class Connection:
    """How to reach the API server: kubectl's global flags."""

    kubeconfig: str | None = None
    context: str | None = None
    #: Seconds; 0 waits as long as the server and the OS let it (kubectl's default, ``--request-timeout 0``).
    request_timeout: float = 0.0
    as_user: str | None = None
    as_group: str | None = None


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


def api_host(kube: KubernetesApi) -> str:
    """The API server's address, for messages."""
    return str(kube.core.api_client.configuration.host or "")


def configure(api_client: Any, connection: Connection) -> None:
    """Apply ``--request-timeout`` and ``--as``/``--as-group`` to a kubernetes ``ApiClient``."""
    if connection.as_user:
        api_client.set_default_header("Impersonate-User", connection.as_user)
    if connection.as_group:
        api_client.set_default_header("Impersonate-Group", connection.as_group)
    if connection.request_timeout > 0:
        rest = api_client.rest_client
        send = rest.request
        default = connection.request_timeout

        def request(*args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("_request_timeout"):
                kwargs["_request_timeout"] = default
            return send(*args, **kwargs)

        rest.request = request


def load_kube(connection: Connection) -> tuple[KubernetesApi, str]:
    """Credentials as kubectl finds them; returns the API and the context's default namespace."""
    import urllib3
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    kubeconfig, context = connection.kubeconfig, connection.context
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
    configure(api_client, connection)
    return KubernetesApi(api_client), namespace
