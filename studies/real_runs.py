"""Our study RR (certified outputs on the shared real runs): what the default analysis and ``--model auto`` certify on
real agent runs, and whether what they certify agrees with what the runs themselves show. Not one of the paper's
studies.

Run ``python -m studies.real_runs [--quick] [--jobs N]``: it writes ``studies/results/RR.json`` and
``studies/results/RR.md`` (quick runs: ``studies/results/quick/``). It reads the shared corpora beside the
repository (``../shared/data``); a corpus that is absent is recorded as skipped.

**pass^k** (τ-bench airline gpt-4o: 50 tasks × 4 trials; τ²-bench airline, claude-sonnet-4.5: 50 tasks × 1 trial).
For each split seed 0–4, the default analysis and ``auto``: every pass^k (k = 1…4) with its status and 95 % interval,
beside the runs' own per-task pass^k (unbiased per task, averaged over tasks) with its task-bootstrap interval
(2,000 replicates). Acceptance: a certified pass^k (k ≥ 2) lies inside the per-task interval. Where no task was tried
twice (τ²-bench), pass^k for k ≥ 2 cannot be checked against the runs and must not be certified.

**R(d)** (SWE-bench: the artifact's 479 SWE-agent trajectories and the 250 mini-swe-agent trajectories, states from
the shell vocabulary). For split seeds 0–2, ``auto``: whether R(d) is certified with an interval at d = 10, 30, 100,
or else which candidate would certify it and why it was not chosen. Acceptance: certified with an interval on ≥ 2 of
3 seeds, or named.

Each ``auto`` row also records the choice's stability: each candidate's share of 200 resamples of the held-out units
under the choice rule (``ModelChoice.stability``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from studies._common import REPO
from tracetochain._parallel import parallel_map

RESULTS = Path(__file__).resolve().parent / "results"
SHARED = REPO.parent / "shared" / "data"
TAU2 = ("tau2-bench/web/leaderboard/public/submissions/claude-sonnet-4-5_aide-platform_2025-10-31/trajectories/"
        "claude-sonnet-4-5_airline_default_gpt4.1_1trials.json")
#: name → (path under the shared data, analysis options, what is measured).
CORPORA: dict[str, tuple[str, dict[str, Any], str]] = {
    "tau-bench": ("tau-bench/historical_trajectories/gpt-4o-airline.json",
                  {"states": "categorical", "state_options": {"vocabulary": "chat"}}, "pass_k"),
    "tau2-bench": (TAU2, {"states": "categorical", "state_options": {"vocabulary": "chat"}}, "pass_k"),
    "swe-artifact": ("tracetochain-artifact/swebench_real/corpus.json",
                     {"states": "categorical", "state_options": {"vocabulary": "shell"}}, "r_d"),
    "mini-swe-agent": ("swebench-verified-mini-swe-agent-gemini-3-pro/swebench_results/20251118_gemini-3-pro-74pct",
                       {"states": "categorical", "state_options": {"vocabulary": "shell"}}, "r_d"),
}
KS = (1, 2, 3, 4)
BUDGETS = (10, 30, 100)
PASS_K_SEEDS = (0, 1, 2, 3, 4)
R_D_SEEDS = (0, 1, 2)


def _read(name: str) -> Any:
    import tracetochain as tt

    return tt.read_traces(SHARED / CORPORA[name][0])


def _per_task(name: str) -> dict[str, Any]:
    """The runs' own per-task pass^k with its task-bootstrap interval (None where no task has k trials)."""
    from tracetochain.models import empirical_pass_k

    est = empirical_pass_k(_read(name), list(KS), n_bootstrap=2000, seed=0)
    return {str(k): {"value": est.pass_hat_k[i], "interval": list(est.interval(k)), "tasks": est.n_tasks_used[i]}
            for i, k in enumerate(KS)}


