"""Accumulated rewards (costs) on an absorbing chain: moments, outcome-conditional moments, budgets.

Every visit to transient state i costs a random amount X_i with mean c_i and variance v_i, independent of
everything else given the state (a Markov reward process; Howard 1971, *Dynamic Probabilistic Systems*, vol. II;
Kemeny & Snell 1960, ch. III for the fundamental matrix). Optionally a transition i → J costs e on some of its
probability mass (a new or rerouted edge in a what-if): that enters through two matrices over the m + 2 targets
(m states, SUCCESS, FAILURE),

    M_iJ = Σ (probability of a sub-edge i → J) · e,     M2_iJ = Σ (probability of a sub-edge i → J) · e²,

so a fallback that moves probability p from FAILURE to SUCCESS at a cost e per use is M_{i,SUCCESS} = p e and
M2_{i,SUCCESS} = p e². C is the total cost until absorption, S and F the events "absorbed in SUCCESS / FAILURE".

With N = (I − Q)⁻¹ (never formed: one LU solve with three right-hand sides), z = Nᵀπ0, h = N r⊕, g = N r⊖,
h̃ = [h, 1, 0] and g̃ = [g, 0, 1] (h and g extended to the two absorbing targets):

    a   = c + M 1                       expected cost of one visit (visit plus edge costs)
    w   = N a                           E[C | start i]
    w⊕  = N (c∘h + M h̃)                 E[C; S | start i]   (the Doob h-transform numerator)
    w⊖  = N (c∘g + M g̃)                 E[C; F | start i]
    E[C] = π0·w = z·a,  E[C; S] = z·(c∘h + M h̃),  E[C; F] = z·(c∘g + M g̃)

and the second moments by first-step analysis (our derivation; checked against exact rationals and Monte Carlo in
``tests/numerics/test_rewards.py``):

    E[C²]    = z·(v − c² + 2 c∘w  + M2 1 + 2 M_Q w)
    E[C²; S] = z·((v − c²)∘h + 2 c∘w⊕ + M2 h̃ + 2 M_Q w⊕)
    E[C²; F] = z·((v − c²)∘g + 2 c∘w⊖ + M2 g̃ + 2 M_Q w⊖)

with M_Q the first m columns of M. With c = 1, v = 0 and no edges these are the Kemeny–Snell moments of the number
of steps (E[T] = z·1, E[T²] = z·(2t − 1)), and E[T; S] = z·h = π0 N² r⊕.

Cost until the first success when failed attempts are retried independently (a geometric number K of attempts,
R = R∞): E[total] = E[C] / R (Wald), Var[total] = E[K−1] Var[C | F] + Var[K−1] E[C | F]² + Var[C | S] with
E[K−1] = (1 − R)/R and Var[K−1] = (1 − R)/R².

Budgets: R(B) = P(S and C ≤ B), the probability of success before the accumulated cost exceeds B, by a dynamic
programme on a cost lattice of step δ (:func:`budget_reliability`). Rounding every visit cost *up* to the lattice
can only make paths dearer, so it gives a lower bound of R(B); rounding *down* gives an upper bound; the true R(B)
lies between the two (a coupling argument: R(B) falls when costs grow pathwise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse
from numpy.typing import NDArray

from tracetochain.numerics.absorbing import SPARSE_THRESHOLD, ChainSolver

Array = NDArray[np.float64]


@dataclass(frozen=True)
class RewardMoments:
    """Moments of the accumulated cost C from the initial distribution (see the module docstring).

    ``*_success`` / ``*_failure`` are joint, not conditional: E[C; S] = E[C · 1{S}]; divide by R∞ (or 1 − R∞) for
    E[C | S]. ``per_state_spend[i]`` = z_i a_i (expected spend at visits to i; sums to ``mean``);
    ``per_state_failed_spend[i]`` = spend at i on runs that end in failure (sums to ``mean_failure``);
    ``per_state_success_spend`` likewise for success. ``expected_from`` = w, E[C | start in i] for every i.
    """

    mean: float
    mean_success: float
    mean_failure: float
    second: float | None
    second_success: float | None
    second_failure: float | None
    per_state_spend: Array
    per_state_success_spend: Array
    per_state_failed_spend: Array
    expected_from: Array


def _extended(x: Array, at_success: float, at_failure: float) -> Array:
    """x (…, m) extended to the m + 2 targets with constants at SUCCESS and FAILURE."""
    shape = (*x.shape[:-1], 1)
    return np.concatenate([x, np.full(shape, at_success), np.full(shape, at_failure)], axis=-1)


def _matvec(M: Array, x: Array) -> Array:
    """(…, m, k) @ (…, k) → (…, m)."""
    out: Array = np.einsum("...ij,...j->...i", M, x)
    return out


def reward_right_hand_sides(c: Array, h: Array, g: Array, edge_spend: Array | None = None) -> Array:
    """The three right-hand sides [a, c∘h + M h̃, c∘g + M g̃] as an (…, m, 3) block (one solve gives w, w⊕, w⊖)."""
    a, rs, rf = c, c * h, c * g
    if edge_spend is not None:
        a = a + edge_spend.sum(axis=-1)
        rs = rs + _matvec(edge_spend, _extended(h, 1.0, 0.0))
        rf = rf + _matvec(edge_spend, _extended(g, 0.0, 1.0))
    return np.stack([a, rs, rf], axis=-1)


def reward_moments(z: Array, h: Array, g: Array, c: Array, v: Array | None, rhs: Array, W: Array,
                   edge_spend: Array | None = None, edge_spend_sq: Array | None = None) -> dict[str, Array]:
    """The moments from the solves: ``rhs`` from :func:`reward_right_hand_sides`, ``W`` = N rhs (same shape).

    Works on one chain (arrays (m,), (m, 3)) or a stack of B chains (leading axis B). ``v`` None skips the second
    moments. Returns a dict of arrays: mean, mean_success, mean_failure, (second, second_success, second_failure),
    per_state_spend, per_state_success_spend, per_state_failed_spend, expected_from.
    """
    w, ws, wf = W[..., 0], W[..., 1], W[..., 2]
    spend, spend_s, spend_f = z * rhs[..., 0], z * rhs[..., 1], z * rhs[..., 2]
    out: dict[str, Array] = {"mean": spend.sum(axis=-1), "mean_success": spend_s.sum(axis=-1),
                             "mean_failure": spend_f.sum(axis=-1), "per_state_spend": spend,
                             "per_state_success_spend": spend_s, "per_state_failed_spend": spend_f,
                             "expected_from": w}
    if v is None:
        return out
    base = v - c * c
    r2 = base + 2.0 * c * w
    r2s = base * h + 2.0 * c * ws
    r2f = base * g + 2.0 * c * wf
    if edge_spend is not None:
        sq = edge_spend_sq if edge_spend_sq is not None else np.zeros_like(edge_spend)
        m = c.shape[-1]
        MQ = edge_spend[..., :m]
        r2 = r2 + sq.sum(axis=-1) + 2.0 * _matvec(MQ, w)
        r2s = r2s + _matvec(sq, _extended(h, 1.0, 0.0)) + 2.0 * _matvec(MQ, ws)
        r2f = r2f + _matvec(sq, _extended(g, 0.0, 1.0)) + 2.0 * _matvec(MQ, wf)
    out["second"] = (z * r2).sum(axis=-1)
    out["second_success"] = (z * r2s).sum(axis=-1)
    out["second_failure"] = (z * r2f).sum(axis=-1)
    return out


def accumulated_reward(solver: ChainSolver, z: Array, h: Array, g: Array, c: Array, v: Array | None = None,
                       *, edge_spend: Array | None = None, edge_spend_sq: Array | None = None) -> RewardMoments:
    """Moments of the accumulated cost of one chain (module docstring): one solve with three right-hand sides.

    ``solver`` is the chain's factorization of I − Q; ``z``, ``h``, ``g`` its visits and absorption vectors;
    ``c`` / ``v`` the per-visit cost mean / variance (``v`` None: no second moments); ``edge_spend`` /
    ``edge_spend_sq`` the (m, m + 2) edge-cost matrices M and M2 (optional).

    >>> import numpy as np
    >>> from tracetochain.numerics import ChainSolver
    >>> Q = np.array([[0.5, 0.3, 0], [0, 0.4, 0.3], [0, 0, 0.6]])
    >>> rs, rf = np.array([0.1, 0.2, 0.3]), np.array([0.1, 0.1, 0.1])
    >>> s = ChainSolver.factor(Q, rs, rf)
    >>> z, h = s.solve(np.array([1.0, 0, 0]), transposed=True), s.solve(rs)
    >>> r = accumulated_reward(s, z, h, 1 - h, np.ones(3), np.zeros(3))
    >>> round(r.mean, 6), round(r.mean_success / 0.625, 6)  # E[T], E[T | success] (docs/numerics.md §9)
    (3.75, 4.033333)
    """
    c = np.asarray(c, dtype=np.float64)
    vv = None if v is None else np.asarray(v, dtype=np.float64)
    rhs = reward_right_hand_sides(c, h, g, edge_spend)
    W = solver.solve(rhs)
    out = reward_moments(z, h, g, c, vv, rhs, W, edge_spend, edge_spend_sq)

    def scalar(key: str) -> float | None:
        return float(out[key]) if key in out else None

    return RewardMoments(float(out["mean"]), float(out["mean_success"]), float(out["mean_failure"]),
                         scalar("second"), scalar("second_success"), scalar("second_failure"),
                         out["per_state_spend"], out["per_state_success_spend"], out["per_state_failed_spend"],
                         out["expected_from"])


def retry_cost(mean_success: float, mean_failure: float, var_success: float | None, var_failure: float | None,
               r_inf: float) -> tuple[float, float | None]:
    """Mean and variance of the total cost until the first success when attempts are independent retries.

    ``mean_success`` / ``mean_failure`` are the *conditional* means E[C | S], E[C | F]; ``r_inf`` = R > 0. The
    number of failed attempts before the success is geometric with mean (1 − R)/R and variance (1 − R)/R², so
    E = E[C | S] + (1 − R)/R · E[C | F] (= E[C]/R) and Var = (1 − R)/R · Var[C | F] + (1 − R)/R² · E[C | F]² +
    Var[C | S] (compound geometric sum).
    """
    if not r_inf > 0:
        raise ValueError("retry cost needs R∞ > 0")
    q = 1.0 - r_inf
    mean = mean_success + q / r_inf * mean_failure
    if var_success is None or (q > 0 and var_failure is None):
        return mean, None
    vf = var_failure if var_failure is not None else 0.0
    try:
        var = q / r_inf * vf + q / r_inf**2 * mean_failure**2 + var_success
    except OverflowError:  # beyond the float range: undefined rather than an internal error
        return mean, None
    return mean, max(0.0, var) if math.isfinite(var) else None


def capped_mean_cost(Q: Array, pi0: Array, a: Array, horizon: int) -> Array:
    """E[cost of the visits among the first d steps] for d = 0..horizon: Σ_{t<d} π_t·a with π_t = π0 Q^t.

    An attempt stopped after d steps (a step cap) costs this on average; with R(d) it gives the cost per success
    of capped retries, E[C_d] / R(d).
    """
    if horizon < 0:
        raise ValueError(f"horizon must be >= 0, got {horizon}")
    out = np.zeros(horizon + 1)
    pi = np.asarray(pi0, dtype=np.float64).copy()
    QT = np.ascontiguousarray(Q.T)
    for d in range(1, horizon + 1):
        out[d] = out[d - 1] + float(pi @ a)
        pi = QT @ pi
    return out


# ------------------------------------------------------------------------------------------------- budgets
def lattice_pmf(mean: Array, var: Array, step: float, n_levels: int, rounding: str) -> Array:
    """Per-visit cost law of every state on the lattice {0, δ, 2δ, …} (δ = ``step``): (m, L) probabilities.

    A state with variance 0 costs exactly its mean; otherwise its cost is taken as gamma-distributed with that mean
    and variance (a positive law with the right first two moments). ``rounding="up"`` puts the mass of
    ((k−1)δ, kδ] at kδ (every cost rounded up: a lower bound on R(B)); ``"down"`` puts [kδ, (k+1)δ) at kδ (an
    upper bound); ``"mean"`` splits a cost x between ⌊x/δ⌋δ and ⌈x/δ⌉δ in the proportions that keep its mean
    (the tent kernel: not a bound, but far more accurate on a coarse lattice, and between the two bounds).
    Mass beyond the last level (a single visit dearer than the whole budget) is left out when rounding up (such a
    visit exhausts any budget on the lattice) and kept at the last level otherwise; gamma tails beyond the
    1 − 1e-12 quantile are cut the same way. L is trimmed to the largest level with mass.
    """
    if rounding not in ("up", "down", "mean"):
        raise ValueError(f"rounding must be 'up', 'down' or 'mean', got {rounding!r}")
    if not step > 0:
        raise ValueError(f"lattice step must be > 0, got {step}")
    mean = np.asarray(mean, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    m = mean.size
    K = int(n_levels)
    P = np.zeros((m, K + 1))
    fixed = (var <= 0) | (mean <= 0)
    for i in np.flatnonzero(fixed):
        x = max(0.0, float(mean[i])) / step
        if rounding == "mean":
            k = int(np.floor(x + 1e-12))
            frac = min(max(x - k, 0.0), 1.0)
            if k <= K:
                P[i, k] += 1.0 - frac if k < K else 1.0
                if k < K:
                    P[i, k + 1] += frac
            continue
        k = int(np.ceil(x - 1e-12)) if rounding == "up" else min(K, int(np.floor(x + 1e-12)))
        if 0 <= k <= K:
            P[i, k] = 1.0
    rand = np.flatnonzero(~fixed)
    if rand.size:
        mu, sd2 = mean[rand], var[rand]
        shape, scale = mu * mu / sd2, sd2 / mu
        # Costs beyond the 1 − 1e-12 quantile are cut off, still rigorously: rounding up drops that mass (as if it
        # exhausted the budget), rounding down puts it at the cut (it costs at least that much).
        # The gamma law's CDF and quantile straight from the regularised incomplete gamma function and its inverse:
        # what scipy.stats.gamma.cdf/ppf evaluate (x/scale, loc 0), equal bit for bit (tests/numerics/
        # test_rewards.py), without ~1 CPU-s of importing scipy.stats nor its per-call argument machinery.
        from scipy.special import gammainc, gammaincinv

        top = np.minimum(K, np.ceil(gammaincinv(shape, 1.0 - 1e-12) * scale / step).astype(np.int64) + 1)
        T = int(top.max())
        edges = np.arange(T + 2, dtype=np.float64) * step  # 0, δ, …, (T+1)δ
        cdf = gammainc(shape[:, None], edges[None, :] / scale[:, None])  # (r, T + 2): the gamma CDF at the edges
        cols = np.arange(T + 1)[None, :]
        inside = cols <= top[:, None]
        if rounding == "up":
            block = np.zeros((rand.size, T + 1))
            block[:, 1:] = np.diff(cdf[:, : T + 1], axis=1)  # mass of ((k−1)δ, kδ] at k = 1..T
            block[:, 0] = cdf[:, 0]
            block *= inside
        elif rounding == "down":
            block = np.diff(cdf, axis=1) * inside  # mass of [kδ, (k+1)δ) at k = 0..T
            tail = 1.0 - cdf[np.arange(rand.size), top + 1]
            block[np.arange(rand.size), top] += tail
        else:
            # Tent weights: p(k) = E[max(0, 1 − |X/δ − k|)], from the gamma CDF and its partial mean
            # E[X; X ≤ t] = shape·scale·F_{shape+1}(t).
            pm = (shape * scale)[:, None] * gammainc(shape[:, None] + 1.0, edges[None, :] / scale[:, None])
            F = np.diff(cdf, axis=1)  # P((kδ, (k+1)δ]) per interval k = 0..T
            M = np.diff(pm, axis=1) / step  # E[X/δ; interval k]
            lev = np.arange(T + 1, dtype=np.float64)[None, :]
            up_part = M - lev * F  # E[X/δ − k; X in interval k]: weight given to level k + 1
            down_part = F - up_part  # E[(k + 1) − X/δ; interval k]: weight given to level k
            block = np.zeros((rand.size, T + 2))
            block[:, : T + 1] += down_part
            block[:, 1: T + 2] += up_part
            block = block[:, : T + 1]
            block *= inside
            tail = 1.0 - cdf[np.arange(rand.size), np.minimum(top + 1, T + 1)]
            block[np.arange(rand.size), top] += np.clip(tail, 0.0, None)
            block = np.clip(block, 0.0, None)
        P[rand, : T + 1] = np.clip(block, 0.0, None)
    used = np.flatnonzero(P.any(axis=0))
    L = int(used[-1]) + 1 if used.size else 1
    return P[:, :L]


_BUDGET_BLOCK = 128  # levels per block of the budget programme: enough to amortise one correlation call per
# state and block, few enough that the within-block updates (b·m per level) stay small beside the mat-vec


def budget_reliability(Q: Array, r_success: Array, pi0: Array, visit_pmf: Array, n_levels: int) -> Array:
    """R(kδ) = P(S and C ≤ kδ) for k = 0..n_levels, with per-visit costs on a lattice (``visit_pmf`` (m, L)).

    Backward dynamic programme over the remaining budget (all start states at once): with u_k(i) the probability
    of success within budget k from i and v_k = r⊕ + Q u_k the same *after* paying the current visit,

        u_k = D0 v_k + Σ_{a≥1} p(a) ∘ v_{k−a}   ⇒   (I − D0 Q) u_k = D0 r⊕ + Σ_{a≥1} p(a) ∘ v_{k−a},

    D0 = diag(p(0)). Zero-cost visits make each level a linear system; I − D0 Q is one matrix for every level,
    factored once (its spectral radius is at most ρ(Q) < 1).

    The sum over earlier levels is taken in blocks of b levels (an exact blocked recursion, no FFT): for the b
    levels of a block, what they owe to the levels before the block is one direct correlation per state of its pmf
    with those levels, over the window where that state's pmf has mass; what they owe to levels of the same block
    (a < b) is added as each is computed. Only the grouping of the sums changes (equal to the level-by-level
    programme to a few ulps: tests/numerics/test_rewards.py). Cost O(K·Σ_i w_i + K·b·m + K·m²) for K levels, per-
    visit supports of widths w_i ≤ L, instead of O(K·L·m) with a numpy call per level for the sum.
    """
    Q = np.asarray(Q, dtype=np.float64)
    m = Q.shape[0]
    K = int(n_levels)
    p = np.asarray(visit_pmf, dtype=np.float64)
    L = p.shape[1]
    p0 = p[:, 0]
    zero_cost = bool((p0 > 0).any())
    if zero_cost:
        A = np.eye(m) - p0[:, None] * Q
        if m > SPARSE_THRESHOLD:
            from scipy.sparse.linalg import splu  # imported here: only chains above SPARSE_THRESHOLD states use it

            lu_sparse = splu(scipy.sparse.csc_matrix(A))

            def solve(b: Array) -> Array:
                return np.asarray(lu_sparse.solve(b), dtype=np.float64)
        else:
            lu, piv = scipy.linalg.lu_factor(A, check_finite=False)
            # LAPACK's getrs directly: what scipy.linalg.lu_solve calls, without its per-call checks, which cost
            # more than the solve itself over thousands of levels.
            (getrs,) = scipy.linalg.get_lapack_funcs(("getrs",), (lu,))

            def solve(b: Array) -> Array:
                x, info = getrs(lu, piv, b)
                if info != 0:
                    raise ValueError(f"illegal value in argument {-info} of getrs")
                return np.asarray(x, dtype=np.float64)
    # Column K − k of Vt holds v_k, so the levels one visit reaches back to (v_{k−1}, …, v_{k−L+1}) are
    # contiguous in each row. Levels are taken in blocks of b: what a level owes to the levels *before* its block
    # is, for every state, a correlation of its pmf with those earlier levels, computed for the whole block at once
    # and only over the window where that state's pmf has mass (np.correlate: direct sums of the same products as
    # level by level, no FFT); what it owes to the levels of its own block (distance < b) is added as each of them
    # is computed. Only the grouping of the sums changes: equal to the level-by-level programme to a few ulps.
    Vt = np.zeros((m, K + 1))
    U = np.empty((K + 1, m))
    rs = np.asarray(r_success, dtype=np.float64)
    pi = np.asarray(pi0, dtype=np.float64)
    c0 = p0 * rs
    # Large sparse chains: one CSR mat-vec per level instead of a dense one (as the horizon sweep does).
    Qop: Any = scipy.sparse.csr_matrix(Q) if m >= 128 and np.count_nonzero(Q) <= 0.2 * m * m else Q
    b = _BUDGET_BLOCK
    p_pad = np.zeros((m, L + b))
    p_pad[:, :L] = p
    near = np.ascontiguousarray(p_pad[:, 1:b].T)  # near[a − 1] = p(a) for the distances inside a block
    mass = np.concatenate([np.zeros((m, 1), dtype=bool), p[:, 1:] > 0], axis=1)  # a ≥ 1 with p(a) > 0
    first = mass.argmax(axis=1)  # smallest such a (0 for a state without any)
    last = L - 1 - mass[:, ::-1].argmax(axis=1)  # largest such a
    rows = np.flatnonzero(mass.any(axis=1))
    E = np.zeros((b, m))  # E[t] = what level k0 + t owes to the levels before it
    Vblk = np.empty((b, m))  # v_{k0 + t}, copied into Vt at the end of the block
    dense = Qop is Q
    for k0 in range(0, K + 1, b):
        nb = min(b, K + 1 - k0)
        E[:] = 0.0
        base = K - k0  # column of v_{k0} in Vt: v_{k0 − s} is column base + s
        for i in rows:
            # E[t, i] = Σ_{1 ≤ s ≤ k0} p_i(t + s) v_i(k0 − s), s restricted to where p_i(t + s) can be > 0.
            s_lo = max(1, int(first[i]) - (nb - 1))
            s_hi = min(k0, int(last[i]))
            if s_lo <= s_hi:
                E[:nb, i] = np.correlate(p_pad[i, s_lo: s_hi + nb], Vt[i, base + s_lo: base + s_hi + 1], "valid")
        Vb = Vblk[:nb]
        for t in range(nb):
            if zero_cost:
                u = U[k0 + t] = solve(c0 + E[t])
            else:
                u = E[t]  # final once its level is reached (later updates go to later rows): copied below
            v = Vb[t]
            if dense:
                np.dot(Q, u, out=v)
            else:
                v[:] = Qop @ u
            v += rs
            if t + 1 < nb:
                E[t + 1: nb] += near[: nb - t - 1] * v
        Vt[:, K - k0 - nb + 1: K - k0 + 1] = Vb[::-1].T
        if not zero_cost:
            U[k0: k0 + nb] = E[:nb]
    out = U @ pi
    return np.clip(out, 0.0, None)
