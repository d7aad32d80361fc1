"""A mirror's ``secretConfig`` values, read once for the MM2 service and the lag monitor.

The service sends them to Connect inside the connectors' config; the lag monitor connects to the
source cluster with them. ``MirrorSecrets`` reuses them for a minute per mirror and spec, so a round
of both costs one read of each Secret per minute at most.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from connect_offsets.clients.credentials import (
    CredentialKey,
    CredentialsPolicy,
    Destination,
    url_destination,
)
from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.clients.reference_policy import ReferenceRule
from connect_offsets.models.crds import KafkaMirrorMaker2Resource
from connect_offsets.planning import mirror_targets


def check_mirror_configs(
    resource: KafkaMirrorMaker2Resource,
    policy: CredentialsPolicy,
    references: ReferenceRule | None,
    values: dict[tuple[str, str], str] | None = None,
) -> dict[str, list[Destination]]:
    """Every connector config the resource declares, as Connect would receive it, through the one
    connector config policy (``CredentialsPolicy.check_connector_config``). No Secret is needed for
    that (the keys and addresses are what is checked); ``values``: what secretConfig keys hold in
    the config sent (the Secrets' values, or the operator's references), for the final check of
    what they refer to. Returns, per Secret, the brokers its values go to. Raises CredentialsRefused."""
    sent: dict[str, list[Destination]] = {}
    for target in mirror_targets(resource, values or {}).targets:
        found = policy.check_connector_config(
            target.config,
            field=f"{target.spec_path}.config",
            tenant_keys=target.tenant_keys,
            mirror=True,
            credential_keys=[CredentialKey(*key) for key in target.secret_keys],
            references=references,
        )
        for secret, destinations in found.items():
            sent.setdefault(secret, []).extend(destinations)
    return sent


async def mirror_secrets(
    kube: KubernetesApi,
    resource: KafkaMirrorMaker2Resource,
    policy: CredentialsPolicy,
    *,
    connect_url: str | None = None,
    references: ReferenceRule | None = None,
) -> dict[tuple[str, str], str]:
    """The ``secretConfig`` values of every cluster, keyed by (Secret name, key), once the policy
    allows each cluster and every connector config: bootstrap servers in the allow-list, a cluster
    with ``secretConfig`` on verified SSL or SASL_SSL, no reserved key in a connector's config. All of
    it is checked before any Secret is read; each Secret's own ``allowed-hosts`` when it is read.

    ``connect_url``: set when the values go into the connectors' config sent to that Connect REST
    API (no config provider), whose host each Secret must then allow too. ``references``: what the
    connectors' configs may refer to, when they are sent to Connect (None: only the operator's own
    Kafka clients use them, which resolve no reference).

    The one reader for the MM2 service (which sends the values to Connect) and the lag monitor
    (which connects to the source cluster with them). Raises CredentialsRefused, LookupError (a key
    is missing) or KubernetesError (the Secret cannot be read).
    """
    goes_to = {
        cluster.alias: policy.check_kafka(
            f"clusters[{cluster.alias}]",
            cluster.bootstrap_servers,
            cluster.config,
            credentials=bool(cluster.secret_config),
        )
        for cluster in resource.spec.clusters
    }
    sent = check_mirror_configs(resource, policy, references)
    connect: list[Destination] = []
    if connect_url is not None:
        connect = [
            url_destination(
                "the ConnectCluster's spec.url (secretConfig values go into connector configs)", connect_url
            )
        ]
    values: dict[tuple[str, str], str] = {}
    for cluster in resource.spec.clusters:
        for key, ref in cluster.secret_config.items():
            sent_to = [*goes_to[cluster.alias], *sent.get(ref.name, []), *connect]
            data = await kube.get_secret_data(resource.metadata.namespace, ref.name, [ref.key], sent_to=sent_to)
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
    read of each Secret per minute at most (the lag monitor reuses the reconcile's). A change of a
    Secret's ``allowed-hosts`` annotation, like a rotated value, is seen within that minute. Keyed
    by the resource's uid and ``metadata.generation``: a spec change (another Secret, another key,
    another cluster) reads again at once, and a mirror deleted and re-created under the same name
    never sees the old values. Only successful reads are kept: a missing key or an unreadable Secret
    is asked again on the next pass.
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
        self._kept: dict[
            tuple[str, str, str | None, ReferenceRule | None], tuple[str, int, float, dict[tuple[str, str], str]]
        ] = {}

    async def read(
        self,
        resource: KafkaMirrorMaker2Resource,
        *,
        connect_url: str | None = None,
        references: ReferenceRule | None = None,
    ) -> dict[tuple[str, str], str]:
        """The values by (Secret name, key); raises as ``mirror_secrets`` does. Kept per destination
        (``connect_url``, ``references``): values checked for the Kafka brokers alone are not reused
        for a config sent to Connect, while the lag monitor (brokers only, no ``connect_url``) reuses
        what the reconcile read under the same reference rule, whose checks covered more."""
        meta = resource.metadata
        key = (meta.namespace, meta.name, connect_url, references)
        now = self._clock()

        def fresh(entry: tuple[str, int, float, dict[tuple[str, str], str]] | None) -> bool:
            return entry is not None and entry[:2] == (meta.uid, meta.generation) and now - entry[2] < self.reuse_s

        candidates = [key]
        if connect_url is None:  # the Kafka brokers alone: a read checked for more serves too
            candidates += [k for k in self._kept if k[:2] == key[:2] and k != key and references in (None, k[3])]
        for candidate in candidates:
            kept = self._kept.get(candidate)
            if kept is not None and fresh(kept):
                return dict(kept[3])
        self._kept.pop(key, None)
        values = await mirror_secrets(self.kube, resource, self.policy, connect_url=connect_url, references=references)
        if any(c.secret_config for c in resource.spec.clusters):  # nothing read, nothing to keep
            self._kept[key] = (meta.uid, meta.generation, now, values)
        return dict(values)

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted mirror's values (they are credentials: kept no longer than needed)."""
        for key in [k for k in self._kept if k[:2] == (namespace, name)]:
            del self._kept[key]
