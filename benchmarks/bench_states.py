"""State discovery: the full SWE-bench artifact corpus file → fitted chain, 1M rule-featured steps, and 1M
64-dimensional continuous rows on the scalable path. Each case runs in a fresh subprocess (clean peak RSS); the
table reports medians.

Targets (issue: state discovery): SWE-bench corpus (479 traces, 29,504 steps) file → chain under 2 s (the authors'
`fit` on their 160-trace sub-sample took ≈14 s on a 2-core machine, ≈105 s and 1.9 GB on all 479); 1M rule-featured
steps under 10 s; 1M × 64 continuous rows under 60 s and 4 GB.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "tracetochain-artifact" / "swebench_real" / \
    "corpus.json"
AUTHORS_SECONDS = {"sub-sample 160 traces": 14.0, "all 479 traces": 105.0}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def case_swebench() -> dict[str, float]:
    import tracetochain as tt
    from tracetochain.pipeline import fit_chain

    t0 = time.perf_counter()
    traces = tt.read_traces(CORPUS)
    t1 = time.perf_counter()
    result = fit_chain(traces, states="ward", vocabulary="shell", features="kind,tool", k_min=2, k_max=10)
    t2 = time.perf_counter()
    return {"read_s": t1 - t0, "states_and_chain_s": t2 - t1, "total_s": t2 - t0, "k": result.states.n_states,
            "steps": traces.n_steps}


def case_swebench_depth() -> dict[str, float]:
    import tracetochain as tt
    from tracetochain.pipeline import fit_chain

    t0 = time.perf_counter()
    traces = tt.read_traces(CORPUS)
    result = fit_chain(traces, states="ward", vocabulary="shell", features="kind,tool,hindsight-depth", k_min=2,
                       k_max=10)
    t1 = time.perf_counter()
    return {"total_s": t1 - t0, "k": result.states.n_states, "steps": traces.n_steps,
            "unique_rows": result.states.settings["n_unique_rows"]}


def _synthetic_rule_traces(n_steps: int, seed: int = 0):  # type: ignore[no-untyped-def]
    import numpy as np
    import pyarrow as pa

    import tracetochain as tt

    rng = np.random.default_rng(seed)
    length = 30
    n_traces = n_steps // length
    tools = np.array([f"tool_{i:02d}" for i in range(40)] + [None] * 10, dtype=object)
    tool = tools[rng.integers(0, len(tools), n_traces * length)]
    kind = np.where(tool == None, "llm", "tool")  # noqa: E711
    table = pa.table({
        "trace_id": pa.array(np.repeat([f"t{i:07d}" for i in range(n_traces)], length)),
        "step_idx": pa.array(np.tile(np.arange(length), n_traces)),
        "step_kind": pa.array(kind),
        "tool_name": pa.array(tool, pa.string()),
        "error": pa.array(rng.random(n_traces * length) < 0.05),
        "outcome": pa.array(np.repeat(np.where(rng.random(n_traces) < 0.6, "success", "failure"), length)),
    })
    return tt.TraceTable.from_dataframe(table)


def case_rules_1m() -> dict[str, float]:
    from tracetochain.featurize import RuleFeaturizer
    from tracetochain.states import WardStates

    traces = _synthetic_rule_traces(1_000_000)
    t0 = time.perf_counter()
    model = WardStates(featurizer=RuleFeaturizer(retry=True), k_min=2, k_max=10).fit(traces).fetch_model()
    labelled = model.label(traces)
    t1 = time.perf_counter()
    return {"states_s": t1 - t0, "k": model.n_states, "unique_rows": model.settings["n_unique_rows"],
            "steps": labelled.n_steps}


class _Continuous:
    """A featurizer returning fixed 64-dimensional continuous rows (a Gaussian mixture), for the scalable path."""

    def __init__(self, n: int, dim: int = 64, seed: int = 0) -> None:
        import numpy as np

        rng = np.random.default_rng(seed)
        centers = rng.normal(scale=4.0, size=(12, dim))
        self.X = centers[rng.integers(0, 12, n)] + rng.normal(size=(n, dim))

    def fit(self, traces: object) -> _Continuous:
        return self

    def fetch_model(self) -> _Continuous:
        return self

    def transform(self, traces: object):  # type: ignore[no-untyped-def]
        import numpy as np

        from tracetochain.featurize import Features

        return Features(self.X, tuple(f"x{i}" for i in range(self.X.shape[1])), np.zeros(len(self.X), np.int64),
                        ("step",), None)


def case_continuous_1m() -> dict[str, float]:
    from tracetochain.states import WardStates

    traces = _synthetic_rule_traces(1_000_000)
    featurizer = _Continuous(traces.n_steps)
    t0 = time.perf_counter()
    model = WardStates(featurizer=featurizer, k_min=2, k_max=12, n_centroids=500).fit(traces).fetch_model()
    t1 = time.perf_counter()
    return {"states_s": t1 - t0, "k": model.n_states, "path": model.settings["path"], "steps": traces.n_steps}


CASES = {"swebench": case_swebench, "swebench-cat+depth": case_swebench_depth, "rules-1M": case_rules_1m,
         "continuous-1M-64d": case_continuous_1m}


def run_child(case: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, __file__, "--child", case], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{case} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        out = CASES[args.child]()
        out["peak_mb"] = _peak_mb()
        print(json.dumps(out))
        return 0
    if not CORPUS.exists():
        print(f"note: {CORPUS} not found; SWE-bench cases skipped")
    rows, results = [], {}
    for case in args.cases.split(","):
        if case.startswith("swebench") and not CORPUS.exists():
            continue
        runs = [run_child(case) for _ in range(args.repeats)]
        key = "total_s" if "total_s" in runs[0] else "states_s"
        secs = median([r[key] for r in runs])
        peak = median([r["peak_mb"] for r in runs])
        results[case] = {"runs": runs, "median_s": secs, "median_peak_mb": peak}
        extra = ", ".join(f"{k}={v}" for k, v in runs[0].items() if k in ("k", "unique_rows", "path", "steps"))
        rows.append([case, f"{secs:.2f}", f"{peak:.0f}", extra])
        print(f"# {case}: {secs:.2f} s, peak {peak:.0f} MB ({extra})", flush=True)
    print()
    print(markdown_table(["case", "median s", "peak RSS MB", "details"], rows))
    if "swebench" in results:
        ours = results["swebench"]["median_s"]
        for what, theirs in AUTHORS_SECONDS.items():
            print(f"authors' fit ({what}): {theirs:.0f} s → ratio {theirs / ours:.0f}× (ours on all 479 traces)")
    if not args.no_save:
        path = write_results("bench_states", {"machine": machine_info(), "cases": results,
                                              "authors_seconds": AUTHORS_SECONDS})
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
