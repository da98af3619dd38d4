"""Optional dependencies: imported on first use, or a clear error naming the extra that installs them."""

from __future__ import annotations

import importlib
from types import ModuleType

from tracetochain.exceptions import TraceToChainError

# import name → (distribution to install, extra of tracetochain that pulls it in)
EXTRAS: dict[str, tuple[str, str]] = {
    "sklearn": ("scikit-learn", "sklearn"),
    "polars": ("polars", "polars"),
    "matplotlib": ("matplotlib", "plots"),
    "pandas": ("pandas", "pandas"),
}


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` (e.g. ``"sklearn.cluster"``) or raise :class:`TraceToChainError` with the install hint."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        dist, extra = EXTRAS.get(top, (top, ""))
        how = f"pip install 'tracetochain[{extra}]'" if extra else f"pip install {dist}"
        raise TraceToChainError(f"{purpose} needs {dist}, which is not installed: {how}") from None
