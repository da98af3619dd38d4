"""Layer 2 of the certificate: is first order enough? (docs/statistics.md §5; Tran-Truong & Le 2026, Algorithm 1).

Default (``mode="per-trace"``): likelihoods are computed trace by trace, never across trace boundaries, and both
orders are scored on **the same observations**:

* the observations are every transition inside a trace, x_{t−1} → x_t for t = 2..L, plus — with
  ``include_outcomes=True`` (default) — the exit of each completed trace, x_L → ⊕/⊖ (the outcome is the last
  symbol of the trace; censored traces have no exit, invalid traces are left out). The first state x_1 of a trace
  is not an observation (π0 models it identically under both orders).
* order 1 predicts x_t from x_{t−1}; order 2 from (x_{t−2}, x_{t−1}), where x_0 = START pads the first
  transition of every trace. So order 2 has (m + 1)·m contexts.

With n_ck the count of next symbol k after context c, ℓ = Σ n_ck ln(n_ck / n_c·) (unsmoothed MLE),
G² = 2(ℓ2 − ℓ1) = 2 Σ n_ijk ln(n_ijk n_·j· / (n_ij· n_·jk)) (Anderson & Goodman 1957), AIC = −2ℓ + 2p,
BIC = −2ℓ + p ln(n_obs), ΔAIC = AIC1 − AIC2, ΔBIC = BIC1 − BIC2 (a positive Δ prefers order 2).

Parameter counts p: ``"observed"`` (default) counts, per context seen in the data, the number of distinct next
symbols seen minus one (structural zeros excluded — the full count charges order 2 for (m+1)·m·(s−1) parameters
most of which no trace can ever use, which makes AIC almost unable to reject first order on real vocabularies);
``"full"`` counts p1 = m(s − 1), p2 = (m + 1)m(s − 1), with s = m + 2 next symbols (m without outcomes).
Measured under an order-1 truth (``benchmarks/results/audit_calibration.json``): ΔAIC > 0 in 0.7% of SS7 corpora
(300 traces), 0.3% of random 8-state corpora, but 6% of 150-trace corpora from the 3-state notation chain, where
df is small (AIC is a selection rule, not a level-α test; use ``criterion="permutation"`` for a calibrated one).

The G² test: asymptotic χ² with df = Σ_j (r_j − 1)(c_j − 1) over observed predecessors r_j and successors c_j
(reference only — it is anti-conservative on sparse tables), and a within-context permutation p-value: the next
symbols are shuffled among the observations that share the order-1 context, which keeps the order-1 fit and
destroys any dependence on x_{t−2}; p = (1 + #{G²* ≥ G²}) / (B + 1).

``mode="artifact"`` reproduces the authors' code exactly (their public artifact, lexuanbach/TraceToChain): one label
stream of all transient steps concatenated across traces (boundary pairs included, outcomes left out), P1 = (C1 + 1e−12)
/ (row + 1e−12·k), ℓ1 over the n − 1 pairs, ℓ2 over the n − 2 triples, k1 = k(k − 1), k2 = k²(k − 1), first order kept
iff AIC1 ≤ AIC2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table, fmt_number
from tracetochain._outcome import FAILURE, INVALID, SUCCESS
from tracetochain.audit._common import (
    REPLICATE_BLOCK,
    Seed,
    as_seed_sequence,
    chain_codes,
    json_dict,
    replicate_blocks,
    seed_record,
)
from tracetochain.chain import AbsorbingChain
from tracetochain.traces import TraceTable

OrderMode = Literal["per-trace", "artifact"]
ParameterCount = Literal["observed", "full"]
Criterion = Literal["aic", "bic", "permutation", "chi2"]

OBSERVATIONS_PER_TRACE = (
    "every transition inside a trace (x_{t-1} -> x_t, t = 2..L) plus, with outcomes, the exit of each completed "
    "trace (x_L -> SUCCESS/FAILURE); order 2 pads x_0 = START; the first state of a trace is not scored"
)
OBSERVATIONS_ARTIFACT = (
    "artifact: all transient steps concatenated across traces in table order; order 1 over the n-1 pairs, order 2 "
    "over the n-2 triples (boundary pairs included, outcomes excluded)"
)


# ------------------------------------------------------------------------------------------------ formulas
def _loglik(counts: NDArray[np.int64]) -> NDArray[np.float64]:
    """ℓ = Σ_c Σ_k n_ck ln(n_ck / n_c·) over the last axis (contexts on the axis before it), batched."""
    n = counts.astype(np.float64)
    rows = n.sum(axis=-1, keepdims=True)
    pos = n > 0
    safe_n = np.where(pos, n, 1.0)
    safe_rows = np.where(rows > 0, rows, 1.0)
    out: NDArray[np.float64] = np.where(pos, n * np.log(safe_n / safe_rows), 0.0).sum(axis=(-2, -1))
    return out


def _observed_params(counts: NDArray[np.int64]) -> int:
    """Σ over contexts with data of (number of distinct next symbols seen − 1)."""
    distinct = (counts > 0).sum(axis=-1)
    return int(np.sum(np.maximum(distinct - 1, 0)))


def artifact_aic(labels: Sequence[int] | NDArray[np.int64], n_states: int) -> dict[str, float]:
    """The artifact's concatenated-stream AIC, exactly as the authors compute it (ΔAIC = −2(ℓ1 − ℓ2) + 2(k1 − k2)).

    ℓ1 = Σ_{t=0}^{n−2} ln P1[s_t, s_{t+1}], P1 = (C1 + 1e−12)/(row + 1e−12·k); ℓ2 = Σ_{t=0}^{n−3} ln P2[s_t, s_{t+1},
    s_{t+2}] likewise; AIC1 = 2k(k − 1) − 2ℓ1, AIC2 = 2k²(k − 1) − 2ℓ2, ΔAIC = AIC1 − AIC2.

    >>> r = artifact_aic([0, 1, 0, 1, 0, 1], 2)
    >>> round(r["delta_aic"], 6)  # both fits are perfect: ΔAIC = 2(k1 − k2) = 2(2 − 4)
    -4.0
    """
    s = np.asarray(labels, dtype=np.int64)
    k = int(n_states)
    if s.size < 3:
        raise ValueError("the artifact AIC needs at least 3 steps")
    if s.min() < 0 or s.max() >= k:
        raise ValueError("labels must lie in 0..n_states-1")
    eps = 1e-12
    c1 = np.zeros((k, k))
    np.add.at(c1, (s[:-1], s[1:]), 1.0)
    p1 = (c1 + eps) / (c1.sum(axis=1, keepdims=True) + eps * k)
    ell1 = float(np.log(p1[s[:-1], s[1:]]).sum())
    c2 = np.zeros((k, k, k))
    np.add.at(c2, (s[:-2], s[1:-1], s[2:]), 1.0)
    p2 = (c2 + eps) / (c2.sum(axis=2, keepdims=True) + eps * k)
    ell2 = float(np.log(p2[s[:-2], s[1:-1], s[2:]]).sum())
    k1, k2 = k * (k - 1), k * k * (k - 1)
    aic1, aic2 = 2.0 * k1 - 2.0 * ell1, 2.0 * k2 - 2.0 * ell2
    return {"loglik1": ell1, "loglik2": ell2, "params1": float(k1), "params2": float(k2), "aic1": aic1,
            "aic2": aic2, "delta_aic": aic1 - aic2, "n_pairs": float(s.size - 1), "n_triples": float(s.size - 2)}


# ------------------------------------------------------------------------------------------------ result
@dataclass(frozen=True, repr=False)
class OrderResult(ResultDisplay):
    """Result of the Markov-order layer (order 1 vs order 2). Undefined numbers are None (reason in ``undefined``)."""

    mode: str
    criterion: str
    level: float
    keeps_order1: bool
    n_states: int
    n_traces: int
    n_observations: int
    observations: str
    include_outcomes: bool
    parameter_count: str
    loglik1: float | None
    loglik2: float | None
    params1: int | None
    params2: int | None
    aic1: float | None
    aic2: float | None
    delta_aic: float | None
    bic1: float | None = None
    bic2: float | None = None
    delta_bic: float | None = None
    g2: float | None = None
    df: int | None = None
    p_chi2: float | None = None
    p_permutation: float | None = None
    n_permutations: int = 0
    seed: int | str | None = None
    g2_by_state: dict[str, float] = field(default_factory=dict)
    undefined: dict[str, str] = field(default_factory=dict)

    @property
    def p_value(self) -> float | None:
        """The order test's p-value: the permutation one when computed, else the χ² reference."""
        return self.p_permutation if self.p_permutation is not None else self.p_chi2

    def to_dict(self) -> dict[str, Any]:
        return json_dict({k: getattr(self, k) for k in self.__dataclass_fields__})

    def describe(self) -> str:
        verdict = "keeps first order" if self.keeps_order1 else "rejects first order"
        parts = [f"ΔAIC = {fmt_number(self.delta_aic, 1)}"]
        if self.delta_bic is not None:
            parts.append(f"ΔBIC = {fmt_number(self.delta_bic, 1)}")
        if self.g2 is not None:
            parts.append(f"G² = {fmt_number(self.g2, 1)} (df {self.df})")
        if self.p_permutation is not None:
            parts.append(f"permutation p = {fmt_number(self.p_permutation, 4)}")
        if self.p_chi2 is not None:
            parts.append(f"χ² p = {fmt_number(self.p_chi2, 4)}")
        return (f"Markov order ({self.mode}, {self.n_observations} observations, criterion {self.criterion}): "
                f"{verdict}; " + ", ".join(parts))

    def __str__(self) -> str:
        return self.describe()

    def _display(self) -> Display:
        verdict = "keeps first order" if self.keeps_order1 else "rejects first order"
        fields: tuple[tuple[str, Any], ...] = (
            ("mode", self.mode), ("criterion", self.criterion), ("observations", self.n_observations),
            ("ΔAIC", self.delta_aic), ("ΔBIC", self.delta_bic), ("G²", self.g2), ("df", self.df),
            ("permutation p", self.p_permutation), ("χ² p", self.p_chi2))
        by_state = Table("states", ("state", "g2"), tuple(self.g2_by_state.items()))
        return Display(f"{verdict} ({self.mode}, {self.criterion})", kind="Markov-order layer",
                       lines=tuple(f"undefined: {v}" for v in self.undefined.values()), fields=fields,
                       tables=(by_state,) if self.g2_by_state else ())


