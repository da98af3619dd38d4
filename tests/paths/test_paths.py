"""Path patterns with inference (tracetochain.paths, analysis.analyze_paths, `tracetochain paths`): the candidates
are exactly the patterns present, the tests and intervals match their references, the q-values are
Benjamini–Yekutieli, clustering by task is used when tasks repeat, the JSON document has its shape, bad input gets a
clear error, the report section escapes trace content, and every engine gives the numbers of the corpus in memory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from cli_runner import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetochain import TraceTable
from tracetochain.analysis import analyze, analyze_paths, compare_paths
from tracetochain.exceptions import EmptyTraceSetError, TraceValidationError
from tracetochain.paths import (
    CandidateSettings,
    PathSequences,
    by_qvalues,
    compare_patterns,
    enumerate_candidates,
    find_patterns,
    fisher_two_sided,
    merge_sequences,
    newcombe,
    sequences_from_lists,
    top_finding,
)

ROW_KEYS = {"pattern", "kind", "n_traces", "share", "success_with", "success_without", "difference", "q_value",
            "p_value", "examples"}


def planted_table(n: int = 300, seed: int = 0, *, tasks: int | None = None, name: str = "test") -> TraceTable:
    """plan, 2–5 × (edit, test), submit; tests fail w.p. 0.35; success 0.3 after two failing tests in a row, else
    0.8 (``tasks``: trials spread over that many tasks)."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {"trace_id": [], "step_idx": [], "outcome": [], "state": [], "error": [], "task_id": []}
    for t in range(n):
        path, err, run, bad = ["plan"], [False], 0, False
        for _ in range(int(rng.integers(2, 6))):
            failed = bool(rng.random() < 0.35)
            path += ["edit", name]
            err += [False, failed]
            run = run + 1 if failed else 0
            bad = bad or run >= 2
        path.append("submit")
        err.append(False)
        outcome = "success" if rng.random() < (0.3 if bad else 0.8) else "failure"
        for i, (s, e) in enumerate(zip(path, err, strict=True)):
            cols["trace_id"].append(f"tr-{t:04d}")
            cols["step_idx"].append(i)
            cols["outcome"].append(outcome)
            cols["state"].append(s)
            cols["error"].append(e)
            cols["task_id"].append(None if tasks is None else f"task-{t % tasks}")
    table = pa.table({k: (pa.array(v, pa.string()) if k == "task_id" else v) for k, v in cols.items()})
    return TraceTable.from_arrow(table, source="planted")


# ---------------------------------------------------------------------------------------------------- candidates
def test_candidates_are_exactly_the_patterns_present() -> None:
    paths = [["a", "b", "b", "c"], ["a", "c"], ["a", "b", "a", "c"], ["b", "b", "b"]] * 3
    errors = [[False, True, True, False], [False, False], [True, False, True, False], [True, True, True]] * 3
    seq = sequences_from_lists(paths, [True, False, True, False] * 3, errors=errors)
    cand = enumerate_candidates(seq, CandidateSettings(min_traces=3, min_share=0.0, revisits=(3,), error_runs=(2,)))
    X = cand.presence.toarray().astype(bool)
    texts = [p.text for p in cand.patterns]
    all_texts = {p.text: X[:, j] for j, p in enumerate(cand.patterns)}
    for j, aliases in enumerate(cand.aliases):
        for a in aliases:
            all_texts[a.text] = X[:, j]
    first4 = lambda col: col[:4].tolist()  # noqa: E731 — the corpus repeats 3 times
    assert first4(all_texts["a → b → c"]) == [True, False, False, False]  # variant (repeats collapsed)
    assert first4(all_texts["b → b"]) == [True, False, False, True]  # n-gram on the raw path
    assert first4(all_texts["a → … → a"]) == [False, False, True, False]  # loop
    assert first4(all_texts["b visited ≥ 3 times"]) == [False, False, False, True]  # revisit
    assert first4(all_texts["≥ 2 consecutive error steps"]) == [True, False, False, True]
    # a failing twice in a row with b in between: visits to one state, other states do not break the run
    assert first4(all_texts["a failing ≥ 2 times in a row"]) == [False, False, True, False]
    # Every reported column is distinct, and present in ≥ 3 and absent from ≥ 3 traces.
    assert len({X[:, j].tobytes() for j in range(X.shape[1])}) == X.shape[1]
    assert (X.sum(axis=0) >= 3).all() and (X.sum(axis=0) <= 9).all()
    assert "c" not in texts  # visited by 9 of 12 traces → absent from only 3: kept; "a" absent from 3 too
    assert all(p.kind in ("variant", "ngram", "loop", "revisit", "errors") for p in cand.patterns)


