"""The watch cache (clients/resource_cache.py): what the reconcile reads instead of a GET.

Covers: an older body never replaces a newer one; readers get copies (a pass that edits its body
cannot change the next pass's); a body no watch event has confirmed expires; deletion; and the
memory it keeps per resource (managedFields dropped, the rest kept as the API server sent it).
"""

from __future__ import annotations

from typing import Any

import pytest

from connect_offsets.clients import resource_cache
from connect_offsets.clients.resource_cache import ResourceCache

pytestmark = pytest.mark.unit


def body(version: str, state: str = "running", **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns", "resourceVersion": version, **metadata},
        "spec": {"state": state},
    }


def test_an_older_body_never_replaces_a_newer_one() -> None:
    cache = ResourceCache()
    cache.observe("kafkaconnectors", "ns", "c", body("12", "stopped"))
    cache.observe("kafkaconnectors", "ns", "c", body("11", "running"))  # a late answer to our own write
    assert cache.resource_version("kafkaconnectors", "ns", "c") == "12"
    cache.observe("kafkaconnectors", "ns", "c", body("not-a-number", "paused"))  # opaque: last wins
    got = cache.get("kafkaconnectors", "ns", "c")
    assert got is not None and got["spec"]["state"] == "paused"


def test_readers_get_copies_and_deletion_forgets() -> None:
    cache = ResourceCache()
    cache.observe("kafkaconnectors", "ns", "c", body("1"))
    first = cache.get("kafkaconnectors", "ns", "c")
    assert first is not None
    first["spec"]["state"] = "edited by a pass"
    again = cache.get("kafkaconnectors", "ns", "c")
    assert again is not None and again["spec"]["state"] == "running"
    cache.observe("kafkaconnectors", "ns", "c", None)
    assert cache.get("kafkaconnectors", "ns", "c") is None and len(cache) == 0


def test_a_body_no_watch_confirms_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(resource_cache.time, "monotonic", lambda: now[0])
    cache = ResourceCache()
    cache.observe("connectclusters", "ns", "x", body("5"), watched=False)  # from a GET, not watched
    assert cache.get("connectclusters", "ns", "x") is not None
    now[0] += resource_cache.UNWATCHED_TTL_S + 1
    assert cache.get("connectclusters", "ns", "x") is None
    cache.observe("connectclusters", "ns", "x", body("6"))  # a watch event: kept for good
    now[0] += 10 * resource_cache.UNWATCHED_TTL_S
    assert cache.get("connectclusters", "ns", "x") is not None


def test_managed_fields_are_not_kept() -> None:
    managed = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {"f:state": {}}}}]
    sent = body("3", annotations={"a": "b"}, managedFields=managed)
    cache = ResourceCache()
    cache.observe("kafkaconnectors", "ns", "c", sent)
    got = cache.get("kafkaconnectors", "ns", "c")
    assert got is not None and "managedFields" not in got["metadata"]
    assert got["metadata"]["annotations"] == {"a": "b"} and got["metadata"]["resourceVersion"] == "3"
    assert sent["metadata"]["managedFields"] == managed  # the caller's body is left as it was


def test_bodies_are_copied_at_every_level() -> None:
    """copy_tree replaces copy.deepcopy for bodies: every dict and list is new, atoms are shared,
    and whatever is not JSON is still deep-copied."""

    class Odd:
        def __init__(self) -> None:
            self.items = [1]

    original = {
        "metadata": {"labels": {"a": "1"}, "finalizers": ["f"]},
        "spec": {"n": 1, "x": None, "f": 1.5},
        "odd": Odd(),
        "tags": {"t"},
    }
    copied = resource_cache.copy_tree(original)
    assert copied.keys() == original.keys() and copied["metadata"] == original["metadata"]
    assert copied["spec"] == original["spec"] and copied["tags"] == {"t"}
    for path in (("metadata",), ("metadata", "labels"), ("metadata", "finalizers"), ("spec",), ("odd",), ("tags",)):
        a, b = copied, original
        for step in path:
            a, b = a[step], b[step]
        assert a is not b, path
    assert copied["odd"].items == [1] and copied["odd"].items is not original["odd"].items
    copied["metadata"]["labels"]["a"] = "2"
    copied["metadata"]["finalizers"].append("g")
    assert original["metadata"] == {"labels": {"a": "1"}, "finalizers": ["f"]}


def test_a_body_handed_over_is_kept_without_a_copy_and_one_lent_is_copied() -> None:
    """The watch streams hand their freshly parsed bodies over (``owned``): no copy of a tenant's
    deeply nested config on the loop (attacker review F1); a body the caller keeps is copied."""
    from connect_offsets.clients.resource_cache import ResourceCache

    cache = ResourceCache()
    config = {"nested": [{"a": 1}]}
    handed = {"metadata": {"name": "c", "resourceVersion": "2", "managedFields": [{}]}, "spec": {"config": config}}
    cache.observe("kafkaconnectors", "ns", "c", handed, owned=True)
    held = cache.peek("kafkaconnectors", "ns", "c")
    assert held is not None and held["spec"]["config"] is config
    assert "managedFields" not in held["metadata"]
    lent = {"metadata": {"name": "d", "resourceVersion": "2"}, "spec": {"config": config}}
    cache.observe("kafkaconnectors", "ns", "d", lent)
    copied = cache.peek("kafkaconnectors", "ns", "d")
    assert copied is not None and copied["spec"]["config"] == config and copied["spec"]["config"] is not config