# ------------------------------------------------------------------------------------------------ data
@dataclass(frozen=True)
class OrderObservations:
    """The scored observations: order-2 context (``prev`` ∈ 0..m, m = START), order-1 context ``cur``, ``nxt``.

    ``nxt`` ∈ 0..s−1, where m and m + 1 stand for SUCCESS and FAILURE when outcomes are included.
    """

    prev: NDArray[np.int64]
    cur: NDArray[np.int64]
    nxt: NDArray[np.int64]
    n_states: int
    n_symbols: int
    n_traces: int


def order_observations(traces: TraceTable, state_names: Sequence[str], *,
                       include_outcomes: bool = True) -> OrderObservations:
    """Build the per-trace observations of the default mode (see the module docstring), vectorised."""
    codes = chain_codes(traces, tuple(state_names))
    return order_observations_from_codes(codes, traces.offsets, traces.outcomes(), len(state_names),
                                         include_outcomes=include_outcomes)


def order_observations_from_codes(codes: NDArray[np.int64], offsets: NDArray[np.int64], outcomes: NDArray[np.int8],
                                  n_states: int, *, include_outcomes: bool = True) -> OrderObservations:
    """:func:`order_observations` from raw arrays (state codes 0..m−1 per step, trace offsets, outcome codes)."""
    m = int(n_states)
    codes = np.asarray(codes, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    oc = np.asarray(outcomes).astype(np.int64)
    valid = oc != INVALID
    lengths = np.diff(offsets)
    ti = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
    # Transitions inside valid traces.
    same = (ti[1:] == ti[:-1]) & valid[ti[:-1]] if ti.size > 1 else np.zeros(0, bool)
    p = np.flatnonzero(same)
    cur = codes[p]
    nxt = codes[p + 1]
    has_prev = (p >= 1) & (ti[np.maximum(p - 1, 0)] == ti[p])
    prev = np.where(has_prev, codes[np.maximum(p - 1, 0)], m)
    s = m
    if include_outcomes:
        s = m + 2
        done = valid & ((oc == SUCCESS) | (oc == FAILURE)) & (lengths > 0)
        last = offsets[1:][done] - 1
        e_prev = np.where(lengths[done] >= 2, codes[np.maximum(last - 1, 0)], m)
        prev = np.concatenate([prev, e_prev])
        cur = np.concatenate([cur, codes[last]])
        nxt = np.concatenate([nxt, m + oc[done]])
    return OrderObservations(prev.astype(np.int64), cur.astype(np.int64), nxt.astype(np.int64), m, s,
                             int(np.count_nonzero(valid)))


# ------------------------------------------------------------------------------------------------ the test
def order_test(traces: TraceTable, states: AbsorbingChain | Sequence[str] | None = None, *,
               mode: OrderMode = "per-trace", include_outcomes: bool = True,
               parameter_count: ParameterCount = "observed", criterion: Criterion = "aic", level: float = 0.05,
               n_permutations: int = 199, seed: Seed = 0) -> OrderResult:
    """Order 1 vs order 2 on labelled traces.

    Parameters
    ----------
    traces : TraceTable
        Traces whose ``state`` column holds the chain's states (e.g. ``StateModel.label(traces)``).
    states : AbsorbingChain or sequence of str, optional
        The state vocabulary (a chain's ``state_names``); default: the labels seen, in order of first appearance.
    mode : {"per-trace", "artifact"}, default "per-trace"
        The same-observation per-trace likelihoods (default), or the authors' concatenated-stream AIC.
    include_outcomes : bool, default True
        Score each completed trace's exit to SUCCESS/FAILURE as its last observation (per-trace mode).
    parameter_count : {"observed", "full"}, default "observed"
        How AIC/BIC count free parameters (module docstring).
    criterion : {"aic", "bic", "permutation", "chi2"}, default "aic"
        What decides ``keeps_order1``: ΔAIC ≤ 0 (the paper's rule; ties keep first order, as the artifact does),
        ΔBIC ≤ 0, or the permutation / χ² p-value of G² above ``level``.
    level : float, default 0.05
        Significance level of the p-value criteria.
    n_permutations : int, default 199
        B for the within-context permutation test (0 skips it; use 999 for reported p-values).
    seed : int, default 0
    """
    if mode not in ("per-trace", "artifact"):
        raise ValueError(f"mode must be 'per-trace' or 'artifact', got {mode!r}")
    if parameter_count not in ("observed", "full"):
        raise ValueError(f"parameter_count must be 'observed' or 'full', got {parameter_count!r}")
    if criterion not in ("aic", "bic", "permutation", "chi2"):
        raise ValueError(f"criterion must be 'aic', 'bic', 'permutation' or 'chi2', got {criterion!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if n_permutations < 0:
        raise ValueError(f"n_permutations must be >= 0, got {n_permutations}")
    if criterion == "permutation" and n_permutations == 0:
        raise ValueError("criterion='permutation' needs n_permutations >= 1")
    if isinstance(states, AbsorbingChain):
        names: tuple[str, ...] = states.state_names
    elif states is not None:
        names = tuple(str(s) for s in states)
    else:
        names = tuple(traces.state_labels()[1])
    if mode == "artifact":
        return _artifact(traces, names, criterion)
    obs = order_observations(traces, names, include_outcomes=include_outcomes)
    return _per_trace(obs, names, include_outcomes, parameter_count, criterion, level, n_permutations, seed)


def _artifact(traces: TraceTable, names: tuple[str, ...], criterion: str) -> OrderResult:
    codes = chain_codes(traces, names)
    valid = traces.outcomes() != INVALID
    seq = codes[valid[traces.trace_index]] if codes.size else codes
    m = len(names)
    n_tr = int(np.count_nonzero(valid))
    if criterion != "aic":
        raise ValueError("mode='artifact' computes the paper's AIC only; use criterion='aic'")
    if seq.size < 3:
        return OrderResult("artifact", "aic", 0.05, True, m, n_tr, int(seq.size), OBSERVATIONS_ARTIFACT, False,
                           "full", None, None, None, None, None, None, None,
                           undefined={"delta_aic": "fewer than 3 steps"})
    r = artifact_aic(seq, m)
    return OrderResult(
        "artifact", "aic", 0.05, bool(r["aic1"] <= r["aic2"]), m, n_tr, int(r["n_pairs"]), OBSERVATIONS_ARTIFACT,
        False, "full (k1 = k(k-1), k2 = k^2(k-1))", r["loglik1"], r["loglik2"], int(r["params1"]),
        int(r["params2"]), r["aic1"], r["aic2"], r["delta_aic"],
        undefined={"g2": "the artifact scores the two orders on different observations (n-1 pairs vs n-2 "
                         "triples), so no likelihood-ratio test is defined",
                   "delta_bic": "not part of the artifact"})


def order_triplets(obs: OrderObservations) -> Any:
    """The observation counts n[prev, cur, next] — all the order test needs — as a sparse ``scipy.sparse.csr_array``
    of shape ((m + 1)·m, s): row ``prev·m + cur`` (prev = m is START), column ``next``. Sparse because the dense
    (m + 1) × m × s cube grows as m³ while the observed triplets are at most the number of steps."""
    from scipy import sparse

    m, s = obs.n_states, obs.n_symbols
    rows = np.asarray(obs.prev, np.int64) * m + np.asarray(obs.cur, np.int64)
    return sparse.csr_array((np.ones(rows.size, np.int64), (rows, np.asarray(obs.nxt, np.int64))),
                            shape=((m + 1) * m, s))  # duplicate (row, column) pairs are summed


def as_triplet_matrix(triplets: Any, m: int, s: int) -> Any:
    """``triplets`` as the sparse ((m + 1)·m) × s matrix of :func:`order_triplets` (a dense (m + 1, m, s) cube is
    accepted too), with explicit zeros removed; ValueError on any other shape."""
    from scipy import sparse

    if sparse.issparse(triplets):
        if triplets.shape != ((m + 1) * m, s):
            raise ValueError(f"triplets must have shape ((m + 1)·m, s) = {((m + 1) * m, s)}, got {triplets.shape}")
        out = sparse.csr_array(triplets, dtype=np.int64)
    else:
        dense = np.asarray(triplets, dtype=np.int64)
        if dense.shape != (m + 1, m, s):
            raise ValueError(f"triplets must have shape (m + 1, m, s) = {(m + 1, m, s)}, got {dense.shape}")
        out = sparse.csr_array(dense.reshape((m + 1) * m, s))
    out.sum_duplicates()
    out.eliminate_zeros()
    return out


def order_test_counts(triplets: NDArray[np.int64], states: Sequence[str], *, n_traces: int,
                      include_outcomes: bool = True, parameter_count: ParameterCount = "observed",
                      criterion: Criterion = "aic", level: float = 0.05, n_permutations: int = 199,
                      seed: Seed = 0) -> OrderResult:
    """The per-trace order test from the counts n[prev, cur, next] of its observations (:func:`order_triplets`):
    what a partitioned corpus provides, since counts add up over partitions.

    Every statistic (ℓ1, ℓ2, G², AIC, BIC, χ² p) equals :func:`order_test`'s on the same traces. The permutation
    p-value is drawn differently: shuffling the next symbols within an order-1 context ``cur = j`` is the same as
    drawing the prev × next table of that context uniformly among the tables with its margins (multivariate
    hypergeometric), which :func:`random_tables` does (Boyett's shuffle, or for large totals a sequential
    hypergeometric draw at a cost independent of the number of observations). Same null distribution, different
    random stream.
    """
    if parameter_count not in ("observed", "full"):
        raise ValueError(f"parameter_count must be 'observed' or 'full', got {parameter_count!r}")
    if criterion not in ("aic", "bic", "permutation", "chi2"):
        raise ValueError(f"criterion must be 'aic', 'bic', 'permutation' or 'chi2', got {criterion!r}")
    if criterion == "permutation" and n_permutations == 0:
        raise ValueError("criterion='permutation' needs n_permutations >= 1")
    names = tuple(str(x) for x in states)
    m = len(names)
    s = m + 2 if include_outcomes else m
    return _per_trace_counts(as_triplet_matrix(triplets, m, s), names, n_traces, include_outcomes, parameter_count,
                             criterion, level, n_permutations, seed, permutation="tables")


def _per_trace(obs: OrderObservations, names: tuple[str, ...], include_outcomes: bool, parameter_count: str,
               criterion: str, level: float, n_permutations: int, seed: Seed) -> OrderResult:
    m, s = obs.n_states, obs.n_symbols
    return _per_trace_counts(as_triplet_matrix(order_triplets(obs), m, s), names, obs.n_traces, include_outcomes,
                             parameter_count, criterion, level, n_permutations, seed, permutation=obs)


def _per_trace_counts(triplets: Any, names: tuple[str, ...], n_traces: int, include_outcomes: bool,
                      parameter_count: str, criterion: str, level: float, n_permutations: int, seed: Seed,
                      permutation: OrderObservations | Literal["tables"]) -> OrderResult:
    """The order test on the sparse triplet counts (:func:`as_triplet_matrix`): rows (prev, cur), columns next."""
    m = len(names)
    s = triplets.shape[1]
    n = int(triplets.sum())
    undefined: dict[str, str] = {}
    if n == 0 or m == 0:
        return OrderResult("per-trace", criterion, level, True, m, n_traces, 0, OBSERVATIONS_PER_TRACE,
                           include_outcomes, parameter_count, None, None, None, None, None, None, None,
                           n_permutations=n_permutations, seed=seed_record(seed),
                           undefined={"delta_aic": "no observations (every trace has one step and no outcome)"})
    # Per stored entry: its row (prev·m + cur), its order-1 context cur, and its log-likelihood term under the
    # order-2 model, n ln(n / n_row).
    row_sums = np.asarray(triplets.sum(axis=1), np.float64).ravel()
    nnz_per_row = np.diff(triplets.indptr)
    row_of = np.repeat(np.arange(triplets.shape[0]), nnz_per_row)
    cur_of = row_of % m
    data = triplets.data.astype(np.float64)
    terms = data * np.log(data / row_sums[row_of])
    n1 = np.zeros((m, s))
    np.add.at(n1, (cur_of, triplets.indices), data)
    l1 = float(_loglik(n1))
    l2 = float(terms.sum())
    g2 = max(0.0, 2.0 * (l2 - l1))
    if parameter_count == "full":
        p1, p2 = m * (s - 1), (m + 1) * m * (s - 1)
    else:
        p1, p2 = _observed_params(n1), int(np.sum(np.maximum(nnz_per_row - 1, 0)))
    aic1, aic2 = -2.0 * l1 + 2.0 * p1, -2.0 * l2 + 2.0 * p2
    bic1, bic2 = -2.0 * l1 + p1 * math.log(n), -2.0 * l2 + p2 * math.log(n)
    # χ² reference: df = Σ_j (r_j − 1)(c_j − 1) over observed predecessors r_j and successors c_j.
    r_j = np.bincount(np.flatnonzero(row_sums > 0) % m, minlength=m)
    c_j = (n1 > 0).sum(axis=1)
    df = int(np.sum(np.maximum(r_j - 1, 0) * np.maximum(c_j - 1, 0)))
    p_chi2: float | None
    if df > 0:
        from scipy.special import chdtrc  # chi2.sf's own routine, bit for bit, without importing scipy.stats

        p_chi2 = float(chdtrc(df, g2))
    else:
        p_chi2 = None
        undefined["p_chi2"] = "df = 0: no context has two predecessors and two successors, nothing to test"
    # Per-state contributions to G² (which states carry memory).
    l2_by_j = np.bincount(cur_of, weights=terms, minlength=m)
    l1_by_j = _loglik(n1[:, None, :])
    g2_by_state = {names[j]: float(max(0.0, 2.0 * (l2_by_j[j] - l1_by_j[j]))) for j in range(m)
                   if n1[j].sum() > 0}
    p_perm: float | None = None
    if n_permutations and isinstance(permutation, OrderObservations):
        p_perm = _permutation_pvalue(permutation, l1, g2, n_permutations, seed)
    elif n_permutations:
        p_perm = _table_permutation_pvalue(triplets, m, l1, g2, n_permutations, seed)
    if p_perm is None and n_permutations == 0:
        undefined["p_permutation"] = "not computed (n_permutations = 0)"
    d_aic, d_bic = aic1 - aic2, bic1 - bic2
    if criterion == "aic":
        keep = d_aic <= 0
    elif criterion == "bic":
        keep = d_bic <= 0
    elif criterion == "permutation":
        keep = p_perm is None or p_perm > level
    else:
        keep = p_chi2 is None or p_chi2 > level
    return OrderResult(
        "per-trace", criterion, level, bool(keep), m, n_traces, n, OBSERVATIONS_PER_TRACE, include_outcomes,
        parameter_count, l1, l2, int(p1), int(p2), aic1, aic2, d_aic, bic1, bic2, d_bic, g2, df, p_chi2, p_perm,
        n_permutations, seed_record(seed), g2_by_state, undefined)


# Cost model of the two exact samplers below (per replicate, measured on 2 cores): Boyett's shuffle ~40 ns per
# observation, the sequential hypergeometric ~250 ns per cell plus ~8 µs of call overhead per cell and batch.
_SHUFFLE_NS_PER_ITEM = 40.0
_HYPERGEOMETRIC_NS_PER_CELL = 250.0
_HYPERGEOMETRIC_NS_PER_CALL = 8_000.0
_SHUFFLE_BLOCK_ITEMS = 1 << 22  # replicates shuffled together hold at most this many observations (32 MB)


def random_tables(rows: NDArray[np.int64], cols: NDArray[np.int64], size: int,
                  rng: np.random.Generator) -> NDArray[np.int64]:
    """``size`` tables drawn uniformly among the r × c tables of non-negative integers with margins ``rows`` and
    ``cols`` (the multivariate hypergeometric law P(x) = Π_i R_i! Π_j C_j! / (N! Π_ij x_ij!)), shape (size, r, c).

    Two exact samplers, chosen per table by their cost (the law does not depend on the choice):

    - Boyett (1979, AS 144): shuffle the N row labels and read the columns off consecutive blocks of C_j places —
      O(N) per table, best for small totals;
    - sequential hypergeometric: column by column, row by row, x_ij ~ Hypergeometric(R_i', Σ_{k>i} R_k', c_j') of
      what is left — O(r c) per table whatever N, for the large totals of a partitioned corpus.

    This is what ``scipy.stats.random_table`` draws (Patefield's or Boyett's algorithm there), with numpy's
    ``Generator.permuted`` and ``Generator.hypergeometric`` instead: importing scipy.stats for it cost every
    ``audit`` and ``report`` ~0.5 s of start-up, more than the draws themselves."""
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    r, c, n = rows.size, cols.size, int(rows.sum())
    if int(cols.sum()) != n or (rows < 0).any() or (cols < 0).any():
        raise ValueError(f"margins must be non-negative with equal totals, got rows {rows} and cols {cols}")
    shuffle_ns = _SHUFFLE_NS_PER_ITEM * n
    hyper_ns = max(r - 1, 0) * max(c - 1, 0) * _HYPERGEOMETRIC_NS_PER_CELL + (
        max(r - 1, 0) * max(c - 1, 0) * _HYPERGEOMETRIC_NS_PER_CALL / max(size, 1))
    if shuffle_ns <= hyper_ns:
        return _boyett_tables(rows, cols, size, rng)
    return _hypergeometric_tables(rows, cols, size, rng)


def _boyett_tables(rows: NDArray[np.int64], cols: NDArray[np.int64], size: int,
                   rng: np.random.Generator) -> NDArray[np.int64]:
    r, c, n = rows.size, cols.size, int(rows.sum())
    out = np.empty((size, r, c), dtype=np.int64)
    if n == 0:
        out[:] = 0
        return out
    labels = np.repeat(np.arange(r, dtype=np.int64) * c, rows)  # the row part of each cell's code
    column = np.repeat(np.arange(c, dtype=np.int64), cols)
    block = max(1, _SHUFFLE_BLOCK_ITEMS // n)
    for first in range(0, size, block):
        b = min(block, size - first)
        codes = rng.permuted(np.broadcast_to(labels, (b, n)), axis=1)
        codes += column
        codes += (np.arange(b, dtype=np.int64) * (r * c))[:, None]
        out[first:first + b] = np.bincount(codes.ravel(), minlength=b * r * c).reshape(b, r, c)
    return out


def _hypergeometric_tables(rows: NDArray[np.int64], cols: NDArray[np.int64], size: int,
                           rng: np.random.Generator) -> NDArray[np.int64]:
    r, c = rows.size, cols.size
    out = np.empty((size, r, c), dtype=np.int64)
    left_in_row = np.repeat(rows[None, :], size, axis=0)
    left = int(rows.sum())
    for j in range(c - 1):
        need = np.full(size, cols[j], dtype=np.int64)
        pool = np.full(size, left, dtype=np.int64)  # what is left in rows i, i+1, …, r-1
        for i in range(r - 1):
            pool -= left_in_row[:, i]
            x = rng.hypergeometric(left_in_row[:, i], pool, need)
            out[:, i, j] = x
            left_in_row[:, i] -= x
            need -= x
        out[:, r - 1, j] = need
        left_in_row[:, r - 1] -= need
        left -= int(cols[j])
    out[:, :, c - 1] = left_in_row
    return out


def _table_permutation_pvalue(triplets: Any, m: int, l1: float, g2: float, n_permutations: int,
                              seed: Seed) -> float:
    """The within-context permutation test drawn as random tables with fixed margins (:func:`order_test_counts`).

    ``triplets`` as in :func:`as_triplet_matrix`; for each order-1 context the prev × next table is redrawn B times
    by :func:`random_tables` (rows and columns with zero margin dropped, tables with one row or column fixed).
    """
    rng = np.random.default_rng(as_seed_sequence(seed))
    l2_star = np.zeros(n_permutations)
    for j in range(m):
        table = triplets[np.arange(m + 1) * m + j].toarray()
        rows, cols = table.sum(axis=1), table.sum(axis=0)
        r, c = rows[rows > 0], cols[cols > 0]
        if r.size < 2 or c.size < 2:
            l2_star += float(_loglik(table))
            continue
        draws = random_tables(r, c, n_permutations, rng)
        l2_star += _loglik(draws[:, None, :, :]).reshape(n_permutations)
    g_star = 2.0 * (l2_star - l1)
    tol = 1e-9 * max(1.0, abs(g2))
    return (1 + int(np.count_nonzero(g_star >= g2 - tol))) / (n_permutations + 1)


def _permutation_pvalue(obs: OrderObservations, l1: float, g2: float, n_permutations: int, seed: Seed) -> float:
    """Within-context permutation test of G² (Anderson & Goodman 1957 for G²), vectorised over blocks of replicates.

    Observations are sorted by their order-1 context; a replicate shuffles ``nxt`` inside each context block by
    argsorting ``context + U(0, 1)`` keys, which keeps n_jk (so ℓ1) and the order-2 contexts fixed.
    """
    m, s = obs.n_states, obs.n_symbols
    order = np.argsort(obs.cur, kind="stable")
    cur = obs.cur[order]
    ctx = (obs.prev[order] * m + cur) * s
    nxt = obs.nxt[order]
    n = cur.size
    K = (m + 1) * m * s
    g_star = np.empty(n_permutations)
    for first, count, rng in replicate_blocks(seed, n_permutations):
        block = REPLICATE_BLOCK
        keys = cur[None, :] + rng.random((block, n))
        perm = np.argsort(keys, axis=1)
        codes = ctx[None, :] + nxt[perm] + (np.arange(block) * K)[:, None]
        counts = np.bincount(codes.ravel(), minlength=block * K).reshape(block, (m + 1) * m, s)
        l2s = _loglik(counts)
        g_star[first:first + count] = 2.0 * (l2s[:count] - l1)
    tol = 1e-9 * max(1.0, abs(g2))
    return (1 + int(np.count_nonzero(g_star >= g2 - tol))) / (n_permutations + 1)
