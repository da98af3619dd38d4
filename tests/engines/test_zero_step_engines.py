"""Zero-step episodes in the analysis core: they enter the counts, the length histograms (at length 0, each split's half
by the trace-id hash rule), the task table and the bootstrap replicates, and a corpus gives the same analysis in
memory and partition by partition on any engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tracetochain as tt
from tracetochain._outcome import SUCCESS
from tracetochain.analysis import analyze
from tracetochain.analysis._summary import FIT, TEST, SummarySpec, merge_summaries, reindex_summary, summarize_traces
from tracetochain.engines import Engine
from tracetochain.traces._hashing import fnv1a_hashes, holdout_mask

FAST = {"n_bootstrap": 19, "n_permutations": 19, "trials_permutations": 99}


def zero_step_records(n: int = 500, seed: int = 5) -> list[dict[str, Any]]:
    """Episodes of a chain where 15 % succeed and 10 % fail before any step, with repeated tasks; a few zero-step
    episodes are censored or invalid; the zero-step records sit between the traces, as a reader writes them."""
    base = tt.datasets.random_chain(4, seed=seed, rho=0.8)
    chain = base.with_changes(pi0=base.pi0 * 0.75, start_exits=(0.15, 0.10))
    sim = tt.datasets.simulate_traces(chain, n, seed=seed, max_steps=25)
    zero = {z["trace_id"]: z["outcome"] for z in sim.report.zero_step}
    rows = sim.to_arrow().to_pylist()
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_trace.setdefault(r["trace_id"], []).append(r)
    out: list[dict[str, Any]] = []
    for i in range(n):
        tid = f"t{i}"
        task = f"task{i % 40}"
        if tid in zero:
            outcome = {3: "censored", 7: "invalid"}.get(i % 50, zero[tid])
            out.append({"trace_id": tid, "outcome": outcome, "task_id": task})
        else:
            out += [dict(r, task_id=task) for r in by_trace[tid]]
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("zero_step")
    recs = zero_step_records()
    jsonl = root / "c.jsonl"
    jsonl.write_text("".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in recs))
    names = ["trace_id", "step_idx", "state", "outcome", "task_id"]
    table = pa.table({k: [r.get(k) for r in recs] for k in names},
                     schema=pa.schema([("trace_id", pa.string()), ("step_idx", pa.int64()), ("state", pa.string()),
                                       ("outcome", pa.string()), ("task_id", pa.string())]))
    parquet = root / "c.parquet"
    pq.write_table(table, parquet, row_group_size=97)
    return {"jsonl": jsonl, "parquet": parquet}


def fingerprint(res: Any) -> dict[str, Any]:
    cert = res.certificate.to_dict() if res.certificate is not None else None
    if cert is not None:
        cert.pop("settings", None)
    out = {"chain": {k: v for k, v in res.chain.to_dict().items() if k != "metadata"},
           "counts": res.summary.counts.to_dict(), "certificate": cert, "ingest": res.ingest.to_dict()}
    out["ingest"].pop("source", None)
    out["ingest"].pop("format", None)
    out["ingest"].pop("problems", None)
    if res.ensemble is not None:
        out["intervals"] = res.intervals(horizon=20, ks=(1, 3))
        out["intervals"].pop("settings", None)
    return out


def same(a: Any, b: Any) -> None:
    fa, fb = fingerprint(a), fingerprint(b)
    for key in fa:
        assert json.dumps(fa[key], sort_keys=True) == json.dumps(fb[key], sort_keys=True), key


def test_the_corpus_reads_with_its_zero_step_episodes(corpus: dict[str, Path]) -> None:
    a, b = tt.read_traces(corpus["jsonl"]), tt.read_traces(corpus["parquet"])
    assert a.report.n_zero_step == b.report.n_zero_step > 100
    assert a.report.zero_step_outcomes() == b.report.zero_step_outcomes()
    assert a.report.zero_step_outcomes()["censored"] > 0 and a.report.zero_step_outcomes()["invalid"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("intervals", ["posterior", "bootstrap"])
def test_memory_and_engines_give_the_same_analysis(engine: Engine, corpus: dict[str, Path], intervals: str) -> None:
    mem = analyze(tt.read_traces(corpus["parquet"]), intervals=intervals, samples=60, seed=3,  # type: ignore[arg-type]
                  **FAST)
    assert mem.chain.start_exits.any() and mem.ingest.n_zero_step > 100
    by_bytes = analyze(corpus["jsonl"], engine=engine, intervals=intervals, samples=60, seed=3,  # type: ignore[arg-type]
                       partition_options={"bytes_per_partition": 6_000}, **FAST)
    assert by_bytes.source["n_partitions"] > 10
    same(mem, by_bytes)
    by_rows = analyze(corpus["parquet"], engine=engine, intervals=intervals, samples=60, seed=3,  # type: ignore[arg-type]
                      partition_options={"rows_per_partition": 150}, **FAST)
    same(mem, by_rows)


def test_r_inf_without_prior_is_the_pass_rate_and_intervals_contain_it(corpus: dict[str, Path]) -> None:
    table = tt.read_traces(corpus["jsonl"])
    oc, zo = table.outcome_counts(), table.report.zero_step_outcomes()
    n_usable = sum(oc.values()) - oc["invalid"] + sum(zo.values()) - zo["invalid"]
    succ = oc["success"] + zo["success"]
    for method in ("posterior", "bootstrap"):
        res = analyze(table, pseudocount=0.0, audit=False, intervals=method, samples=400, seed=1)  # type: ignore[arg-type]
        assert res.summary.n_usable == n_usable and res.summary.n_success == succ
        assert res.pass_rate == succ / n_usable
        if oc["censored"] + zo["censored"] == 0:
            assert res.chain.r_inf == pytest.approx(res.pass_rate, abs=1e-12)
        s = res.ensemble.stats("r_inf")
        assert s.lower < res.pass_rate < s.upper
    res = analyze(table, audit=False, intervals="bootstrap", samples=200, seed=2)
    assert res.ensemble.start_exits[:, 0].std() > 0


def test_no_censoring_gives_the_exact_identity() -> None:
    base = tt.datasets.random_chain(3, seed=1, rho=0.7)
    chain = base.with_changes(pi0=base.pi0 * 0.7, start_exits=(0.2, 0.1))
    sim = tt.datasets.simulate_traces(chain, 800, seed=1)
    res = analyze(sim, pseudocount=0.0, audit=False, intervals=None)
    assert res.summary.counts.n_traces["censored"] == 0
    assert res.chain.r_inf == pytest.approx(res.pass_rate, abs=1e-12)
    assert res.chain.reliability(0)[0] == pytest.approx(res.summary.empirical_rdc(0)[0], abs=1e-12)


def test_summary_puts_zero_step_episodes_at_length_zero_in_their_half(corpus: dict[str, Path]) -> None:
    table = tt.read_traces(corpus["jsonl"])
    codes, names = table.state_labels()
    spec = SummarySpec(seed=4, n_splits=3, n_replicates=16, resample_by="trace")
    summ = summarize_traces(table, codes, tuple(names), spec)
    zero = [z for z in table.report.zero_step if z["outcome"] != "invalid"]
    zo = table.report.zero_step_outcomes()
    assert summ.all_lengths[:, 0].tolist() == [zo["success"], zo["failure"], zo["censored"]]
    held = np.stack([holdout_mask(fnv1a_hashes(pa.array([z["trace_id"] for z in zero])), 0.5, 4, s)
                     for s in range(3)])
    succ = np.array([z["outcome"] == "success" for z in zero])
    fail = np.array([z["outcome"] == "failure" for z in zero])
    for s in range(3):
        assert summ.lengths[s, TEST, SUCCESS, 0] == int((held[s] & succ).sum())
        assert summ.lengths[s, FIT, SUCCESS, 0] == int((~held[s] & succ).sum())
        fit_counts = summ.split_fit_counts(s)
        assert fit_counts.start_exits.tolist() == [int((~held[s] & succ).sum()), int((~held[s] & fail).sum())]
    m = len(names)
    assert summ.boot.shape == (16, m * m + 3 * m + 2)
    assert summ.boot[:, -2].mean() == pytest.approx(zo["success"], rel=0.2)  # Poisson(1) weights
    assert summ.tasks is not None and int(summ.tasks.trials.sum()) == summ.n_usable


def test_summaries_of_pieces_add_up(corpus: dict[str, Path]) -> None:
    table = tt.read_traces(corpus["jsonl"])
    codes, names = table.state_labels()
    spec = SummarySpec(seed=1, n_splits=2, n_replicates=8)
    whole = summarize_traces(table, codes, tuple(names), spec)
    steps_only = table.select_traces(np.arange(table.n_traces))  # the traces without the zero-step episodes
    a = summarize_traces(steps_only, codes, tuple(names), spec)
    empty = tt.TraceTable.from_records([], source="zero-step only")
    empty.report.zero_step = list(table.report.zero_step)
    b = summarize_traces(empty, np.zeros(0, np.int64), (), spec, partition=1)
    for merged in (merge_summaries(a, b), merge_summaries(b, a)):
        merged = reindex_summary(merged, whole.state_names)
        assert merged.counts.to_dict() == whole.counts.to_dict()
        np.testing.assert_array_equal(merged.all_lengths, whole.all_lengths)
        np.testing.assert_array_equal(merged.lengths, whole.lengths)
        np.testing.assert_array_equal(merged.split_start_exits, whole.split_start_exits)
        np.testing.assert_allclose(merged.boot, whole.boot, rtol=0, atol=1e-9)
