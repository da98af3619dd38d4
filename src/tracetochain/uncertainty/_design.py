r"""A design effect per quantity: how much repeated trials of a task widen *this* quantity's interval.

Kish's design effect of the pass rate (``audit._trials.TaskTable.design_effect``) measures the clustering of success
only. Tasks that differ in speed but not in success leave it at ≈ 1 while the trace lengths — and so mean steps and
R(d) — cluster strongly; and a quantity that barely clusters is over-widened when every row is tempered by the pass
rate's d. This module measures the clustering of each quantity itself, by the infinitesimal jackknife of the chain's
estimator (Efron 1981; the cluster-robust "sandwich" variance, Liang & Zeger 1986).

The chain's rows are multinomial MLEs P_s· = X_s· / n_s. A quantity θ(P) whose derivative is ∂θ/∂P_{s,c} = g_{s,c} has
per-count influence φ_{s,c} = (g_{s,c} − Σ_c' P_{s,c'} g_{s,c'}) / n_s (and per start, φ0_s = (w_s − θ)/n0 for
θ = π0·w), so a trace, or a task's trials together, moves θ̂ by its count vector times φ. Then

    V_model = Σ_{s,c} X_{s,c} φ_{s,c}² + Σ_s x0_s φ0_s²       (every transition independent: the posterior's variance)
    V_unit  = Σ_k (U_k · φ)²                                   (units k — tasks, a trace without a task its own —
                                                                 independent, anything inside a unit free)
    d_θ     = max(1, V_unit / V_model).

For θ = π0·w with a value function w over the states (R∞: w = h = N R⊕ with 1 at success, 0 at failure; mean steps:
w = N 1 with 0 at both exits), g_{s,c} = z_s w_c with z = π0 N the expected visits. For R(d) = π0·V_d, with
V_j(x) = P(success within j steps from x) and a^(l) = π0 Q^l, g_{s,c} = Σ_{l<d} a^(l)_s V_{d−1−l}(c) and
Σ_c P_{s,c} V_j(c) = V_{j+1}(s). The posterior draws, tempered by the pass rate's d₀, are then stretched per quantity
by √(d_θ / d₀) about their median on the logit (probabilities) or log (steps) scale (delta method: the ratio of
variances is scale-free), in :meth:`~tracetochain.uncertainty.ChainEnsemble.stats` — one implementation for every
surface. The bootstrap by task needs none of this: it resamples the units themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from tracetochain.chain import AbsorbingChain

if TYPE_CHECKING:
    import scipy.sparse

#: Horizons of R(d) at which the design effect is computed exactly; between them it is interpolated (log scale).
_MAX_EXACT_HORIZONS = 12
#: Horizons of R(d)'s design effect a saved chain keeps.
STORED_HORIZON = 100


@dataclass(frozen=True, eq=False)
class UnitCounts:
    """Each unit's (task's, a trace without a task being its own unit) summed per-trace count vector, in the layout
    of :func:`~tracetochain.chain.per_trace_counts` (m² + 3m columns), keyed by the unit's id hash (sorted). Adds up
    over partitions."""

    keys: NDArray[np.uint64]
    counts: scipy.sparse.csr_matrix
    n_traces: NDArray[np.int64]
    #: Per trace: its unit's hash and its number of steps (the speed-heterogeneity test, ``audit._speed``).
    trace_unit: NDArray[np.uint64] = field(default_factory=lambda: np.zeros(0, np.uint64))
    trace_length: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))

    @staticmethod
    def build(unit: NDArray[np.uint64], per_trace: scipy.sparse.csr_matrix,
              lengths: NDArray[np.int64] | None = None) -> UnitCounts:
        import scipy.sparse

        unit = np.asarray(unit, np.uint64)
        uniq, inv = np.unique(unit, return_inverse=True)
        n = int(inv.size)
        A = scipy.sparse.csr_matrix((np.ones(n), (inv, np.arange(n))), shape=(uniq.size, n))
        L = np.zeros(n, np.int64) if lengths is None else np.asarray(lengths, np.int64)
        return UnitCounts(uniq, _canonical(A @ per_trace), np.bincount(inv, minlength=uniq.size).astype(np.int64),
                          unit, L)

    @property
    def repeated(self) -> bool:
        """Some unit holds two or more traces."""
        return bool(np.any(self.n_traces >= 2))

    def merge(self, other: UnitCounts) -> UnitCounts:
        import scipy.sparse

        keys = np.concatenate([self.keys, other.keys])
        uniq, inv = np.unique(keys, return_inverse=True)
        A = scipy.sparse.csr_matrix((np.ones(inv.size), (inv, np.arange(inv.size))), shape=(uniq.size, inv.size))
        stacked = scipy.sparse.vstack([self.counts, other.counts]).tocsr()
        return UnitCounts(uniq, _canonical(A @ stacked),
                          np.bincount(inv, np.concatenate([self.n_traces, other.n_traces]),
                                      minlength=uniq.size).astype(np.int64),
                          np.concatenate([self.trace_unit, other.trace_unit]),
                          np.concatenate([self.trace_length, other.trace_length]))

    def reindexed(self, idx: NDArray[np.int64], M: int) -> UnitCounts:
        """Columns moved to the vocabulary of M states (``idx[old] = new``)."""
        import scipy.sparse

        m = idx.size
        coo = self.counts.tocoo()
        cols = layout_columns(idx, M)[coo.col] if m else coo.col
        return UnitCounts(self.keys, _canonical(scipy.sparse.csr_matrix((coo.data, (coo.row, cols)),
                                                                        shape=(self.keys.size, M * M + 3 * M))),
                          self.n_traces,
                          self.trace_unit, self.trace_length)


def layout_columns(idx: NDArray[np.int64], M: int) -> NDArray[np.int64]:
    """Where each column of the per-trace count layout m² + 3m (``chain.per_trace_counts``) goes in the vocabulary
    of M states (``idx[old] = new``)."""
    out: NDArray[np.int64] = np.concatenate([(idx[:, None] * M + idx[None, :]).ravel()]
                                            + [M * M + k * M + idx for k in range(3)]).astype(np.int64)
    return out


def _canonical(matrix: Any) -> scipy.sparse.csr_matrix:
    """CSR with summed duplicates and sorted column indices: the same counts give the same arrays, so every sum over
    them runs in one order — the same design effects, bit for bit, on every engine and partitioning."""
    out = matrix.tocsr()
    out.sum_duplicates()
    out.sort_indices()
    return out


def _ratio(phi: NDArray[np.float64], phi0: NDArray[np.float64], X: NDArray[np.float64], x0: NDArray[np.float64],
           U: scipy.sparse.csr_matrix, m: int) -> float:
    v_model = float(np.sum(X * phi * phi) + np.sum(x0 * phi0 * phi0))
    if not np.isfinite(v_model) or v_model <= 0.0:
        return 1.0
    # U's layout: [C (m²) | c⊕ (m) | c⊖ (m) | first (m)]; φ's: rows s, columns [transient m | ⊕ | ⊖].
    vec = np.concatenate([phi[:, :m].ravel(), phi[:, m], phi[:, m + 1], phi0])
    psi = U @ vec
    v_unit = float(psi @ psi)
    return max(1.0, v_unit / v_model) if np.isfinite(v_unit) else 1.0


@dataclass(frozen=True, eq=False)
class QuantityDesign:
    """The design effects d_θ of a chain's quantities under the units' clustering (module docstring), and the design
    effect d₀ its posterior draws were tempered by. :meth:`stretch` is the factor √(d_θ / d₀) of a built-in
    quantity, or None for quantities it does not cover (they keep d₀)."""

    chain: AbsorbingChain
    X: NDArray[np.float64]  # (m, m + 2) data counts [C | c⊕ | c⊖]
    x0: NDArray[np.float64]  # (m,) first states
    units: UnitCounts
    tempered_by: float = 1.0
    _cache: dict[Any, Any] = field(default_factory=dict)

    @property
    def n_rows(self) -> NDArray[np.float64]:
        out: NDArray[np.float64] = np.asarray(self.X.sum(axis=1), np.float64)
        return out

    def _rows(self) -> NDArray[np.float64]:
        c = self.chain
        return np.column_stack([c.Q, c.R_success, c.R_failure])

    def _value_effect(self, w: NDArray[np.float64], exits: tuple[float, float]) -> float:
        """d for θ = π0·w with value w on the states and ``exits`` at (success, failure)."""
        c = self.chain
        m = c.n_states
        z = np.asarray(c.expected_visits(), np.float64)
        v = np.concatenate([w, exits])
        ev = self._rows() @ v
        n = self.n_rows
        scale = np.divide(z, n, out=np.zeros(m), where=n > 0)
        phi = scale[:, None] * (v[None, :] - ev[:, None])
        n0 = float(self.x0.sum())
        theta = float(c.pi0 @ w)
        phi0 = (w - theta) / n0 if n0 > 0 else np.zeros(m)
        return _ratio(phi, phi0, self.X, self.x0, self.units.counts, m)

    def r_inf(self) -> float:
        if "r_inf" not in self._cache:
            self._cache["r_inf"] = self._value_effect(np.asarray(self.chain.success_probabilities, float), (1.0, 0.0))
        return float(self._cache["r_inf"])

    def mean_steps(self) -> float:
        if "mean_steps" not in self._cache:
            self._cache["mean_steps"] = self._value_effect(_steps(self.chain), (0.0, 0.0))
        return float(self._cache["mean_steps"])

    def reliability(self, horizon: int) -> NDArray[np.float64]:
        """d of R(d) for d = 0..horizon (exact at ≤ 12 horizons, log-interpolated between; d of R(0) is 1)."""
        key = ("reliability", int(horizon))
        if key not in self._cache:
            self._cache[key] = _reliability_effects(self, int(horizon))
        out: NDArray[np.float64] = self._cache[key]
        return out

    def stretch(self, quantity: str, params: dict[str, Any]) -> NDArray[np.float64] | float | None:
        return _stretch(self, quantity, params)

    def stored(self, horizon: int = STORED_HORIZON) -> dict[str, Any]:
        """What a saved chain keeps (``metadata["design_effect_per_quantity"]``) to give the same intervals when its
        posterior is drawn again without the traces (:class:`StoredDesign`)."""
        return {"r_inf": self.r_inf(), "mean_steps": self.mean_steps(),
                "reliability": [float(x) for x in self.reliability(horizon)]}

    def to_dict(self, horizon: int = 10) -> dict[str, Any]:
        return {"r_inf": self.r_inf(), "mean_steps": self.mean_steps(),
                f"R({horizon})": float(self.reliability(horizon)[-1]), "tempered_by": self.tempered_by,
                "n_units": int(self.units.keys.size), "method": "infinitesimal jackknife by task (cluster sandwich "
                "variance over the chain's multinomial variance)"}


def _stretch(design: Any, quantity: str, params: dict[str, Any]) -> NDArray[np.float64] | float | None:
    d0 = design.tempered_by
    if quantity in ("r_inf", "failure_probability", "pass_hat_k", "pass_at_k"):
        return float(np.sqrt(design.r_inf() / d0))
    if quantity == "mean_steps":
        return float(np.sqrt(design.mean_steps() / d0))
    if quantity == "reliability":
        out: NDArray[np.float64] = np.sqrt(np.asarray(design.reliability(int(params["horizon"])), np.float64) / d0)
        return out
    return None


@dataclass(frozen=True)
class StoredDesign:
    """Design effects saved with a chain (:meth:`QuantityDesign.stored`): a posterior drawn again from the saved
    counts (``tracetochain summarize CHAIN``, ``interval_summary(chain)``) is stretched as the analysis's was. R(d)
    past the stored horizon keeps the last stored value."""

    doc: dict[str, Any]
    tempered_by: float = 1.0

    def r_inf(self) -> float:
        return float(self.doc["r_inf"])

    def mean_steps(self) -> float:
        return float(self.doc["mean_steps"])

    def reliability(self, horizon: int) -> NDArray[np.float64]:
        r = np.asarray(self.doc["reliability"], np.float64)
        out = np.full(int(horizon) + 1, r[-1] if r.size else 1.0)
        k = min(r.size, out.size)
        out[:k] = r[:k]
        return out

    def stretch(self, quantity: str, params: dict[str, Any]) -> NDArray[np.float64] | float | None:
        return _stretch(self, quantity, params)

    def to_dict(self) -> dict[str, Any]:
        return {"r_inf": self.r_inf(), "mean_steps": self.mean_steps(), "R(10)": float(self.reliability(10)[-1]),
                "tempered_by": self.tempered_by, "method": "saved with the chain"}

    @staticmethod
    def valid(doc: Any) -> bool:
        return (isinstance(doc, dict) and all(isinstance(doc.get(k), (int, float)) and doc[k] >= 1
                                              for k in ("r_inf", "mean_steps"))
                and isinstance(doc.get("reliability"), list))


def _steps(chain: AbsorbingChain) -> NDArray[np.float64]:
    m = chain.n_states
    return np.asarray(np.linalg.solve(np.eye(m) - chain.Q, np.ones(m)), np.float64)


def _horizon_grid(horizon: int) -> NDArray[np.int64]:
    if horizon <= _MAX_EXACT_HORIZONS:
        return np.arange(1, horizon + 1)
    g = np.unique(np.round(np.geomspace(1, horizon, _MAX_EXACT_HORIZONS)).astype(np.int64))
    return g


def _reliability_effects(design: QuantityDesign, horizon: int) -> NDArray[np.float64]:
    import scipy.sparse

    c = design.chain
    m = c.n_states
    out = np.ones(horizon + 1)
    if horizon < 1:
        return out
    grid = _horizon_grid(horizon)
    H = int(grid[-1])
    Q = c.Q
    P = design._rows()
    # V[j] over the m + 2 columns: P(success within j steps), V_0 = 0 on the states, 1 at ⊕, 0 at ⊖.
    V = np.zeros((H + 1, m + 2))
    V[:, m] = 1.0
    for j in range(1, H + 1):
        V[j, :m] = P @ V[j - 1]
    A = np.zeros((H, m))  # a^(l) = π0 Q^l
    a = np.asarray(c.pi0, float).copy()
    for lag in range(H):
        A[lag] = a
        a = a @ Q
    n = design.n_rows
    inv_n = np.divide(1.0, n, out=np.zeros(m), where=n > 0)
    X, x0 = design.X, design.x0
    n0 = float(x0.sum())
    U = design.units.counts
    rows, cols = np.nonzero(X)
    vals = X[rows, cols]
    # Unit sums of visits out of each state (u_ks) and of V_j over each state's outcome columns.
    K = m * m + 3 * m
    Ucoo = U.tocoo()
    col = Ucoo.col
    is_out = col < m * m + 2 * m
    src = np.where(col < m * m, col // max(m, 1), (col - m * m) % max(m, 1))
    dst = np.where(col < m * m, col % max(m, 1), np.where(col < m * m + m, m, m + 1))
    ur, ud, us, ut = Ucoo.row[is_out], Ucoo.data[is_out], src[is_out], dst[is_out]
    n_units = U.shape[0]
    first = (col >= m * m + 2 * m) & (col < K)
    F = scipy.sparse.csr_matrix((Ucoo.data[first], (Ucoo.row[first], col[first] - (m * m + 2 * m))),
                                shape=(n_units, m))
    psi = {int(d): np.zeros(n_units) for d in grid}
    sq = {int(d): np.zeros(vals.size) for d in grid}
    for j in range(H):
        # Y_j[k, s] = Σ_c U_k,s,c (V_j(c) − V_{j+1}(s)), one sparse pass.
        contrib = ud * (V[j, ut] - V[j + 1, us])
        Yj = scipy.sparse.csr_matrix((contrib, (ur, us)), shape=(n_units, m))
        per_count = V[j, cols] - V[j + 1, rows]
        for d in grid:
            lag = int(d) - 1 - j
            if lag < 0:
                continue
            w = A[lag] * inv_n
            psi[int(d)] += Yj @ w
            sq[int(d)] += w[rows] * per_count
    for d in grid:
        theta = float(c.pi0 @ V[int(d), :m])
        phi0 = (V[int(d), :m] - theta) / n0 if n0 > 0 else np.zeros(m)
        p = psi[int(d)] + (F @ phi0 if n0 > 0 else 0.0)
        v_model = float(np.sum(vals * sq[int(d)] ** 2) + np.sum(x0 * phi0 * phi0))
        v_unit = float(p @ p)
        out[int(d)] = max(1.0, v_unit / v_model) if v_model > 0 and np.isfinite(v_unit) else 1.0
    if grid.size < horizon:
        logd = np.log(out[grid])
        out[1:] = np.exp(np.interp(np.arange(1, horizon + 1), grid, logd))
    return out


def _logit(p: NDArray[np.float64]) -> NDArray[np.float64]:
    q = np.clip(p, 1e-12, 1 - 1e-12)
    out: NDArray[np.float64] = np.log(q) - np.log1p(-q)
    return out


def stretch_draws(values: NDArray[np.float64], factor: NDArray[np.float64] | float, scale: str
                  ) -> NDArray[np.float64]:
    """Draws (B, …) stretched about their median by ``factor`` (broadcast over the trailing axes) on the logit
    (``scale="probability"``) or log (``"positive"``) scale, mapped back (so they stay in range)."""
    v = np.asarray(values, np.float64)
    if v.shape[0] == 0:
        return v
    f = np.asarray(factor, np.float64)
    if np.all(f == 1.0):
        return v
    if scale == "probability":
        t = _logit(v)
        med = np.median(t, axis=0)
        t2 = med + f * (t - med)
        out: NDArray[np.float64] = 1.0 / (1.0 + np.exp(-t2))
        return np.where((v <= 0.0) | (v >= 1.0), v, out)
    t = np.log(np.maximum(v, 1e-300))
    med = np.median(t, axis=0)
    res: NDArray[np.float64] = np.exp(med + f * (t - med))
    return res


def quantity_design(chain: AbsorbingChain, X: NDArray[Any], x0: NDArray[Any], units: UnitCounts | None,
                    tempered_by: float) -> QuantityDesign | None:
    """The per-quantity design of ``chain`` (fitted on the data counts ``X``, first states ``x0``) when some unit
    repeats; None otherwise (no clustering to measure)."""
    if units is None or not units.repeated or chain.n_states == 0:
        return None
    return QuantityDesign(chain, np.asarray(X, np.float64), np.asarray(x0, np.float64), units, float(tempered_by))


#: Quantities stretched on the logit scale (the rest on the log scale).
PROBABILITY_QUANTITIES = frozenset({"r_inf", "failure_probability", "pass_hat_k", "pass_at_k", "reliability"})
