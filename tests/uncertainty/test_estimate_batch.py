"""The bootstrap's batched estimate is the chain estimator, not a second copy of it: for any stack of count vectors
and any prior setting, ``estimate_batch`` gives bit for bit the chain ``ChainEstimator`` fits to each replicate's
traces (it calls the same ``chain._prior.estimate_rows`` and ``start_distribution``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

import tracetochain as tt
from tracetochain.chain import ChainPrior, per_trace_counts
from tracetochain.uncertainty._bootstrap import estimate_batch

PRIORS = ((None, None), (1.0, None), (0.0, None), (0.3, "laplace"), (2.0, "episode"))


def resample(traces: tt.TraceTable, weights: np.ndarray) -> tt.TraceTable:
    """The traces repeated ``weights[i]`` times each, every copy under its own trace id."""
    picks = np.repeat(np.arange(weights.size), weights)
    rows = np.concatenate([np.arange(traces.offsets[i], traces.offsets[i + 1]) for i in picks])
    copy = np.repeat(np.arange(picks.size), np.diff(traces.offsets)[picks])
    table = traces.to_arrow().take(pa.array(rows))
    table = table.set_column(table.column_names.index("trace_id"), "trace_id", pa.array([f"r{k}" for k in copy]))
    return tt.TraceTable.from_arrow(table)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(n_states=st.integers(1, 5), seed=st.integers(0, 10_000), n_replicates=st.integers(1, 4),
       prior=st.sampled_from(PRIORS), unvisited=st.sampled_from(("auto", "prior", "failure")),
       initial=st.sampled_from(("empirical", "modal")))
def test_a_batch_of_replicates_is_the_estimator_on_each(n_states: int, seed: int, n_replicates: int,
                                                        prior: tuple[float | None, str | None], unvisited: str,
                                                        initial: str) -> None:
    rng = np.random.default_rng(seed)
    chain = tt.datasets.random_chain(n_states, seed)
    traces = tt.datasets.simulate_traces(chain, 40, seed=seed)
    names = chain.state_names
    pseudocount, kind = prior
    codes, labels = traces.state_labels()
    lookup = np.array([names.index(x) for x in labels], dtype=np.int64)
    per_trace = per_trace_counts(lookup[codes], traces.offsets, traces.outcomes(), n_states)
    # Each replicate: a multinomial resample of the traces, as its weight vector.
    weights = rng.multinomial(traces.n_traces, np.full(traces.n_traces, 1 / traces.n_traces), size=n_replicates)
    stack = np.asarray(per_trace.T.dot(weights.T).T, dtype=np.float64)
    estimator = tt.ChainEstimator(pseudocount=pseudocount, prior=kind, unvisited=unvisited,  # type: ignore[arg-type]
                                  initial=initial, states=names)  # type: ignore[arg-type]
    policy = ChainPrior.from_settings(pseudocount, kind).resolve_unvisited(unvisited)
    batch = estimate_batch(stack, n_states, ChainPrior.from_settings(pseudocount, kind), policy, initial)
    for b, w in enumerate(weights):
        fitted = estimator.fit(resample(traces, w)).fetch_model()
        assert_array_equal(batch["Q"][b], fitted.Q)
        assert_array_equal(batch["R_success"][b], fitted.R_success)
        assert_array_equal(batch["R_failure"][b], fitted.R_failure)
        assert_array_equal(batch["pi0"][b], fitted.pi0)
