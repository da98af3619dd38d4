"""``states="informative"`` on every engine: the state model learned on the fit half of the first split and applied
partition by partition gives the same chain, counts, certificate and intervals as in memory (history features are
computed per trace, and a partition holds whole traces)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from engine_parity import FAST, same

from tracetochain.analysis import analyze
from tracetochain.datasets import planted_history_traces
from tracetochain.engines import Engine


def test_informative_states_engine_parity(engine: Engine, tmp_path: Path) -> None:
    traces = planted_history_traces(500, seed=12)
    path = tmp_path / "planted.parquet"
    pq.write_table(traces.to_arrow(), path, row_group_size=400)
    memory = analyze(traces, states="informative", state_options={"seed": 2}, seed=4, samples=100, **FAST)
    parts = analyze(path, engine=engine, states="informative", state_options={"seed": 2}, seed=4, samples=100,
                    partition_options={"rows_per_partition": 800}, **FAST)
    assert parts.source["n_partitions"] > 1
    same(memory, parts)
    assert parts.state_model.to_dict() == memory.state_model.to_dict()
    assert "submit after ≥2 failing tests in a row" in parts.chain.state_names
