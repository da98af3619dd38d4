"""Our study CR (compare on real runs split in two): how often ``compare`` calls two halves of one real run
different. Not one of the paper's studies.

Run ``python -m studies.compare_real [--splits N] [--jobs N]``: it writes ``studies/results/CR.json`` and
``studies/results/CR.md``.

A run split at random into two halves is two samples of one agent by construction, so every difference ``compare``
calls between them is a false one. Each corpus is split ``splits`` times (seeded; each half gets half of the usable
traces, a task's trials spread over both halves at random, as two runs of one benchmark share their tasks), and each
split is compared with the default settings (bootstrap intervals, 200 replicates; ``seed`` = the split's index). Per
split: whether ΔR∞'s interval excludes 0, whether the permutation test of ΔR∞ = 0 rejects at 5 %, whether a
difference in R∞ is called (both), whether a state is called changed, and whether the verdict says anything but
"same" (either claim).

A random split of a fixed pool is a random relabelling of its traces, so the permutation test's rejection rate over
splits is at most 5 % exactly (conditionally on the pool); the interval's own rate is what is measured. Corpora: the
bundled τ-bench airline run (50 tasks × 4 trials, shipped with the package) and, when ``../shared/data`` is present,
the 250 mini-swe-agent SWE-bench trajectories and the artifact's 479 SWE-agent trajectories (one trial per task),
and a τ²-bench airline run (50 tasks, one trial each).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from studies._common import rate_text, write_archive
from studies.rn_statistics import _rate
from tracetochain import TraceTable, read_traces
from tracetochain._parallel import parallel_map
from tracetochain.analysis._compare import compare
from tracetochain.datasets import example_path

RESULTS = Path(__file__).resolve().parent / "results"
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
#: Corpus → (its file or folder, compare's state options); the artifact's SWE-agent corpus is read by studies._swe.
CORPORA: dict[str, tuple[Path, dict[str, Any]]] = {
    "τ-bench airline (bundled, 50 tasks × 4)": (example_path(), {"vocabulary": "chat"}),
    "SWE-bench mini-swe-agent (250)": (SHARED / "swebench-verified-mini-swe-agent-gemini-3-pro", {}),
    "SWE-bench SWE-agent (artifact, 479)": (SHARED / "tracetochain-artifact" / "swebench_real" / "corpus.json", {}),
    "τ²-bench airline (claude-sonnet-4-5, 50)": (SHARED / "tau2-bench" / "web" / "leaderboard" / "public" /
                                                 "submissions" / "claude-sonnet-4-5_aide-platform_2025-10-31" /
                                                 "trajectories" /
                                                 "claude-sonnet-4-5_airline_default_gpt4.1_1trials.json",
                                                 {"vocabulary": "chat"}),
}
CLAIMS = ("interval", "permutation", "delta", "state", "any")

_TABLES: dict[str, TraceTable] = {}


def _table(name: str) -> TraceTable:
    if name not in _TABLES:
        path = CORPORA[name][0]
        if path.name == "corpus.json":  # the artifact's token lists, in its shell-paper categories
            from studies import _swe

            _TABLES[name] = _swe.table()
        else:
            _TABLES[name] = read_traces(path)
    return _TABLES[name]


def _split_job(job: tuple[str, int, int]) -> dict[str, Any]:
    name, split, seed = job
    traces = _table(name)
    rng = np.random.default_rng(np.random.SeedSequence([seed, split]))
    n = traces.n_traces
    half = np.zeros(n, bool)
    half[rng.permutation(n)[: n // 2]] = True
    a, b = traces.select_traces(half), traces.select_traces(~half)
    c = compare(a, b, state_options=CORPORA[name][1], samples=200, seed=split)
    assert c.delta_r_inf_test is not None
    return {"corpus": name, "interval": c.interval_direction != "same",
            "permutation": c.delta_r_inf_test.p_value <= 0.05, "delta": c.direction in ("better", "worse"),
            "state": bool(c.homogeneity.differing),
            "any": c.direction in ("better", "worse") or bool(c.homogeneity.differing),
            "n": list(c.n_usable), "shared_tasks": c.delta_r_inf_test.shared_tasks}


def run(splits: int = 200, jobs: int = 2, seed: int = 20261207) -> dict[str, Any]:
    t0 = time.perf_counter()
    names = [k for k, (path, _) in CORPORA.items() if path.exists()]
    work = [(name, s, seed) for s in range(splits) for name in names]
    rows = parallel_map(_split_job, work, n_jobs=jobs)
    corpora: dict[str, Any] = {}
    for name in names:
        mine = [r for r in rows if r["corpus"] == name]
        corpora[name] = {"splits": len(mine), "n_per_half": mine[0]["n"] if mine else None,
                         "shared_tasks": int(np.median([r["shared_tasks"] for r in mine])) if mine else None,
                         **{k: _rate([r[k] for r in mine]) for k in CLAIMS}}
    return {"kind": "tracetochain.study", "study": "CR", "title": "compare on real runs split in two",
            "seed": seed, "splits": splits, "level": 0.05, "corpora": corpora,
            "missing": [k for k in CORPORA if k not in names], "runtime_s": round(time.perf_counter() - t0, 1)}


def render(doc: dict[str, Any]) -> str:
    pct = functools.partial(rate_text, interval_digits=1, count="k/n")
    lines = [f"# Study CR: {doc['title']}", "",
             f"Each corpus split {doc['splits']} times at random into two halves (seed {doc['seed']}); each split "
             "compared with the default settings. Every call is false: the halves are one run. Rates in % with "
             f"their Wilson 95 % interval. Runtime {doc['runtime_s']} s.", "",
             "| corpus | usable traces per half | tasks in both halves (median) | ΔR∞ interval excludes 0 "
             "| permutation p ≤ 0.05 | ΔR∞ called different | a state called changed | verdict not 'same' |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, e in doc["corpora"].items():
        lines.append(f"| {name} | {' / '.join(str(x) for x in e['n_per_half'])} | {e['shared_tasks']} | "
                     f"{pct(e['interval'])} | {pct(e['permutation'])} | {pct(e['delta'])} | {pct(e['state'])} | "
                     f"{pct(e['any'])} |")
    if doc["missing"]:
        lines += ["", f"Not run (data absent): {', '.join(doc['missing'])}."]
    lines += ["", "A difference in R∞ is called when its interval excludes 0 and the permutation test rejects; the "
                  "permutation test's rate over random splits of one pool is at most 5 % exactly."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    doc = run(args.splits, args.jobs)
    write_archive(RESULTS, "CR", doc, render(doc))
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