def test_support_threshold_is_the_larger_of_count_and_share() -> None:
    assert CandidateSettings(min_traces=5, min_share=0.01).min_support(250) == 5
    assert CandidateSettings(min_traces=5, min_share=0.01).min_support(10_000) == 100
    with pytest.raises(ValueError, match="min_share"):
        CandidateSettings(min_share=0.7)
    with pytest.raises(ValueError, match="kinds"):
        CandidateSettings(kinds=("motif",))


# ---------------------------------------------------------------------------------------------------- statistics
def test_fisher_matches_scipy() -> None:
    from scipy.stats import fisher_exact

    rng = np.random.default_rng(1)
    N, K = 80, 31
    n = rng.integers(1, N, 300)
    x = np.array([rng.integers(max(0, a + K - N), min(a, K) + 1) for a in n])
    ours = fisher_two_sided(N, K, n, x)
    ref = [fisher_exact([[b, a - b], [K - b, N - K - a + b]])[1] for a, b in zip(n, x, strict=True)]
    np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-12)


def test_newcombe_golden_values() -> None:
    # Newcombe (1998), Statistics in Medicine 17:873, Table II, method 10: (a) 56/70 − 48/80, (h) 10/10 − 0/10.
    d, lo, hi = newcombe(np.array([56.0, 10.0]), np.array([70.0, 10.0]), np.array([48.0, 0.0]),
                         np.array([80.0, 10.0]), 1.959964)
    np.testing.assert_allclose(d, [0.2, 1.0])
    np.testing.assert_allclose(lo, [0.0524, 0.6075], atol=1e-4)
    np.testing.assert_allclose(hi, [0.3339, 1.0], atol=1e-4)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1.0, allow_nan=False), min_size=1, max_size=60))
def test_qvalues_are_by_and_monotone_in_p(ps: list[float]) -> None:
    p = np.asarray(ps)
    q = by_qvalues(p)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(q[order]) >= -1e-15)  # monotone in p
    assert np.all(q >= p - 1e-15) and np.all(q <= 1.0)
    C = p.size
    h = np.sum(1.0 / np.arange(1, C + 1))
    ranks = np.arange(1, C + 1)
    brute = [min(1.0, min(p[order][j:] * C * h / ranks[j:])) for j in range(C)]
    np.testing.assert_allclose(q[order], brute, rtol=1e-12)


# ---------------------------------------------------------------------------------------------------- results
def test_planted_pattern_found_and_json_shape() -> None:
    res = analyze_paths(planted_table())
    doc = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert doc["kind"] == "tracetochain.paths" and doc["schema_version"] == 1
    assert doc["clustered_by_task"] is False and "Fisher" in doc["method"]["p_value"]
    assert "Benjamini-Yekutieli" in doc["method"]["q_value"]
    rows = doc["patterns"]
    assert rows and all(ROW_KEYS <= set(r) for r in rows)
    for r in rows:
        d = r["difference"]
        assert set(d) == {"point", "lower", "upper"} and d["lower"] <= d["point"] <= d["upper"]
        assert r["n_traces"] == r["n_success_with"] + (r["n_traces"] - r["n_success_with"])
        assert abs(r["share"] - r["n_traces"] / doc["n_traces"]) < 1e-12
        assert set(r["examples"]) == {"success", "failure"}
        assert len(r["examples"]["failure"]) <= 3
    assert rows[0]["pattern"] == "test failing ≥ 2 times in a row" and rows[0]["q_value"] < 0.05
    top = top_finding(res)
    assert top is not None and top["pattern"] == rows[0]["pattern"] and "q =" in top["sentence"]
    assert top_finding(doc) == top
    # q-values are monotone in p across the rows
    ps = np.array([r["p_value"] for r in rows])
    qs = np.array([r["q_value"] for r in rows])
    o = np.argsort(ps, kind="stable")
    assert np.all(np.diff(qs[o]) >= -1e-15)


def test_no_finding_on_a_null_corpus() -> None:
    t = planted_table(200, seed=3)
    arrow = t.to_arrow()
    ids = np.asarray(arrow.column("trace_id").to_pylist())
    rng = np.random.default_rng(5)
    uniq = sorted(set(ids))
    coin = dict(zip(uniq, rng.random(len(uniq)) < 0.6, strict=True))  # outcome independent of the path
    out = ["success" if coin[i] else "failure" for i in ids]
    null = TraceTable.from_arrow(arrow.set_column(arrow.column_names.index("outcome"), "outcome", pa.array(out)))
    res = analyze_paths(null)
    assert top_finding(res) is None
    assert res.to_dict()["top_finding"] is None


