"""Write the README's performance section from the benchmark results (``benchmarks/results/*.json``).

The section lies between ``<!-- performance:begin -->`` and ``<!-- performance:end -->`` in README.md and is never
edited by hand: ``make bench`` reruns the benchmarks and then this script; ``python benchmarks/render_readme.py
--check`` exits 1 when the README differs from what the results say (``tests/test_readme_performance.py`` runs it).
A results file that is missing leaves its rows out, it never invents figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results"
README = BENCH_DIR.parent / "README.md"
BEGIN, END = "<!-- performance:begin -->", "<!-- performance:end -->"


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _s(x: float) -> str:
    """Seconds with sensible precision."""
    if x >= 100:
        return f"{x:.0f} s"
    if x >= 10:
        return f"{x:.1f} s"
    if x >= 0.1:
        return f"{x:.2f} s"
    return f"{x * 1000:.1f} ms"


def _mb(x: float) -> str:
    return f"{x / 1024:.1f} GB" if x >= 1024 else f"{x:.0f} MB"


def _machine(doc: dict[str, Any]) -> str:
    m = doc.get("machine") or {}
    date = str(m.get("date", "?"))[:10]
    return (f"{date}, {m.get('cpu_count', '?')}-core {m.get('processor', '?')}, {m.get('memory_gb', '?')} GB, "
            f"Python {m.get('python', '?')}, numpy {m.get('numpy', '?')}")


def _n(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k"


# ---------------------------------------------------------------------------------------------------- sections
def rescale_sentence(doc: dict[str, Any]) -> str:
    """The calibration of the rescaled KS bootstrap (``ks_rescale_calibration.py``), in one sentence."""
    parts = []
    for name, r in doc["results"].items():
        lo, hi = r["reject@0.05"]["wilson95"]
        parts.append(f"{r['reject@0.05']['rate']:.1%} [{lo:.1%}, {hi:.1%}] with replicates at {name}")
    n = next(iter(doc["results"].values()))["n_corpora"]
    return (f"The rescaling keeps the KS test at its level: on {n} "
            f"null corpora of {doc['traces']:,} traces (held-out protocol) it rejects at 5% in " + "; ".join(parts)
            + " (`ks_rescale_calibration.py`).")


def scale_section(doc: dict[str, Any]) -> str:
    out = [f"**At scale** (`bench_scale.py`, {_machine(doc)}; the generator of `bench_fit.py`: a 20-state chain, "
           "mean trace length 30, Parquet in row groups of 2^20 rows; medians of fresh subprocesses; peak = sampled "
           "sum of the RSS of the driver and every Dask process)."]
    res = doc["results"]
    fit = [r for r in res if r.get("task", "fit") == "fit"]
    if fit:
        rows = [[r["engine"], _n(r["n_traces"]), f"{r['n_steps'] / 1e6:.0f}M" if r["n_steps"] >= 1e6
                 else f"{r['n_steps']:,}", str(r["n_partitions"]), _s(r["fit_s"]), _mb(r["peak_total_mb"]),
                 "yes" if r.get("identical", r.get("identical_chain")) else "**no**"] for r in fit]
        out += ["", "Ingest + fit (`fit_partitioned`; in-memory = `TraceTable.read` + `ChainEstimator`):", "",
                _table(["engine", "traces", "steps", "partitions", "time", "peak memory", "same chain"], rows)]
    aud = [r for r in res if r.get("task") == "audit"]
    if aud:
        s = doc.get("audit_settings", {})
        rows = []
        for r in aud:
            split = (f"{r['partitions_s']:.1f} + {r['audit_s']:.1f} + {r['intervals_s']:.1f}"
                     if r.get("partitions_s") is not None else
                     f"– + {r['audit_s']:.1f} + {r['intervals_s']:.1f}")
            lo, hi = r["r_inf_interval"]
            rows.append([r["engine"], _n(r["n_traces"]), str(r["n_partitions"]), _s(r["fit_s"]), split,
                         _mb(r["peak_total_mb"]), f"{r['decision']} (KS p = {r['p_ks']:.3f})",
                         f"[{lo:.4f}, {hi:.4f}] ∋ {r['true_r_inf']:.4f}" if lo <= r["true_r_inf"] <= hi
                         else f"[{lo:.4f}, {hi:.4f}] ∌ {r['true_r_inf']:.4f}",
                         "yes" if r.get("identical") else "**no**"])
        out += ["", f"Ingest + fit + audit + uncertainty (`audit_partitioned`: held-out certificate with "
                    f"B = {s.get('n_bootstrap', '?')} KS refits and {s.get('n_permutations', '?')} permutation "
                    f"tables, {s.get('n_resamples', '?')} Poisson-bootstrap replicates; in-memory = `audit()` + "
                    "`TraceBootstrap`):", "",
                _table(["engine", "traces", "partitions", "time", "pass + layers + intervals (s)", "peak memory",
                        "decision", "R∞ 95% interval ∋ true R∞", "same result"], rows),
                "", "The corpora are simulated from a first-order chain, so every layer's null holds and each "
                    "decision is one draw of 5%-level tests: a PARTIAL or REJECT here is a false alarm of that size "
                    "(`benchmarks/README.md` re-runs it with other seeds)."]
    notes = []
    for a in doc.get("acceptance") or []:
        if isinstance(a, dict):
            notes.append(f"{a.get('task', 'fit')} of {a['n_traces']:,} traces on 2 Dask workers: "
                         f"{_s(a.get('seconds', a.get('fit_s', 0.0)))}, peak {_mb(a['peak_total_mb'])} "
                         f"(limit {_mb(a['limit_mb'])}: {'met' if a['met'] else '**missed**'})")
    ratios = []
    for n in sorted({r["n_traces"] for r in fit}):
        loc = next((r for r in fit if r["n_traces"] == n and r["engine"] == "local"), None)
        dsk = next((r for r in fit if r["n_traces"] == n and r["engine"] == "dask-2"), None)
        if loc and dsk:
            ratios.append(f"{loc['fit_s'] / dsk['fit_s']:.2f}× the local engine's speed at {_n(n)} traces")
    if notes:
        out += ["", "Acceptance (10M traces, 2 workers, < 8 GB in total): " + "; ".join(notes) + "."]
    if ratios:
        out += ["", "On 2 cores Dask runs at " + ", ".join(ratios) + " (the local engine already decodes Parquet on "
                "both cores): it is there for clusters and for memory. Past 2,000 traces per half the audit's KS "
                "replicates are simulated at 2,000 traces and rescaled by √(size ratio), so its cost stops growing; "
                "the pass over the data is what grows."]
    calibration = _load("ks_rescale_calibration")
    if calibration:
        out += ["", rescale_sentence(calibration)]
    return "\n".join(out)


def protocols_section(doc: dict[str, Any]) -> str:
    cases = doc["cases"]
    if any("authors_s" in c for c in cases.values()):  # results written before the side-by-side run
        rows = []
        for case, c in cases.items():
            authors = f"{c['authors_s']:.0f} s" + (f", {_mb(c['authors_mb'])}" if c.get("authors_mb") else "")
            rows.append([case, _s(c["median_s"]), _mb(c["median_peak_mb"]), authors, f"**{c['speedup']:.0f}×**"])
        return "\n".join([
            f"**The authors' SWE-bench protocols** (`bench_protocols.py`, {_machine(doc)}); their code's times are "
            "from the issue.", "", _table(["protocol", "ours", "peak memory", "authors' code", "ratio"], rows)])
    rows = []
    for case, c in cases.items():
        ours, theirs = c["ours"], c.get("theirs")

        def cpu(side: dict[str, Any]) -> str:
            return _s(side["median_protocol_cpu_s"]) if "median_protocol_cpu_s" in side else "–"

        row = [case, f"{_s(ours['median_protocol_s'])} / {_s(ours['median_process_s'])}", cpu(ours),
               _mb(ours["median_peak_mb"])]
        if theirs:
            row += [f"{_s(theirs['median_protocol_s'])} / {_s(theirs['median_process_s'])}", cpu(theirs),
                    _mb(theirs["median_peak_mb"]),
                    f"**{c['speedup_protocol']:.1f}×** / {c['speedup_process']:.1f}×",
                    f"{c['speedup_protocol_cpu']:.1f}×" if "speedup_protocol_cpu" in c else "–",
                    f"{c['memory_ratio']:.2f}×"]
        else:
            row += ["not run", "", "", "", "", ""]
        o, t = ours["runs"][0], (theirs or {}).get("runs", [{}])[0]
        row.append(f"m = {o['m']} / {t.get('m', '–')}, L∞ = {o['l_inf']:.3f} / "
                   + (f"{t['l_inf']:.3f}" if "l_inf" in t else "–"))
        rows.append(row)
    load = doc.get("load_average_at_end")
    note = f" Load average at the end of the run: {load[0]:.1f} on {doc['machine'].get('cpu_count')} cores." \
        if load else ""
    if "pandas_installed" in doc:
        note += (" Ours ran in a venv with pandas installed (pyarrow imports it on its first array, ~0.3 s of the "
                 "process)." if doc["pandas_installed"] else
                 " Ours ran in the default install (`pip install .`, no extras: no pandas for pyarrow to import).")
    return "\n".join([
        f"**The authors' SWE-bench protocols, side by side with their code** (`bench_protocols.py`, "
        f"{_machine(doc)}, medians of {doc.get('repeats', '?')} interleaved runs): file → Ward on shell-vocabulary "
        "categories + depth, k ∈ [2, 10], on the fit half → chain → first- vs second-order Δ_AIC → KS against "
        "20,000 simulated times → L∞ to the held-out RDC. Times are *protocol* (file to last number, libraries "
        "imported) / *process* (interpreter start-up and imports included), wall clock; CPU is the protocol's "
        "CPU time (user + system), which load on the shared machine barely moves; ratios are theirs / ours."
        + note, "",
        _table(["protocol", "ours", "ours CPU", "ours peak", "authors' code", "their CPU", "their peak",
                "faster by (wall)", "faster by (CPU)", "less memory by", "states, L∞ (ours / theirs)"], rows)])


def commands_section(doc: dict[str, Any]) -> str:
    """Whole commands as processes (bench_commands.py): one row per corpus and command, the baseline first."""
    rows = []
    for key, c in doc["cases"].items():
        if "median_wall_s" not in c:
            if "skipped" not in c:
                rows.append([key.replace(" | ", ": "), "failed", "", ""])
            continue
        loads = [x for pair in c.get("load_before_after", []) for x in (pair[0][0], pair[1][0])]
        n = len(c.get("runs", []))
        shown = key.replace(" | ", ": ") + (f" (median of {n})" if n > 1 and n != doc.get("repeats") else
                                            " (one run)" if n == 1 and doc.get("repeats", 1) != 1 else "")
        rows.append([shown, _s(c["median_wall_s"]), _s(c["median_cpu_s"]),
                     f"{min(loads):.1f}–{max(loads):.1f}" if loads else "–"])
    ratios = doc.get("ratios") or {}
    said = "; ".join(f"{k}: **{v:.1f}×**" for k, v in ratios.items())
    venv = ("a venv with pandas installed (pyarrow imports it on its first array)" if doc.get("pandas_installed")
            else "a runtime-only venv (`make demo`)")
    where = ""
    br = (doc.get("import_breakdown") or {}).get("seconds")
    if br:
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in br.items() if k not in ("process (wall)", "imports (all)")
                          and v >= 0.005)
        where = (f" Where the demo's `fit -q` goes (`python -X importtime`, each module's own time by package, "
                 f"median of {doc['import_breakdown']['repeats']}): a {br['process (wall)']:.2f} s process imports "
                 f"for {br['imports (all)']:.2f} s — {parts}; scipy's share includes the NumPy submodules its "
                 "array-API layer loads (numpy.f2py, numpy.testing, numpy.ma, numpy.polynomial), which "
                 "`import numpy` alone never does.")
    rerun = doc.get("rerun")
    if rerun:
        where += (f" Re-run rows ({', '.join(k.replace(' | ', ': ') for k in rerun['cases'])}): {rerun['why']}.")
    return "\n".join([
        f"**Whole commands** (`bench_commands.py`, {_machine(doc)}, medians of {doc.get('repeats', '?')} "
        f"interleaved runs, {venv}): each command as a fresh process on each shared corpus, interpreter start-up "
        "and imports included — what a user waits for. CPU is user + system of the process; the 1-minute load "
        "average is recorded around each run." + (f" Ratios: {said}." if said else "") + where, "",
        _table(["corpus: command", "wall time", "CPU time", "load average"], rows)])


def startup_section(startup: dict[str, Any] | None, install: dict[str, Any] | None) -> str:
    out: list[str] = []
    if startup:
        c = startup["cases"]
        helps = [v["median_s"] for k, v in c.items() if k.startswith("tracetochain ") and k.endswith("--help")]
        def both(v: dict[str, Any]) -> list[str]:
            return [_s(v["median_s"]), _s(v["median_cpu_s"]) if "median_cpu_s" in v else "–"]

        slowest = max((v for k, v in c.items() if k.startswith("tracetochain ") and k != "tracetochain --help"),
                      key=lambda v: v["median_s"])
        rows = [["`python -c pass` (the interpreter alone)", *both(c["python -c pass"])],
                ["`import tracetochain`", *both(c["import tracetochain"])],
                ["`tracetochain --help`", *both(c["tracetochain --help"])],
                [f"`tracetochain COMMAND --help`, slowest of {len(helps) - 1}", *both(slowest)]]
        heavy = startup.get("heavy_loaded_by_import") or []
        out += [f"**Start-up** (`bench_startup.py`, {_machine(startup)}; whole processes, medians of "
                f"{startup.get('repeats', '?')}): `import tracetochain` loads "
                + (", ".join(heavy) if heavy else "none of numpy, scipy, pyarrow, matplotlib, scikit-learn, polars")
                + "; public names load their modules on first use. CPU time is what the process itself used (wall time "
                "on a loaded machine adds the wait for a core).", "", _table(["what", "wall time", "CPU time"], rows)]
    if install:
        dists = install["distributions_mb"]
        top = ", ".join(f"{k} {v:.0f} MB" for k, v in list(dists.items())[:4])
        out += ["", f"**Install** (`bench_install.py`, {_machine(install)}): `pip install .` into a fresh venv "
                f"takes {_s(install['install_s'])} (wheels from the local cache and indexes) and adds "
                f"**{install['added_mb']:.0f} MB** to site-packages ({top}; {len(dists)} distributions). "
                "matplotlib, scikit-learn and polars are extras: `pip install \"tracetochain[plots]\"`, "
                "`[sklearn]`, `[polars]`, or `[all]`."]
        core = sum(v for k, v in dists.items() if k.lower() in ("pyarrow", "scipy", "numpy"))
        if core:
            out[-1] += (f" The three numeric libraries alone take {core:.0f} MB, and each carries core work (Arrow "
                        "tables and Parquet; sparse LU solves and the tests' distributions; arrays): a default "
                        "install below 300 MB would need one of them replaced by hand-written code or made an "
                        "extra that every audit needs, so the default keeps them.")
    return "\n".join(out).strip()


def peers_section(doc: dict[str, Any]) -> str:
    v = doc.get("versions", {})
    out = [f"**Against peers** (`bench_peers.py`, {_machine(doc)}; deeptime {v.get('deeptime', 'not installed')}, "
           f"stormpy {v.get('stormpy', 'not installed')}; every figure checked equal to the peer's to 1e-9)."]
    counting = doc.get("counting") or []
    if counting and "deeptime_s" in counting[0]:
        rows = [[_n(c["n_traces"]), _s(c["ours_codes_s"]), _s(c["ours_tracetable_s"]), _s(c["deeptime_s"]),
                 f"{c['deeptime_over_ours_codes']:.0f}× / {c['deeptime_over_ours_tracetable']:.0f}×"]
                for c in counting]
        out += ["", "Transition counting (20 states, mean length 30) vs deeptime's `TransitionCountEstimator` "
                "(which counts transient transitions only; ours also counts exits and first states):", "",
                _table(["traces", "ours, from codes", "ours, `ChainEstimator.fit`", "deeptime", "faster by"], rows)]
    horizon = doc.get("horizon") or []
    if horizon and "storm_single_s" in horizon[0]:
        rows = [[f"{h['chain']} {h['n_states']}", _s(h["ours_warm_s"]), _s(h["ours_cold_s"]),
                 _s(h["storm_single_s"]), _s(h["storm_full_curve_s"]),
                 f"{h['storm_full_curve_s'] / h['ours_warm_s']:.0f}×", f"{h['max_abs_diff_full_curve']:.0e}"]
                for h in horizon]
        out += ["", "R(d), d = 0..1000, vs Storm's bounded reachability `P=? [F<=d \"success\"]` (one value per "
                "call; a fresh initial state carries π0, so Storm's d + 1 is our d). For one budget Storm is "
                "faster; for the whole curve, which reports need, ours is:", "",
                _table(["chain", "ours, all 1001 values", "ours incl. LU", "Storm, one value", "Storm, 1001 calls",
                        "curve ratio", "max diff"], rows)]
    return "\n".join(out)


STATES_CASES = {
    "swebench": ("SWE-bench artifact corpus (479 traces) file → shell-vocabulary Ward states (k ∈ [2, 10]) → chain",
                 "< 2 s"),
    "swebench-cat+depth": ("same, the paper's cat+depth features: exact Ward on every distinct row", ""),
    "rules-1M": ("1M rule-featured steps → Ward states", "< 10 s"),
    "continuous-1M-64d": ("1M × 64-dimensional continuous rows → states, scalable path", "< 60 s, < 4 GB"),
}


def single_section(fit: dict[str, Any] | None, horizon: dict[str, Any] | None, audit: dict[str, Any] | None,
                   unc: dict[str, Any] | None, otlp: dict[str, Any] | None,
                   states: dict[str, Any] | None = None) -> str:
    rows: list[list[str]] = []
    if fit:
        for r in fit["results"]:
            if r["n_traces"] >= 100_000:
                rows.append([f"{_n(r['n_traces'])} traces ({r['n_steps'] / 1e6:.0f}M steps), Parquet → "
                             "`TraceTable` → chain, in memory",
                             f"{_s(r['total_s'])} (read {_s(r['read_s'])}), {_mb(r['rss_peak_mb'])}",
                             "< 30 s, < 4 GB" if r["n_traces"] == 1_000_000 else "", "`bench_fit.py`"])
    if horizon:
        for r in horizon["results"]:
            rows.append([f"`reliability({r['horizon']})` on a {r['n_states']}-state {r['chain']} chain",
                         f"{_s(r['reliability_warm_s'])} ({_s(r['reliability_cold_s'])} with the LU)",
                         "< 0.1 s" if r["chain"] == "sparse" else "", "`bench_horizon.py`"])
    if states:
        for case, (what, target) in STATES_CASES.items():
            c = states["cases"].get(case)
            if c:
                rows.append([what, f"{_s(c['median_s'])}, {_mb(c['median_peak_mb'])}", target, "`bench_states.py`"])
    if audit:
        med = audit["medians"]
        rows.append([f"audit of the SWE-bench corpus, held-out on 5 splits, B = {audit['bootstrap']} KS refits",
                     _s(med["audit_holdout_s"]), "< 10 s", "`bench_audit.py`"])
    if unc:
        for r in unc["results"]:
            if r.get("target_s"):
                rows.append([r["what"].strip(), _s(r["median_s"]), f"< {r['target_s']:g} s", "`bench_uncertainty.py`"])
    if otlp:
        r = otlp["results"][0]
        rows.append([f"OTLP JSONL streaming read, {r['file_mb'] / 1024:.0f} GB ({r['spans'] / 1e6:.1f}M spans)",
                     f"{_s(r['wall_s'])} ({r['mb_per_s']:.1f} MB/s), {_mb(r['rss_peak_mb'])}", "bounded memory",
                     "`bench_otlp_stream.py`"])
    if not rows:
        return ""
    machine = next(d for d in (fit, horizon, states, audit, unc, otlp) if d)
    return "\n".join([f"**One process** ({_machine(machine)}):", "",
                      _table(["what", "figure", "target", "script"], rows)])


def render() -> str:
    parts = [f"{BEGIN}",
             "<!-- generated by benchmarks/render_readme.py from benchmarks/results/*.json: do not edit by hand -->",
             "",
             "`make bench` runs the benchmarks below (about 15 minutes on 2 cores, data generation included) and "
             "rewrites this section from their results; `benchmarks/README.md` says what each one measures. "
             "Times are wall-clock medians on a shared VM: compare ratios, not absolute figures, across machines."]
    scale, proto, peers = _load("bench_scale"), _load("bench_protocols"), _load("bench_peers")
    for doc, fn in ((scale, scale_section), (proto, protocols_section), (peers, peers_section)):
        if doc:
            parts += ["", fn(doc)]
    startup = startup_section(_load("bench_startup"), _load("bench_install"))
    if startup:
        parts += ["", startup]
    commands = _load("bench_commands")
    if commands:
        parts += ["", commands_section(commands)]
    single = single_section(_load("bench_fit"), _load("bench_horizon"), _load("bench_audit"),
                            _load("bench_uncertainty"), _load("bench_otlp_stream"), _load("bench_states"))
    if single:
        parts += ["", single]
    parts.append(END)
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md is not up to date (write nothing)")
    args = ap.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"README.md has no {BEGIN} … {END} markers", file=sys.stderr)
        return 2
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + render() + tail
    if args.check:
        if new != text:
            print("README.md's performance section is out of date: run python benchmarks/render_readme.py",
                  file=sys.stderr)
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    print("README.md performance section written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
