"""Ground-truth chains and corpora for the uncertainty tests and ``benchmarks/coverage_study.py``.

* :func:`hetero_chain` — a random m-state absorbing chain with heterogeneous exits and a spread π0 (unlike
  ``datasets.random_chain``, whose rows share one exit split, so R∞ is the same from every state).
* :func:`ss8_traces` — the SS8 "MAST-style" synthetic corpus generator reconstructed from the paper's description of
  study SS8.
* :func:`ss13_chain` — the SS13 ground truth of the authors' artifact.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

import tracetochain as tt


def hetero_chain(m: int = 6, seed: int = 7) -> tt.AbsorbingChain:
    """Rows Dirichlet(0.6) over the m states scaled to a transient mass U(0.55, 0.85); the exit mass split into
    success with a per-state share U(0.15, 0.85); π0 ~ Dirichlet(1)."""
    rng = np.random.default_rng(seed)
    Q = rng.dirichlet(np.full(m, 0.6), size=m) * rng.uniform(0.55, 0.85, size=m)[:, None]
    exit_mass = 1.0 - Q.sum(axis=1)
    share = rng.uniform(0.15, 0.85, size=m)
    pi0 = rng.dirichlet(np.ones(m))
    return tt.AbsorbingChain(Q, exit_mass * share, exit_mass * (1 - share), pi0,
                             [f"s{i}" for i in range(m)])


# ------------------------------------------------------------------------------------------------------ SS8
SS8_FEATURES = ("plan", "tool_call", "reflect", "retry", "wait", "error_parse")
#: Emission of the step's feature given its latent mode (planning, tool-use, error/reflection), as in SS8.
SS8_EMISSION = np.array([
    [0.60, 0.20, 0.20, 0.00, 0.00, 0.00],  # planning → plan .6, tool_call .2, reflect .2
    [0.00, 0.70, 0.00, 0.20, 0.10, 0.00],  # tool → tool_call .7, retry .2, wait .1
    [0.00, 0.00, 0.30, 0.15, 0.00, 0.55],  # error → error_parse .55, reflect .3, retry .15
])
SS8_FRAMEWORKS = (
    ("react", (0.55, 0.35, 0.10), 0.45),
    ("reflexion", (0.30, 0.45, 0.25), 0.60),
    ("cot_agent", (0.70, 0.20, 0.10), 0.40),
    ("toolformer", (0.25, 0.55, 0.20), 0.55),
    ("babyagi", (0.20, 0.40, 0.40), 0.30),
    ("autogpt", (0.15, 0.45, 0.40), 0.35),
    ("agentbench", (0.35, 0.40, 0.25), 0.50),
)
SS8_SEED = 2026042208


def ss8_traces(framework: int, n_traces: int = 120, seed: int | None = None) -> tt.TraceTable:
    """One SS8 corpus (Tran-Truong & Le 2026, study SS8): per step an i.i.d. latent mode from the framework's
    ``tool_bias``, an emitted feature given the mode; L ~ U{3..13} steps with a 3% per-step early stop; terminal label
    8% censored, else success with probability ``succ_bias``, else failure.

    The paper clusters noisy one-hot features (σ = 0.08) and recovers one state per feature with 100% purity in all
    seven frameworks; here the state *is* the emitted feature, which gives the same counts without the clustering.
    """
    _, tool_bias, succ_bias = SS8_FRAMEWORKS[framework]
    rng = np.random.default_rng(SS8_SEED + framework if seed is None else seed)
    records = []
    for i in range(n_traces):
        length = int(rng.integers(3, 14))
        steps = []
        for t in range(length):
            mode = rng.choice(3, p=tool_bias)
            steps.append(SS8_FEATURES[rng.choice(6, p=SS8_EMISSION[mode])])
            if t + 1 < length and rng.random() < 0.03:
                break
        u = rng.random()
        outcome = "censored" if u < 0.08 else ("success" if rng.random() < succ_bias else "failure")
        records += [{"trace_id": f"t{i}", "step_idx": j, "state": s, "outcome": outcome}
                    for j, s in enumerate(steps)]
    table = pa.table({k: [r[k] for r in records] for k in ("trace_id", "step_idx", "state", "outcome")})
    return tt.TraceTable.from_dataframe(table, source=f"ss8-{SS8_FRAMEWORKS[framework][0]}")


# ------------------------------------------------------------------------------------------------------ SS13
def ss13_chain() -> tt.AbsorbingChain:
    """SS13 ground truth (Tran-Truong & Le 2026, study SS13): m = 4, rows [Q | R⊕ | R⊖] normalised, start in state 0."""
    Q = np.array([[.10, .65, .05, .05], [.05, .10, .65, .05], [.15, .10, .10, .35], [.20, .05, .10, .10]])
    rs = np.array([.10, .10, .20, .45])
    rf = np.full(4, 0.05)
    total = Q.sum(axis=1) + rs + rf
    return tt.AbsorbingChain(Q / total[:, None], rs / total, rf / total, 0, ["a", "b", "c", "d"])
