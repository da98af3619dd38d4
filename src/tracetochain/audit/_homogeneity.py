"""Homogeneity of two trace groups (two agents, two weeks): do their transition rows differ?

For every state i present in both groups, the outcomes of row i (next state, success, failure) form a 2 × (m+2)
table; G²_i = 2 Σ n ln(n / E) with E the expected counts under one shared row (Anderson & Goodman 1957). The
total G² is Σ_i G²_i. p-values: the χ² reference (df = Σ_i (observed columns_i − 1)) and, the one to rely on with
sparse rows, a permutation test that shuffles whole traces between the groups (seeded; p = (1 + #{G²* ≥ G²}) /
(B + 1)). States are reported as differing when their Holm-adjusted permutation p is below ``level``.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse
import scipy.stats
from numpy.typing import NDArray

from tracetochain.traces._table import TraceTable
from tracetochain.uncertainty._bootstrap import per_trace_counts


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
    """Holm's step-down adjustment of the p-values ``p[tested]`` (the others stay 1), and the tested indices in
    increasing order of p: adjusted_(r) = max_{k ≤ r} min(1, (n − k) p_(k)) (Holm 1979)."""
    adjusted = np.ones(p.size)
    order = tested[np.argsort(p[tested], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * float(p[i])))
        adjusted[i] = running
    return adjusted, order


@dataclass(frozen=True)
class HomogeneityResult:
    state_names: tuple[str, ...]
    g2: float
    df: int
    p_chi2: float | None
    p_permutation: float
    n_permutations: int
    per_state: tuple[dict[str, Any], ...]
    level: float
    differing: tuple[str, ...]
    seed: int
    n_traces: tuple[int, int] = field(default=(0, 0))
    method: str = "permutation"  # or "chi2" (from counts only: partitioned corpora)

    @property
    def p_value(self) -> float:
        """The p-value the decision uses: the permutation p, or the χ² p when only counts were available."""
        if self.method == "chi2":
            return 1.0 if self.p_chi2 is None else self.p_chi2
        return self.p_permutation

    @property
    def rejects(self) -> bool:
        return self.p_value <= self.level

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "tracetochain.homogeneity", "schema_version": 1, "g2": self.g2, "df": self.df,
                "method": self.method, "p_value": self.p_value,
                "p_chi2": self.p_chi2, "p_permutation": self.p_permutation if self.method == "permutation" else None,
                "n_permutations": self.n_permutations,
                "level": self.level, "rejects": self.rejects, "differing_states": list(self.differing),
                "per_state": list(self.per_state), "seed": self.seed, "n_traces": list(self.n_traces)}

    def __str__(self) -> str:
        verdict = "the groups differ" if self.rejects else "no evidence that the groups differ"
        how = (f"permutation p = {self.p_permutation:.4f} (B = {self.n_permutations})" if self.method == "permutation"
               else f"χ² p = {self.p_value:.4g}")
        text = f"Homogeneity: G² = {self.g2:.1f} (df {self.df}), {how} — {verdict}"
        if self.differing:
            text += "; states that differ: " + ", ".join(self.differing)
        return text

    def _repr_html_(self) -> str:
        return "<pre>" + html.escape(str(self)) + "</pre>"


def homogeneity_test(a: TraceTable, b: TraceTable, *, states: list[str] | tuple[str, ...] | None = None,
                     n_permutations: int = 999, level: float = 0.05, seed: int = 0) -> HomogeneityResult:
    """Test whether two labelled trace sets share one transition kernel, state by state.

    Both tables must carry state labels on the same vocabulary (``states``; default: the union of their labels in
    order of first appearance, A first). Invalid traces are left out.
    """
    ca, na = a.state_labels()
    cb, nb = b.state_labels()
    vocab = list(states) if states is not None else list(dict.fromkeys([*na, *nb]))
    pos = {s: i for i, s in enumerate(vocab)}
    m = len(vocab)

    def contributions(t: TraceTable, codes: NDArray[np.int64], names: list[str]) -> scipy.sparse.csr_matrix:
        remap = np.array([pos[s] for s in names], np.int64) if names else np.zeros(0, np.int64)
        mapped = remap[codes] if codes.size else codes
        keep = t.outcomes() != 3
        rows = per_trace_counts(mapped, t.offsets, t.outcomes(), m)
        return rows[np.flatnonzero(keep)]

    A = contributions(a, ca, na)
    B = contributions(b, cb, nb)

    def table(X: scipy.sparse.csr_matrix) -> NDArray[np.float64]:
        s = np.asarray(X.sum(axis=0)).ravel()
        trans = s[: m * m].reshape(m, m)
        return np.column_stack([trans, s[m * m: m * m + m], s[m * m + m: m * m + 2 * m]])

    g2_rows, df_rows = _row_g2(table(A), table(B))
    g2 = float(g2_rows.sum())
    df = int(df_rows.sum())
    p_chi2 = float(scipy.stats.chi2.sf(g2, df)) if df > 0 else None
    pooled = scipy.sparse.vstack([A, B]).tocsr()
    n_a, n_b = A.shape[0], B.shape[0]
    rng = np.random.default_rng(seed)
    exceed_total = 0
    exceed_rows = np.zeros(m, np.int64)
    for _ in range(n_permutations):
        perm = rng.permutation(n_a + n_b)
        ga, _ = _row_g2(table(pooled[perm[:n_a]]), table(pooled[perm[n_a:]]))
        exceed_total += int(ga.sum() >= g2 - 1e-9)
        exceed_rows += ga >= g2_rows - 1e-9
    p_perm = (1 + exceed_total) / (n_permutations + 1)
    p_rows = (1 + exceed_rows) / (n_permutations + 1)
    tested = np.flatnonzero(df_rows > 0)
    adjusted, order = _holm(p_rows, tested)
    per_state = tuple({"state": vocab[i], "g2": float(g2_rows[i]), "df": int(df_rows[i]),
                       "p_permutation": float(p_rows[i]) if df_rows[i] > 0 else None,
                       "p_holm": float(adjusted[i]) if df_rows[i] > 0 else None} for i in range(m))
    differing = tuple(vocab[i] for i in order if adjusted[i] <= level)
    return HomogeneityResult(tuple(vocab), g2, df, p_chi2, float(p_perm), n_permutations, per_state, level,
                             differing, seed, (n_a, n_b))


def homogeneity_from_counts(a: NDArray[np.float64], b: NDArray[np.float64], states: list[str] | tuple[str, ...], *,
                            level: float = 0.05, n_traces: tuple[int, int] = (0, 0)) -> HomogeneityResult:
    """:func:`homogeneity_test` from the two groups' row counts alone (m × (m + 2): transitions, then the success
    and failure exits, on the same vocabulary ``states``): what partitioned corpora provide.

    Without the traces there is no permutation test; the χ² reference decides (``method="chi2"``), per state with
    Holm's step-down. Under the chain both groups' rows are multinomial given the visits, so G²_i → χ² with its df
    (Anderson & Goodman 1957); with the large counts of partitioned corpora the approximation is good.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    m = len(states)
    if a.shape != (m, m + 2) or b.shape != (m, m + 2):
        raise ValueError(f"row counts must have shape (m, m + 2) = {(m, m + 2)}, got {a.shape} and {b.shape}")
    g2_rows, df_rows = _row_g2(a, b)
    g2, df = float(g2_rows.sum()), int(df_rows.sum())
    p_chi2 = float(scipy.stats.chi2.sf(g2, df)) if df > 0 else None
    tested = np.flatnonzero(df_rows > 0)
    p_rows = np.ones(m)
    p_rows[tested] = scipy.stats.chi2.sf(g2_rows[tested], df_rows[tested])
    adjusted, order = _holm(p_rows, tested)
    per_state = tuple({"state": states[i], "g2": float(g2_rows[i]), "df": int(df_rows[i]),
                       "p_chi2": float(p_rows[i]) if df_rows[i] > 0 else None,
                       "p_holm": float(adjusted[i]) if df_rows[i] > 0 else None} for i in range(m))
    differing = tuple(states[i] for i in order if adjusted[i] <= level)
    return HomogeneityResult(tuple(states), g2, df, p_chi2, 1.0, 0, per_state, level, differing, 0, n_traces,
                             method="chi2")