def _job(job: tuple[str, str, int]) -> dict[str, Any]:
    """One analysis: (corpus, model, split seed) → what it certifies, with intervals."""
    from tracetochain.analysis import analyze

    name, model, seed = job
    _, options, _ = CORPORA[name]
    t0 = time.process_time()
    res = analyze(_read(name), model=model, seed=seed, **options)
    iv = res.intervals(ks=KS, horizon=max(BUDGETS)) or {"metrics": {}}
    cert = res.certificate
    assert cert is not None
    pk = iv["metrics"].get("pass_hat_k", {})
    rel = iv["metrics"].get("reliability")
    row: dict[str, Any] = {
        "corpus": name, "model": model, "seed": seed, "chosen": res.model_name, "decision": cert.decision,
        "cpu_s": round(time.process_time() - t0, 1), "timings": res.timings,
        "pass_k": {str(k): {"status": cert.pass_k_status(k),
                            "point": pk.get(str(k), {}).get("point"), "lower": pk.get(str(k), {}).get("lower"),
                            "upper": pk.get(str(k), {}).get("upper")} for k in KS},
        "pass_k_tested": None if cert.pass_k_tested is None else list(cert.pass_k_tested),
        "trials_message": cert.layers["trials"].message if "trials" in cert.layers else None,
        "r_d": {"status": cert.status("R(d)"),
                "timing_message": cert.layers["timing"].message if "timing" in cert.layers else None,
                "at": {str(d): (None if rel is None or rel.get("lower") is None else
                                {"point": rel["point"][d], "lower": rel["lower"][d], "upper": rel["upper"][d]})
                       for d in BUDGETS}},
        "would_certify": [] if res.model_choice is None else [w for w in res.model_choice.would_certify
                                                               if w["output"] == "R(d)"],
        "notes": [] if res.model_choice is None else list(res.model_choice.notes),
        "stability": {} if res.model_choice is None else dict(getattr(res.model_choice.choice, "stability", {})),
    }
    return row


def _jobs(quick: bool) -> list[tuple[str, str, int]]:
    work: list[tuple[str, str, int]] = []
    for name, (path, _, what) in CORPORA.items():
        if not (SHARED / path).exists():
            continue
        seeds = (PASS_K_SEEDS if what == "pass_k" else R_D_SEEDS)[: 1 if quick else None]
        models = ("markov", "auto") if what == "pass_k" else ("auto",)
        work += [(name, m, s) for m in models for s in seeds]
    # The dearest first (auto on the SWE-bench corpora), so two workers finish together.
    return sorted(work, key=lambda w: (w[1] != "auto", CORPORA[w[0]][2] != "r_d"))


