"""Issue acceptance: the full SWE-bench artifact corpus (479 traces, 29,504 steps), every step clustered."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.pipeline import fit_chain


@pytest.fixture(scope="module")
def corpus(shared_data: Path) -> tt.TraceTable:
    return tt.read_traces(shared_data / "tracetochain-artifact" / "swebench_real" / "corpus.json")


def test_shell_vocabulary_ward_clusters_every_step(corpus: tt.TraceTable) -> None:
    assert (corpus.n_traces, corpus.n_steps) == (479, 29_504)
    result = fit_chain(corpus, states="ward", vocabulary="shell", features="kind,tool", k_min=2, k_max=10)
    model = result.states
    print(model.describe())  # the taxonomy, shown with pytest -s
    assert model.settings["n_steps"] == 29_504 and model.settings["path"] == "exact"
    assert sum(s.n_steps for s in model.taxonomy) == 29_504
    # With categorical features every category is its own pure state at the silhouette optimum (k = 10).
    assert model.n_states == 10
    sizes = {s.name: s.n_steps for s in model.taxonomy}
    # The shell vocabulary reads cat/head/tail/awk as VIEW and hostname/pwd as INSPECT (docs/vocabularies.md); the
    # artifact's `PYTHONPATH=/testbed` and bare `sed`/`timeout` tokens hide their command (OTHER).
    assert sizes == {"EXECUTE (100%)": 9927, "EDIT (100%)": 6735, "VIEW (100%)": 6161, "SEARCH (100%)": 3617,
                     "VCS (100%)": 1016, "SUBMIT (100%)": 958, "FILEOP (100%)": 695, "NONE (100%)": 243,
                     "OTHER (100%)": 116, "INSPECT (100%)": 36}
    np.testing.assert_array_equal(model.predict(corpus), model.fit_labels)
    chain = result.chain
    assert chain.metadata["states"]["method"] == "ward"
    assert chain.metadata["n_traces"] == {"success": 324, "failure": 155, "censored": 0, "invalid": 0}
    assert 0.6 < chain.r_inf < 0.7


@pytest.mark.slow
def test_category_plus_depth_is_exact_on_all_steps(corpus: tt.TraceTable) -> None:
    """The paper's cat+depth features on all 479 traces (the authors had to sub-sample to 160)."""
    result = fit_chain(corpus, states="ward", vocabulary="shell", features="kind,tool,hindsight-depth", k_min=2,
                       k_max=10)
    model = result.states
    assert model.settings["path"] == "exact" and model.settings["n_unique_rows"] > 10_000
    assert model.n_states == 8
    names = set(model.state_names)
    # Six pure action states, as in the paper's SS10 taxonomy, plus a mixed late state.
    for pure in ("VIEW @early (100%)", "EDIT @mid (100%)", "EXECUTE @mid (100%)", "SEARCH @mid (100%)",
                 "SUBMIT @late (100%)", "VCS @late (100%)"):
        assert pure in names
