"""SS2 — tightness of the Prop. 2 perturbation bound (Tran-Truong & Le 2026, Prop. 2; study SS2 of the artifact).

Protocol (artifact): 100 chains with m = 10 (rho ~ U(0.4, 0.85), density ~ U(0.4, 1), success_rate ~ U(0.05, 0.3),
s0 = 0); Δ removes r_i ~ U(0.01, 0.1) of row i's transient mass proportionally (row i of Δ = −Q0[i]·r_i / Σ_j Q0[i,j])
and reroutes it to failure, R⊕ fixed; for ε on linspace(0, 0.28, 21) compare Prop. 2's bound (with ε_max = ε)
with the exact |R∞(ε) − R∞(0)|. Headline: the ratio bound / true gap at the grid point nearest 0.1 (ε = 0.098).

The exact change and the bound at ε = 0.098 come from :func:`tracetochain.whatif.what_if` with the perturbation
written as edits (``Reroute(state_i, ε·r_i/ρ_i, target="failure", source=state_j)`` for every edge i → j); the
whole ε grid uses :meth:`AbsorbingChain.with_changes` and :func:`tracetochain.numerics.sensitivity.prop2_bound`, and
the two routes are checked against each other. Quick: 20 chains.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tracetochain as tt
from studies._common import Figure, StudyResult, artifact_json, chain_seeds
from tracetochain.numerics.sensitivity import first_order_delta, prop2_bound
from tracetochain.whatif import Edit, Reroute, what_if

M = 10
FULL_CHAINS = 100
QUICK_CHAINS = 20
EPS = np.linspace(0.0, 0.28, 21)
I_STAR = int(np.argmin(np.abs(EPS - 0.1)))  # 0.098, the artifact's "ε ≈ 0.1"


def _ratio_stats(r: np.ndarray) -> dict[str, float]:
    return {"min": float(r.min()), "p10": float(np.percentile(r, 10)), "median": float(np.median(r)),
            "p90": float(np.percentile(r, 90)), "max": float(r.max()), "share_within_2x": float(np.mean(r <= 2.0))}


def one_chain(seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    rho, density, success_rate = rng.uniform(0.4, 0.85), rng.uniform(0.4, 1.0), rng.uniform(0.05, 0.3)
    chain = tt.datasets.random_chain(M, rng, rho=rho, density=density, success_rate=success_rate)
    r = rng.uniform(0.01, 0.1, size=M)
    Q0 = chain.Q
    row_mass = Q0.sum(axis=1)
    delta = -Q0 * (r / row_mass)[:, None]
    # ‖N0‖∞ = max_i (N0 1)_i, the largest expected number of steps (N0 ≥ 0); solved here independently of the library.
    n_norm = float(np.linalg.solve(np.eye(M) - Q0, np.ones(M)).max())
    z, h = chain.expected_visits(), chain.success_probabilities
    true, bound, first = [], [], []
    for eps in EPS[1:]:
        dQ = eps * delta
        edited = chain.with_changes(Q=Q0 + dQ, R_failure=chain.R_failure - dQ.sum(axis=1))
        true.append(abs(edited.r_inf - chain.r_inf))
        b = prop2_bound(n_norm, dQ, chain.R_success)
        bound.append(np.nan if b is None else b)
        first.append(first_order_delta(z, h, dQ, np.zeros(M)))
    eps_star = float(EPS[I_STAR])
    edits: list[Edit] = [Reroute(chain.state_names[i], eps_star * r[i] / row_mass[i], target="failure",
                     source=chain.state_names[j])
             for i in range(M) for j in range(M) if Q0[i, j] > 0]
    wi = what_if(chain, edits, horizons=())
    return {"rho": rho, "success_rate": success_rate, "r_inf": chain.r_inf, "n_norm": n_norm,
            "delta_norm": float(np.max(r)), "true": true, "bound": bound, "first_order": first,
            "what_if": {"delta_r_inf": wi.delta_r_inf, "first_order": wi.first_order, "prop2_bound": wi.prop2_bound}}


def run(quick: bool, seed: int) -> dict[str, Any]:
    n = QUICK_CHAINS if quick else FULL_CHAINS
    rows = [one_chain(s) for s in chain_seeds(seed, FULL_CHAINS)[:n]]
    true = np.array([x["true"] for x in rows])  # (n, 20) for ε > 0
    bound = np.array([x["bound"] for x in rows], dtype=float)
    first = np.array([x["first_order"] for x in rows])
    ratio = bound / true
    k = I_STAR - 1  # column of ε* among ε > 0
    ours = _ratio_stats(ratio[:, k])
    valid = bool(np.all(np.isfinite(ratio)) and ratio.min() >= 1.0)
    wi_delta = np.array([x["what_if"]["delta_r_inf"] for x in rows])
    wi_bound = np.array([np.nan if x["what_if"]["prop2_bound"] is None else x["what_if"]["prop2_bound"] for x in rows])
    wi_first = np.array([x["what_if"]["first_order"] for x in rows])
    signed_true = -true[:, k]  # the perturbation only removes success paths: R∞(ε) < R∞(0)

    ref = artifact_json("synthetic/SS2_summary.json")
    paper = _ratio_stats(np.array(ref["ratios"])) if ref else {}
    long_noise = ("other chains than the artifact's (its draws for Q and Δ could not be replayed), so the ratio "
                  "distributions are compared, not chain by chain")
    noise = "different chains (see the median row)"
    figures = [
        Figure("ratio/min", "bound/true at ε = 0.098: min", paper.get("min"), ours["min"], noise, 4),
        Figure("ratio/p10", "bound/true at ε = 0.098: p10", paper.get("p10"), ours["p10"], noise, 4),
        Figure("ratio/median", "bound/true at ε = 0.098: median", paper.get("median"), ours["median"],
               long_noise + "; to first order the ratio is max_i r_i / (visit-weighted mean of r_i), ≈ 1.8 "
               "for r_i ~ U(0.01, 0.1)", 4),
        Figure("ratio/p90", "bound/true at ε = 0.098: p90", paper.get("p90"), ours["p90"], noise, 4),
        Figure("ratio/max", "bound/true at ε = 0.098: max", paper.get("max"), ours["max"],
               noise + "; the maximum of 100 ratios is set by the one chain whose start row loses the least "
               "mass (r_0 ≈ 0.01 gives up to ≈ 10)", 4),
        Figure("ratio/share_within_2x", "share of chains with ratio ≤ 2 at ε = 0.098",
               paper.get("share_within_2x"), ours["share_within_2x"], noise, 3),
        Figure("valid", "bound valid (ratio ≥ 1) at every chain and ε > 0", "yes", "yes" if valid else "no",
               "" if valid else "the bound was violated: see data.ratio"),
        Figure("min_ratio_all_eps", "smallest ratio over all chains and ε ∈ (0, 0.28]", None, float(np.nanmin(ratio)),
               "ours; the paper reports the ratio at ε ≈ 0.1 only", 4),
        Figure("median_ratio_eps_max", "median ratio at ε = 0.28", None, float(np.median(ratio[:, -1])),
               "ours: the bound keeps tracking the gap over the whole grid (the Cε² term grows with ε)", 4),
        Figure("first_order_rel_err", "median |first-order − exact| / |exact| at ε = 0.098", None,
               float(np.median(np.abs(first[:, k] + true[:, k]) / true[:, k])),
               "ours: the first-order term ε·zᵀΔh is within a few percent at ε ≈ 0.1", 3),
        Figure("what_if_delta_vs_grid", "max |what_if ΔR∞ − with_changes ΔR∞| at ε = 0.098", None,
               float(np.max(np.abs(wi_delta - signed_true))),
               "ours: the edit route (Reroute per edge) and the matrix route agree to rounding", 2),
        Figure("what_if_bound_vs_grid", "max |what_if bound − prop2_bound on the grid| at ε = 0.098", None,
               float(np.nanmax(np.abs(wi_bound - bound[:, k]))), "ours: same check for the bound", 2),
        Figure("what_if_first_vs_grid", "max |what_if first-order − grid first-order| at ε = 0.098", None,
               float(np.max(np.abs(wi_first - first[:, k]))), "ours", 2),
    ]
    close = paper and abs(ours["median"] - paper["median"]) <= 0.25
    summary = (f"Prop. 2's bound is never violated (min ratio {np.nanmin(ratio):.3f}) and is typically within 2× "
               f"(median {ours['median']:.3f} at ε = 0.098; paper 1.811).")
    return StudyResult(
        study="SS2", title="perturbation bound tightness", quick=quick, seed=seed,
        paper_ref="artifact only (one-sentence summary in §VII-A); Prop. 2",
        params={"n_chains": n, "m": M, "rho": "U(0.4, 0.85)", "density": "U(0.4, 1.0)",
                "success_rate": "U(0.05, 0.3)", "r_i": "U(0.01, 0.1)", "eps_grid": "linspace(0, 0.28, 21)",
                "eps_star": float(EPS[I_STAR]), "generator": "tracetochain.datasets.random_chain", "s0": 0},
        figures=figures, headline="ratio/median",
        verdict=("reproduced within tolerance" if (valid and close) else "differs, explained") if paper else "partial",
        summary=summary,
        notes=[
            "Bound: ε‖N0‖∞²‖Δ‖∞‖R⊕‖∞ + Cε², C = ‖N0‖∞³‖Δ‖∞²‖R⊕‖∞ / (1 − ε_max‖N0‖∞‖Δ‖∞) with ε_max = ε, i.e. "
            "prop2_bound(‖N0‖∞, εΔ, R⊕).",
            "Why the ratio sits near 1.8: with the artifact's generator h = N0 R⊕ is constant (= success_rate) and "
            "‖N0‖∞ = 1/(1 − ρ), so to first order the ratio is max_i r_i divided by the visit-weighted mean of r_i "
            "— a property of the Δ design (r_i ~ U(0.01, 0.1)), not of the chain.",
            "Δ's row sums are −r_i (absolute mass r_i per unit ε leaves row i), following Prop. 2's "
            "perturbation family; the edit route expresses the same change as a fraction ε·r_i/ρ_i of each edge.",
        ],
        data={"eps": EPS.tolist(), "ratio_at_eps_star": ratio[:, k].tolist(),
              "chains": [{key: x[key] for key in ("rho", "success_rate", "r_inf", "n_norm", "delta_norm", "true",
                                                  "bound")} for x in rows]},
    ).to_dict()
