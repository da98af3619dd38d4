"""compare_partitioned / `compare --engine`: two corpora of any size compared from counts, equal to the in-memory
comparison wherever both compute the same thing, identical on every engine and partitioning."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_runner import run_cli

import tracetochain as tt
from tracetochain.audit import homogeneity_test
from tracetochain.audit._homogeneity import homogeneity_from_counts
from tracetochain.compare import compare
from tracetochain.engines import Engine
from tracetochain.partitioned import compare_partitioned


def doc(c: object) -> str:
    return json.dumps(c.to_dict(), sort_keys=True)  # type: ignore[attr-defined]


@pytest.mark.slow
def test_same_comparison_on_every_engine_and_partitioning(engine: Engine, corpus: dict[str, Path],
                                                          second_corpus: Path) -> None:
    many = compare_partitioned(corpus["jsonl"], second_corpus, engine=engine, bytes_per_partition=20_000,
                               rows_per_partition=300, samples=60)
    one = compare_partitioned(corpus["parquet"], second_corpus, rows_per_partition=10**9, samples=60)
    assert doc(many) == doc(one)
    mem = compare(tt.TraceTable.read(corpus["parquet"]), tt.TraceTable.read(second_corpus), samples=60)
    assert doc(mem) == doc(one) and mem.homogeneity.method == "rao-scott"


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
    assert out["homogeneity"]["method"] == "rao-scott" and out["delta_r_inf_interval"][1] < 0


def test_homogeneity_from_counts_matches_the_trace_test_statistic(corpus: dict[str, Path],
                                                                  second_corpus: Path) -> None:
    """Oracle: scipy's log-likelihood-ratio test of each state's 2 × C table (columns seen in either group). From
    counts alone (no replicates) the test is the plain χ² sum; with the groups' bootstrap replicates each state's G²
    is divided by its Rao–Scott design effect (≥ 1)."""
    from scipy.stats import chi2_contingency

    a, b = tt.TraceTable.read(corpus["parquet"]), tt.TraceTable.read(second_corpus)
    vocab = list(dict.fromkeys([*a.state_labels()[1], *b.state_labels()[1]]))

    def rows(t: tt.TraceTable) -> np.ndarray:
        c = tt.ChainEstimator(states=vocab).fit(t).fetch_model().metadata["counts"]
        return np.column_stack([c["transitions"], c["exits_success"], c["exits_failure"]]).astype(float)

    ra, rb = rows(a), rows(b)
    got = homogeneity_from_counts(ra, rb, vocab)
    g2_total, df_total = 0.0, 0
    for i, state in enumerate(vocab):
        row = got.per_state[i]
        assert row["state"] == state
        if ra[i].sum() == 0 or rb[i].sum() == 0:
            assert row["df"] == 0 and row["p_value"] is None
            continue
        table = np.vstack([ra[i], rb[i]])
        table = table[:, table.sum(axis=0) > 0]
        g2, p, dof, _ = chi2_contingency(table, correction=False, lambda_="log-likelihood")
        assert row["g2"] == pytest.approx(g2, rel=1e-9, abs=1e-9) and row["df"] == dof
        assert row["p_value"] == pytest.approx(p, rel=1e-9, abs=1e-12)
        g2_total, df_total = g2_total + g2, df_total + dof
    assert got.g2 == pytest.approx(g2_total, rel=1e-9) and got.df == df_total and df_total > 0
    assert got.method == "chi2" and "(χ²)" in str(got) and got.to_dict()["method"] == "chi2"
    ref = homogeneity_test(a, b, states=vocab, samples=100)
    assert ref.method == "rao-scott" and ref.df == got.df
    deltas = np.array([r["design_effect"] for r in ref.per_state])
    assert (deltas >= 1.0).all()
    assert ref.g2 == pytest.approx(sum(g["g2"] / d for g, d in zip(got.per_state, deltas, strict=True)), rel=1e-9)
    assert ref.g2 <= got.g2 and ref.p_value >= got.p_value  # the correction only ever makes the test more cautious
    with pytest.raises(ValueError, match="shape"):
        homogeneity_from_counts(ra[:, :-1], rb, vocab)
