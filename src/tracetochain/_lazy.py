"""Module attributes imported on first use (PEP 562): the one implementation behind every ``<pkg>/shared.py``."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_attributes(module: str, table: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``module`` whose names in ``table`` (name → defining module) are imported
    on first use and then cached in the module's namespace, so later look-ups cost a dict access."""

    def __getattr__(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(table[name]), name)
        setattr(sys.modules[module], name, value)  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[module]), *table})

    return __getattr__, __dir__
