"""Homogeneity of two trace groups (two agents, two weeks): do their transition rows differ?

For every state i present in both groups, the outcomes of row i (next state, success, failure) form a 2 × (m+2)
table; G²_i = 2 Σ n ln(n / E) with E the expected counts under one shared row (Anderson & Goodman 1957). Under one
shared chain, G²_i is asymptotically χ² with df_i = observed columns − 1 — if the rows' observations were independent.
They are not quite: one trace visits a state several times, and repeated trials of a task share their difficulty, so
counts vary more than multinomially. The first-order Rao–Scott correction (Rao & Scott 1981) divides G²_i by the row's
mean design effect δ_i, the ratio of each cell proportion's variance over the bootstrap replicates (which resample
whole traces, or tasks) to its multinomial variance, averaged over the cells and the two groups (clipped at 1, so the
correction only ever makes the test more cautious). States are reported as differing when their Holm-adjusted p
(Holm 1979) is below ``level``. Everything comes from the two groups' count tables and bootstrap replicates, which
add up over partitions: one implementation for a corpus in memory and one read partition by partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table
from tracetochain.audit._combine import holm_adjust


def _row_g2(a: NDArray[np.float64], b: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Per-row G² of 2 × C tables given row-wise counts a and b (shape (m, C)); returns (G², df)."""
    total = a + b
    na = a.sum(axis=1, keepdims=True)
    nb = b.sum(axis=1, keepdims=True)
    n = na + nb
    with np.errstate(divide="ignore", invalid="ignore"):
        ea = np.where(n > 0, na * total / np.where(n > 0, n, 1), 0.0)
        eb = np.where(n > 0, nb * total / np.where(n > 0, n, 1), 0.0)
        ga = np.where(a > 0, a * np.log(np.where(a > 0, a, 1) / np.where(ea > 0, ea, 1)), 0.0)
        gb = np.where(b > 0, b * np.log(np.where(b > 0, b, 1) / np.where(eb > 0, eb, 1)), 0.0)
    g2 = 2.0 * (ga + gb).sum(axis=1)
    both = (na[:, 0] > 0) & (nb[:, 0] > 0)
    df = np.where(both, np.maximum((total > 0).sum(axis=1) - 1, 0), 0)
    return np.where(both, np.maximum(g2, 0.0), 0.0), df.astype(np.int64)


def _holm(p: NDArray[np.float64], tested: NDArray[np.intp]) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Holm's adjustment of ``p[tested]`` (the others stay 1) and the tested indices in increasing order of p."""
    adjusted = np.ones(p.size)
    adjusted[tested] = holm_adjust(p[tested])
    return adjusted, tested[np.argsort(p[tested], kind="stable")]


@dataclass(frozen=True, repr=False)
class HomogeneityResult(ResultDisplay):
    """Per-state and overall homogeneity of two groups' transition rows (module docstring). ``g2`` is the corrected
    total (Σ G²_i / δ_i), ``p_value`` its χ² p; ``differing`` the states whose Holm-adjusted p is at most ``level``."""

    state_names: tuple[str, ...]
    g2: float
    df: int
    p_chi2: float | None
    per_state: tuple[dict[str, Any], ...]
    level: float
    differing: tuple[str, ...]
    seed: int
    n_traces: tuple[int, int] = field(default=(0, 0))
    method: str = "rao-scott"

    @property
    def p_value(self) -> float:
        return 1.0 if self.p_chi2 is None else self.p_chi2

    @property
    def rejects(self) -> bool:
        return self.p_value <= self.level

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "tracetochain.homogeneity", "schema_version": 2, "g2": self.g2, "df": self.df,
                "method": self.method, "p_value": self.p_value, "level": self.level, "rejects": self.rejects,
                "differing_states": list(self.differing), "per_state": list(self.per_state), "seed": self.seed,
                "n_traces": list(self.n_traces)}

    def __str__(self) -> str:
        verdict = "the groups differ" if self.rejects else "no evidence that the groups differ"
        how = "χ², Rao–Scott corrected" if self.method == "rao-scott" else "χ²"
        text = f"Homogeneity: G² = {self.g2:.1f} (df {self.df}), p = {self.p_value:.4g} ({how}) — {verdict}"
        if self.differing:
            text += "; states that differ: " + ", ".join(self.differing)
        return text

    def _display(self) -> Display:
        cols = ("state", "g2", "df", "design_effect", "p_value", "p_holm")
        rows = tuple(tuple(row.get(c) for c in cols) for row in self.per_state)
        return Display(str(self).removeprefix("Homogeneity: "), kind="Homogeneity",
                       tables=(Table("states", cols, rows, digits={"df": 0}),))


