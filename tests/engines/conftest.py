"""Engine fixtures: every engine-sensitive test runs on the local engine and on a Dask local cluster.

The Dask cluster runs its two workers as threads of the test process (``processes=False``: fast, no pickling);
one test in ``test_dask.py`` uses worker processes. Dask tests are marked ``dask`` and skipped when
``distributed`` is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tracetochain import datasets
from tracetochain.engines import Engine, LocalEngine


@pytest.fixture(scope="session")
def dask_engine() -> Iterator[Engine]:
    pytest.importorskip("distributed")
    from tracetochain.engines import DaskEngine

    with DaskEngine(n_workers=2, threads_per_worker=1, processes=False) as engine:
        yield engine


@pytest.fixture(params=["local", pytest.param("dask", marks=pytest.mark.dask)])
def engine(request: pytest.FixtureRequest) -> Engine:
    if request.param == "local":
        return LocalEngine()
    return request.getfixturevalue("dask_engine")  # type: ignore[no-any-return]


def simulated_table(n_traces: int = 600, seed: int = 11) -> pa.Table:
    """A simulated corpus with everything that makes partitioned counting hard.

    Traces straddle row groups (and some span several), steps are stored out of order within each trace, ~5% of
    traces are invalid, long traces are censored, a state appears only in the last traces (so the vocabulary must
    be merged across partitions), and each step has step_kind/tool_name for rule-feature state models.
    """
    chain = datasets.random_chain(6, seed=seed, rho=0.95)
    table = datasets.simulate_traces(chain, n_traces, seed=seed, max_steps=60).to_arrow()
    rng = np.random.default_rng(seed)
    trace = np.asarray(pc.cast(pc.utf8_slice_codeunits(table.column("trace_id"), 1), pa.int64()))
    state = table.column("state").to_numpy(zero_copy_only=False).astype(object)
    late = trace >= n_traces - 20
    state[late & (state == state[0])] = "late_state"
    outcome = table.column("outcome").to_numpy(zero_copy_only=False).astype(object)
    invalid = rng.random(n_traces) < 0.05
    outcome[invalid[trace]] = "invalid"
    # Steps of each trace in a random order (traces stay contiguous): the table sorts them back.
    order = np.lexsort((rng.random(trace.size), trace))
    table = pa.table({
        "trace_id": table.column("trace_id"),
        "step_idx": table.column("step_idx"),
        "state": pa.array(state, pa.string()),
        "outcome": pa.array(outcome, pa.string()),
        "step_kind": pa.array(np.where(rng.random(trace.size) < 0.5, "tool", "llm"), pa.string()),
        "tool_name": pa.array(state, pa.string()),
    }).take(pa.array(order))
    return table


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The simulated corpus as multi-row-group Parquet (row groups of 101 rows) and as JSONL."""
    from tracetochain import TraceTable

    root = tmp_path_factory.mktemp("corpus")
    table = simulated_table()
    parquet = root / "traces.parquet"
    pq.write_table(table, parquet, row_group_size=101)
    jsonl = root / "traces.jsonl"
    # Written in file order (TraceTable.write would sort the steps).
    import json

    with jsonl.open("w", encoding="utf-8") as fh:
        for rec in table.to_pylist():
            fh.write(json.dumps(rec) + "\n")
    assert TraceTable.read(parquet).n_traces == TraceTable.read(jsonl).n_traces
    return {"parquet": parquet, "jsonl": jsonl}


@pytest.fixture(scope="session")
def second_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another corpus of the same kind (different seed, 500 traces) as Parquet: the B of comparisons."""
    path = tmp_path_factory.mktemp("second") / "b.parquet"
    pq.write_table(simulated_table(n_traces=500, seed=23), path, row_group_size=97)
    return path
