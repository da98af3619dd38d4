"""Size and coverage of the held-out discrimination interval (``tracetochain.audit._discrimination``).

``python -m studies.discrimination_interval [--reps 200] [--traces 300]`` writes ``studies/results/DISCRIMINATION.json``
and ``.md``; ``tests/audit/test_discrimination.py::test_archived_discrimination_study_meets_the_acceptance`` checks
the archive.

* **Size** — corpora from a chain whose every state has the same eventual success (the path carries no information
  about the outcome): the share of corpora the rule calls *informative* (lower end of the 95 % AUC interval above 0.5;
  a one-sided test at 2.5 %). Acceptance: ≤ 5 % (upper Wilson bound reported).
* **Coverage** — corpora from a chain whose states separate outcomes: the share whose 95 % interval contains the
  true held-out AUC of the splits' fitted chains (each scored on 20,000 fresh runs, averaged over the splits).
  Acceptance: ≥ 90 % (the interval is conservative by construction).
* **Power** — on the same corpora, the share called informative.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def null_chain() -> Any:
    from tracetochain.chain import AbsorbingChain

    Q = np.array([[0.2, 0.4, 0.2], [0.3, 0.2, 0.3], [0.25, 0.25, 0.3]])
    stay = Q.sum(axis=1)
    rs = 0.6 * (1 - stay)
    return AbsorbingChain(Q, rs, 1 - stay - rs, 0, ("a", "b", "c"))


def separating_chain() -> Any:
    from tracetochain.chain import AbsorbingChain

    Q = np.array([[0.0, 0.5, 0.5, 0.0], [0.0, 0.3, 0.35, 0.35], [0.0, 0.0, 0.2, 0.0], [0.0, 0.0, 0.0, 0.2]])
    rs = np.array([0.0, 0.0, 0.7, 0.1])
    return AbsorbingChain(Q, rs, 1.0 - Q.sum(axis=1) - rs, 0, ("start", "explore", "fix", "stuck"))


def auc(p: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import rankdata

    r = rankdata(p)
    n1, n0 = int(y.sum()), int((~y).sum())
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def true_heldout_auc(res: Any, chain: Any, seed: int, n_fresh: int = 20_000) -> float:
    """Every split's fit-half chain (as the analysis fits it) scored on fresh runs at their last step, averaged."""
    import tracetochain as tt
    from tracetochain.chain import ChainPrior, estimate_chain

    fresh = tt.datasets.simulate_traces(chain, n_fresh, seed=seed)
    acc = res.summary
    oc = fresh.outcomes()
    states = fresh.to_arrow().column("state").to_pylist()
    end = np.array([states[int(o) - 1] for o in fresh.offsets[1:]], dtype=object)
    keep = (np.diff(fresh.offsets) > 0) & (oc != 2)
    y = oc[keep] == 0
    s0 = res.settings
    prior = ChainPrior.from_settings(None, None)
    out = []
    for s in range(acc.spec.n_splits):
        c = estimate_chain(acc.split_fit_counts(s), prior=prior, unvisited=s0["unvisited"], initial=s0["initial"])
        h = dict(zip(c.state_names, c.success_probabilities, strict=True))
        out.append(auc(np.array([h.get(e, 0.0) for e in end[keep]]), y))
    return float(np.mean(out))


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def run(reps: int, n_traces: int) -> dict[str, Any]:
    import tracetochain as tt
    from tracetochain.analysis import analyze

    informative_null = 0
    for r in range(reps):
        res = analyze(tt.datasets.simulate_traces(null_chain(), n_traces, seed=10_000 + r), audit=False,
                      intervals=None)
        informative_null += res.discrimination.informative is True
    covered = informative = 0
    widths = []
    for r in range(reps):
        res = analyze(tt.datasets.simulate_traces(separating_chain(), n_traces, seed=20_000 + r), audit=False,
                      intervals=None)
        a = res.discrimination.auc
        truth = true_heldout_auc(res, separating_chain(), 30_000 + r)
        covered += a["lower"] <= truth <= a["upper"]
        informative += res.discrimination.informative is True
        widths.append(a["upper"] - a["lower"])
    return {"study": "DISCRIMINATION", "reps": reps, "n_traces": n_traces, "confidence": 0.95,
            "size": {"informative": informative_null, "rate": informative_null / reps,
                     "wilson": wilson(informative_null, reps)},
            "coverage": {"covered": covered, "rate": covered / reps, "wilson": wilson(covered, reps)},
            "power": {"informative": informative, "rate": informative / reps},
            "mean_width": float(np.mean(widths)),
            "acceptance": {"size_rate_max": 0.05, "coverage_min": 0.90, "coverage_max": 1.0}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--traces", type=int, default=300)
    args = ap.parse_args()
    doc = run(args.reps, args.traces)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "DISCRIMINATION.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    md = (f"# Held-out discrimination interval ({doc['reps']} corpora of {doc['n_traces']} traces per row)\n\n"
          "| figure | value | Wilson 95 % |\n|---|---|---|\n"
          f"| size: null corpora called informative | {doc['size']['rate']:.3f} | "
          f"[{doc['size']['wilson'][0]:.3f}, {doc['size']['wilson'][1]:.3f}] |\n"
          f"| coverage of the true held-out AUC | {doc['coverage']['rate']:.3f} | "
          f"[{doc['coverage']['wilson'][0]:.3f}, {doc['coverage']['wilson'][1]:.3f}] |\n"
          f"| power: separating corpora called informative | {doc['power']['rate']:.3f} | |\n"
          f"| mean interval width | {doc['mean_width']:.3f} | |\n")
    (RESULTS / "DISCRIMINATION.md").write_text(md, encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
