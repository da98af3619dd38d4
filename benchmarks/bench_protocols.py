"""The authors' two SWE-bench protocols, run by tracetochain and by the authors' own code in the same run.

Protocols (the paper's SS10 study): (a) the 160-trace sub-sample (``sort(default_rng(20260606).choice(479, 160))``
then ``default_rng(20260606).permutation(160)``), 80 fit / 80 test; (b) all 479 traces, 239 fit / 240 test
(``default_rng(20260606).permutation(479)``). Both: read the corpus file, states = Ward on shell-vocabulary
categories + depth j/(L−1) with k ∈ [2, 10] chosen by silhouette on the fit half (exact, every step), chain (α = 1,
modal s0), the artifact's first- vs second-order Δ_AIC, KS against 20,000 simulated absorption times, L∞ to the
held-out RDC over d ∈ [0, 80].

The authors' code (their public repository, package ``mcr`` plus ``code/sim``; a benchmark peer, never a
dependency and never vendored) runs the same steps through its own functions: ``load_corpus`` → split →
``fit(k_max=10)`` → ``goodness_of_fit(n_model_samples=20000)`` → ``reliability_curve`` → L∞. Point the script at a
checkout with ``--peer DIR`` (or ``TRACETOCHAIN_BENCH_PEER``) and at an interpreter that has numpy, scipy and
scikit-learn with ``--peer-python`` (or ``TRACETOCHAIN_BENCH_PEER_PYTHON``); without one the peer rows are skipped.

Importing is kept out of the protocol span on both sides alike: the authors' modules import numpy, scipy and
scikit-learn at the top; ours are imported before the clock starts, with every reader (format detection asks each
one) and pyarrow's one-time pandas hook (pyarrow imports pandas, when installed, on its first conversion).

Every case runs in a fresh subprocess, ours and theirs interleaved round by round so that machine load hits both
alike, after one warm-up run of each (file cache, bytecode). Two spans per run: ``protocol`` (read the file → last
number, the modules it uses already imported) and ``process`` (the whole child process: interpreter start-up,
imports, protocol), each as wall time and as CPU time (user + system, BLAS threads included), which load on a
shared machine barely moves. Peak memory is the child's ``ru_maxrss``. Medians of ``--repeats``; ratios are
theirs / ours.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, median

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "tracetochain-artifact" / "swebench_real" / \
    "corpus.json"
CASES = {"sub-sample 160 (80/80)": "sub", "all 479 (239/240)": "all"}
SEED = 20260606


def _split(n_all: int, case: str) -> tuple[list[int], list[int]]:
    import numpy as np

    if case == "sub":
        sub = np.sort(np.random.default_rng(SEED).choice(n_all, 160, replace=False))
        order = sub[np.random.default_rng(SEED).permutation(160)]
    else:
        order = np.random.default_rng(SEED).permutation(n_all)
    half = len(order) // 2
    return [int(i) for i in order[:half]], [int(i) for i in order[half:]]


def run_ours(case: str) -> dict[str, float]:
    t_start = time.perf_counter()
    import numpy as np

    import tracetochain as tt
    import tracetochain.pipeline  # the modules the protocol uses, imported before the clock starts
    import tracetochain.readers.swe_agent
    import tracetochain.states
    from tracetochain.audit import ks_paper, order_test
    from tracetochain.audit._holdout import empirical_rdc, l_inf_distance
    from tracetochain.pipeline import fit_chain as pipeline_fit_chain  # states learned on the whole fit set
    from tracetochain.readers import available_readers

    available_readers()  # format detection asks every reader: their modules are modules the protocol uses
    import pyarrow as pa

    pa.array([0])  # pyarrow imports pandas (when installed) on its first conversion: importing, not the protocol
    t0, c0 = time.perf_counter(), time.process_time()
    traces = tt.read_traces(CORPUS)
    fit_rows, test_rows = _split(traces.n_traces, case)
    fit, test = traces.select_traces(fit_rows), traces.select_traces(test_rows)
    # The paper's protocol: its first-word shell map, depth j/(L−1), α = 1.
    result = pipeline_fit_chain(fit, states="ward", vocabulary="shell-paper", features="kind,tool,hindsight-depth",
                                k_min=2, k_max=10, pseudocount=1.0, initial="modal")
    test_labelled = result.states.label(test)
    chain = result.chain
    aic = order_test(result.labelled, mode="artifact")
    ks = ks_paper(chain, test_labelled, n_model=20_000, outcome="any", start="modal", pvalue="asymptotic", seed=1)
    l_inf = l_inf_distance(chain.reliability(80), np.asarray(empirical_rdc(test_labelled, 80)))
    t1 = time.perf_counter()
    return {"protocol_s": t1 - t0, "protocol_cpu_s": time.process_time() - c0, "import_s": t0 - t_start,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "m": chain.n_states,
            "delta_aic": float(aic.delta_aic), "ks_D": float(ks.statistic), "l_inf": float(l_inf),
            "fit_steps": fit.n_steps}


def run_peer(case: str, peer: Path) -> dict[str, float]:
    """The same protocol through the authors' functions (runs under the peer's interpreter)."""
    t_start = time.perf_counter()
    sys.path[:0] = [str(peer / "code"), str(peer / "code" / "sim")]
    import numpy as np
    from mcr.reliability import reliability_curve
    from mcr.trace_to_chain import empirical_first_passage_from_traces, fit, goodness_of_fit
    from SS10_swebench_real import empirical_rdc, to_labels_terminals
    from swebench_adapter import load_corpus

    t0, c0 = time.perf_counter(), time.process_time()
    traces, ids, _ = load_corpus(str(CORPUS), include_depth=True, max_steps=None)
    fit_rows, test_rows = _split(len(traces), case)
    fit_tr, test_tr = [traces[i] for i in fit_rows], [traces[i] for i in test_rows]
    chain = fit(fit_tr, k_max=10)
    labels, terms = to_labels_terminals(test_tr)
    gof = goodness_of_fit(chain, empirical_first_passage_from_traces(labels, terms), n_model_samples=20_000,
                          s0=chain.s0_cluster, rng=np.random.default_rng(SEED + 1))
    d_grid = np.arange(0, 81)
    r_model = np.asarray(reliability_curve(chain.Q, chain.R_succ, s0=chain.s0_cluster, d_max=80))
    l_inf = float(np.max(np.abs(r_model - empirical_rdc(test_tr, ids, d_grid))))
    t1 = time.perf_counter()
    return {"protocol_s": t1 - t0, "protocol_cpu_s": time.process_time() - c0, "import_s": t0 - t_start,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "m": int(chain.m),
            "delta_aic": float(chain.aic_1st - chain.aic_2nd), "ks_D": float(gof["ks_stat"]), "l_inf": l_inf,
            "fit_steps": int(chain.n_steps)}


def child(cmd: list[str]) -> dict[str, float]:
    """Run one measurement; adds the whole process's wall and CPU (user + system) time."""
    # Bytecode caching on, as in an installed package (pip compiles .pyc files at install time): a shell that sets
    # PYTHONDONTWRITEBYTECODE would otherwise make every run recompile an editable checkout's modules.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = wall
    out["process_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out


def find_peer(args: argparse.Namespace) -> tuple[Path, str] | None:
    root = args.peer or os.environ.get("TRACETOCHAIN_BENCH_PEER")
    if not root or not (Path(root) / "code" / "mcr" / "trace_to_chain.py").exists():
        return None
    python = args.peer_python or os.environ.get("TRACETOCHAIN_BENCH_PEER_PYTHON") or sys.executable
    ok = subprocess.run([python, "-c", "import numpy, scipy, sklearn"], capture_output=True).returncode == 0
    return (Path(root), python) if ok else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", default="sub,all", help="comma list of: sub, all")
    ap.add_argument("--peer", help="checkout of the authors' repository (with code/mcr)")
    ap.add_argument("--peer-python", help="interpreter with numpy, scipy and scikit-learn for the peer")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-peer", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(run_ours(args.child)))
        return 0
    if args.child_peer:
        case, root = args.child_peer.split(":", 1)
        print(json.dumps(run_peer(case, Path(root))))
        return 0
    if not CORPUS.exists():
        print(f"{CORPUS} not found: nothing to measure")
        return 0
    peer = find_peer(args)
    if peer is None:
        print("the authors' code is not set up (--peer / TRACETOCHAIN_BENCH_PEER): their rows are skipped")
    wanted = {c.strip() for c in args.cases.split(",")}
    cases = {name: key for name, key in CASES.items() if key in wanted}
    runs: dict[str, dict[str, list[dict[str, float]]]] = {name: {"ours": [], "theirs": []} for name in cases}
    child([sys.executable, __file__, "--child", "sub"])  # warm-up: file cache, bytecode
    if peer is not None:
        child([peer[1], __file__, "--child-peer", f"sub:{peer[0]}"])
    for _ in range(args.repeats):
        for name, key in cases.items():
            runs[name]["ours"].append(child([sys.executable, __file__, "--child", key]))
            if peer is not None:
                runs[name]["theirs"].append(child([peer[1], __file__, "--child-peer", f"{key}:{peer[0]}"]))
    rows, results = [], {}
    for name, both in runs.items():
        entry: dict[str, object] = {}
        for who, rs in both.items():
            if rs:
                spans = ("protocol_s", "process_s", "protocol_cpu_s", "process_cpu_s", "import_s", "peak_mb")
                entry[who] = {"runs": rs, **{f"median_{k}": median([r[k] for r in rs]) for k in spans}}
        ours = entry["ours"]
        theirs = entry.get("theirs")
        assert isinstance(ours, dict)
        if isinstance(theirs, dict):
            entry["speedup_protocol"] = theirs["median_protocol_s"] / ours["median_protocol_s"]
            entry["speedup_process"] = theirs["median_process_s"] / ours["median_process_s"]
            entry["speedup_protocol_cpu"] = theirs["median_protocol_cpu_s"] / ours["median_protocol_cpu_s"]
            entry["speedup_process_cpu"] = theirs["median_process_cpu_s"] / ours["median_process_cpu_s"]
            entry["memory_ratio"] = theirs["median_peak_mb"] / ours["median_peak_mb"]
        results[name] = entry
        r0 = ours["runs"][0]
        row = [name, f"{ours['median_protocol_s']:.2f}", f"{ours['median_process_s']:.2f}",
               f"{ours['median_peak_mb']:.0f}"]
        if isinstance(theirs, dict):
            t0 = theirs["runs"][0]
            row += [f"{theirs['median_protocol_s']:.2f}", f"{theirs['median_process_s']:.2f}",
                    f"{theirs['median_peak_mb']:.0f}", f"{entry['speedup_protocol']:.0f}×",
                    f"{entry['speedup_process']:.0f}×",
                    f"m={t0['m']}, ΔAIC={t0['delta_aic']:.1f}, D={t0['ks_D']:.3f}, L∞={t0['l_inf']:.3f}"]
        else:
            row += ["–"] * 6
        row.append(f"m={r0['m']}, ΔAIC={r0['delta_aic']:.1f}, D={r0['ks_D']:.3f}, L∞={r0['l_inf']:.3f}")
        rows.append(row)
    print(markdown_table(["protocol", "ours protocol s", "ours process s", "ours peak MB", "theirs protocol s",
                          "theirs process s", "theirs peak MB", "ratio protocol", "ratio process", "theirs result",
                          "ours result"], rows))
    if not args.no_save:
        from _common import machine_info, write_results

        load = os.getloadavg() if hasattr(os, "getloadavg") else None
        doc = {"machine": machine_info(), "load_average_at_end": load, "repeats": args.repeats,
               "peer": None if peer is None else {"root": str(peer[0].name), "python": Path(peer[1]).name},
               "pandas_installed": subprocess.run([sys.executable, "-c", "import pandas"],
                                                  capture_output=True).returncode == 0,
               "cases": results}
        print(f"wrote {write_results('bench_protocols', doc)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
