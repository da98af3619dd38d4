"""Intervals are engine-independent: the trace bootstrap maps its replicates with ``engine.map_seeds``."""

from __future__ import annotations

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.engines import Engine

uncertainty = pytest.importorskip("tracetochain.uncertainty")


@pytest.fixture(scope="module")
def traces() -> tt.TraceTable:
    return tt.datasets.simulate_traces(tt.datasets.random_chain(4, seed=3, rho=0.75), 150, seed=2, max_steps=12)


@pytest.mark.parametrize("path", ["fast", "full"])
def test_bootstrap_intervals_are_identical_on_every_engine(engine: Engine, traces: tt.TraceTable,
                                                          path: str) -> None:
    kwargs = {"samples": 40, "seed": 9, "path": path}
    if path == "full":
        kwargs["states"] = tt.states.CategoricalStates()
    reference = uncertainty.TraceBootstrap(**kwargs).fit(traces).fetch_model()  # in-process driver
    mapped = uncertainty.TraceBootstrap(**kwargs, engine=engine).fit(traces).fetch_model()
    for name in ("Q", "R_success", "R_failure", "pi0"):
        assert np.array_equal(getattr(mapped, name), getattr(reference, name)), name
    for quantity, options in (("r_inf", {}), ("reliability", {"horizon": 10})):
        a, b = mapped.stats(quantity, **options), reference.stats(quantity, **options)
        assert (np.asarray(a.lower) == np.asarray(b.lower)).all()
        assert (np.asarray(a.upper) == np.asarray(b.upper)).all()
