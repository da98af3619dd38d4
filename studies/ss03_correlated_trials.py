"""SS3 — the correlated-trial (Jensen) gap, closed form (Tran-Truong & Le 2026, Thm 4 and Cor. 5).

Protocol (artifact): two random chains with m = 5 — "ξ = 0" (rho 0.6, success_rate 0.05, so p0 = R∞ = 0.05) and
"ξ = 1" (rho 0.5, success_rate 0.35, p1 = 0.35); a binary latent with Pr[ξ = 1] = q ∈ {0.1, 0.3, 0.5, 0.7, 0.9};
k ∈ {1, 2, 3, 5, 10, 20}. i.i.d. values use the marginal R∞ = q p1 + (1 − q) p0 (pass^k = R∞^k,
pass@k = 1 − (1 − R∞)^k); mixture values are E[p(ξ)^k] and 1 − E[(1 − p(ξ))^k]. No simulation: every value is exact.

Here the marginal chain is built explicitly — the two chains side by side with π0 = ((1 − q)·e_0, q·e_0) — so its
R∞, pass^k and pass@k come from :class:`tracetochain.AbsorbingChain`; the mixture values average each component
chain's ``pass_hat_k`` / ``pass_at_k`` over ξ. The full and quick runs are the same (the study takes milliseconds).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tracetochain as tt
from studies._common import Figure, StudyResult, artifact_json, chain_seeds

M = 5
Q_VALUES = (0.1, 0.3, 0.5, 0.7, 0.9)
K_VALUES = (1, 2, 3, 5, 10, 20)
FIELDS = ("passk_iid", "passk_mix", "passk_gap", "passat_iid", "passat_mix", "passat_gap")
#: The values the artifact's SS3 result file reports: (q, k, field).
SELECTED = (
    (0.5, 2, "passk_gap"), (0.5, 2, "passat_gap"), (0.5, 3, "passk_gap"), (0.5, 3, "passat_gap"),
    (0.5, 5, "passk_gap"), (0.5, 5, "passat_gap"), (0.5, 10, "passk_gap"), (0.5, 10, "passat_gap"),
    (0.5, 20, "passk_gap"), (0.5, 20, "passat_gap"),
    (0.3, 10, "passat_iid"), (0.3, 10, "passat_mix"), (0.3, 10, "passat_gap"),
    (0.1, 2, "passk_iid"), (0.1, 2, "passk_mix"), (0.1, 20, "passat_iid"), (0.1, 20, "passat_mix"),
    (0.9, 10, "passat_iid"), (0.9, 10, "passat_mix"),
)


def marginal_chain(c0: tt.AbsorbingChain, c1: tt.AbsorbingChain, q: float) -> tt.AbsorbingChain:
    """One trial of the mixture: with probability q run ``c1``, else ``c0`` (block-diagonal Q, π0 split by q)."""
    m0, m1 = c0.n_states, c1.n_states
    Q = np.zeros((m0 + m1, m0 + m1))
    Q[:m0, :m0], Q[m0:, m0:] = c0.Q, c1.Q
    pi0 = np.concatenate([(1 - q) * c0.pi0, q * c1.pi0])
    names = [f"xi0:{s}" for s in c0.state_names] + [f"xi1:{s}" for s in c1.state_names]
    return tt.AbsorbingChain(Q, np.concatenate([c0.R_success, c1.R_success]),
                             np.concatenate([c0.R_failure, c1.R_failure]), pi0, names)


def table(c0: tt.AbsorbingChain, c1: tt.AbsorbingChain) -> dict[str, list[dict[str, float]]]:
    ks = np.array(K_VALUES)
    out: dict[str, list[dict[str, float]]] = {}
    for q in Q_VALUES:
        iid = marginal_chain(c0, c1, q)
        passk_iid, passat_iid = iid.pass_hat_k(ks), iid.pass_at_k(ks)
        passk_mix = q * c1.pass_hat_k(ks) + (1 - q) * c0.pass_hat_k(ks)
        passat_mix = q * c1.pass_at_k(ks) + (1 - q) * c0.pass_at_k(ks)
        out[str(q)] = [
            {"k": int(k), "passk_iid": float(a), "passk_mix": float(b), "passk_gap": float(b - a),
             "passat_iid": float(c), "passat_mix": float(d), "passat_gap": float(d - c)}
            for k, a, b, c, d in zip(ks, passk_iid, passk_mix, passat_iid, passat_mix, strict=True)
        ]
    return out


def run(quick: bool, seed: int) -> dict[str, Any]:
    s0, s1 = chain_seeds(seed, 2)
    c0 = tt.datasets.random_chain(M, s0, rho=0.6, density=1.0, success_rate=0.05)
    c1 = tt.datasets.random_chain(M, s1, rho=0.5, density=1.0, success_rate=0.35)
    ours = table(c0, c1)
    ref = artifact_json("synthetic/SS3_summary.json")

    def paper(q: float, k: int, name: str) -> float | None:
        if ref is None:
            return None
        return next(float(r[name]) for r in ref["results"][str(q)] if r["k"] == k)

    def value(q: float, k: int, name: str) -> float:
        return next(r[name] for r in ours[str(q)] if r["k"] == k)

    figures = [
        Figure("p0", "p0 = R∞ of the ξ = 0 chain", ref["p0"] if ref else None, c0.r_inf, "", 6),
        Figure("p1", "p1 = R∞ of the ξ = 1 chain", ref["p1"] if ref else None, c1.r_inf, "", 6),
    ]
    for q, k, name in SELECTED:
        figures.append(Figure(f"q={q}/k={k}/{name}", f"q = {q}, k = {k}: {name}", paper(q, k, name),
                              value(q, k, name), "", 4))

    max_abs = max_rel = None
    if ref is not None:
        diffs, rels = [], []
        for q in Q_VALUES:
            for k in K_VALUES:
                for name in FIELDS:
                    a, b = value(q, k, name), paper(q, k, name)
                    assert b is not None
                    diffs.append(abs(a - b))
                    if name in ("passk_iid", "passk_mix", "passat_iid", "passat_mix"):
                        rels.append(abs(a - b) / abs(b))
        max_abs, max_rel = max(diffs), max(rels)
    figures += [
        Figure("max_abs_diff_all", "max |ours − artifact JSON| over all 180 values", None, max_abs,
               "rounding only (the values are closed form)", 2),
        Figure("max_rel_diff_probs", "max relative difference of the 120 pass^k / pass@k values", None, max_rel,
               "rounding only; relative, because pass^20 is as small as 1e−22", 2),
    ]
    jensen = all(r["passk_gap"] >= -1e-15 and r["passat_gap"] <= 1e-15 for rows in ours.values() for r in rows)
    k1_zero = max(max(abs(r["passk_gap"]), abs(r["passat_gap"])) for rows in ours.values() for r in rows if r["k"] == 1)
    figures += [
        Figure("jensen", "pass^k gap ≥ 0 and pass@k gap ≤ 0 for every (q, k)", "yes", "yes" if jensen else "no"),
        Figure("k1_gap", "largest |gap| at k = 1", 0.0, k1_zero, "rounding only", 2),
    ]
    ok = max_abs is not None and max_abs < 1e-12 and max_rel is not None and max_rel < 1e-9 and jensen
    return StudyResult(
        study="SS3", title="correlated-trial (Jensen) gap", quick=quick, seed=seed,
        paper_ref="artifact only (one-sentence summary in §VII-A); Thm 4",
        params={"m": M, "q": list(Q_VALUES), "k": list(K_VALUES), "chain_xi0": {"rho": 0.6, "success_rate": 0.05},
                "chain_xi1": {"rho": 0.5, "success_rate": 0.35}, "generator": "tracetochain.datasets.random_chain"},
        figures=figures, headline="q=0.3/k=10/passat_gap",
        verdict="reproduced" if ok else ("skipped" if ref is None else "differs, explained"),
        summary=("Every one of the 180 closed-form values equals the artifact's to rounding; the pass@k gap grows "
                 "to −0.2 at k = 10 while the absolute pass^k gap vanishes for large k."),
        notes=[
            "Both chains come from the artifact's generator, whose rows all have the same transient mass and the same "
            "success split, so R∞ = success_rate exactly (p0 = 0.05, p1 = 0.35) whatever Q is; the chains' other "
            "draws do not matter here.",
            "The practically large effect is the pass@k gap (i.i.d. overstates pass@10 by 0.10–0.20 for q ≤ 0.5); "
            "the pass^k gap is positive but both terms vanish as k grows (our reading of the closed form).",
        ],
        data={"p0": c0.r_inf, "p1": c1.r_inf, "results": ours},
    ).to_dict()
