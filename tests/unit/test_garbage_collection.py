"""The collector's full collections skip what start-up left alive (controller/garbage_collection.py),
and every collection's pause is measured."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from connect_offsets import metrics
from connect_offsets.controller.garbage_collection import freeze_long_lived, measure_pauses

pytestmark = pytest.mark.unit


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_what_is_alive_at_the_end_of_start_up_is_left_out_of_full_collections(unfrozen: None) -> None:
    class Node:
        def __init__(self) -> None:
            self.other: Node | None = None

    kept = Node()
    garbage = Node()
    garbage.other = Node()
    garbage.other.other = garbage  # a cycle only the collector frees
    del garbage
    frozen = freeze_long_lived()
    assert frozen == gc.get_freeze_count() > 0
    tracked = {id(o) for generation in range(3) for o in gc.get_objects(generation)}
    assert id(kept) not in tracked  # frozen: no collection walks it
    assert not any(isinstance(o, Node) for o in gc.get_objects())  # the start-up cycle was collected first
    assert kept.other is None

    later = Node()
    assert any(o is later for o in gc.get_objects())  # what comes after is collected as usual


def sampled(generation: str) -> float:
    value = metrics.REGISTRY.get_sample_value("connect_offsets_gc_pause_seconds_count", {"generation": generation})
    return value or 0.0


def test_every_collection_is_timed_by_generation_and_the_timer_is_installed_once() -> None:
    measure_pauses()
    measure_pauses()
    before = sampled("2")
    gc.collect()
    assert sampled("2") == before + 1
    gc.collect(0)
    assert sampled("0") >= 1
    ours = [c for c in gc.callbacks if getattr(c, "__module__", "") == "connect_offsets.controller.garbage_collection"]
    assert len(ours) == 1
