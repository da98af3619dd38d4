"""Old spellings kept for one release, with a :class:`DeprecationWarning`: names a package stopped exporting when its
public API was trimmed, keyword arguments and attributes renamed to the library's one vocabulary."""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar


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
    where = module if module.startswith("tracetochain.") else f"{package}.{module}"  # absolute, or in the package
    warnings.warn(f"{package}.{name} is an internal building block; import it from {where}",
                  DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(where), name)


_F = TypeVar("_F", bound=Callable[..., Any])


def renamed_parameters(**renames: str) -> Callable[[_F], _F]:
    """Keep an old keyword spelling working for one release: ``@renamed_parameters(n_samples="samples")`` maps
    ``n_samples=`` to ``samples=`` after a :class:`DeprecationWarning` naming the new spelling (a ``TypeError`` when
    both are given). The signature users see (``help``, ``inspect.signature``) is the new one.

    The library's vocabulary (docs/architecture.md): ``samples`` counts replicates (draws or resamples), ``level``
    is a test's significance level, ``confidence`` an interval's coverage, ``intervals`` how intervals are made.
    """

    def decorate(func: _F) -> _F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{func.__qualname__}() got both {new}= and its deprecated spelling {old}=")
                    warnings.warn(f"{func.__qualname__}({old}=...) is deprecated and will be removed in the next "
                                  f"release: use {new}=", DeprecationWarning, stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def renamed_attribute(old: str, new: str) -> property:
    """A read-only property ``old`` that returns ``self.new`` after a :class:`DeprecationWarning` (for one
    release)."""

    def get(self: Any) -> Any:
        warnings.warn(f"{type(self).__name__}.{old} is deprecated and will be removed in the next release: use "
                      f".{new}", DeprecationWarning, stacklevel=2)
        return getattr(self, new)

    return property(get, doc=f"Deprecated spelling of :attr:`{new}`.")
