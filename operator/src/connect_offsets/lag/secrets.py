"""A mirror's ``secretConfig`` values, read once for the MM2 service and the lag monitor.

The service sends them to Connect inside the connectors' config; the lag monitor connects to the
source cluster with them. ``MirrorSecrets`` reuses them for a minute per mirror and spec, so a round
of both costs one read of each Secret per minute at most.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from connect_offsets.clients.credentials import CredentialsPolicy
from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.models.crds import KafkaMirrorMaker2Resource


async def mirror_secrets(
    kube: KubernetesApi, resource: KafkaMirrorMaker2Resource, policy: CredentialsPolicy
) -> dict[tuple[str, str], str]:
    """The ``secretConfig`` values of every cluster, keyed by (Secret name, key), once the policy
    allows each cluster: bootstrap servers in the allow-list, and a cluster with ``secretConfig``
    on SSL or SASL_SSL. Every cluster is checked before any Secret is read.

    The one reader for the MM2 service (which sends the values to Connect) and the lag monitor
    (which connects to the source cluster with them). Raises CredentialsRefused, LookupError (a key
    is missing) or KubernetesError (the Secret cannot be read).
    """
    for cluster in resource.spec.clusters:
        policy.check_kafka(
            f"clusters[{cluster.alias}]",
            cluster.bootstrap_servers,
            cluster.config,
            credentials=bool(cluster.secret_config),
        )
    values: dict[tuple[str, str], str] = {}
    for cluster in resource.spec.clusters:
        for key, ref in cluster.secret_config.items():
            data = await kube.get_secret_data(resource.metadata.namespace, ref.name, [ref.key])
            if ref.key not in data:
                raise LookupError(
                    f"clusters[{cluster.alias}].secretConfig.{key}: Secret {ref.name} has no key {ref.key}"
                )
            values[(ref.name, ref.key)] = data[ref.key]
    return values


#: How long a mirror's ``secretConfig`` values are reused while its spec is unchanged. Every pass
#: of the reconcile and every lag round needs them; reading each Secret each time made the idle cost
#: grow with mirrors (issue 20). A rotated Secret reaches the connectors' config within this long, as
#: a rotated ConnectCluster credential does (reconcile/clusters.py ``ENDPOINT_TTL_S``).
SECRETS_REUSE_S = 60.0


class MirrorSecrets:
    """``mirror_secrets`` with the values reused for ``SECRETS_REUSE_S`` per mirror and spec.

    One instance is shared by the MM2 reconcile and the lag monitor, so a round of both costs one
    read of each Secret per minute at most. Keyed by the resource's uid and ``metadata.generation``:
    a spec change (another Secret, another key, another cluster) reads again at once, and a mirror
    deleted and re-created under the same name never sees the old values. Only successful reads are
    kept: a missing key or an unreadable Secret is asked again on the next pass.
    """

    def __init__(
        self,
        kube: KubernetesApi,
        policy: CredentialsPolicy,
        reuse_s: float = SECRETS_REUSE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.policy = policy
        self.reuse_s = reuse_s
        self._clock = clock
        self._kept: dict[tuple[str, str], tuple[str, int, float, dict[tuple[str, str], str]]] = {}

    async def read(self, resource: KafkaMirrorMaker2Resource) -> dict[tuple[str, str], str]:
        """The values by (Secret name, key); raises as ``mirror_secrets`` does."""
        meta = resource.metadata
        key = (meta.namespace, meta.name)
        kept = self._kept.get(key)
        now = self._clock()
        if kept is not None and kept[:2] == (meta.uid, meta.generation) and now - kept[2] < self.reuse_s:
            return dict(kept[3])
        self._kept.pop(key, None)
        values = await mirror_secrets(self.kube, resource, self.policy)
        if any(c.secret_config for c in resource.spec.clusters):  # nothing read, nothing to keep
            self._kept[key] = (meta.uid, meta.generation, now, values)
        return dict(values)

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted mirror's values (they are credentials: kept no longer than needed)."""
        self._kept.pop((namespace, name), None)
