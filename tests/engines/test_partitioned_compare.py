"""compare_partitioned / `compare --engine`: two corpora of any size compared from counts, equal to the in-memory
comparison wherever both compute the same thing, identical on every engine and partitioning."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_runner import run_cli

import tracetochain as tt
from tracetochain.audit import homogeneity_from_counts, homogeneity_test
from tracetochain.compare import compare
from tracetochain.engines import Engine
from tracetochain.partitioned import compare_partitioned


def doc(c: object) -> str:
    return json.dumps(c.to_dict(), sort_keys=True)  # type: ignore[attr-defined]


def test_same_comparison_on_every_engine_and_partitioning(engine: Engine, corpus: dict[str, Path],
                                                          second_corpus: Path) -> None:
    many = compare_partitioned(corpus["jsonl"], second_corpus, engine=engine, bytes_per_partition=20_000,
                               rows_per_partition=300, samples=60)
    one = compare_partitioned(corpus["parquet"], second_corpus, rows_per_partition=10**9, samples=60)
    assert doc(many) == doc(one)


def test_equals_the_in_memory_comparison_where_both_compute_the_same(corpus: dict[str, Path],
                                                                     second_corpus: Path) -> None:
    a, b = tt.TraceTable.read(corpus["parquet"]), tt.TraceTable.read(second_corpus)
    part = compare_partitioned(corpus["parquet"], second_corpus, samples=300, seed=4)
    mem = compare(a, b, samples=300, seed=4, n_permutations=99)
    assert part.chain_a.state_names == mem.chain_a.state_names
    for x, y in ((part.chain_a, mem.chain_a), (part.chain_b, mem.chain_b)):
        for name in ("Q", "R_success", "R_failure", "pi0"):
            assert np.array_equal(getattr(x, name), getattr(y, name)), name
    assert part.delta_r_inf == mem.delta_r_inf and part.delta_reliability == mem.delta_reliability
    assert part.changed_transitions == mem.changed_transitions
    assert (part.homogeneity.g2, part.homogeneity.df) == pytest.approx((mem.homogeneity.g2, mem.homogeneity.df))
    assert part.homogeneity.p_chi2 == pytest.approx(mem.homogeneity.p_chi2)
    assert part.homogeneity.method == "chi2" and mem.homogeneity.method == "permutation"
    width_p = part.delta_r_inf_interval[1] - part.delta_r_inf_interval[0]
    width_m = mem.delta_r_inf_interval[1] - mem.delta_r_inf_interval[0]
    assert width_p == pytest.approx(width_m, rel=0.3)


def test_a_worse_agent_is_called_worse(tmp_path: Path) -> None:
    good = tt.datasets.notation_chain()
    rs = good.R_success * 0.4
    bad = good.with_changes(R_success=rs, R_failure=good.R_failure + good.R_success - rs)
    pa, pb = tmp_path / "a.parquet", tmp_path / "b.parquet"
    tt.datasets.simulate_traces(good, 3000, seed=1).write(pa)
    tt.datasets.simulate_traces(bad, 3000, seed=2).write(pb)
    c = compare_partitioned(pa, pb, samples=100, names=("last week", "this week"))
    assert c.delta_r_inf_interval[1] < 0 and "less reliable" in c.verdict
    assert c.homogeneity.rejects and c.homogeneity.differing
    r = run_cli("compare", str(pa), str(pb), "--engine", "local", "--samples", "100", "--json", "--fail-if-worse")
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["homogeneity"]["method"] == "chi2" and out["delta_r_inf_interval"][1] < 0


def test_homogeneity_from_counts_matches_the_trace_test_statistic(corpus: dict[str, Path],
                                                                  second_corpus: Path) -> None:
    a, b = tt.TraceTable.read(corpus["parquet"]), tt.TraceTable.read(second_corpus)
    vocab = list(dict.fromkeys([*a.state_labels()[1], *b.state_labels()[1]]))
    ref = homogeneity_test(a, b, states=vocab, n_permutations=19)

    def rows(t: tt.TraceTable) -> np.ndarray:
        c = tt.ChainEstimator(states=vocab).fit(t).fetch_model().metadata["counts"]
        return np.column_stack([c["transitions"], c["exits_success"], c["exits_failure"]]).astype(float)

    got = homogeneity_from_counts(rows(a), rows(b), vocab)
    assert got.g2 == pytest.approx(ref.g2) and got.df == ref.df and got.p_value == pytest.approx(ref.p_chi2)
    assert "χ² p" in str(got) and got.to_dict()["p_permutation"] is None
    with pytest.raises(ValueError, match="shape"):
        homogeneity_from_counts(rows(a)[:, :-1], rows(b), vocab)