def _pass_k_inside(row: dict[str, Any], per_task: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k in KS[1:]:
        p, emp = row["pass_k"][str(k)], per_task[str(k)]
        lo, hi = emp["interval"]
        inside = None if p["point"] is None or lo is None else bool(lo <= p["point"] <= hi)
        out[str(k)] = {"certified": p["status"] == "certified", "inside": inside,
                       "has_interval": p["lower"] is not None and p["upper"] is not None}
    return out


def run(quick: bool = False, jobs: int = 2) -> dict[str, Any]:
    t0 = time.perf_counter()
    work = _jobs(quick)
    rows = parallel_map(_job, work, n_jobs=jobs)
    corpora: dict[str, Any] = {}
    for name, (path, options, what) in CORPORA.items():
        mine = [r for r in rows if r["corpus"] == name]
        entry: dict[str, Any] = {"path": path, "options": options, "measures": what, "runs": mine,
                                 "skipped": None if mine else "not in the shared data"}
        if mine and what == "pass_k":
            entry["per_task"] = _per_task(name)
            for r in mine:
                r["inside"] = _pass_k_inside(r, entry["per_task"])
        if mine and what == "r_d":
            ok = [r for r in mine if r["r_d"]["status"] == "certified" and r["r_d"]["at"][str(BUDGETS[0])]]
            entry["r_d_certified_with_interval"] = len(ok)
            entry["r_d_named_instead"] = sum(1 for r in mine if r not in ok and r["would_certify"])
        corpora[name] = entry
    return {"kind": "tracetochain.study", "study": "RR", "title": "Certified outputs on the shared real runs",
            "quick": quick, "ks": list(KS), "budgets": list(BUDGETS), "corpora": corpora,
            "runtime_s": round(time.perf_counter() - t0, 1)}


def _num(v: float | None, digits: int = 3) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def _iv(lo: float | None, hi: float | None) -> str:
    return "no interval" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"


def _stability(row: dict[str, Any]) -> str:
    """Each candidate's share of the held-out unit resamples under the choice rule (⚠ when none reaches 90 %)."""
    shares = row.get("stability") or {}
    if not shares:
        return "—"
    text = ", ".join(f"{nm} {v:.0%}" for nm, v in shares.items())
    rule_choice = next(iter(shares))
    return text + (" ⚠ not settled" if shares[rule_choice] < 0.9 else "")


def render(doc: dict[str, Any]) -> str:
    lines = [f"# {doc['title']}", "",
             "Each row is one analysis of a whole corpus at one split seed (the seed draws the certificate's held-out "
             "halves). Status: certified / withheld / untested; intervals are 95 %. Runtime "
             f"{doc['runtime_s']} s.", ""]
    for name, e in doc["corpora"].items():
        lines += [f"## {name}", "", f"`{e['path']}` — {e['options']}", ""]
        if e["skipped"]:
            lines += [f"skipped: {e['skipped']}", ""]
            continue
        if e["measures"] == "pass_k":
            pt = e["per_task"]
            lines += ["The runs' own per-task pass^k (task bootstrap): " + "; ".join(
                f"k={k}: {_num(pt[str(k)]['value'])} {_iv(*pt[str(k)]['interval'])} ({pt[str(k)]['tasks']} tasks)"
                for k in doc["ks"]), "",
                "| model | seed | chosen | " + " | ".join(f"pass^{k}" for k in doc["ks"]) +
                " | certified k≥2 inside | choice stability |",
                "|---|---:|---|" + "---|" * len(doc["ks"]) + "---|---|"]
            for r in e["runs"]:
                pk = r["pass_k"]
                cells = [f"{_num(pk[str(k)]['point'])} {_iv(pk[str(k)]['lower'], pk[str(k)]['upper'])} "
                         f"{pk[str(k)]['status']}" for k in doc["ks"]]
                cert = [v for v in r["inside"].values() if v["certified"]]
                verdict = ("none certified" if not cert else
                           "yes" if all(v["inside"] for v in cert) else "NO")
                lines.append(f"| {r['model']} | {r['seed']} | {r['chosen']} | " + " | ".join(cells) +
                             f" | {verdict} | {_stability(r)} |")
        else:
            lines += ["| seed | chosen | R(d) | " + " | ".join(f"R({d})" for d in doc["budgets"]) +
                      " | would certify R(d) instead | choice stability |",
                      "|---:|---|---|" + "---|" * len(doc["budgets"]) + "---|---|"]
            for r in e["runs"]:
                at = r["r_d"]["at"]
                cells = [("—" if at[str(d)] is None else f"{_num(at[str(d)]['point'])} "
                          f"{_iv(at[str(d)]['lower'], at[str(d)]['upper'])}") for d in doc["budgets"]]
                named = "; ".join(f"{w['candidate']} ({w['why_not_chosen']})" for w in r["would_certify"]) or "—"
                lines.append(f"| {r['seed']} | {r['chosen']} | {r['r_d']['status']} | " + " | ".join(cells) +
                             f" | {named} | {_stability(r)} |")
            lines += ["", f"R(d) certified with an interval on {e['r_d_certified_with_interval']} of {len(e['runs'])} "
                          f"seeds; a candidate named instead on {e['r_d_named_instead']}."]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    doc = run(args.quick, args.jobs)
    out = RESULTS / "quick" if args.quick else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    (out / "RR.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    (out / "RR.md").write_text(render(doc))
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
