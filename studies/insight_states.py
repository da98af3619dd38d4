"""Study INSIGHT-STATES (ours, issue 25 item 2): do informative states find outcome information the first-order chain
cannot see, and stay put when there is none?

Run ``python -m studies.insight_states [--quick] [--jobs N]``: it writes ``studies/results/INSIGHT_STATES.json``
(the truth) and ``INSIGHT_STATES.md`` (quick runs: ``studies/results/quick/``).

**Score.** Each corpus is cut in halves by the analysis's rule (held out iff u(FNV-1a(id), seed, 0) < ½); the state
model and the chain are fitted on the fit half; each held-out trace is scored by the chain's eventual success from
its last transient state (the first-order chain's prediction of the outcome once the path is known), and the score
is compared with the outcome by the AUC (``sklearn.metrics.roc_auc_score``; a local helper — the library's own
discrimination metric is a separate module).

**Planted.** :func:`tracetochain.datasets.planted_history_traces`: edit / test (fails with probability 0.7) /
submit, every trace ending in ``submit``; a trace whose last two tests before submit failed fails with probability
0.9, any other with 0.1. The label chain scores every trace alike (AUC 0.5); acceptance: informative states reach a
held-out AUC ≥ 0.75 and a state's name names the pattern ("submit after ≥2 failing tests in a row"), at 500
traces. Sizes 300, 500, 1000.

**Null.** Two corpora where the history carries no outcome information: a first-order chain (edit, test, view,
submit, with exits from every state) and the planted dynamics with the outcome drawn independently of the history.
Acceptance: few or no splits (the share of corpora with any split ≤ 5 %).

**Real.** The shared SWE-bench corpora (skipped when absent), shell vocabulary: the AUC of the category chain and of
the informative chain over five held-out splits, and the states found — whatever they are.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import tracetochain as tt
from studies._common import rate_text
from tracetochain._outcome import OutcomeCode
from tracetochain._parallel import parallel_map
from tracetochain.audit._holdout import label_traces
from tracetochain.datasets import planted_history_traces
from tracetochain.pipeline import fit_chain_over_states
from tracetochain.states import CategoricalStates, InformativeStates
from tracetochain.traces._hashing import fnv1a_hashes, holdout_mask

RESULTS = Path(__file__).resolve().parent / "results"
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SIZES = (300, 500, 1000)
NULL_SIZE = 500
PATTERN = "≥2 failing tests"
REAL = {
    "swebench-mini-swe-agent": ("swebench-verified-mini-swe-agent-gemini-3-pro", "mini-swe-agent"),
    "swebench-swe-agent-artifact": ("tracetochain-artifact/swebench_real/corpus.json", None),
}


def first_order_chain() -> tt.AbsorbingChain:
    """The null's first-order truth: four states, exits from each."""
    return tt.AbsorbingChain(
        Q=[[0.0, 0.7, 0.0, 0.0], [0.4, 0.0, 0.3, 0.2], [0.5, 0.0, 0.0, 0.3], [0.0, 0.0, 0.0, 0.0]],
        R_success=[0.05, 0.0, 0.1, 0.7], R_failure=[0.25, 0.1, 0.1, 0.3], pi0=[1.0, 0.0, 0.0, 0.0],
        state_names=("edit", "test", "view", "submit"))


def heldout_auc(traces: tt.TraceTable, estimator: Any, seed: int = 0, split: int = 0) -> tuple[float, Any]:
    """(held-out AUC of the chain's eventual success at each held-out trace's last transient state, state model)."""
    from sklearn.metrics import roc_auc_score

    held = holdout_mask(fnv1a_hashes(traces.trace_id_array), 0.5, seed, split)
    fit, test = traces.select_traces(~held), traces.select_traces(held)
    model = estimator.fit(fit).fetch_model()
    chain = fit_chain_over_states(model, model.label(fit))
    _, keep = label_traces(model, test)
    kept = test.select_traces(keep)
    last = np.asarray(model.predict(kept))[np.asarray(kept.offsets)[1:] - 1]
    y = kept.outcomes() == OutcomeCode.SUCCESS
    if y.all() or not y.any():
        return float("nan"), model
    return float(roc_auc_score(y, chain.success_probabilities[last])), model


def _planted_job(job: tuple[int, int, int]) -> dict[str, Any]:
    n, rep, seed = job
    s = int(np.random.default_rng([seed, n, rep]).integers(2**31))
    traces = planted_history_traces(n, seed=s)
    auc_label, _ = heldout_auc(traces, CategoricalStates(), seed=rep)
    auc_inf, model = heldout_auc(traces, InformativeStates(seed=rep), seed=rep)
    return {"n": n, "rep": rep, "auc_label": auc_label, "auc_informative": auc_inf, "n_states": model.n_states,
            "named": any(PATTERN in name for name in model.state_names),
            "first_split": (model.settings["splits"][0]["state"], model.settings["splits"][0]["feature"],
                            model.settings["splits"][0]["threshold"]) if model.settings["splits"] else None}