def test_clustered_interval_and_test_when_tasks_repeat() -> None:
    flat = analyze_paths(planted_table(300, seed=2))
    clustered = analyze_paths(planted_table(300, seed=2, tasks=30))
    assert not flat.clustered and clustered.clustered and clustered.n_tasks == 30
    doc = clustered.to_dict()
    assert doc["clustered_by_task"] and "effective sample sizes" in doc["method"]["difference"]
    assert "Rao-Scott" in doc["method"]["p_value"]
    by_pattern = {r["pattern"]: r for r in flat.rows}
    wider = 0
    for r in clustered.rows:
        assert r["design_effect"]["with"] >= 1.0 and r["design_effect"]["without"] >= 1.0
        f = by_pattern[r["pattern"]]
        assert r["success_with"] == f["success_with"]  # same traces, same point estimates
        w_c = r["difference"]["upper"] - r["difference"]["lower"]
        w_f = f["difference"]["upper"] - f["difference"]["lower"]
        assert w_c >= w_f - 1e-12
        wider += w_c > w_f + 1e-9
    assert wider > 0


def test_all_alike_task_makes_boundary_design_effect_the_cluster_size() -> None:
    # 10 tasks × 4 trials; the pattern is in every trial of tasks 0–4, which all fail; tasks 5–9 succeed.
    paths, succ, tasks = [], [], []
    for k in range(10):
        for _ in range(4):
            paths.append(["a", "x", "b"] if k < 5 else ["a", "b"])
            succ.append(k >= 5)
            tasks.append(f"t{k}")
    res = find_patterns(sequences_from_lists(paths, succ, tasks=tasks), CandidateSettings(min_traces=2))
    row = next(r for r in res.rows if "x" in (r["pattern"], *r["aliases"]))
    assert row["design_effect"]["with"] == pytest.approx(4.0)  # p̂ = 0: all trials of a task alike
    assert row["difference"]["point"] == -1.0 and row["difference"]["upper"] < 0


# ---------------------------------------------------------------------------------------------------- bad input
def test_errors_on_bad_input(tmp_path: Path) -> None:
    t = planted_table(30)
    arrow = t.to_arrow()
    censored = TraceTable.from_arrow(arrow.set_column(arrow.column_names.index("outcome"), "outcome",
                                                      pa.array(["censored"] * arrow.num_rows)))
    with pytest.raises(EmptyTraceSetError, match="30 censored"):
        analyze_paths(censored)
    seq = PathSequences.from_table(t, *t.state_labels())
    with pytest.raises(TraceValidationError, match="appears twice"):
        merge_sequences(seq, seq).canonical()
    with pytest.raises(ValueError, match="confidence"):
        find_patterns(seq, confidence=1.5)
    with pytest.raises(TypeError, match="either"):
        analyze_paths(t, settings=CandidateSettings(), min_traces=3)
    r = run_cli("paths", str(tmp_path / "missing.jsonl"))
    assert r.returncode == 2 and "missing.jsonl" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("paths", str(tmp_path), "--min-share", "0.9")
    assert r.returncode == 2


# ---------------------------------------------------------------------------------------------------- surfaces
def test_cli_json_and_table(tmp_path: Path) -> None:
    path = planted_table(200, seed=4).write(tmp_path / "t.jsonl")
    r = run_cli("paths", str(path), "--json", "--min-traces", "4")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "tracetochain.paths" and doc["min_support"] == 4
    assert doc["top_finding"]["pattern"] == "test failing ≥ 2 times in a row"
    r = run_cli("paths", str(path), "--top", "3")
    assert r.returncode == 0, r.stderr
    assert "  1. test failing ≥ 2 times in a row" in r.stdout and "more patterns" in r.stdout
    assert "e.g. failing: tr-" in r.stdout
    r = run_cli("paths", "--help")
    assert "Example: tracetochain paths" in r.stdout


