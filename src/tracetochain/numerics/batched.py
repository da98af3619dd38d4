"""Batched absorbing-chain numerics over a stack of B chains: the fast path of ``ChainEnsemble.stats``.

Every function takes stacked arrays ``Q`` (B, m, m), ``r_success``/``r_failure`` (B, m), ``pi0`` (B, m) — and
optionally the start exits (B, 2) of episodes that end before any step, π0 then being a sub-distribution — and
computes, for all B chains at once, what :class:`~tracetochain.AbsorbingChain` computes for one (same formulas,
same conventions — ``tests/uncertainty/test_ensemble.py`` pins each one to the per-chain method):

* absorption: h = N r⊕, g = N r⊖, t = N 1, z = Nᵀ π0 with N = (I − Q)⁻¹ by batched LU solves
  (``np.linalg.solve`` on (B, m, m)), the diagonal of I − Q built subtraction-free (GTH style) as in
  :class:`~tracetochain.numerics.ChainSolver` (Kemeny & Snell 1960, ch. III; docs/numerics.md §2–§3);
* horizon: one batched forward sweep π_d = π_{d−1} Q (Tran-Truong & Le 2026, Prop. 1; docs/numerics.md §4);
* spectral quantities by batched eigen-decomposition (Tran-Truong & Le 2026, Prop. 8).

Draws that are not absorbing chains (a closed loop with no exit — possible only with pseudocount 0), or whose
solves fail the residual check, are flagged rather than raised: the ensemble excludes and counts them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: Relative residual above which a batched solve is treated as failed (the same threshold ChainSolver warns at).
RESIDUAL_RTOL = 1e-8
#: Solved probabilities may leave [0, 1] by at most this much (as ``clip_probabilities``).
PROBABILITY_ATOL = 1e-10


def reachable(Q: NDArray[np.float64], targets: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """States from which some path of positive-probability transitions reaches a ``targets`` state.

    ``Q`` (B, m, m), ``targets`` (B, m) (e.g. r⊕ > 0: "can exit to success from here"). Backward breadth-first
    search, all draws at once: reach ← reach ∨ (Q > 0)·reach until nothing changes (at most m rounds).
    """
    reach = targets.copy()
    if reach.all():
        return reach
    adj = (Q > 0).astype(np.float64)
    for _ in range(Q.shape[-1]):
        new = reach | ((adj @ reach[..., None].astype(np.float64))[..., 0] > 0)
        if np.array_equal(new, reach):
            break
        reach = new
    return reach


def gth_matrix(Q: NDArray[np.float64], r_success: NDArray[np.float64],
               r_failure: NDArray[np.float64]) -> NDArray[np.float64]:
    """A = I − Q with A_ii = Σ_{j≠i} Q_ij + r⊕_i + r⊖_i (subtraction-free diagonal, docs/numerics.md §2)."""
    m = Q.shape[-1]
    idx = np.arange(m)
    A = -np.array(Q, dtype=np.float64, copy=True)
    A[..., idx, idx] = Q.sum(axis=-1) - Q[..., idx, idx] + r_success + r_failure
    return A


def _solve(A: NDArray[np.float64], b: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Batched solve A x = b with b (B, m, k); returns x and a per-draw flag "residual check passed"."""
    B = A.shape[0]
    ok = np.ones(B, dtype=bool)
    try:
        x = np.linalg.solve(A, b)
    except np.linalg.LinAlgError:  # some matrix exactly singular: solve one by one
        x = np.zeros_like(b)
        for i in range(B):
            try:
                x[i] = np.linalg.solve(A[i], b[i])
            except np.linalg.LinAlgError:
                ok[i] = False
    resid = np.abs(A @ x - b).max(axis=(-2, -1)) if b.size else np.zeros(B)
    scale = np.maximum(1.0, np.abs(x).max(axis=(-2, -1))) if b.size else np.ones(B)
    with np.errstate(invalid="ignore"):
        ok &= np.isfinite(resid) & (resid <= RESIDUAL_RTOL * scale)
    return np.asarray(x, dtype=np.float64), ok


