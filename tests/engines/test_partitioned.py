"""Partitioned ingest and counting: identical counts and chains to the in-memory path, on every engine."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from cli_runner import run_cli
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain._outcome import OutcomeCode
from tracetochain.analysis import analyze
from tracetochain.engines import Engine, LocalEngine
from tracetochain.exceptions import TraceValidationError
from tracetochain.partitioned import (
    count_partitioned,
    fit_partitioned,
    iter_partitions,
    plan_partitions,
    repartition_by_trace,
    trace_id_hashes,
)
from tracetochain.states import CategoricalStates, WardStates


def assert_same_counts(a: tt.TransitionCounts, b: tt.TransitionCounts) -> None:
    assert a.state_names == b.state_names
    for name in ("transitions", "exits_success", "exits_failure", "initial"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
        assert getattr(a, name).dtype == getattr(b, name).dtype
    assert a.n_traces == b.n_traces


def assert_same_chain(a: tt.AbsorbingChain, b: tt.AbsorbingChain) -> None:
    """Bit for bit: the JSON documents are equal, and so are the float arrays — except the sums of float usage
    values in the cost model, which partitions add in another order (equal to 1e-12; the counts are exact)."""
    da, db = a.to_dict(), b.to_dict()
    costs_a, costs_b = da["metadata"].pop("costs", None), db["metadata"].pop("costs", None)
    assert json.dumps(da, sort_keys=True) == json.dumps(db, sort_keys=True)
    for name in ("Q", "R_success", "R_failure", "pi0"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (costs_a is None) == (costs_b is None)
    if costs_a is not None:
        assert costs_a["state_names"] == costs_b["state_names"] and costs_a["visits"] == costs_b["visits"]
        assert costs_a["metrics"].keys() == costs_b["metrics"].keys()
        for metric, sa in costs_a["metrics"].items():
            sb = costs_b["metrics"][metric]
            assert sa["n"] == sb["n"], metric
            for key in ("sum", "sum_sq"):
                np.testing.assert_allclose(sa[key], sb[key], rtol=1e-12, err_msg=f"{metric} {key}")


def write_jsonl(table: pa.Table, path: Path, *, extra_lines: dict[int, str] | None = None) -> Path:
    """Records in table order (one per line), with ``extra_lines`` inserted before the given record index."""
    extra_lines = extra_lines or {}
    with path.open("w", encoding="utf-8") as fh:
        for i, rec in enumerate(table.to_pylist()):
            if i in extra_lines:
                fh.write(extra_lines[i] + "\n")
            fh.write(json.dumps({k: v for k, v in rec.items() if v is not None}) + "\n")
    return path


# ---------------------------------------------------------------------------------------------------- parity
@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
@pytest.mark.parametrize(("rows", "size"),
                         [pytest.param(1, 8000, marks=pytest.mark.slow), (700, 60_000), (10**9, 10**9)])
def test_counts_and_chain_equal_the_in_memory_path(engine: Engine, corpus: dict[str, Path], fmt: str,
                                                   rows: int, size: int) -> None:
    """Parquet: one partition per row group (115), a few, one; JSONL: 8 kB (~160 partitions), 60 kB, one."""
    path = corpus[fmt]
    whole = tt.TraceTable.read(path)
    n_parts = len(plan_partitions(path, rows_per_partition=rows, bytes_per_partition=size))
    assert (n_parts > 10) if size < 10**9 else (n_parts == 1)
    result = count_partitioned(path, engine=engine, rows_per_partition=rows, bytes_per_partition=size)
    assert result.n_partitions == n_parts
    assert result.engine == engine.name
    assert_same_counts(result.counts, tt.count_transitions(whole))
    assert result.counts.state_names[-1] == "late_state"  # seen only in the last partitions
    for kwargs in ({}, {"pseudocount": 0.0}, {"pseudocount": 0.5, "unvisited": "failure", "initial": "modal"}):
        chain = fit_partitioned(path, engine=engine, rows_per_partition=rows, bytes_per_partition=size, **kwargs)
        assert_same_chain(chain, tt.ChainEstimator(**kwargs).fit(whole).fetch_model())


@pytest.mark.slow
def test_traces_spanning_many_row_groups(engine: Engine, tmp_path: Path, corpus: dict[str, Path]) -> None:
    """Row groups of 7 rows: a 60-step trace spans 9 of them; a partition may hold no trace start at all."""
    table = pq.read_table(corpus["parquet"]).slice(0, 3000)
    cut = table.column("trace_id")[table.num_rows - 1]  # the slice cuts this trace: leave it out whole (a trace
    table = table.filter(pc.not_equal(table.column("trace_id"), cut))  # with missing steps is refused)
    path = tmp_path / "tiny_groups.parquet"
    pq.write_table(table, path, row_group_size=7)
    assert pq.ParquetFile(path).metadata.num_row_groups > 400
    whole = tt.TraceTable.read(path)
    parts = list(iter_partitions(path, rows_per_partition=1))
    assert sum(p.n_traces for p in parts) == whole.n_traces
    assert any(p.n_traces == 0 for p in parts)
    result = count_partitioned(path, engine=engine, rows_per_partition=20)
    assert_same_counts(result.counts, tt.count_transitions(whole))


def test_partitions_hold_whole_traces(corpus: dict[str, Path]) -> None:
    for fmt, kwargs in (("parquet", {"rows_per_partition": 300}), ("jsonl", {"bytes_per_partition": 20_000})):
        whole = tt.TraceTable.read(corpus[fmt])
        lengths = dict(zip(whole.trace_ids, np.diff(whole.offsets).tolist(), strict=True))
        seen: list[str] = []
        for part in iter_partitions(corpus[fmt], **kwargs):
            for tid, n in zip(part.trace_ids, np.diff(part.offsets).tolist(), strict=True):
                assert lengths[tid] == n, (fmt, tid)
            seen.extend(part.trace_ids)
        assert seen == whole.trace_ids  # each trace once, in file order


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    traces=st.lists(
        st.tuples(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=12),
                  st.sampled_from(["success", "failure", "censored", "invalid"]), st.randoms(use_true_random=False)),
        min_size=1, max_size=25),
    row_group=st.integers(1, 30), rows_per_partition=st.integers(1, 80), bytes_per_partition=st.integers(1, 3000),
)
def test_any_cut_gives_the_same_counts(traces: list, row_group: int, rows_per_partition: int,
                                       bytes_per_partition: int) -> None:
    assume(any(outcome != "invalid" for _, outcome, _ in traces))  # see test_a_corpus_without_usable_traces_is_counted
    recs = []
    for i, (states, outcome, rnd) in enumerate(traces):
        steps = list(range(len(states)))
        rnd.shuffle(steps)  # steps in any order within a contiguous trace
        recs += [{"trace_id": f"id{i}", "step_idx": j, "state": states[j], "outcome": outcome} for j in steps]
    table = pa.Table.from_pylist(recs)
    with tempfile.TemporaryDirectory() as d:
        pq_path, js_path = Path(d) / "t.parquet", Path(d) / "t.jsonl"
        pq.write_table(table, pq_path, row_group_size=row_group)
        write_jsonl(table, js_path)
        expected = tt.count_transitions(tt.TraceTable.read(pq_path))
        got_pq = count_partitioned(pq_path, rows_per_partition=rows_per_partition)
        got_js = count_partitioned(js_path, bytes_per_partition=bytes_per_partition)
    assert_same_counts(got_pq.counts, expected)
    assert_same_counts(got_js.counts, expected)
    assert got_pq.report.n_records == got_js.report.n_records == len(recs)


def test_a_corpus_without_usable_traces_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "invalid.parquet"
    pq.write_table(pa.Table.from_pylist([{"trace_id": "a", "step_idx": 0, "state": "x", "outcome": "invalid"}]), path)
    expected = tt.count_transitions(tt.TraceTable.read(path))
    assert expected.n_traces["invalid"] == 1
    assert_same_counts(count_partitioned(path).counts, expected)


@pytest.mark.slow
def test_integer_trace_ids_and_a_directory_of_parts(engine: Engine, tmp_path: Path,
                                                    corpus: dict[str, Path]) -> None:
    table = pq.read_table(corpus["parquet"])
    ids = np.asarray([int(x[1:]) for x in table.column("trace_id").to_pylist()], dtype=np.int64)
    table = table.set_column(0, "trace_id", pa.array(ids))
    folder = tmp_path / "parts"
    folder.mkdir()
    cut = int(np.flatnonzero(np.diff(ids))[len(ids) // 50])  # a trace boundary
    pq.write_table(table.slice(0, cut + 1), folder / "a.parquet", row_group_size=50)
    pq.write_table(table.slice(cut + 1), folder / "b.parquet", row_group_size=50)
    (folder / "README.txt").write_text("not data")
    whole = tt.TraceTable.from_dataframe(table)
    result = count_partitioned(folder, engine=engine, rows_per_partition=200)
    assert_same_counts(result.counts, tt.count_transitions(whole))
    assert result.report.n_records == table.num_rows
    # A pyarrow filesystem URI reads the same data.
    uri = count_partitioned(folder.resolve().as_uri(), engine=engine, rows_per_partition=200)
    assert_same_counts(uri.counts, result.counts)


# ---------------------------------------------------------------------------------------------------- states
@pytest.mark.slow
def test_fixed_state_vocabulary(engine: Engine, corpus: dict[str, Path]) -> None:
    whole = tt.TraceTable.read(corpus["parquet"])
    vocab = ["late_state", "unused", *sorted(set(whole.state_labels()[1]) - {"late_state"})]
    chain = fit_partitioned(corpus["parquet"], engine=engine, states=vocab, rows_per_partition=500)
    assert chain.state_names == tuple(vocab)
    assert_same_chain(chain, tt.ChainEstimator(states=vocab).fit(whole).fetch_model())
    with pytest.raises(TraceValidationError) as part_err:
        count_partitioned(corpus["jsonl"], engine=engine, states=vocab[2:], bytes_per_partition=30_000)
    with pytest.raises(TraceValidationError) as whole_err:
        tt.count_transitions(tt.TraceTable.read(corpus["jsonl"]), vocab[2:])
    assert str(part_err.value) == str(whole_err.value)  # same message: the label, the count and the fix


def test_fitted_state_model_predicts_per_partition(engine: Engine, corpus: dict[str, Path]) -> None:
    whole = tt.TraceTable.read(corpus["jsonl"])
    model = CategoricalStates().fit(whole).fetch_model()
    chain = fit_partitioned(corpus["jsonl"], engine=engine, states=model, bytes_per_partition=50_000)
    expected = tt.ChainEstimator(states=model.state_names).fit(model.label(whole)).fetch_model()
    assert_same_chain(chain, expected.with_metadata(states=model.to_dict()))


def test_state_estimator_is_learned_on_the_fit_half(engine: Engine, corpus: dict[str, Path]) -> None:
    """A state estimator learns on the usable traces of the fit half of the first held-out split (held out iff
    u(FNV-1a(id), seed, 0) < ½), never on held-out traces, then labels every trace — with or without the audit, so
    that a fit without the audit has the states of the audited analysis."""
    from tracetochain.featurize.rules import RuleFeaturizer
    from tracetochain.traces._hashing import fnv1a_hashes, holdout_mask

    def estimator() -> WardStates:
        return WardStates(featurizer=RuleFeaturizer(kind=True, tool=True, error=False), k_min=2, k_max=4, seed=0)

    path = corpus["parquet"]
    whole = tt.TraceTable.read(path)
    usable = whole.select_traces(whole.outcomes() != OutcomeCode.INVALID)
    chain = fit_partitioned(path, engine=engine, states=estimator(), rows_per_partition=2000)
    model = estimator().fit(usable.select_traces(~holdout_mask(fnv1a_hashes(usable.trace_id_array), 0.5, 0, 0))
                            ).fetch_model()
    expected = tt.ChainEstimator(states=model.state_names).fit(model.label(whole)).fetch_model()
    assert_same_chain(chain, expected.with_metadata(states=model.to_dict()))
    assert chain.metadata["states"]["method"] == "ward"

    res = analyze(path, engine=engine, states=estimator(), intervals=None, seed=7, n_bootstrap=19, n_permutations=19,
                  trials_permutations=99, partition_options={"rows_per_partition": 2000})
    held_out = holdout_mask(fnv1a_hashes(usable.trace_id_array), 0.5, 7, 0)
    assert 0.4 < held_out.mean() < 0.6
    fit_model = estimator().fit(usable.select_traces(~held_out)).fetch_model()
    assert res.state_model.to_dict() == fit_model.to_dict() != model.to_dict()
    expected = tt.ChainEstimator(states=fit_model.state_names).fit(fit_model.label(whole)).fetch_model()
    assert_same_chain(res.chain, expected.with_metadata(states=fit_model.to_dict()))


def _relabel_unknown(traces: tt.TraceTable, known: tuple[str, ...], model_codes: np.ndarray | None = None
                     ) -> tt.TraceTable:
    """``traces`` with every step whose label is not in ``known`` (or whose ``model_codes`` entry is out of range)
    in the state "(unseen)", on the vocabulary ``known`` + ("(unseen)",)."""
    raw, labels = traces.state_labels()
    names = (*known, "(unseen)")
    if model_codes is None:
        lookup = np.array([known.index(x) if x in known else len(known) for x in labels], dtype=np.int64)
        codes = lookup[np.asarray(raw)]
    else:
        codes = np.where((model_codes >= 0) & (model_codes < len(known)), model_codes, len(known))
    return traces.with_states(codes, names)


def test_a_category_the_state_model_never_saw_goes_to_the_unseen_state(engine: Engine,
                                                                        corpus: dict[str, Path]) -> None:
    """A fitted model that never saw "late_state" (it appears only in the last traces): those steps are counted in
    the state "(unseen)" — never dropped, never an error — and the analysis says how many there were."""
    path = corpus["parquet"]
    first = next(iter_partitions(path, rows_per_partition=2000))
    model = CategoricalStates().fit(first.select_traces(first.outcomes() != OutcomeCode.INVALID)).fetch_model()
    assert "late_state" not in model.state_names
    whole = tt.TraceTable.read(path)
    expected = tt.count_transitions(_relabel_unknown(whole, model.state_names), (*model.state_names, "(unseen)"))
    got = count_partitioned(path, engine=engine, states=model, rows_per_partition=2000)
    assert_same_counts(got.counts, expected)
    res = analyze(path, engine=engine, states=model, audit=False, intervals=None,
                  partition_options={"rows_per_partition": 2000})
    usable = whole.select_traces(whole.outcomes() != OutcomeCode.INVALID)
    n_late = int(np.count_nonzero(np.asarray(usable.state_labels()[1])[usable.state_labels()[0]] == "late_state"))
    assert n_late > 0 and res.states_document()["unseen_steps"] == n_late
    # The traces' own labels need no fitting: the vocabulary is merged across partitions.
    chain = fit_partitioned(path, states="label", rows_per_partition=2000)
    assert "late_state" in chain.state_names and "(unseen)" not in chain.state_names


# ---------------------------------------------------------------------------------------------------- errors
def test_a_trace_split_across_partitions_is_named(engine: Engine, tmp_path: Path) -> None:
    recs = [{"trace_id": f"t{i}", "step_idx": j, "state": "ab"[j % 2], "outcome": "success"}
            for i in range(40) for j in range(5)]
    recs.append({"trace_id": "t3", "step_idx": 5, "state": "a", "outcome": "success"})  # t3 again, at the end
    table = pa.Table.from_pylist(recs)
    js = write_jsonl(table, tmp_path / "split.jsonl")
    pqp = tmp_path / "split.parquet"
    pq.write_table(table, pqp, row_group_size=20)
    for path, kwargs in ((js, {"bytes_per_partition": 2000}), (pqp, {"rows_per_partition": 40})):
        with pytest.raises(TraceValidationError, match=r"trace 't3' has steps in two places") as err:
            count_partitioned(path, engine=engine, **kwargs)
        assert "repartition_by_trace" in str(err.value)
        # Read in one piece it is one trace (the table groups its steps), and the counts say so.
        single = count_partitioned(path, engine=engine, rows_per_partition=10**9, bytes_per_partition=10**9)
        assert_same_counts(single.counts, tt.count_transitions(tt.TraceTable.read(path)))
    # Without the check, the split trace's tail looks like a trace missing its first steps: an error, or with
    # on_error="skip" a counted skip — never a second trace in the counts.
    with pytest.raises(TraceValidationError, match=r"split.jsonl:201: field 'step_idx': trace 't3' starts at "):
        count_partitioned(js, bytes_per_partition=2000, check_traces=False)
    unchecked = count_partitioned(js, bytes_per_partition=2000, check_traces=False, on_error="skip")
    assert sum(unchecked.counts.n_traces.values()) == 40
    assert unchecked.report.skipped_by_reason == {"steps of the trace are missing (step_idx has a gap)": 1}


def test_repartition_by_trace_is_the_fallback(engine: Engine, tmp_path: Path, corpus: dict[str, Path]) -> None:
    table = pq.read_table(corpus["parquet"])
    rng = np.random.default_rng(5)
    shuffled = table.take(pa.array(rng.permutation(table.num_rows)))  # traces no longer contiguous
    src = tmp_path / "shuffled.parquet"
    pq.write_table(shuffled, src, row_group_size=500)
    with pytest.raises(TraceValidationError, match="has steps in two places"):
        count_partitioned(src, engine=engine, rows_per_partition=1000)
    parts = repartition_by_trace(src, tmp_path / "by_trace", 4)
    assert len(parts) == 4 and all(p.exists() for p in parts)
    ids_per_part = [set(pq.read_table(p, columns=["trace_id"]).column(0).to_pylist()) for p in parts]
    assert sum(len(s) for s in ids_per_part) == len(set().union(*ids_per_part)) == 600
    result = count_partitioned(tmp_path / "by_trace", engine=engine, by="file", states=None)
    whole = tt.count_transitions(tt.TraceTable.read(src))
    # Same counts; the state order may differ (first appearance depends on the row order), so compare by name.
    vocab = list(whole.state_names)
    fixed = count_partitioned(tmp_path / "by_trace", engine=engine, by="file", states=vocab)
    assert_same_counts(fixed.counts, whole)
    assert set(result.counts.state_names) == set(vocab)


@pytest.mark.slow
def test_bad_json_is_reported_at_its_line(engine: Engine, tmp_path: Path, corpus: dict[str, Path]) -> None:
    table = pq.read_table(corpus["parquet"])
    path = write_jsonl(table, tmp_path / "bad.jsonl", extra_lines={9000: "{not json", 9500: "", 9501: "[1, 2]"})
    with pytest.raises(TraceValidationError) as whole_err:
        tt.TraceTable.read(path)
    with pytest.raises(TraceValidationError) as part_err:
        count_partitioned(path, engine=engine, bytes_per_partition=20_000)
    assert whole_err.value.line == 9001
    assert str(part_err.value) == str(whole_err.value)
    # Skipping: the same records and traces are dropped for the same reasons, and the counts agree.
    whole = tt.TraceTable.read(path, on_error="skip")
    result = count_partitioned(path, engine=engine, bytes_per_partition=20_000, on_error="skip")
    assert_same_counts(result.counts, tt.count_transitions(whole))
    for key in ("n_records", "n_records_skipped", "n_traces", "n_traces_skipped", "skipped_by_reason"):
        assert getattr(result.report, key) == getattr(whole.report, key), key
    assert sorted(p.location for p in result.report.problems) == sorted(p.location for p in whole.report.problems)
    assert [p.location for p in result.report.problems] == [9001, 9504]


@pytest.mark.slow
def test_bad_records_in_skip_mode_drop_whole_traces(engine: Engine, tmp_path: Path,
                                                    corpus: dict[str, Path]) -> None:
    table = pq.read_table(corpus["parquet"])
    outcome = table.column("outcome").to_pylist()
    step = table.column("step_idx").to_pylist()
    for i in range(100, table.num_rows, 997):
        outcome[i] = "maybe"  # unknown outcome: the trace goes
        step[i + 1] = None  # empty step: the trace goes
    table = table.set_column(3, "outcome", pa.array(outcome)).set_column(1, "step_idx", pa.array(step, pa.int64()))
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path, row_group_size=64)
    with pytest.raises(TraceValidationError) as whole_err:
        tt.TraceTable.read(path)
    with pytest.raises(TraceValidationError) as part_err:
        count_partitioned(path, engine=engine, rows_per_partition=300)
    assert part_err.value.row == whole_err.value.row == 101  # rows are numbered in the whole file
    whole = tt.TraceTable.read(path, on_error="skip")
    result = count_partitioned(path, engine=engine, rows_per_partition=300, on_error="skip")
    assert_same_counts(result.counts, tt.count_transitions(whole))
    for key in ("n_records", "n_records_skipped", "n_traces", "n_traces_skipped", "skipped_by_reason"):
        assert getattr(result.report, key) == getattr(whole.report, key), key
    assert result.report.n_traces_skipped > 10


def test_input_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceValidationError, match="no such file"):
        plan_partitions(tmp_path / "missing.parquet")
    (tmp_path / "x.csv").write_text("trace_id\n")
    with pytest.raises(TraceValidationError, match="Parquet"):
        plan_partitions(tmp_path / "x.csv")
    with pytest.raises(TraceValidationError, match="holds no trace files"):
        plan_partitions(tmp_path)
    with pytest.raises(ValueError, match="by must be"):
        plan_partitions(tmp_path / "x.csv", by="hash")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_error"):
        count_partitioned(tmp_path / "x.csv", on_error="ignore")  # type: ignore[arg-type]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(tt.exceptions.EmptyTraceSetError):
        fit_partitioned(empty)
    with pytest.raises(TraceValidationError, match="required field 'outcome'"):
        pq.write_table(pa.table({"trace_id": ["a"], "step_idx": [0], "state": ["s"]}), tmp_path / "no.parquet")
        count_partitioned(tmp_path / "no.parquet")


def test_engine_given_by_name_and_results_render(corpus: dict[str, Path]) -> None:
    result = count_partitioned(corpus["parquet"], engine="local", rows_per_partition=3000)
    assert result.engine == "local"
    text = str(result)
    assert "600 traces counted in" in text and "(local engine)" in text
    assert "<b>Partitioned counts: 600 traces" in result._repr_html_() and "<script" not in result._repr_html_()
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["counts"]["n_traces"] == result.counts.n_traces and doc["states"] is None
    with pytest.raises(ValueError, match="unknown engine"):
        count_partitioned(corpus["parquet"], engine="spark")


def test_steps_the_state_model_cannot_place_are_counted_as_unseen(corpus: dict[str, Path]) -> None:
    """A model that places no step (every code out of range) leaves every step in "(unseen)": counted, not dropped."""
    whole = tt.TraceTable.read(corpus["parquet"])
    model = CategoricalStates().fit(whole).fetch_model()
    broken = type(model)(model.method, model.state_names, model.taxonomy, model.settings,
                         lambda t: np.full(t.n_steps, -1, np.int64))
    got = count_partitioned(corpus["parquet"], states=broken, rows_per_partition=2000).counts
    relabelled = _relabel_unknown(whole, model.state_names, np.full(whole.n_steps, -1, np.int64))
    assert_same_counts(got, tt.count_transitions(relabelled, (*model.state_names, "(unseen)")))
    unseen = got.state_names.index("(unseen)")
    assert got.transitions.sum() == got.transitions[unseen, unseen] > 0


# ---------------------------------------------------------------------------------------------------- hashing
def test_trace_id_hashes_are_fnv1a() -> None:
    def fnv(s: str) -> int:
        h = 0xCBF29CE484222325
        for b in s.encode():
            h = ((h ^ b) * 0x100000001B3) % 2**64
        return h

    ids = ["", "a", "t0000123", "ünïcødé-trace", "x" * 70, None]
    got = trace_id_hashes(pa.array(ids))
    assert got.tolist() == [fnv(s or "") for s in ids]
    chunked = pa.chunked_array([pa.array(ids[:3]), pa.array(ids[3:])])
    assert trace_id_hashes(chunked).tolist() == got.tolist()
    assert trace_id_hashes(pa.array([7, 12])).tolist() == [fnv("7"), fnv("12")]
    assert trace_id_hashes(pa.array(ids).slice(2, 2)).tolist() == got[2:4].tolist()


def test_local_engine_is_the_default(corpus: dict[str, Path]) -> None:
    a = count_partitioned(corpus["parquet"], rows_per_partition=1000)
    b = count_partitioned(corpus["parquet"], engine=LocalEngine(), rows_per_partition=1000)
    assert_same_counts(a.counts, b.counts)
    assert a.engine == "local"


def test_empty_row_groups_inside_a_trace(engine: Engine, tmp_path: Path) -> None:
    """Trace a spans row groups 0–3, two of which are empty; every cut still counts it once."""
    t = pa.table({"trace_id": ["a", "a", "a", "b", "b", "c"], "step_idx": [0, 1, 2, 0, 1, 0],
                  "state": ["x", "y", "x", "y", "y", "z"], "outcome": ["success"] * 3 + ["failure"] * 3})
    path = tmp_path / "empty_groups.parquet"
    with pq.ParquetWriter(path, t.schema) as w:
        for piece in (t.slice(0, 1), t.slice(0, 0), t.slice(1, 1), t.slice(0, 0), t.slice(2, 2), t.slice(4, 2)):
            w.write_table(piece)
    assert [pq.ParquetFile(path).metadata.row_group(i).num_rows for i in range(6)] == [1, 0, 1, 0, 2, 2]
    expected = tt.count_transitions(tt.TraceTable.read(path))
    for rows in (1, 2, 3, 100):
        assert_same_counts(count_partitioned(path, engine=engine, rows_per_partition=rows).counts, expected)


@pytest.mark.slow
@pytest.mark.dask
def test_fit_cli_on_engines_matches_in_memory(tmp_path: Path) -> None:

    path = tmp_path / "sim.parquet"
    tt.datasets.simulate_traces(tt.datasets.notation_chain(), 3000, 5).write(path)

    def r_inf(*extra: str) -> float:
        r = run_cli("fit", str(path), "--json", *extra)
        assert r.returncode == 0, r.stderr
        return float(json.loads(r.stdout)["r_inf"])

    pytest.importorskip("distributed")
    base = r_inf()
    assert r_inf("--engine", "local") == base
    assert r_inf("--engine", "dask") == base