@pytest.mark.slow
def test_report_section_escapes_state_names() -> None:
    from tracetochain.report import build_report, render_html
    from tracetochain.report._markdown import render_markdown

    evil = "<script>alert(1)</script>"
    t = planted_table(200, seed=6, name=evil)
    res = analyze(t, audit=False, intervals=None)
    doc = build_report(res, paths=analyze_paths(t))
    assert doc["paths"]["top_finding"]["pattern"] == f"{evil} failing ≥ 2 times in a row"
    page = render_html(doc)
    assert 'id="paths"' in page and evil not in page and "&lt;script&gt;" in page
    md = render_markdown(doc)
    import re

    assert "Paths that go with failure" in md
    assert "<script>" not in re.sub(r"`[^`\n]*`", "", md)  # trace content only inside code spans
    assert build_report(res)["paths"] is None and 'id="paths"' not in render_html(build_report(res))
    # the report leads with the supported path pattern (the headline's "path" finding)
    assert doc["headline"]["kind"] == "path" and "failing ≥ 2 times in a row" in doc["headline"]["sentence"]
    assert evil not in page.split('id="paths"')[0]  # the headline is escaped too


def test_engine_parity(tmp_path: Path) -> None:
    t = planted_table(240, seed=7, tasks=60)
    path = t.write(tmp_path / "c.jsonl")
    memory = analyze_paths(t).to_dict()
    for engine in ("local",):
        parted = analyze_paths(path, engine=engine, partition_options={"bytes_per_partition": 20_000})
        doc = parted.to_dict()
        assert parted.source["n_partitions"] > 1 and parted.source["engine"] == engine
        assert json.dumps({k: v for k, v in doc.items() if k != "source"}, sort_keys=True) == \
            json.dumps({k: v for k, v in memory.items() if k != "source"}, sort_keys=True)
    r = run_cli("paths", str(path), "--engine", "local", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["patterns"] == memory["patterns"]


def test_compare_patterns_finds_the_changed_pattern() -> None:
    a = planted_table(300, seed=8)
    # B: the same agent whose tests fail far more often (more traces with two failures in a row)
    arrow = planted_table(300, seed=9).to_arrow()
    err = np.asarray(arrow.column("error").to_pylist())
    state = np.asarray(arrow.column("state").to_pylist())
    rng = np.random.default_rng(0)
    err = np.where(state == "test", rng.random(err.size) < 0.7, err)
    b = TraceTable.from_arrow(arrow.set_column(arrow.column_names.index("error"), "error", pa.array(err.tolist())))
    doc = compare_paths(a, b, labels=("before", "after"))
    json.dumps(doc, allow_nan=False)
    assert doc["kind"] == "tracetochain.paths.compare" and doc["labels"] == ["before", "after"]
    row = next(r for r in doc["patterns"] if r["pattern"] == "test failing ≥ 2 times in a row")
    assert row["prevalence_change"]["q_value"] < 0.05 and row["prevalence_change"]["lower"] > 0
    assert row["share"]["after"] > row["share"]["before"]
    # a corpus against itself: nothing changed
    same = compare_patterns(PathSequences.from_table(a, *a.state_labels()),
                            PathSequences.from_table(a, *a.state_labels()))
    assert same["n_changed"] == 0


def test_compare_cli_lists_changed_paths(tmp_path: Path) -> None:
    a = planted_table(150, seed=10).write(tmp_path / "a.jsonl")
    b = planted_table(150, seed=11).write(tmp_path / "b.jsonl")
    r = run_cli("compare", str(a), str(b), "--paths", "--samples", "50", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["paths"]["kind"] == "tracetochain.paths.compare" and doc["paths"]["labels"] == ["a.jsonl", "b.jsonl"]
    assert "paths" not in json.loads(run_cli("compare", str(a), str(b), "--samples", "50", "--json").stdout)
    r = run_cli("compare", str(a), str(b), "--paths", "--samples", "50")
    assert r.returncode == 0 and "path patterns from a.jsonl to b.jsonl" in r.stdout


def test_report_paths_section_same_with_and_without_engine(tmp_path: Path) -> None:
    path = planted_table(160, seed=12, tasks=40).write(tmp_path / "c.jsonl")
    docs = []
    for extra in ((), ("--engine", "local")):
        out = tmp_path / f"r{len(extra)}.json"
        r = run_cli("report", str(path), "--format", "json", "--no-audit", "--uncertainty", "none", "-q", "-o",
                    str(out), *extra)
        assert r.returncode == 0, r.stderr
        docs.append(json.loads(out.read_text(encoding="utf-8"))["paths"])
    assert docs[0] is not None and docs[0]["clustered_by_task"]
    strip = lambda d: {k: v for k, v in d.items() if k != "source"}  # noqa: E731 — the engine is named in source
    assert strip(docs[0]) == strip(docs[1])