def _dot(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row-wise dot products of two (B, m) arrays."""
    out: NDArray[np.float64] = np.einsum("bi,bi->b", a, b)
    return out


@dataclass(eq=False)
class ChainBatch:
    """B absorbing chains as stacked arrays, with lazily computed (and cached) batched solves.

    ``valid`` marks the draws that are absorbing chains whose solves passed the residual check; every derived
    quantity is defined only on those (``reasons`` counts the others by cause). ``start_exits`` (B, 2), optional:
    each draw's (s, f), the probabilities of success and failure before any step (R∞ = s + π0·h, R(0) = s).
    """

    Q: NDArray[np.float64]
    r_success: NDArray[np.float64]
    r_failure: NDArray[np.float64]
    pi0: NDArray[np.float64]
    start_exits: NDArray[np.float64] | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.start_exits is not None:
            exits = np.asarray(self.start_exits, dtype=np.float64)
            if exits.shape != (self.Q.shape[0], 2):
                raise ValueError(f"start_exits must have shape ({self.Q.shape[0]}, 2), got {exits.shape}")
            self.start_exits = exits if exits.any() else None  # all zero: exactly the chain without them

    @property
    def size(self) -> int:
        return int(self.Q.shape[0])

    @property
    def n_states(self) -> int:
        return int(self.Q.shape[-1])

    # ------------------------------------------------------------------ structure
    def _structure(self) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        if "structure" not in self._cache:
            exits = (self.r_success + self.r_failure) > 0
            can_absorb = reachable(self.Q, exits)
            can_succeed = reachable(self.Q, self.r_success > 0)
            self._cache["structure"] = (can_absorb.all(axis=1), can_succeed)
        out: tuple[NDArray[np.bool_], NDArray[np.bool_]] = self._cache["structure"]
        return out

    def _solves(self) -> dict[str, Any]:
        """h, g, t (one batched solve with three right-hand sides) and z (one transposed solve)."""
        if "solves" in self._cache:
            out: dict[str, Any] = self._cache["solves"]
            return out
        absorbing, can_succeed = self._structure()
        B, m = self.size, self.n_states
        h = np.zeros((B, m))
        g = np.zeros((B, m))
        t = np.zeros((B, m))
        z = np.zeros((B, m))
        ok = absorbing.copy()
        idx = np.flatnonzero(absorbing)
        if idx.size:
            A = gth_matrix(self.Q[idx], self.r_success[idx], self.r_failure[idx])
            rhs = np.stack([self.r_success[idx], self.r_failure[idx], np.ones((idx.size, m))], axis=-1)
            x, ok1 = _solve(A, rhs)
            zz, ok2 = _solve(np.swapaxes(A, -1, -2), self.pi0[idx][..., None])
            hh, gg = x[..., 0], x[..., 1]
            hh = np.where(can_succeed[idx], hh, 0.0)  # exactly 0 where success is unreachable (as the chain)
            in_range = ((hh.min(axis=1) >= -PROBABILITY_ATOL) & (hh.max(axis=1) <= 1 + PROBABILITY_ATOL)
                        & (gg.min(axis=1) >= -PROBABILITY_ATOL) & (gg.max(axis=1) <= 1 + PROBABILITY_ATOL))
            h[idx] = np.clip(hh, 0.0, 1.0)
            g[idx] = np.clip(gg, 0.0, 1.0)
            t[idx] = x[..., 2]
            z[idx] = zz[..., 0]
            ok[idx] = ok1 & ok2 & in_range
            self._cache["A"] = (idx, A)
        reasons: dict[str, int] = {}
        if (~absorbing).any():
            reasons["non-absorbing (a closed loop with no exit; I − Q singular)"] = int((~absorbing).sum())
        bad = absorbing & ~ok
        if bad.any():
            reasons["ill-conditioned (solve failed the residual check)"] = int(bad.sum())
        solved: dict[str, Any] = {"h": h, "g": g, "t": t, "z": z, "valid": ok, "reasons": reasons}
        self._cache["solves"] = solved
        return solved

    def solve(self, rhs: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """x = N b for every draw: ``rhs`` (B, m, k) → (x (B, m, k), ok (B,)), with the draws' GTH matrices
        (cached by the first solves); ok is False for non-absorbing draws and failed residual checks."""
        solved = self._solves()
        x = np.zeros_like(np.asarray(rhs, dtype=np.float64))
        ok = np.asarray(solved["valid"], dtype=bool).copy()
        if "A" in self._cache:  # absent only when no draw is absorbing (then no draw is valid either)
            idx, A = self._cache["A"]
            xi, oki = _solve(A, np.asarray(rhs, dtype=np.float64)[idx])
            x[idx] = xi
            ok[idx] &= oki
        return x, ok

    @property
    def absorbing(self) -> NDArray[np.bool_]:
        """Draws that are absorbing chains (every state can reach an exit): enough for quantities without solves."""
        return self._structure()[0]

    @property
    def structure_reasons(self) -> dict[str, int]:
        n = int((~self.absorbing).sum())
        return {"non-absorbing (a closed loop with no exit; I − Q singular)": n} if n else {}

    @property
    def valid(self) -> NDArray[np.bool_]:
        out: NDArray[np.bool_] = self._solves()["valid"]
        return out

    @property
    def invalid_reasons(self) -> dict[str, int]:
        return dict(self._solves()["reasons"])

    @property
    def h(self) -> NDArray[np.float64]:
        """Success probability from each state, h = N r⊕ (B, m)."""
        out: NDArray[np.float64] = self._solves()["h"]
        return out

    @property
    def g(self) -> NDArray[np.float64]:
        """Failure probability from each state, g = N r⊖ (B, m)."""
        out: NDArray[np.float64] = self._solves()["g"]
        return out

    @property
    def t(self) -> NDArray[np.float64]:
        """Expected steps to absorption from each state, t = N 1 (B, m)."""
        out: NDArray[np.float64] = self._solves()["t"]
        return out

    @property
    def z(self) -> NDArray[np.float64]:
        """Expected visits z = Nᵀ π0 (B, m)."""
        out: NDArray[np.float64] = self._solves()["z"]
        return out

    # ------------------------------------------------------------------ scalars
    def r_inf(self) -> NDArray[np.float64]:
        """R∞ = s + π0 · h (Prop. 1, plus the start exit s)."""
        r = _dot(self.pi0, self.h)
        return r if self.start_exits is None else self.start_exits[:, 0] + r

    def failure_probability(self) -> NDArray[np.float64]:
        """1 − R∞ computed directly as f + π0 · g."""
        p = _dot(self.pi0, self.g)
        return p if self.start_exits is None else self.start_exits[:, 1] + p

    def mean_steps(self) -> NDArray[np.float64]:
        """MTTA = π0 · N 1 (zero-step episodes take 0 steps)."""
        return _dot(self.pi0, self.t)

    def steps_variance(self) -> NDArray[np.float64]:
        """Var[T] = Σ π0_i (τ₂_i + t_i²) − (π0·t)², τ₂ = clip((2N − I)t − t∘t, 0) (Kemeny–Snell Thm 3.3.5)."""
        if "variance" not in self._cache:
            t = self.t
            Nt = np.zeros_like(t)
            if "A" in self._cache:
                idx, A = self._cache["A"]
                x, ok = _solve(A, t[idx][..., None])
                Nt[idx] = x[..., 0]
                if not ok.all():
                    self._solves()["valid"][idx[~ok]] = False
                    key = "ill-conditioned (solve failed the residual check)"
                    reasons = self._solves()["reasons"]
                    reasons[key] = reasons.get(key, 0) + int((~ok).sum())
            tau2 = np.clip(2.0 * Nt - t - t * t, 0.0, None)
            second = np.einsum("bi,bi->b", self.pi0, tau2 + t * t)
            self._cache["variance"] = np.maximum(0.0, second - self.mean_steps() ** 2)
        out: NDArray[np.float64] = self._cache["variance"]
        return out

    def conditional_mean_steps(self, outcome: str) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """E[T | outcome] = (z · h) / R∞ or (z · g) / (1 − R∞) (docs/numerics.md §3; R∞ and 1 − R∞ include the start
        exits, whose episodes take 0 steps); defined where the outcome is reachable (probability > 0)."""
        vec, p = (self.h, self.r_inf()) if outcome == "success" else (self.g, self.failure_probability())
        defined = p > 0.0
        num = np.einsum("bi,bi->b", self.z, vec)
        return np.divide(num, p, out=np.zeros_like(num), where=defined), defined

    def failure_attribution(self) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """Share of failures leaving from each state, z_i r⊖_i / (f + Σ_j z_j r⊖_j) (docs/numerics.md §3; f the start
        exit to failure)."""
        flows = self.z * self.r_failure
        total = flows.sum(axis=1)
        if self.start_exits is not None:
            total = total + self.start_exits[:, 1]
        defined = total > 0.0
        return np.divide(flows, total[:, None], out=np.zeros_like(flows), where=defined[:, None]), defined

    # ------------------------------------------------------------------ horizon
    def sweep(self, horizon: int, *, residual: bool = True) -> dict[str, NDArray[np.float64]]:
        """Batched forward sweep for d = 0..horizon (docs/numerics.md §4): f⊕(d) = π_{d−1}·r⊕, f⊖(d) = π_{d−1}·r⊖,
        π_d = π_{d−1} Q, and f⊕(0), f⊖(0) the start exits; R(d) = Σ_{t≤d} f⊕(t); survival Pr[T > d] = π_d·1; exact
        tail R∞ − R(d) = π_d·h.

        Returns arrays of shape (B, horizon + 1); ``residual=False`` skips the tail (and so the solve for h).
        Cost: ``horizon`` batched (1 × m)·(m × m) products; the projections on [r⊕, r⊖, 1, h] are done in
        blocks of steps, one batched matrix product per block.
        """
        if horizon < 0:
            raise ValueError(f"horizon must be >= 0, got {horizon}")
        for key in (f"sweep{horizon}:True", f"sweep{horizon}:{residual}"):
            if key in self._cache:
                cached: dict[str, NDArray[np.float64]] = self._cache[key]
                return cached
        B, m = self.size, self.n_states
        n = horizon + 1
        cols = [self.r_success, self.r_failure, np.ones((B, m))] + ([self.h] if residual else [])
        V = np.stack(cols, axis=-1)  # (B, m, k)
        proj = np.empty((B, n, V.shape[-1]))
        block = max(1, min(n, 32))
        buf = np.empty((B, block, m))
        Q = np.ascontiguousarray(self.Q)
        pi = np.array(self.pi0, dtype=np.float64, copy=True)[:, None, :]
        for start in range(0, n, block):
            stop = min(n, start + block)
            for d in range(start, stop):
                if d > 0:
                    pi = pi @ Q
                buf[:, d - start] = pi[:, 0]
            proj[:, start:stop] = buf[:, : stop - start] @ V
        fs = np.zeros((B, n))
        ff = np.zeros((B, n))
        fs[:, 1:] = proj[:, :-1, 0]
        ff[:, 1:] = proj[:, :-1, 1]
        if self.start_exits is not None:
            fs[:, 0] = self.start_exits[:, 0]
            ff[:, 0] = self.start_exits[:, 1]
        out = {"reliability": np.cumsum(fs, axis=1), "success_pmf": fs, "failure_pmf": ff,
               "survival": np.clip(proj[:, :, 2], 0.0, None)}
        if residual:
            out["residual"] = np.clip(proj[:, :, 3], 0.0, None)
        self._cache = {k: v for k, v in self._cache.items() if not k.startswith("sweep")}  # keep one sweep
        self._cache[f"sweep{horizon}:{residual}"] = out
        return out

    def step_budget(self, delta: float, max_horizon: int = 100_000) -> tuple[NDArray[np.float64],
                                                                              NDArray[np.bool_]]:
        """Smallest d ≤ ``max_horizon`` with R∞ − R(d) = π_d·h ≤ δ (exact; Tran-Truong & Le 2026, Prop. 8 gives the
        a-priori bound).

        Sweeps only the draws not yet below δ. Returns (d, reached) with d as float (0 where not reached).
        """
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        B = self.size
        h = self.h
        budget = np.zeros(B)
        reached = np.zeros(B, dtype=bool)
        active = np.flatnonzero(self.valid)
        pi = np.array(self.pi0[active], dtype=np.float64)[:, None, :]
        Qa = self.Q[active]
        ha = h[active]
        d = 0
        while active.size:
            resid = np.clip(np.einsum("bi,bi->b", pi[:, 0], ha), 0.0, None)
            hit = resid <= delta
            if hit.any():
                budget[active[hit]] = d
                reached[active[hit]] = True
                keep = ~hit
                active, pi, Qa, ha = active[keep], pi[keep], Qa[keep], ha[keep]
            if d >= max_horizon or not active.size:
                break
            pi = pi @ Qa
            d += 1
        return budget, reached

    # ------------------------------------------------------------------ spectra
    def spectral_radius(self) -> NDArray[np.float64]:
        """ρ(Q) = max |eigenvalue| of each draw."""
        if "rho" not in self._cache:
            self._cache["rho"] = np.abs(np.linalg.eigvals(self.Q)).max(axis=1)
        out: NDArray[np.float64] = self._cache["rho"]
        return out

    def _eigenvector_condition(self) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """κ∞(V) of each draw and whether it is defined (cond₂(V) < 1e10), computed once: the eigendecomposition
        and the condition numbers are most of Prop. 8's cost and do not depend on δ."""
        if "kappa" not in self._cache:
            with np.errstate(all="ignore"):  # defective Q: V singular, cond = inf (handled below)
                _, V = np.linalg.eig(self.Q)
                cond = np.linalg.cond(V)
            diag_ok = np.isfinite(cond) & (cond < 1e10)
            kappa = np.zeros(self.size)
            if diag_ok.any():
                Vd = V[diag_ok]
                Vinv = np.linalg.inv(Vd)
                kappa[diag_ok] = (np.abs(Vd).sum(axis=-1).max(axis=-1) * np.abs(Vinv).sum(axis=-1).max(axis=-1))
            self._cache["kappa"] = (kappa, diag_ok)
        out: tuple[NDArray[np.float64], NDArray[np.bool_]] = self._cache["kappa"]
        return out

    def prop8(self, delta: float) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64],
                                           NDArray[np.bool_]]:
        """Prop. 8's step budget d*(δ) = ⌈log(κ∞(V) ‖h‖∞ / δ) / (−log ρ)⌉ with κ∞(V) = ‖V‖∞ ‖V⁻¹‖∞ computed from
        the eigenvectors (as :func:`tracetochain.numerics.step_budget`). Returns (bound, bound defined, κ, κ defined):
        κ is defined when Q is numerically diagonalizable (cond₂(V) < 1e10); the bound also needs 0 < ρ < 1 and
        ‖h‖∞ > 0."""
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        B = self.size
        kappa, diag_ok = self._eigenvector_condition()
        rho = self.spectral_radius()
        h_norm = np.abs(self.h).max(axis=1)
        bound_ok = diag_ok & (rho > 0.0) & (rho < 1.0) & (h_norm > 0.0)
        bound = np.zeros(B)
        for i in np.flatnonzero(bound_ok):  # math.ceil/log on scalars keeps bit-identical results with the chain
            bound[i] = max(0, math.ceil(math.log(kappa[i] * h_norm[i] / delta) / (-math.log(rho[i]))))
        return bound, bound_ok, kappa.copy(), diag_ok.copy()
