"""Every module of ``connect_offsets``, imported: for the tests that check the whole package
(tests/unit/test_errors.py, test_layout.py). Modules of an optional extra that is not installed
(pyspark) are left out."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import connect_offsets


def package_modules() -> list[ModuleType]:
    found = []
    for info in pkgutil.walk_packages(connect_offsets.__path__, "connect_offsets."):
        try:
            found.append(importlib.import_module(info.name))
        except ImportError:  # an optional extra (pyspark) is not installed
            continue
    return found