def _null_job(job: tuple[str, int, int]) -> dict[str, Any]:
    scenario, rep, seed = job
    s = int(np.random.default_rng([seed, 7, rep]).integers(2**31))
    if scenario == "first-order":
        traces = tt.datasets.simulate_traces(first_order_chain(), NULL_SIZE, seed=s)
    else:
        traces = planted_history_traces(NULL_SIZE, pattern=False, seed=s)
    auc_label, _ = heldout_auc(traces, CategoricalStates(), seed=rep)
    auc_inf, model = heldout_auc(traces, InformativeStates(seed=rep), seed=rep)
    return {"scenario": scenario, "rep": rep, "n_splits": len(model.settings["splits"]), "auc_label": auc_label,
            "auc_informative": auc_inf,
            "splits": [(x["state"], x["feature"], x["threshold"]) for x in model.settings["splits"]]}


def _real(name: str, relpath: str, reader: str | None) -> dict[str, Any] | None:
    path = SHARED / relpath
    if not path.exists():
        return None
    traces = tt.read_traces(path, reader) if reader else tt.read_traces(path)
    rows = []
    for split in range(5):
        auc_cat, _ = heldout_auc(traces, CategoricalStates(vocabulary="shell"), split=split)
        t0 = time.perf_counter()
        auc_inf, model = heldout_auc(traces, InformativeStates(vocabulary="shell"), split=split)
        rows.append({"split": split, "auc_categories": auc_cat, "auc_informative": auc_inf,
                     "n_states": model.n_states, "fit_seconds": round(time.perf_counter() - t0, 2),
                     "states": list(model.state_names),
                     "splits": [{k: x[k] for k in ("state", "feature", "threshold", "into", "p_value",
                                                    "heldout_gain_per_trace", "heldout_z")}
                                for x in model.settings["splits"]]})
    last_states = sorted({s for r in rows for s in r["states"] if s.startswith("SUBMIT")})
    # How much each history feature at the last step says about the verdict on the whole corpus (in sample, a
    # descriptive ceiling: the AUC of "less of it → success").
    from sklearn.metrics import roc_auc_score

    from tracetochain.featurize.history import HISTORY_FEATURES, history_features

    base = InformativeStates(vocabulary="shell").fit(traces).fetch_model()
    codes = base.assign.base_codes(traces)  # type: ignore[attr-defined]
    feats = history_features(traces, codes, base.settings["base_states"])
    last = np.asarray(traces.offsets)[1:] - 1
    y = traces.outcomes() == OutcomeCode.SUCCESS
    feature_auc = {f: float(roc_auc_score(y, -feats[f][last])) for f in HISTORY_FEATURES}
    return {"corpus": name, "n_traces": traces.n_traces, "n_steps": traces.n_steps,
            "outcomes": traces.outcome_counts(), "splits": rows,
            "mean_auc_categories": float(np.mean([r["auc_categories"] for r in rows])),
            "mean_auc_informative": float(np.mean([r["auc_informative"] for r in rows])),
            "submit_states": last_states, "in_sample_feature_auc_at_last_step": feature_auc}


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    z = 1.959963984540054
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, round(c - h, 12)), min(1.0, round(c + h, 12))


def _rate(hits: list[bool]) -> dict[str, Any]:
    k, n = int(sum(hits)), len(hits)
    lo, hi = wilson(k, n)
    return {"rate": k / n if n else None, "k": k, "n": n, "wilson": [lo, hi]}


def _mean(values: list[float]) -> dict[str, Any]:
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    return {"mean": float(x.mean()), "se": float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else None,
            "q10": float(np.quantile(x, 0.1)), "median": float(np.median(x)), "n": int(x.size)}


def run(quick: bool = False, seed: int = 20261202, jobs: int = 1) -> dict[str, Any]:
    reps = 12 if quick else 100
    t0 = time.perf_counter()
    planted_jobs = [(n, r, seed) for n in SIZES for r in range(reps)]
    null_jobs = [(s, r, seed) for s in ("first-order", "planted-null") for r in range(reps)]
    planted = parallel_map(_planted_job, planted_jobs, n_jobs=jobs)
    null = parallel_map(_null_job, null_jobs, n_jobs=jobs)
    planted_doc = {}
    for n in SIZES:
        rows = [r for r in planted if r["n"] == n]
        planted_doc[str(n)] = {
            "auc_label": _mean([r["auc_label"] for r in rows]),
            "auc_informative": _mean([r["auc_informative"] for r in rows]),
            "auc_informative_at_least_075": _rate([r["auc_informative"] >= 0.75 for r in rows]),
            "named": _rate([r["named"] for r in rows]),
            "n_states": _mean([float(r["n_states"]) for r in rows]),
            "first_split_is_the_pattern": _rate([r["first_split"] == ("submit", "fail_streak", 2) for r in rows]),
        }
    null_doc = {}
    for scenario in ("first-order", "planted-null"):
        rows = [r for r in null if r["scenario"] == scenario]
        null_doc[scenario] = {"n_traces": NULL_SIZE, "any_split": _rate([r["n_splits"] > 0 for r in rows]),
                              "mean_splits": float(np.mean([r["n_splits"] for r in rows])),
                              "auc_label": _mean([r["auc_label"] for r in rows]),
                              "auc_informative": _mean([r["auc_informative"] for r in rows]),
                              "splits_seen": [r["splits"] for r in rows if r["splits"]]}
    real = {name: doc for name, (rel, reader) in REAL.items() if (doc := _real(name, rel, reader)) is not None}
    return {"kind": "tracetochain.study", "study": "INSIGHT_STATES",
            "title": "Informative states: outcome information the first-order chain cannot see",
            "quick": quick, "seed": seed, "reps": reps, "sizes": list(SIZES), "planted": planted_doc,
            "null": null_doc, "real": real, "runtime_s": round(time.perf_counter() - t0, 1)}