def row_design_effects(boot: NDArray[np.float64], rows: NDArray[np.float64]) -> NDArray[np.float64]:
    """δ_i per state from bootstrap replicate count vectors ``boot`` (B × (m² + 3m)) and the group's row counts
    ``rows`` (m × (m + 2)): mean over cells with 0 < p < 1 of Var_boot(p̂_ij) / (p_ij (1 − p_ij) / c_i); 1 where it
    cannot be estimated."""
    m = rows.shape[0]
    B = boot.shape[0]
    if B < 2:
        return np.ones(m)
    X = np.concatenate([boot[:, : m * m].reshape(B, m, m), boot[:, m * m: m * m + m, None],
                        boot[:, m * m + m: m * m + 2 * m, None]], axis=2)
    tot = X.sum(axis=2, keepdims=True)
    P = np.divide(X, tot, out=np.zeros_like(X), where=tot > 0)
    var_boot = P.var(axis=0, ddof=1)
    c = rows.sum(axis=1, keepdims=True)
    p = np.divide(rows, c, out=np.zeros_like(rows), where=c > 0)
    var_mult = np.divide(p * (1 - p), c, out=np.zeros_like(p), where=c > 0)
    ok = (p > 0) & (p < 1) & (var_mult > 0)
    ratio = np.divide(var_boot, var_mult, out=np.zeros_like(p), where=ok)
    n_ok = ok.sum(axis=1)
    out = np.where(n_ok > 0, ratio.sum(axis=1) / np.maximum(n_ok, 1), 1.0)
    return np.maximum(out, 1.0)


def homogeneity_from_counts(a: NDArray[np.float64], b: NDArray[np.float64], states: list[str] | tuple[str, ...], *,
                            level: float = 0.05, n_traces: tuple[int, int] = (0, 0),
                            boot: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
                            seed: int = 0) -> HomogeneityResult:
    """The homogeneity test from the two groups' row counts (m × (m + 2): transitions, then the success and failure
    exits, on the same vocabulary ``states``) and, for the design-effect correction, their bootstrap replicate count
    vectors ``boot`` (without them δ = 1: plain χ²)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    m = len(states)
    if a.shape != (m, m + 2) or b.shape != (m, m + 2):
        raise ValueError(f"row counts must have shape (m, m + 2) = {(m, m + 2)}, got {a.shape} and {b.shape}")
    g2_rows, df_rows = _row_g2(a, b)
    if boot is not None:
        delta = np.maximum(row_design_effects(boot[0], a), row_design_effects(boot[1], b))
    else:
        delta = np.ones(m)
    g2_adj = g2_rows / delta
    g2, df = float(g2_adj.sum()), int(df_rows.sum())
    from scipy.special import chdtrc  # chi2.sf's own routine, bit for bit, without importing scipy.stats (~1 s)

    p_chi2 = float(chdtrc(df, g2)) if df > 0 else None
    tested = np.flatnonzero(df_rows > 0)
    p_rows = np.ones(m)
    p_rows[tested] = chdtrc(df_rows[tested], g2_adj[tested])
    adjusted, order = _holm(p_rows, tested)
    per_state = tuple({"state": states[i], "g2": float(g2_rows[i]), "design_effect": float(delta[i]),
                       "df": int(df_rows[i]), "p_value": float(p_rows[i]) if df_rows[i] > 0 else None,
                       "p_holm": float(adjusted[i]) if df_rows[i] > 0 else None} for i in range(m))
    differing = tuple(states[i] for i in order if adjusted[i] <= level)
    return HomogeneityResult(tuple(states), g2, df, p_chi2, per_state, level, differing, seed, n_traces,
                             "rao-scott" if boot is not None else "chi2")
