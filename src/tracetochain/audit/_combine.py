r"""Combining p-values: across the repeated held-out splits of one layer, and across the layers of a certificate.

**Across splits (Cauchy combination).** One random split makes a held-out verdict depend on the seed: near the
threshold, another split flips it. The certificate repeats the split (independent random halves by trace id) and
combines the splits' p-values p_1 … p_S of one layer with the Cauchy combination test (Liu & Xie 2020, "ACAT"):

    T = (1/S) Σ_s tan((½ − p_s) π),    p = ½ − arctan(T) / π.

The p_s are strongly dependent (the splits share their data); the Cauchy combination keeps its level under arbitrary
dependence between the p_s for the small levels a certificate uses, and equals p_1 when all splits agree. The share
of splits that reject on their own is reported beside it.

A p-value at or near 1 would veto the others: tan((½ − p)π) → −∞ as p → 1, so one split with p = 1 (a bootstrap p of
(B + 1)/(B + 1), which happens on a few percent of sound corpora) turned ``[0.001]*4 + [1.0]`` into 0.99999. Each p_s
is therefore capped at :data:`CAUCHY_P_CAP` = 0.9 before the transform: min(p_s, 0.9) ≤ t iff p_s ≤ t for every
t < 0.9, so each capped p-value is still valid at every level a test uses, and a split that sees nothing can pull the
combination down by at most tan(0.4π) ≈ 3.1 on the Cauchy scale, not veto it. Under the null the cap moves the
combination's size from 5.02 % to 5.33 % at the 5 % level with five independent splits, and changes nothing with five
splits that share half their data and bootstrap-grid p-values (5.4 % at 5 %, 0.29 % at 1.25 %, with and without the
cap; ``tests/audit/test_combination.py``, slow tier).

**Across layers (:func:`family_test`).** The certificate's layers test different assumptions (R∞, timing, Markov
order, exchangeable trials); withholding an output when any of its layers rejects is a multiple test. Each layer
that applies is tested at level / L, with L the number of layers that apply (Bonferroni); a layer that does not
apply (trials without repeated tasks, order for a family that models memory) or did not run leaves the family
(counting it as p = 1 only made the others stricter), while one that applies but lacked the data this time stays in
it and cannot reject. This keeps the family-wise error rate — the chance that a sound chain loses any output — at most
``level`` under any dependence between the layers, and it is the rule that keeps the certificate's promise that
evidence against one assumption never withholds an output that does not rest on it: an output's status depends only
on the p-values of its own layers (and on which layers could test, which is a matter of data size, not of evidence).
Holm's step-down (Holm 1979), used before, gives a rejected layer's share of the level to the others, so a rejected
order layer could withhold R∞ (789 of 20,000 random configurations); with the output statuses required to depend on
their own layers only, a family-wise rule over the union of outputs reduces to fixed per-layer thresholds, and equal
thresholds are the Bonferroni rule. Lowering any p-value, or a layer that lacked data now testing and rejecting (more
evidence against the model), can only add rejections: the rule is monotone, never certifying more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

#: Split p-values are capped here before the Cauchy transform, so one split that sees nothing cannot veto the others.
CAUCHY_P_CAP = 0.9


def cauchy_combination(p_values: Sequence[float]) -> float:
    """The Cauchy-combination p-value of ``p_values`` (module docstring); equal weights.

    >>> cauchy_combination([0.3, 0.3, 0.3])
    0.3
    >>> round(cauchy_combination([0.001, 0.5, 0.5, 0.5, 0.5]), 4)
    0.005
    >>> round(cauchy_combination([0.001] * 4 + [1.0]), 5)  # a split with p = 1 does not veto the others
    0.00125
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
    # Capped (module docstring): min(p, cap) is a valid p-value at every level below the cap.
    # Floored too, so 1/(pπ) stays finite for subnormal p.
    p = np.clip(p, 1e-300, CAUCHY_P_CAP)
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


def family_test(p_values: Mapping[str, float | None], level: float = 0.05
                ) -> tuple[dict[str, bool], dict[str, float | None]]:
    """The certificate's rule across layers (module docstring): each of the L named layers is tested at level / L;
    None is a layer of the family that lacked the data to test (it cannot reject). Layers that do not apply are not
    passed at all. Returns which are rejected and the adjusted p-values min(1, L p) (None where there is no p).

    >>> rej, adj = family_test({"a": 0.01, "b": 0.04, "c": 0.03, "d": None})
    >>> rej, adj["a"], adj["d"]
    ({'a': True, 'b': False, 'c': False, 'd': False}, 0.04, None)
    >>> family_test({"a": 0.03, "b": 0.5})[0]  # two layers apply: 0.025 each
    {'a': False, 'b': False}
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    L = len(p_values)
    adjusted: dict[str, float | None] = {k: (None if v is None else min(1.0, L * float(v)))
                                         for k, v in p_values.items()}
    rejected = {k: (v is not None and float(v) <= level / L) for k, v in p_values.items()}
    return rejected, adjusted


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
