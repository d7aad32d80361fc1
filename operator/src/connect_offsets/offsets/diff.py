"""What an offsets change would do, for dry runs: partitions added, changed, removed, unchanged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from connect_offsets.offsets.document import OffsetEntry, OffsetsDocument, canonical_json, partition_key


@dataclass(frozen=True)
class OffsetsDiff:
    """What a PATCH with ``requested`` would do to ``current`` (for dry runs).

    ``added``: partitions not in current, with an offset. ``changed``: (old, new) where the offset
    differs. ``removed``: current entries that a null offset removes. ``unchanged``: partitions
    whose state stays the same (current partitions not listed or listed with the same offset, and
    null offsets for partitions that have none).
    """

    added: list[OffsetEntry]
    changed: list[tuple[OffsetEntry, OffsetEntry]]
    removed: list[OffsetEntry]
    unchanged: int

    @property
    def has_changes(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.changed)} changed, "
            f"{len(self.removed)} removed, {self.unchanged} unchanged"
        )

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "added": [e.to_json_obj() for e in self.added],
            "changed": [
                {
                    "partition": dict(new.partition),
                    "old": None if old.offset is None else dict(old.offset),
                    "new": None if new.offset is None else dict(new.offset),
                }
                for old, new in self.changed
            ],
            "removed": [e.to_json_obj() for e in self.removed],
            "unchanged": self.unchanged,
        }


def diff_offsets(current: OffsetsDocument, requested: OffsetsDocument) -> OffsetsDiff:
    """Compare by ``partition_key``; offsets compare by canonical JSON, so ``1`` != ``1.0`` != ``true``."""
    by_key = {partition_key(e): e for e in current.entries}
    touched: set[str] = set()
    added: list[OffsetEntry] = []
    changed: list[tuple[OffsetEntry, OffsetEntry]] = []
    removed: list[OffsetEntry] = []
    unchanged = 0
    for entry in requested.entries:
        key = partition_key(entry)
        old = by_key.get(key)
        if old is not None:
            touched.add(key)
        if entry.offset is None:
            if old is not None and old.offset is not None:
                removed.append(old)
            else:
                unchanged += 1
        elif old is None or old.offset is None:
            added.append(entry)
        elif canonical_json(old.offset) != canonical_json(entry.offset):
            changed.append((old, entry))
        else:
            unchanged += 1
    unchanged += sum(1 for key in by_key if key not in touched)
    return OffsetsDiff(added=added, changed=changed, removed=removed, unchanged=unchanged)


def reset_diff(current: OffsetsDocument) -> OffsetsDiff:
    """What ``DELETE /connectors/{c}/offsets`` would do: every current partition is removed."""
    return OffsetsDiff(added=[], changed=[], removed=list(current.entries), unchanged=0)
