"""Binding a resource to a ConnectCluster (planning.check_binding), pure.

* the cluster's own namespace always binds; another only when ``spec.allowedNamespaces`` lists it
  (empty/absent = none), refused with ``ClusterNotAllowed`` naming the cluster and the namespace;
* ``spec.connectorNamePrefix`` with ``{namespace}`` replaced by the resource's namespace: every
  connector name must start with it (also in the cluster's own namespace), else
  ``ConnectorNameNotAllowed`` naming the wrong names (five at most, then a count);
* the namespace check comes first: a namespace that may not bind learns nothing about the prefix;
* leftover offsets (planning.leftovers_owned_elsewhere): no record -> may be wiped; the newest
  record decides; another namespace (even one whose name starts with this one's) -> its owner.
"""

from __future__ import annotations

import pytest

from connect_offsets.models.crds import ConnectClusterSpec
from connect_offsets.planning import (
    check_binding,
    connector_name_prefix,
    leftovers_owned_elsewhere,
    mirror_connector_name,
)


def spec(**fields: object) -> ConnectClusterSpec:
    return ConnectClusterSpec.model_validate({"url": "http://connect:8083", **fields})


def test_own_namespace_binds_without_settings() -> None:
    assert check_binding(spec(), "platform", "shared", "platform", ["anything"]) is None


@pytest.mark.parametrize("allowed", [None, [], ["team-b"]])
def test_other_namespace_needs_to_be_listed(allowed: list[str] | None) -> None:
    fields = {} if allowed is None else {"allowedNamespaces": allowed}
    refusal = check_binding(spec(**fields), "platform", "shared", "team-a", ["team-a-orders"])
    assert refusal is not None
    assert refusal.reason == "ClusterNotAllowed"
    assert "ConnectCluster platform/shared" in refusal.message
    assert "namespace team-a" in refusal.message and "spec.allowedNamespaces" in refusal.message


def test_listed_namespace_binds() -> None:
    assert check_binding(spec(allowedNamespaces=["team-a", "team-b"]), "platform", "shared", "team-b", ["x"]) is None


def test_namespace_refusal_comes_before_the_prefix() -> None:
    refusal = check_binding(spec(connectorNamePrefix="{namespace}-"), "platform", "shared", "team-a", ["bad"])
    assert refusal is not None and refusal.reason == "ClusterNotAllowed"


@pytest.mark.parametrize("namespace", ["platform", "team-a"])
def test_prefix_with_namespace_placeholder(namespace: str) -> None:
    cluster = spec(allowedNamespaces=["team-a"], connectorNamePrefix="{namespace}-")
    assert check_binding(cluster, "platform", "shared", namespace, [f"{namespace}-orders"]) is None
    refusal = check_binding(cluster, "platform", "shared", namespace, [f"{namespace}-orders", "orders", "team-b-x"])
    assert refusal is not None
    assert refusal.reason == "ConnectorNameNotAllowed"
    assert f"start with '{namespace}-'" in refusal.message
    assert "not: orders, team-b-x." in refusal.message


def test_mirror_names_start_with_the_source_alias() -> None:
    cluster = spec(allowedNamespaces=["team-a"], connectorNamePrefix="{namespace}.")
    good = mirror_connector_name("team-a.src", "dst", "MirrorSourceConnector")
    bad = mirror_connector_name("src", "team-a.dst", "MirrorCheckpointConnector")
    assert check_binding(cluster, "platform", "shared", "team-a", [good]) is None
    refusal = check_binding(cluster, "platform", "shared", "team-a", [good, bad])
    assert refusal is not None and refusal.reason == "ConnectorNameNotAllowed" and bad in refusal.message


def test_many_wrong_names_are_counted() -> None:
    refusal = check_binding(spec(connectorNamePrefix="p-"), "ns", "c", "ns", [f"n{i}" for i in range(8)])
    assert refusal is not None
    assert "n0, n1, n2, n3, n4 and 3 more" in refusal.message


def test_fixed_prefix_and_no_prefix() -> None:
    assert connector_name_prefix(spec(connectorNamePrefix="shared-"), "team-a") == "shared-"
    assert connector_name_prefix(spec(), "team-a") == ""
    assert connector_name_prefix(spec(connectorNamePrefix="{namespace}-{namespace}."), "a") == "a-a."


def test_allowed_namespaces_are_namespace_names() -> None:
    with pytest.raises(ValueError, match="allowedNamespaces"):
        spec(allowedNamespaces=["Team_A"])


# --------------------------------------------------------------------------- leftover offsets' owner


def test_leftovers_without_a_record_may_be_wiped() -> None:
    assert leftovers_owned_elsewhere([], "team-a") is None


def test_the_newest_record_decides() -> None:
    older_a = ("team-a/orders", "2026-01-01T00:00:00+00:00")
    newer_b = ("team-b/orders", "2026-02-01T00:00:00+00:00")
    assert leftovers_owned_elsewhere([older_a, newer_b], "team-a") == "team-b/orders"
    assert leftovers_owned_elsewhere([newer_b, older_a], "team-b") is None
    newest_a = ("team-a/other", "2026-03-01T00:00:00+00:00")
    assert leftovers_owned_elsewhere([older_a, newer_b, newest_a], "team-a") is None


def test_a_namespace_that_is_a_prefix_of_another_is_another() -> None:
    assert leftovers_owned_elsewhere([("team-ab/x", "2026-01-01")], "team-a") == "team-ab/x"
    assert leftovers_owned_elsewhere([("team-a/x", "2026-01-01")], "team-ab") == "team-a/x"


def test_equal_times_do_not_depend_on_order() -> None:
    a, b = ("team-a/x", "2026-01-01"), ("team-b/x", "2026-01-01")
    assert leftovers_owned_elsewhere([a, b], "team-a") == leftovers_owned_elsewhere([b, a], "team-a") == "team-b/x"
