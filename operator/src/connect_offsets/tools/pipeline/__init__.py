"""Offsets history pipeline on PySpark: ``latest``, ``history`` and ``as-of`` over offsets topics.

Why a separate package: it needs pyspark, an optional extra (``connect-offsets-operator[spark]``)
that the operator image does not carry, so nothing here is imported by the operator and pyspark is
imported lazily, only when a job runs. The main CLI adds ``connect-offsets pipeline ...`` with
``register``; ``python -m connect_offsets.tools.pipeline`` and ``spark-submit .../pipeline/__main__.py``
run the same commands.
"""

from __future__ import annotations

from connect_offsets.tools.pipeline.command import main, register

__all__ = ["main", "register"]
