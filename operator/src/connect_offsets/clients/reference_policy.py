"""Which config provider references a tenant's connector config may hold: an allow-list, per cluster.

Why an allow-list: a reference (``${provider:path:key}``) is resolved by the Connect workers with
their own identity: ``FileConfigProvider`` reads their files, ``EnvVarConfigProvider`` their
environment, a Kubernetes Secret provider any Secret their ServiceAccount may read. The operator
cannot know which providers the workers have, and every earlier rule that listed what is forbidden
(the operator's own provider, the first reference of a value) was bypassed by a provider or a
reference it did not list. So a tenant's value may refer only to what the ConnectCluster's
``spec.configProviders.allowed`` lists for the resource's namespace, with the path under the
entry's prefix; anything else, including providers the workers may not even have, is refused
before Connect sees the config. References are found exactly as Connect finds them
(``models.config_references``).

References the operator writes itself (secretConfig through ``spec.configProvider``) are held to
the same check with one more entry, the operator's provider under the resource's own namespace,
and only in the keys the operator wrote: a tenant who chose a Secret's name and key still cannot
make such a reference point elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from connect_offsets.models.config_references import ConfigReference, config_references
from connect_offsets.models.crds import AllowedConfigProvider, ConfigProviderSpec, ConfigProviderType

__all__ = ["ReferenceAllowance", "ReferenceRule"]

#: How much of a tenant's text a refusal quotes.
_SHOWN: Final = 200


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")


@dataclass(frozen=True)
class ReferenceAllowance:
    """One provider a value may refer to, with the path prefix already made for the namespace
    (None: any path)."""

    provider: str
    path_prefix: str | None

    def covers(self, path: str) -> bool:
        """Whether ``path`` lies below the prefix, at a segment boundary: a prefix ``team-a`` covers
        ``team-a/x``, not ``team-ab/x``, and not ``team-a`` itself (Strimzi's Secret provider reads
        a one-segment path as a Secret of the workers' own namespace)."""
        prefix = self.path_prefix
        if prefix is None or prefix == "":
            return True
        return path.startswith(prefix if prefix.endswith("/") else prefix + "/")

    def __str__(self) -> str:
        return self.provider if self.path_prefix is None else f"{self.provider} (paths under {self.path_prefix!r})"


def _traversal(path: str) -> bool:
    """A ``.`` or ``..`` segment, or a backslash: a path that may leave its prefix once a file
    system or a provider normalises it."""
    return "\\" in path or any(segment in (".", "..") for segment in path.split("/"))


@dataclass(frozen=True)
class ReferenceRule:
    """What one resource's connector configs may refer to; the default allows nothing.

    ``allowed``: the cluster's ``spec.configProviders.allowed`` entries for the resource's
    namespace; ``own``: the operator's own provider for secretConfig (only in ``written`` keys);
    ``where``: the ConnectCluster, for messages.
    """

    allowed: tuple[ReferenceAllowance, ...] = ()
    own: ReferenceAllowance | None = None
    where: str = "the ConnectCluster"
    #: Why ``allowed`` is empty, for messages.
    why_none: str = "spec.configProviders.allowed is empty"

    @classmethod
    def for_namespace(
        cls,
        namespace: str,
        allowed: Sequence[AllowedConfigProvider],
        own: ConfigProviderSpec | None,
        where: str,
        why_none: str = "spec.configProviders.allowed is empty",
    ) -> ReferenceRule:
        """The rule for a resource in ``namespace``: the entries that list it (or list none), with
        ``{namespace}`` replaced in their prefixes."""
        entries = tuple(
            ReferenceAllowance(
                entry.name, None if entry.path_prefix is None else entry.path_prefix.replace("{namespace}", namespace)
            )
            for entry in allowed
            if not entry.namespaces or namespace in entry.namespaces
        )
        mine = None
        if own is not None:
            base = namespace if own.type is ConfigProviderType.KUBERNETES_SECRET else own.path or ""
            mine = ReferenceAllowance(own.name, base.replace("{namespace}", namespace).rstrip("/") + "/")
        return cls(entries, mine, where, why_none)

    def refusal(self, reference: ConfigReference, *, written: bool) -> str | None:
        """Why ``reference`` may not stand in a value (``written``: a value the operator wrote), or None."""
        entries = self.allowed + ((self.own,) if written and self.own is not None else ())
        named = [entry for entry in entries if entry.provider == reference.provider]
        if not named:
            if not self.allowed:
                return f"{self.where} allows tenants no config provider ({self.why_none})" + self._own_hint(reference)
            listed = ", ".join(str(entry) for entry in self.allowed)
            return f"{self.where} allows only {listed[:512]} for this namespace (spec.configProviders.allowed)" + (
                self._own_hint(reference)
            )
        if _traversal(reference.path):
            return f"its path {_shown(reference.path)} has a '.' or '..' segment or a backslash"
        if not any(entry.covers(reference.path) for entry in named):
            prefixes = ", ".join(repr(entry.path_prefix) for entry in named)
            return (
                f"its path {_shown(reference.path)} is not under {prefixes[:512]}, the path prefix {self.where} "
                "allows this namespace for that provider (spec.configProviders.allowed)"
            )
        return None

    def _own_hint(self, reference: ConfigReference) -> str:
        if self.own is not None and reference.provider == self.own.provider:
            return "; the operator uses that provider for secretConfig: use secretConfig instead"
        return ""

    def first_refusal(self, values: Iterable[tuple[str, str, bool]]) -> tuple[str, ConfigReference, str] | None:
        """The first (key, reference, why) among ``(key, value, written)`` that is refused, or None."""
        for key, value, written in values:
            for reference in config_references(value):
                why = self.refusal(reference, written=written)
                if why is not None:
                    return key, reference, why
        return None
