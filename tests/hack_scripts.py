"""hack/'s scripts loaded as modules, for the unit tests of their logic.

Why a loader: hack/ holds scripts run by path (``python3 hack/stack.py``), not a package, so a test
imports one from its file. The module is registered in ``sys.modules`` before it runs, as an import
would, because dataclasses look their module up there.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HACK = Path(__file__).resolve().parents[1] / "hack"


def load_hack_script(stem: str) -> ModuleType:
    """``hack/<stem>.py``, run once more as the module ``hack_<stem>``."""
    name = f"hack_{stem}"
    spec = importlib.util.spec_from_file_location(name, HACK / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