def render(doc: dict[str, Any]) -> str:
    def pct(e: dict[str, Any]) -> str:
        return rate_text(e)

    def auc(e: dict[str, Any]) -> str:
        return f"{e['mean']:.3f} ± {e['se']:.3f}" if e.get("se") is not None else f"{e['mean']:.3f}"

    lines = [f"# {doc['title']}", "",
             f"{doc['reps']} corpora per size and scenario (seed {doc['seed']}); held-out AUC of the chain's eventual "
             "success at the last transient state (mean ± Monte Carlo standard error); rates in % with their "
             f"Wilson 95 % interval. Runtime {doc['runtime_s']} s.", "",
             "## Planted pattern (failure follows two failing tests in a row before submit)", "",
             "| n | AUC label chain | AUC informative | 10 % quantile | AUC ≥ 0.75 | a state names the pattern | "
             "first split is submit by the streak ≥ 2 | states |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n, e in doc["planted"].items():
        lines.append(f"| {n} | {auc(e['auc_label'])} | {auc(e['auc_informative'])} | "
                     f"{e['auc_informative']['q10']:.3f} | {pct(e['auc_informative_at_least_075'])} | "
                     f"{pct(e['named'])} | {pct(e['first_split_is_the_pattern'])} | {e['n_states']['mean']:.1f} |")
    lines += ["", "## Null (no outcome information in the history)", "",
              "| scenario | n | corpora with any split | mean splits | AUC label chain | AUC informative |",
              "|---|---:|---:|---:|---:|---:|"]
    for s, e in doc["null"].items():
        lines.append(f"| {s} | {e['n_traces']} | {pct(e['any_split'])} | {e['mean_splits']:.3f} | "
                     f"{auc(e['auc_label'])} | {auc(e['auc_informative'])} |")
    lines += ["", "In the first-order null the states themselves differ in their exits, so the label chain already "
              "discriminates; the history adds nothing, and the informative states should stay the labels."]
    if doc["real"]:
        lines += ["", "## Real corpora (shell vocabulary, five held-out splits)", "",
                  "| corpus | traces | AUC categories | AUC informative | states (split 0) | SUBMIT states found |",
                  "|---|---:|---:|---:|---:|---|"]
        for name, e in doc["real"].items():
            lines.append(f"| {name} | {e['n_traces']} | {e['mean_auc_categories']:.3f} | "
                         f"{e['mean_auc_informative']:.3f} | {e['splits'][0]['n_states']} | "
                         f"{'; '.join(e['submit_states'])} |")
        lines += ["", "In-sample AUC of each history feature at the last step against the verdict (fewer → success; "
                  "a descriptive ceiling, not a held-out figure):", "",
                  "| corpus | " + " | ".join(next(iter(doc["real"].values()))["in_sample_feature_auc_at_last_step"])
                  + " |", "|---|" + "---:|" * 8]
        for name, e in doc["real"].items():
            lines.append(f"| {name} | " + " | ".join(f"{v:.3f}" for v in
                                                     e["in_sample_feature_auc_at_last_step"].values()) + " |")
        for name, e in doc["real"].items():
            lines += ["", f"Splits of {name}, held-out split 0 (state → feature ≥ threshold, p, held-out gain "
                          "per trace, z):", ""]
            lines += [f"- {x['state']} → {x['feature']} ≥ {x['threshold']} (p = {x['p_value']:.2g}, gain "
                      f"{x['heldout_gain_per_trace']:.3f}, z = {x['heldout_z']:.1f}): {' / '.join(x['into'])}"
                      for x in e["splits"][0]["splits"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=20261202)
    args = ap.parse_args(argv)
    doc = run(args.quick, args.seed, args.jobs)
    out = RESULTS / "quick" if args.quick else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    (out / "INSIGHT_STATES.json").write_text(json.dumps(doc, indent=1, allow_nan=False, ensure_ascii=False) + "\n")
    (out / "INSIGHT_STATES.md").write_text(render(doc))
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
