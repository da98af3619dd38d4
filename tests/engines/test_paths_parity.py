"""`analyze_paths` on every engine (local, and a Dask cluster when installed) gives the numbers of the corpus in
memory: the same candidates, counts, intervals, p- and q-values and examples, whatever the partitioning."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from studies.insight_paths import simulate
from tracetochain.analysis import analyze_paths
from tracetochain.engines import Engine


def test_paths_same_on_every_engine(engine: Engine, tmp_path: Path) -> None:
    traces = simulate("null-tasks", 200, np.random.default_rng(3))  # tasks repeat, error runs, several states
    path = traces.write(tmp_path / "c.jsonl")
    memory = analyze_paths(traces).to_dict()
    parted = analyze_paths(path, engine=engine, partition_options={"bytes_per_partition": 30_000})
    assert parted.source["n_partitions"] > 1 and memory["clustered_by_task"]
    doc = parted.to_dict()
    for key in memory:
        if key != "source":
            assert json.dumps(doc[key], sort_keys=True) == json.dumps(memory[key], sort_keys=True), key
