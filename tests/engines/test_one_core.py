"""One core: a corpus in memory is one partition of the same analysis, so the chain, the certificate and the
intervals are identical, bit for bit, in memory, on the local engine and on Dask, for any partitioning and any
reader format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from engine_parity import FAST, same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.analysis import analyze
from tracetochain.compare import compare
from tracetochain.engines import Engine, LocalEngine
from tracetochain.report import build_report


@pytest.mark.slow
@pytest.mark.parametrize("intervals", ["posterior", "bootstrap"])
def test_memory_local_and_dask_give_the_same_analysis(engine: Engine, corpus: dict[str, Path], intervals: str) -> None:
    whole = tt.TraceTable.read(corpus["parquet"])
    mem = analyze(whole, intervals=intervals, samples=60, seed=3, **FAST)  # type: ignore[arg-type]
    part = analyze(corpus["jsonl"], engine=engine, intervals=intervals, samples=60, seed=3,  # type: ignore[arg-type]
                   partition_options={"bytes_per_partition": 20_000}, **FAST)
    assert part.source["n_partitions"] > 10
    same(mem, part)
    pq_part = analyze(corpus["parquet"], engine=engine, intervals=intervals, samples=60, seed=3,  # type: ignore[arg-type]
                      partition_options={"rows_per_partition": 500}, **FAST)
    same(mem, pq_part)


@pytest.mark.slow
def test_the_report_document_is_the_same(corpus: dict[str, Path]) -> None:
    whole = tt.TraceTable.read(corpus["parquet"])
    a = build_report(analyze(whole, samples=100, seed=1, **FAST), horizon=30)
    b = build_report(analyze(corpus["jsonl"], engine="local", samples=100, seed=1,
                             partition_options={"bytes_per_partition": 30_000}, **FAST), horizon=30)
    for key in ("chain", "metrics", "intervals", "certificate", "empirical", "output_status", "bottlenecks",
                "states", "thin_evidence"):
        da, db = a[key], b[key]
        if key == "certificate":
            da = {k: v for k, v in da.items() if k != "settings"}
            db = {k: v for k, v in db.items() if k != "settings"}
        if key == "intervals":
            da = {k: v for k, v in da.items() if k != "settings"}
            db = {k: v for k, v in db.items() if k != "settings"}
        assert json.dumps(da, sort_keys=True) == json.dumps(db, sort_keys=True), key


@pytest.mark.slow
def test_learned_states_are_learned_on_the_fit_half_wherever_read(corpus: dict[str, Path]) -> None:
    whole = tt.TraceTable.read(corpus["parquet"])
    opts = {"features": "kind,tool", "k_min": 2, "k_max": 4}
    mem = analyze(whole, states="ward", state_options=opts, intervals=None, **FAST)
    part = analyze(corpus["parquet"], engine="local", states="ward", state_options=opts, intervals=None,
                   partition_options={"rows_per_partition": 400}, **FAST)
    same(mem, part)
    assert mem.state_model is not None and mem.state_model.method == "ward"


@pytest.mark.slow
def test_compare_is_the_same_in_memory_and_on_engines(engine: Engine, corpus: dict[str, Path],
                                                       second_corpus: Path) -> None:
    a, b = tt.TraceTable.read(corpus["parquet"]), tt.TraceTable.read(second_corpus)
    mem = compare(a, b, samples=60, seed=4)
    part = compare(corpus["jsonl"], second_corpus, engine=engine, samples=60, seed=4,
                   partition_options={"bytes_per_partition": 25_000})
    da, db = mem.to_dict(), part.to_dict()
    assert json.dumps(da, sort_keys=True) == json.dumps(db, sort_keys=True)


@pytest.mark.slow
def test_any_reader_format_goes_through_an_engine(tmp_path: Path) -> None:
    """Formats other than the canonical table are read on the driver and shipped as one partition."""
    src = Path(tt.datasets.example_path())
    mem = analyze(tt.read_traces(src), intervals="bootstrap", samples=40, **FAST)
    eng = analyze(src, engine="local", intervals="bootstrap", samples=40, **FAST)
    same(mem, eng)
    rows = tt.read_traces(src).to_arrow()
    csv = tmp_path / "t.csv"
    import pyarrow.csv as pacsv

    pacsv.write_csv(rows.drop_columns([c for c in rows.column_names if rows.schema.field(c).type == pa.null()]),
                    csv)
    same(mem, analyze(csv, engine="local", intervals="bootstrap", samples=40, **FAST))


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10_000), st.integers(50, 400), st.integers(1, 6))
def test_random_corpora_random_seeds_random_cuts(tmp_path: Path, seed: int, rows: int, group: int) -> None:
    chain = tt.datasets.random_chain(4, seed=seed, rho=0.8)
    table = tt.datasets.simulate_traces(chain, 150, seed=seed, max_steps=25)
    path = tmp_path / f"c{seed}-{rows}-{group}.parquet"
    pq.write_table(table.to_arrow(), path, row_group_size=max(7, rows // group))
    mem = analyze(table, intervals="bootstrap", samples=30, seed=seed, **FAST)
    part = analyze(path, engine=LocalEngine(), intervals="bootstrap", samples=30, seed=seed,
                   partition_options={"rows_per_partition": rows}, **FAST)
    same(mem, part)
    np.testing.assert_array_equal(mem.summary.boot, part.summary.boot)


@pytest.mark.slow
def test_cli_audit_gives_one_verdict_with_and_without_engine(tmp_path: Path, corpus: dict[str, Path]) -> None:
    from typer.testing import CliRunner

    from tracetochain.cli import app

    runner = CliRunner()
    args = ["audit", str(corpus["parquet"]), "--json", "--ks-samples", "19", "--samples", "0"]
    a = runner.invoke(app, args)
    b = runner.invoke(app, [*args, "--engine", "local"])
    assert a.exit_code == 0, a.output
    assert b.exit_code == 0, b.output
    da, db = json.loads(a.stdout), json.loads(b.stdout)  # stderr names the detected reader
    for doc in (da, db):
        assert doc.pop("settings")["audit"]["n_bootstrap"] == 19
    assert da == db


def test_partition_options_on_a_format_read_whole_are_reported_not_dropped() -> None:
    src = Path(__file__).parents[1] / "data" / "readers" / "swe_agent" / "mini_run"  # read whole by its reader
    with pytest.warns(UserWarning, match=r"partition_options \['rows_per_partition'\] do not apply"):
        res = analyze(src, engine="local", intervals=None, partition_options={"rows_per_partition": 10}, **FAST)
    assert res.source["n_partitions"] == 1
