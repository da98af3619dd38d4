"""Every family's compiled chain is a valid AbsorbingChain: JSON round trip, summary, sampling."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.models import (
    DurationModel,
    HiddenMarkovModel,
    LiftedModel,
    MarkovModel,
    MixtureModel,
    TaskClassModel,
    TraceModel,
)

FAMILIES = {
    "markov": MarkovModel,
    "lifted": lambda: LiftedModel(2),
    "duration": lambda: DurationModel(buckets=(2, 4)),
    "hmm": lambda: HiddenMarkovModel(2, n_init=1),
    "mixture": lambda: MixtureModel(2),
    "tasks-all": lambda: TaskClassModel(LiftedModel(2), 2, tilt="all"),
    "tasks-outcome": lambda: TaskClassModel(HiddenMarkovModel(2, n_init=1), 2),
}


@pytest.fixture(scope="module")
def traces() -> tt.TraceTable:
    return tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAMILIES))
def test_compiled_chain_round_trips_and_summarises(name: str, traces: tt.TraceTable) -> None:
    model: TraceModel = FAMILIES[name]().fit(traces)
    compiled = model.to_chain()
    back = tt.AbsorbingChain.from_json(compiled.chain.to_json())
    assert back.r_inf == pytest.approx(compiled.chain.r_inf, abs=1e-12)
    np.testing.assert_allclose(back.Q, compiled.chain.Q)
    doc = compiled.summary(horizon=5)
    json.dumps(doc, allow_nan=False)
    assert doc["r_inf"] == pytest.approx(compiled.chain.r_inf)
    assert np.allclose(compiled.emission.sum(axis=1), 1.0)
    # pass^1 is R∞, and pass^k never falls below the i.i.d. value
    pk = compiled.pass_hat_k([1, 2, 3])
    assert pk[0] == pytest.approx(compiled.chain.r_inf, abs=1e-12)
    assert np.all(pk >= compiled.chain.r_inf ** np.array([1, 2, 3]) - 1e-12)
    sample = model.sample(50, seed=2, trials_per_task=2)
    assert sample.n_traces == 50 and set(sample.state_labels()[1]) <= set(model.state_names_ or ())
    assert model.describe().startswith(model.label)
