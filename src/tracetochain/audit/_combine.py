r"""Combining p-values: across the repeated held-out splits of one layer, and across the layers of a certificate.

**Across splits (Cauchy combination).** One random split makes a held-out verdict depend on the seed: near the
threshold, another split flips it. The certificate repeats the split (independent random halves by trace id) and
combines the splits' p-values p_1 … p_S of one layer with the Cauchy combination test (Liu & Xie 2020, "ACAT"):

    T = (1/S) Σ_s tan((½ − p_s) π),    p = ½ − arctan(T) / π.

The p_s are strongly dependent (the splits share their data); the Cauchy combination keeps its level under arbitrary
dependence between the p_s for the small levels a certificate uses, and equals p_1 when all splits agree. The share
of splits that reject on their own is reported beside it.

**Across layers (Holm).** The certificate's layers test different assumptions (R∞, timing, Markov order, exchangeable
trials); withholding an output when any of its layers rejects is a multiple test. Holm's step-down procedure (Holm
1979) over the fixed family of all layers keeps the family-wise error rate — the chance that a sound chain loses any
output — at most ``level``: order p_(1) ≤ … ≤ p_(L), reject p_(j) while p_(j) ≤ level / (L − j + 1). A layer that
did not run, does not apply or lacks the data to test counts as p = 1, so the family never changes size: lowering
any p-value (more evidence against the model) can only add rejections (Holm is monotone), never certify more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


def cauchy_combination(p_values: Sequence[float]) -> float:
    """The Cauchy-combination p-value of ``p_values`` (module docstring); equal weights.

    >>> cauchy_combination([0.3, 0.3, 0.3])
    0.3
    >>> round(cauchy_combination([0.001, 0.5, 0.5, 0.5, 0.5]), 4)
    0.005
    """
    p = np.asarray([float(x) for x in p_values], dtype=np.float64)
    if p.size == 0:
        raise ValueError("need at least one p-value")
    if np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    if np.all(p == p[0]):
        return float(p[0])
    if np.any(p == 0.0):
        return 0.0
    p = np.minimum(p, 1.0 - 1e-16)
    # tan((½ − p)π) = 1 / tan(pπ); for tiny p use 1/(pπ) to avoid overflow.
    terms = np.where(p < 1e-15, 1.0 / (p * math.pi), np.tan((0.5 - p) * math.pi))
    t = float(terms.mean())
    out = 0.5 - math.atan(t) / math.pi
    if t > 1e15:
        out = 1.0 / (t * math.pi)
    return float(min(1.0, max(0.0, out)))


def holm_adjust(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values: adjusted_(r) = max_{j ≤ r} min(1, (L − j + 1) p_(j)) in increasing order of p.

    >>> holm_adjust([0.01, 0.04, 0.03]).round(4).tolist()
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(p_values, dtype=np.float64)
    L = p.size
    adjusted = np.empty(L)
    running = 0.0
    for rank, i in enumerate(np.argsort(p, kind="stable")):
        running = max(running, min(1.0, (L - rank) * float(p[i])))
        adjusted[i] = running
    return adjusted


def holm(p_values: Mapping[str, float | None], level: float = 0.05) -> tuple[dict[str, bool], dict[str, float]]:
    """Holm's step-down over the named p-values (None counts as 1): which are rejected at family-wise ``level``,
    and the Holm-adjusted p-values (max over j ≤ i of (L − j + 1) p_(j), capped at 1).

    >>> rej, adj = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": None})
    >>> rej, adj["a"], adj["c"]
    ({'a': True, 'b': False, 'c': False, 'd': False}, 0.04, 0.09)
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    names = list(p_values)
    p = np.array([1.0 if p_values[k] is None else float(p_values[k]) for k in names])  # type: ignore[arg-type]
    L = len(names)
    adjusted = holm_adjust(p)
    rejected = {names[i]: bool(adjusted[i] <= level) for i in range(L)}
    return rejected, {names[i]: float(adjusted[i]) for i in range(L)}
