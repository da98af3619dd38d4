"""SS8 — uncertainty on MAST-style corpora: posterior vs bootstrap interval widths (Tran-Truong & Le 2026, §IV-D;
paper Tables II–III).

The artifact's generator (synthetic, not raw MAST): 120 traces per framework; each step's latent mode is drawn
i.i.d. from the framework's ``tool_bias`` (planning, tool use, error), the emitted feature from the mode's law
(planning → plan .6 / tool_call .2 / reflect .2; tool → tool_call .7 / retry .2 / wait .1; error → error_parse .55 /
reflect .3 / retry .15); length U{3..13} with a 3% per-step early stop; 8% of traces censored, else success with
probability ``succ_bias``. States: the six emitted features (the artifact's Ward on σ = 0.08 noisy one-hot features
finds exactly these, m = 6 for all seven). α = 1; 95% intervals from :class:`tracetochain.uncertainty.
DirichletPosterior` (Beta marginals) and :class:`tracetochain.uncertainty.TraceBootstrap` (fast path, B = 200).
Our draws are not the artifact's (its draw order is not recorded): widths are compared as statistics.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tracetochain as tt
from studies._common import PAPER_BOOTSTRAP, Figure, StudyResult, artifact_json
from tracetochain.uncertainty import DirichletPosterior, TraceBootstrap

FEATURES = ("plan", "tool_call", "reflect", "retry", "wait", "error_parse")
EMIT = np.array([[.6, .2, .2, 0, 0, 0], [0, .7, 0, .2, .1, 0], [0, 0, .3, .15, 0, .55]])
SKELETONS = {"react": ((.55, .35, .10), .45), "reflexion": ((.30, .45, .25), .60), "cot_agent": ((.70, .20, .10), .40),
             "toolformer": ((.25, .55, .20), .55), "babyagi": ((.20, .40, .40), .30),
             "autogpt": ((.15, .45, .40), .35), "agentbench": ((.35, .40, .25), .50)}
#: Table III: (posterior min, median, max, bootstrap min, median, max) of the 95% widths over the entries of Q̂.
PAPER_WIDTHS = {"react": (.037, .110, .313, .017, .097, .287), "reflexion": (.048, .109, .238, .040, .098, .253),
                "cot_agent": (.029, .111, .337, .008, .084, .288), "toolformer": (.041, .108, .241, .034, .101, .208),
                "babyagi": (.040, .113, .286, .035, .100, .291), "autogpt": (.044, .112, .283, .012, .100, .268),
                "agentbench": (.034, .116, .265, .032, .103, .250)}
N = 120


def simulate(tool_bias: tuple[float, float, float], succ: float, rng: np.random.Generator) -> tt.TraceTable:
    records = []
    for t in range(N):
        length = int(rng.integers(3, 14))
        steps = []
        for _ in range(length):
            mode = rng.choice(3, p=tool_bias)
            steps.append(FEATURES[rng.choice(6, p=EMIT[mode])])
            if rng.random() < 0.03:
                break
        u = rng.random()
        outcome = "censored" if u < 0.08 else ("success" if rng.random() < succ else "failure")
        records += [{"trace_id": f"t{t}", "step_idx": j, "state": s, "outcome": outcome} for j, s in enumerate(steps)]
    return tt.TraceTable.from_records(records)


def run(quick: bool, seed: int) -> dict[str, Any]:
    ref = artifact_json("mast_derived/SS8_uq_summary.json") or []
    steps_ref = {r["framework"]: r["n_steps"] for r in ref}
    n_boot = 200
    rows: dict[str, dict[str, Any]] = {}
    for i, (name, (bias, succ)) in enumerate(SKELETONS.items()):
        traces = simulate(bias, succ, np.random.default_rng(seed + i))
        chain = tt.ChainEstimator(pseudocount=1.0).fit(traces).fetch_model()
        post = DirichletPosterior(seed=seed + i).fit(chain).fetch_model()
        pw = post.intervals.width_summary("Q")
        ens = TraceBootstrap(samples=n_boot, seed=seed + i, state_names=chain.state_names,
                             **PAPER_BOOTSTRAP).fit(traces).fetch_model()
        bw = ens.entry_intervals().width_summary("Q")
        rows[name] = {"m": chain.n_states, "n_steps": traces.n_steps, "post": [pw["min"], pw["median"], pw["max"]],
                      "boot": [bw["min"], bw["median"], bw["max"]], "r_inf": chain.r_inf}
    figures: list[Figure] = []
    for name, r in rows.items():
        p = PAPER_WIDTHS[name]
        figures += [
            Figure(f"{name}/m", f"{name}: m", 6, r["m"]),
            Figure(f"{name}/n_steps", f"{name}: steps", steps_ref.get(name), r["n_steps"], "our own draw", 0),
            Figure(f"{name}/post_median", f"{name}: posterior median width", p[1], r["post"][1], "", 3),
            Figure(f"{name}/boot_median", f"{name}: bootstrap median width", p[4], r["boot"][1], "", 3),
            Figure(f"{name}/post_max", f"{name}: posterior max width", p[2], r["post"][2],
                   "the sparsest row: depends on how often that state was visited in the draw", 3),
            Figure(f"{name}/boot_max", f"{name}: bootstrap max width", p[5], r["boot"][2], "", 3),
        ]
    post_med = [r["post"][1] for r in rows.values()]
    boot_med = [r["boot"][1] for r in rows.values()]
    gaps = [a - b for a, b in zip(post_med, boot_med, strict=True)]
    figures += [
        Figure("post_median_range_lo", "posterior medians: lowest", 0.108, min(post_med), "", 3),
        Figure("post_median_range_hi", "posterior medians: highest", 0.116, max(post_med), "", 3),
        Figure("boot_median_range_lo", "bootstrap medians: lowest", 0.084, min(boot_med), "", 3),
        Figure("boot_median_range_hi", "bootstrap medians: highest", 0.103, max(boot_med), "", 3),
        Figure("median_gap", "mean (posterior − bootstrap) median width", float(np.mean(
            [p[1] - p[4] for p in PAPER_WIDTHS.values()])), float(np.mean(gaps)),
               "posterior a little wider than bootstrap at the median, in both", 3),
    ]
    ok = all(abs(f.diff) <= 0.02 for f in figures if f.key.endswith("median") and f.diff is not None)
    return StudyResult(
        study="SS8", title="uncertainty: posterior vs bootstrap widths (MAST-style)", quick=quick, seed=seed,
        paper_ref="Tables II–III, §IV-D",
        params={"n_traces": N, "pseudocount": 1.0, "confidence": 0.95, "n_bootstrap": n_boot, "states": "features"},
        figures=figures, headline="median_gap",
        verdict="reproduced within tolerance" if ok else "differs, explained",
        summary=(f"Median 95% widths: posterior {min(post_med):.3f}–{max(post_med):.3f} (paper 0.108–0.116), "
                 f"bootstrap {min(boot_med):.3f}–{max(boot_med):.3f} (paper 0.084–0.103); the two agree to "
                 f"≈{np.mean(gaps):.2f} at the median, as the paper says."),
        notes=[
            "New draws from the artifact's generator: per-entry widths move with how often each state is visited; "
            "the medians are stable, the maxima (the sparsest rows) are not.",
            "States are the emitted features (the artifact's Ward recovers them from σ = 0.08 noisy one-hot "
            "vectors). The quick and full runs are the same study (B = 200 takes well under a second).",
        ],
        data={"frameworks": rows},
    ).to_dict()
