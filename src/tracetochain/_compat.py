"""Names a package stopped exporting when its public API was trimmed: still importable from the package, with a
warning that names the private module to import them from."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from typing import Any


def moved_attribute(package: str, name: str, moved: Mapping[str, str]) -> Any:
    """``package.name`` for a module-level ``__getattr__`` (PEP 562): the attribute ``name`` of the private module
    ``package.<moved[name]>``, after a :class:`DeprecationWarning` that names that module; :class:`AttributeError`
    for a name not in ``moved``.

    The warning points at the line that asked for the name (two frames up: this function, the package's
    ``__getattr__``).
    """
    module = moved.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    warnings.warn(f"{package}.{name} is an internal building block; import it from {package}.{module}",
                  DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(f"{package}.{module}"), name)
