"""Benchmark: speed against peer libraries (deeptime, stormpy), where installed, each with a ratio peer / ours.

Both peers are optional: a peer that cannot be imported is recorded as ``"not installed"`` in the results and
its comparison is skipped (ours is still timed).

**1. Counting vs deeptime.** Data: a seeded vectorised simulation of the random 20-state absorbing chain of
``bench_fit.py`` (``make_chain``; mean trace length 30; traces still running after 250 steps end as
``censored``, about 0.02%; no ``invalid`` traces, so both sides count exactly the same steps), at 10k, 100k and
1M traces. Timed, interleaved round by round, median of ``--repeats`` (default 3):

* ``ours (codes)``: ``count_transitions_from_codes(codes, offsets, outcomes, names)`` on our flat layout (the
  state codes of all traces concatenated, int64; ``offsets``; one outcome code per trace);
* ``ours (TraceTable)``: ``ChainEstimator(pseudocount=1.0).fit(table)``, i.e. counting from the validated
  table (dictionary-encoding its string ``state`` column, the trace boundaries, the outcomes) plus the
  estimation of the 20-state chain, which is negligible. The table is built from the same arrays outside the
  timing (pyarrow columns ``trace_id``/``step_idx``/``state``/``outcome``, then ``TraceTable.from_arrow``);
* ``deeptime``: ``TransitionCountEstimator(lagtime=1, count_mode="sliding", n_states=20).fit(trajs)`` on a
  Python list with one int64 array per trace (views into the flat codes, made outside the timing): the form
  deeptime takes. Its fit also builds a state histogram; ours has no such output.

Check: deeptime's transient-to-transient count matrix must equal our ``transitions`` matrix entry for entry
(``max abs diff`` is 0 when they agree). deeptime has no notion of absorbing outcomes, so our success / failure
exit counts, first-state counts and per-outcome trace counts are extra work that only we do.

**2. Horizon reliability vs stormpy.** Chains: the 1000-state sparse chain (5 successors per row) and the
100-state dense chain of ``bench_horizon.py`` (``sparse_chain`` / ``dense_chain``, same seeds). The stormpy
model is a floating-point (double) ``SparseDtmc`` built from the same numpy arrays: state 0 is a fresh initial
state whose transitions are π0, states 1..m are the transient states, then ``success`` and ``failure`` with
self-loops. Storm has one initial state, so the fresh state shifts time by one step:
``P_init[F<=d+1 "success"] = Σ_s π0(s) P_s[F<=d "success"] = R(d)``. The script verifies this numerically
(also that the unshifted bound d does *not* match, and that Storm's value from a single transient start state s
equals our R(d) for a chain with π0 = e_s), and requires stormpy to agree with us to 1e-9. Timed separately,
median of ``--horizon-repeats`` (default 7):

* ``construct``: ours ``AbsorbingChain(Q, r+, r−, π0, names)`` vs. stormpy's CSR assembly from the numpy
  arrays, ``SparseMatrixBuilder[float]`` (bulk ``add_next_values``), labelling and ``SparseDtmc[float]``;
* ours ``chain.reliability(1000)``: **the whole curve R(0..1000), 1001 values, in one call**; ``warm`` = the
  I − Q factorization already cached, ``cold`` = on a fresh chain (factorization included, construction not);
* stormpy ``model_checking(dtmc, P=? [F<=d+1 "success"], only_initial_states=True)`` (+ ``get_value``) for
  one d = 1000: a *single* value per call. Properties are parsed outside the timing; one warm-up call first;
* per-call stormpy times for d in ``--storm-d`` (default 10, 100, 1000) and their sum (3 values);
* the measured loop over all 1001 bounds d = 0..1000 (``--curve-repeats``, default 1), one call per value:
  what it really costs to get our curve from Storm. Nothing is extrapolated.

Usage::

    python benchmarks/bench_peers.py
    python benchmarks/bench_peers.py --sizes 10000,100000 --repeats 1 --no-save
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results
from bench_fit import MAX_STEPS, MEAN_LENGTH, OUTCOMES, chain_cdfs, simulate_chunk
from bench_horizon import dense_chain, sparse_chain

import tracetochain
from tracetochain.chain import count_transitions_from_codes

TOL = 1e-9
CHUNK_TRACES = 1 << 17  # traces simulated per batch


def _peer(name: str) -> tuple[Any, str]:
    """(module or None, version string or "not installed" / "not importable: …")."""
    try:
        mod = __import__(name)
    except ImportError:
        return None, "not installed"
    except Exception as exc:  # e.g. a binary built against another numpy
        return None, f"not importable: {type(exc).__name__}: {exc}"
    return mod, str(getattr(mod, "__version__", "unknown"))


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------------- data
def simulate(n_traces: int, seed: int) -> dict[str, Any]:
    """Traces of ``bench_fit.make_chain(seed)`` in our flat layout: codes (int64), offsets, outcome codes (int8).

    All traces of a batch step together (vectorised); a trace still running after MAX_STEPS steps is censored.
    """
    t0 = time.perf_counter()
    cum, cum_pi0, m = chain_cdfs(seed)
    codes, lengths, outcomes = [], [], []
    batches = np.random.SeedSequence([seed, n_traces]).spawn((n_traces + CHUNK_TRACES - 1) // CHUNK_TRACES)
    for k, ss in enumerate(batches):
        n = min(CHUNK_TRACES, n_traces - k * CHUNK_TRACES)
        states, outcome = simulate_chunk(cum, cum_pi0, n, np.random.default_rng(ss))
        seen = states >= 0
        codes.append(states[seen].astype(np.int64))  # row-major: sorted by (trace, step)
        lengths.append(seen.sum(axis=1))
        outcomes.append(outcome)
    offsets = np.zeros(n_traces + 1, dtype=np.int64)
    np.cumsum(np.concatenate(lengths), out=offsets[1:])
    out = np.concatenate(outcomes)
    return {"codes": np.concatenate(codes), "offsets": offsets, "outcomes": out,
            "names": [f"state_{i:02d}" for i in range(m)],
            "outcome_counts": dict(zip(OUTCOMES, np.bincount(out, minlength=4).tolist(), strict=True)),
            "generate_s": time.perf_counter() - t0}


def to_trace_table(codes: np.ndarray, offsets: np.ndarray, outcomes: np.ndarray,
                   names: list[str]) -> tracetochain.TraceTable:
    """The same traces as a validated TraceTable (string trace ids and state labels, canonical columns)."""
    import pyarrow as pa

    n = offsets.size - 1
    lengths = np.diff(offsets)
    row_trace = np.repeat(np.arange(n, dtype=np.int32), lengths)
    ids = pa.array(np.char.add("t", np.char.zfill(np.arange(n).astype(str), max(7, len(str(n - 1))))))
    table = pa.table({
        "trace_id": ids.take(pa.array(row_trace)),
        "step_idx": pa.array(np.arange(codes.size, dtype=np.int64) - np.repeat(offsets[:-1], lengths)),
        "state": pa.array(names).take(pa.array(codes)),
        "outcome": pa.array(list(OUTCOMES)).take(pa.array(outcomes[row_trace].astype(np.int32))),
    })
    return tracetochain.TraceTable.from_arrow(table, source="bench_peers")


# ---------------------------------------------------------------------------------------------------- counting
def bench_counting(n_traces: int, seed: int, repeats: int, deeptime: Any) -> dict[str, Any]:
    data = simulate(n_traces, seed)
    codes, offsets, outcomes, names = data["codes"], data["offsets"], data["outcomes"], data["names"]
    m = len(names)
    print(f"# {n_traces:,} traces, {codes.size:,} steps (simulated in {data['generate_s']:.1f} s) …",
          file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    table = to_trace_table(codes, offsets, outcomes, names)
    table_s = time.perf_counter() - t0
    trajs: list[np.ndarray] | None = None
    split_s = None
    if deeptime is not None:
        from deeptime.markov import TransitionCountEstimator

        t0 = time.perf_counter()
        trajs = np.split(codes, offsets[1:-1])
        split_s = time.perf_counter() - t0

    ours: dict[str, Any] = {}
    fitted: dict[str, Any] = {}
    peer: dict[str, Any] = {}

    def run_ours() -> None:
        ours["c"] = count_transitions_from_codes(codes, offsets, outcomes, names)

    def run_fit() -> None:
        fitted["est"] = tracetochain.ChainEstimator(pseudocount=1.0).fit(table)

    def run_deeptime() -> None:
        est = TransitionCountEstimator(lagtime=1, count_mode="sliding", n_states=m)
        peer["C"] = est.fit(trajs).fetch_model().count_matrix

    runs: dict[str, list[float]] = {"ours_codes": [], "ours_tracetable": [], "deeptime": []}
    for _ in range(repeats):  # interleaved, so drift on the VM hits every contender alike
        runs["ours_codes"].append(timed(run_ours))
        runs["ours_tracetable"].append(timed(run_fit))
        if trajs is not None:
            runs["deeptime"].append(timed(run_deeptime))

    T = ours["c"].transitions
    fc = fitted["est"].counts_
    perm = [fc.state_names.index(s) for s in names]  # the table's states are in order of first appearance
    T_fit = fc.transitions[np.ix_(perm, perm)]
    res: dict[str, Any] = {
        "n_traces": n_traces,
        "n_steps": int(codes.size),
        "mean_length": codes.size / n_traces,
        "outcomes": data["outcome_counts"],
        "generate_s": data["generate_s"],
        "trace_table_build_s": table_s,
        "deeptime_list_build_s": split_s,
        "ours_codes_s": median(runs["ours_codes"]),
        "ours_tracetable_s": median(runs["ours_tracetable"]),
        "deeptime_s": median(runs["deeptime"]) if runs["deeptime"] else None,
        "runs": runs,
        "n_transitions": int(T.sum()),
        "tracetable_equals_codes": bool(np.array_equal(T_fit, T)),
    }
    if trajs is not None:
        C = np.asarray(peer["C"])
        res["max_abs_diff_codes"] = float(np.max(np.abs(C - T)))
        res["max_abs_diff_tracetable"] = float(np.max(np.abs(C - T_fit)))
        res["deeptime_over_ours_codes"] = res["deeptime_s"] / res["ours_codes_s"]
        res["deeptime_over_ours_tracetable"] = res["deeptime_s"] / res["ours_tracetable_s"]
    return res


# ---------------------------------------------------------------------------------------------------- horizon
def build_storm_dtmc(Q: np.ndarray, rs: np.ndarray, rf: np.ndarray, pi0: np.ndarray) -> Any:
    """Double-precision DTMC: 0 = fresh initial state (→ π0), 1..m transient, m+1 success, m+2 failure."""
    from stormpy import datastructures, models

    m = Q.shape[0]
    n = m + 3
    dense = np.zeros((n, n))
    dense[0, 1:m + 1] = pi0
    dense[1:m + 1, 1:m + 1] = Q
    dense[1:m + 1, m + 1] = rs
    dense[1:m + 1, m + 2] = rf
    dense[m + 1, m + 1] = dense[m + 2, m + 2] = 1.0
    P = scipy.sparse.csr_matrix(dense)  # row-major, sorted columns, zeros dropped
    rows = np.repeat(np.arange(n), np.diff(P.indptr))
    builder = datastructures.SparseMatrixBuilder[float](rows=n, columns=n, entries=P.nnz)
    builder.add_next_values(rows.tolist(), P.indices.tolist(), P.data.tolist(), [])
    labeling = models.StateLabeling(n)
    for label in ("init", "success", "failure"):
        labeling.add_label(label)
    labeling.add_label_to_state("init", 0)
    labeling.add_label_to_state("success", m + 1)
    labeling.add_label_to_state("failure", m + 2)
    components = models.SparseModelComponents[float](transition_matrix=builder.build(), state_labeling=labeling)
    return models.SparseDtmc[float](components)



def bench_horizon(label: str, arrays: tuple[np.ndarray, ...], horizon: int, storm_d: list[int], repeats: int,
                  curve_repeats: int, stormpy: Any) -> dict[str, Any]:
    Q, rs, rf, pi0 = arrays
    m = Q.shape[0]
    names = [f"s{i}" for i in range(m)]

    def build() -> tracetochain.AbsorbingChain:
        return tracetochain.AbsorbingChain(Q, rs, rf, pi0, names)

    chain = build()
    rel = np.asarray(chain.reliability(horizon))  # also warms the factorization and lazy imports
    t_construct = [timed(build) for _ in range(repeats)]
    t_warm = [timed(lambda: chain.reliability(horizon)) for _ in range(repeats)]
    t_cold = []
    for _ in range(repeats):
        fresh = build()
        t_cold.append(timed(lambda c=fresh: c.reliability(horizon)))
    res: dict[str, Any] = {
        "chain": label, "n_states": m, "nnz_Q": int(np.count_nonzero(Q)), "horizon": horizon,
        "ours_construct_s": median(t_construct), "ours_warm_s": median(t_warm), "ours_cold_s": median(t_cold),
        "R_at_horizon": float(rel[horizon]),
        "runs": {"ours_construct": t_construct, "ours_warm": t_warm, "ours_cold": t_cold},
    }
    if stormpy is None:
        return res

    dtmc = build_storm_dtmc(Q, rs, rf, pi0)
    t_sconstruct = [timed(lambda: build_storm_dtmc(Q, rs, rf, pi0)) for _ in range(repeats)]
    props = {b: stormpy.parse_properties(f'P=? [F<={b} "success"]')[0] for b in range(horizon + 2)}

    def check(bound: int, only_initial: bool = True) -> Any:
        return stormpy.model_checking(dtmc, props[bound], only_initial_states=only_initial)

    check(horizon + 1).get_value(0)  # warm-up (first call pays one-off set-up)
    per_d: dict[str, Any] = {}
    for d in sorted({*storm_d, horizon}):
        times = [timed(lambda d=d: check(d + 1).get_value(0)) for _ in range(repeats)]
        shifted = check(d + 1).get_value(0)  # fresh initial state: one extra step
        unshifted = check(d).get_value(0)
        per_d[str(d)] = {"storm_s": median(times), "runs": times, "storm_value": shifted, "ours_value": float(rel[d]),
                         "abs_diff": abs(shifted - float(rel[d])),
                         "abs_diff_unshifted_bound": abs(unshifted - float(rel[d]))}
    # Without the fresh state: Storm's value from a transient start state s is our R(d) for π0 = e_s.
    s = int(np.argmax(pi0))
    rel_s = np.asarray(chain.with_changes(pi0=s).reliability(horizon))
    single_start = max(abs(check(d, only_initial=False).get_value(s + 1) - float(rel_s[d]))
                       for d in sorted({*storm_d, horizon}))
    # The whole curve from Storm: one call per bound, all 1001 of them, measured (not extrapolated).
    curve = np.zeros(horizon + 1)
    t_curve = []
    for _ in range(curve_repeats):
        t0 = time.perf_counter()
        for d in range(horizon + 1):
            curve[d] = check(d + 1).get_value(0)
        t_curve.append(time.perf_counter() - t0)
    subset = sorted(set(storm_d))
    res.update({
        "storm_construct_s": median(t_sconstruct),
        "storm_single_s": per_d[str(horizon)]["storm_s"],
        "storm_per_d": per_d,
        "storm_subset": subset,
        "storm_subset_loop_s": sum(per_d[str(d)]["storm_s"] for d in subset),
        "storm_full_curve_s": median(t_curve) if t_curve else None,
        "storm_nr_states": int(dtmc.nr_states),
        "storm_nr_transitions": int(dtmc.nr_transitions),
        "max_abs_diff_single": per_d[str(horizon)]["abs_diff"],
        "max_abs_diff_subset": max(per_d[str(d)]["abs_diff"] for d in subset),
        "max_abs_diff_full_curve": float(np.max(np.abs(curve - rel))) if t_curve else None,
        "max_abs_diff_unshifted_bound": max(v["abs_diff_unshifted_bound"] for v in per_d.values()),
        "single_start_state": s,
        "max_abs_diff_single_start": single_start,
    })
    res["runs"].update({"storm_construct": t_sconstruct, "storm_full_curve": t_curve})
    return res


# ---------------------------------------------------------------------------------------------------- output
def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:.4f}" if x < 10 else f"{x:.2f}"


def _ratio(peer: float | None, ours: float | None) -> str:
    if peer is None or not ours:
        return "—"
    r = peer / ours
    return f"{r:.0f}×" if r >= 100 else f"{r:.3g}×"


def _diff(x: float | None) -> str:
    return "—" if x is None else "0" if x == 0 else f"{x:.1e}"


def counting_table(results: list[dict[str, Any]]) -> str:
    rows = []
    for r in results:
        case = f"{r['n_traces']:,} traces ({r['n_steps'] / 1e6:.1f}M steps)"
        for key, what, diff in (("ours_codes_s", "count_transitions_from_codes", "max_abs_diff_codes"),
                                ("ours_tracetable_s", "ChainEstimator.fit(TraceTable)", "max_abs_diff_tracetable")):
            rows.append([case, what, _s(r[key]), _s(r["deeptime_s"]), _ratio(r["deeptime_s"], r[key]),
                         _diff(r.get(diff))])
    return markdown_table(["case", "ours", "ours s", "deeptime s", "deeptime/ours", "max abs diff"], rows)


def horizon_table(results: list[dict[str, Any]]) -> str:
    rows = []
    for r in results:
        h = r["horizon"]
        case = f"{r['chain']} {r['n_states']:,}"
        storm = "storm_construct_s" in r
        rows.append([case, "construct (AbsorbingChain / SparseDtmc)", "—", _s(r["ours_construct_s"]),
                     _s(r.get("storm_construct_s")), _ratio(r.get("storm_construct_s"), r["ours_construct_s"]), "—"])
        for tag, key in (("warm", "ours_warm_s"), ("cold", "ours_cold_s")):
            rows.append([case, f"R({h}): ours R(0..{h}) {tag} vs one Storm call", f"{h + 1} / 1", _s(r[key]),
                         _s(r.get("storm_single_s")), _ratio(r.get("storm_single_s"), r[key]),
                         _diff(r.get("max_abs_diff_single"))])
        if not storm:
            continue
        for d in r["storm_subset"]:
            if d == h:
                continue
            pd = r["storm_per_d"][str(d)]
            rows.append([case, f"R({d}): ours R(0..{h}) warm vs one Storm call", f"{h + 1} / 1",
                         _s(r["ours_warm_s"]), _s(pd["storm_s"]), _ratio(pd["storm_s"], r["ours_warm_s"]),
                         _diff(pd["abs_diff"])])
        sub = r["storm_subset"]
        rows.append([case, f"d ∈ {{{', '.join(map(str, sub))}}}: ours warm vs Storm loop", f"{h + 1} / {len(sub)}",
                     _s(r["ours_warm_s"]), _s(r["storm_subset_loop_s"]),
                     _ratio(r["storm_subset_loop_s"], r["ours_warm_s"]), _diff(r["max_abs_diff_subset"])])
        if r["storm_full_curve_s"] is not None:
            rows.append([case, f"whole curve d = 0..{h}: ours warm vs {h + 1} Storm calls", f"{h + 1} / {h + 1}",
                         _s(r["ours_warm_s"]), _s(r["storm_full_curve_s"]),
                         _ratio(r["storm_full_curve_s"], r["ours_warm_s"]), _diff(r["max_abs_diff_full_curve"])])
    return markdown_table(["chain", "what", "values ours / Storm", "ours s", "stormpy s", "stormpy/ours",
                           "max abs diff"], rows)


# ---------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated trace counts (counting)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of each counting measurement")
    ap.add_argument("--horizon-repeats", type=int, default=7, help="repeats of each R(d) / Storm measurement")
    ap.add_argument("--curve-repeats", type=int, default=1,
                    help="repeats of the 1001-call Storm loop over d = 0..horizon (0 skips it)")
    ap.add_argument("--horizon", type=int, default=1000)
    ap.add_argument("--storm-d", default="10,100,1000", help="bounds d timed one Storm call each")
    ap.add_argument("--states", type=int, default=1000, help="states of the sparse chain")
    ap.add_argument("--nnz-per-row", type=int, default=5)
    ap.add_argument("--dense-states", type=int, default=100)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/bench_peers.json")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    deeptime, deeptime_version = _peer("deeptime")
    stormpy, stormpy_version = _peer("stormpy")
    storm_version = None
    if stormpy is not None:
        storm_version = str(importlib.import_module("stormpy.info").storm_version())
    print(f"# deeptime: {deeptime_version}; stormpy: {stormpy_version}"
          + (f" (Storm {storm_version})" if storm_version else ""), file=sys.stderr, flush=True)

    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    counting = [bench_counting(n, args.seed, args.repeats, deeptime) for n in sizes]
    print("## Counting: ours vs deeptime TransitionCountEstimator(lagtime=1, count_mode='sliding')\n")
    print(counting_table(counting))
    if deeptime is None:
        print(f"\ndeeptime {deeptime_version}: only our times are shown")

    storm_d = [int(d) for d in args.storm_d.split(",") if d.strip()]
    if any(d > args.horizon for d in storm_d):
        ap.error("--storm-d values must not exceed --horizon")
    print("# R(d) vs stormpy …", file=sys.stderr, flush=True)
    horizon = [
        bench_horizon("sparse", sparse_chain(args.states, args.nnz_per_row, args.seed), args.horizon, storm_d,
                      args.horizon_repeats, args.curve_repeats, stormpy),
        bench_horizon("dense", dense_chain(args.dense_states, args.seed + 1), args.horizon, storm_d,
                      args.horizon_repeats, args.curve_repeats, stormpy),
    ]
    print(f"\n## R(d) vs stormpy P=? [F<=d+1 \"success\"] (ours returns all {args.horizon + 1} values "
          f"R(0..{args.horizon}) in one call; each Storm call returns one)\n")
    print(horizon_table(horizon))
    if stormpy is None:
        print(f"\nstormpy {stormpy_version}: only our times are shown")
    else:
        for r in horizon:
            print(f"{r['chain']}: Storm DTMC {r['storm_nr_states']} states / {r['storm_nr_transitions']} transitions; "
                  f"|P_init[F<=d] − R(d)| (unshifted bound) up to {r['max_abs_diff_unshifted_bound']:.1e}; "
                  f"from start state {r['single_start_state']}: |P_s[F<=d] − R_s(d)| ≤ "
                  f"{r['max_abs_diff_single_start']:.1e}")

    ok = all(r.get("max_abs_diff_codes", 0.0) == 0 and r.get("max_abs_diff_tracetable", 0.0) == 0
             and r["tracetable_equals_codes"] for r in counting)
    ok &= all(max(r.get(k) or 0.0 for k in ("max_abs_diff_single", "max_abs_diff_subset", "max_abs_diff_full_curve",
                                             "max_abs_diff_single_start")) <= TOL for r in horizon)
    wall = time.perf_counter() - t_start
    print(f"\ncorrectness: {'all checks passed' if ok else 'MISMATCH (see the JSON)'}; "
          f"wall time {wall:.0f} s")
    if not args.no_save:
        path = write_results("bench_peers", {
            "benchmark": "bench_peers",
            "description": "speed against peers, ratio peer/ours: transition counting vs deeptime "
                           "TransitionCountEstimator; R(0..horizon) vs stormpy bounded reachability "
                           "P=? [F<=d+1 \"success\"] (one value per call); medians over repeats",
            "versions": {"deeptime": deeptime_version, "stormpy": stormpy_version, "storm": storm_version},
            "repeats": args.repeats,
            "horizon_repeats": args.horizon_repeats,
            "curve_repeats": args.curve_repeats,
            "seed": args.seed,
            "generator": {"chain": "bench_fit.make_chain", "n_states": 20, "mean_length": MEAN_LENGTH,
                          "max_steps": MAX_STEPS, "invalid_rate": 0.0},
            "tolerance": TOL,
            "all_checks_passed": ok,
            "wall_s": wall,
            "machine": machine_info(),
            "counting": counting,
            "horizon": horizon,
        })
        print(f"\nwrote {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
