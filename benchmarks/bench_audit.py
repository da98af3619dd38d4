"""Benchmark: the full audit of the SWE-bench artifact corpus (479 traces, 29,504 steps) with B = 200.

Target (issue 4): ``audit(...)`` with 200 parametric-bootstrap refits under 10 s on 2 cores.

What is timed, each in a fresh subprocess pinned to (at most) 2 CPUs with BLAS threads capped at 2:

* ``read`` — ``read_traces(corpus.json)`` (the swe-token-corpus reader);
* ``audit_holdout`` — ``audit(traces, states="categorical", state_options={"vocabulary": "shell"}, seed=20260606,
  n_bootstrap=200)``: 5 random 50/50 splits by trace-id hash, states on the fit half of the first, on each split the
  chain on the fit half, calibrated KS on the held-out half (200 replicates, each simulating a fit half and a
  held-out half and refitting), order layer with 199 permutations, R∞ check; trials check; Holm over the layers;
* ``audit_insample`` — the same with ``holdout=False`` (200 refits on 479-trace replicates).

Interpreter start-up and imports are excluded (``import_s`` in the JSON; the first call also pays scipy's lazy
imports, which is included — it is what a CLI run pays). Medians over ``--repeats`` (default 5).

Usage::

    python benchmarks/bench_audit.py
    python benchmarks/bench_audit.py --repeats 3 --bootstrap 999
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "tracetochain-artifact" / "swebench_real" / \
    "corpus.json"
TARGET_S = 10.0


def child(path: str, bootstrap: int) -> None:
    """One measurement in a fresh process; prints one JSON line."""
    t_import = time.perf_counter()
    import tracetochain as tt
    from tracetochain.audit import audit

    import_s = time.perf_counter() - t_import
    t0 = time.perf_counter()
    traces = tt.read_traces(path)
    t1 = time.perf_counter()
    opts: dict[str, Any] = {"states": "categorical", "state_options": {"vocabulary": "shell"}, "seed": 20260606,
                            "n_bootstrap": bootstrap}
    cert = audit(traces, **opts)
    t2 = time.perf_counter()
    cert_in = audit(traces, holdout=False, **opts)
    t3 = time.perf_counter()
    print(json.dumps({
        "import_s": import_s, "read_s": t1 - t0, "audit_holdout_s": t2 - t1, "audit_insample_s": t3 - t2,
        "n_traces": traces.n_traces, "n_steps": traces.n_steps, "decision_holdout": cert.decision,
        "decision_insample": cert_in.decision, "p_ks_holdout": cert.p_ks,
        "D_holdout": None if cert.timing is None else cert.timing.statistic, "p_ks_insample": cert_in.p_ks,
        "D_insample": None if cert_in.timing is None else cert_in.timing.statistic, "delta_aic": cert_in.delta_aic,
        "withheld": list(cert.withheld), "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else None,
    }))


def run_child(path: Path, bootstrap: int, cpus: int) -> dict[str, Any]:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(cpus)
    cmd = [sys.executable, __file__, "--child", str(path), "--bootstrap", str(bootstrap)]
    if hasattr(os, "sched_getaffinity"):
        allowed = sorted(os.sched_getaffinity(0))[:cpus]
        cmd = ["taskset", "-c", ",".join(map(str, allowed)), *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}):\n{proc.stderr}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--child", metavar="CORPUS", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.bootstrap)
        return 0
    path = Path(args.corpus)
    if not path.exists():
        print(f"corpus not found: {path}", file=sys.stderr)
        return 1
    runs = [run_child(path, args.bootstrap, args.cpus) for _ in range(args.repeats)]
    res = {k: median([r[k] for r in runs]) for k in ("import_s", "read_s", "audit_holdout_s", "audit_insample_s")}
    r0 = runs[0]
    header = ["what", "median s", "target"]
    rows = [["read_traces(corpus.json)", f"{res['read_s']:.3f}", ""],
            [f"audit, held-out (5 splits 50/50), B = {args.bootstrap}", f"{res['audit_holdout_s']:.3f}",
             f"< {TARGET_S:.0f} s"],
            [f"audit, in-sample, B = {args.bootstrap}", f"{res['audit_insample_s']:.3f}", f"< {TARGET_S:.0f} s"],
            ["read + held-out audit", f"{res['read_s'] + res['audit_holdout_s']:.3f}", f"< {TARGET_S:.0f} s"]]
    print(f"SWE-bench artifact corpus: {r0['n_traces']} traces, {r0['n_steps']} steps; {args.repeats} fresh "
          f"processes on CPUs {r0['cpus']}\n")
    print(markdown_table(header, rows))
    met = max(res["audit_holdout_s"], res["audit_insample_s"]) < TARGET_S
    d_ks = "—" if r0["D_holdout"] is None else f"{r0['D_holdout']:.3f}"
    p_ks = "—" if r0["p_ks_holdout"] is None else f"{r0['p_ks_holdout']:.4f}"
    print(f"\ndecision (held-out): {r0['decision_holdout']} (KS D = {d_ks} on the first split, combined p = {p_ks}); "
          f"withheld: {', '.join(r0['withheld'])}")
    print(f"target: audit with B = {args.bootstrap} under {TARGET_S:.0f} s on {args.cpus} cores: "
          f"{'met' if met else 'MISSED'}")
    if not args.no_save:
        out = write_results("bench_audit", {
            "benchmark": "bench_audit",
            "description": "audit() of the SWE-bench artifact corpus (shell categories as states), calibrated KS "
                           "with B parametric-bootstrap refits, 199-permutation order test, trials check; medians "
                           "over fresh subprocesses pinned to the given number of CPUs",
            "target": {"audit_s": TARGET_S, "bootstrap": 200, "cpus": 2},
            "bootstrap": args.bootstrap, "repeats": args.repeats, "cpus": args.cpus, "medians": res,
            "met": met, "machine": machine_info(), "runs": runs,
        })
        print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
