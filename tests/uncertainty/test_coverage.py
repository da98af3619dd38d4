"""Coverage of the 95% intervals for R∞ and R(10) on chains with a known truth (issue 5 acceptance, small version).

The full study (≥ 200 replicates per cell, n ∈ {50, 200, 1000}, two chains) is ``benchmarks/coverage_study.py``; its
figures are in ``benchmarks/results/coverage.json``. Here fewer replicates R are run, so the acceptance band 90–98%
is widened by three binomial standard errors on each side:

    band(R) = [0.90 − 3·√(0.90·0.10/R), 0.98 + 3·√(0.98·0.02/R)]

(R = 120 → [0.818, 1.0]; R = 300 → [0.848, 1.0]). Seeds are fixed, so each test is deterministic; a method whose
intervals were, e.g., half as wide as they should be (coverage ≈ 0.66) fails every one of them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _uq_generators import hetero_chain

import tracetochain as tt
from tracetochain.uncertainty import ChainEnsemble, DirichletPosterior, TraceBootstrap


def band(n_reps: int) -> tuple[float, float]:
    return 0.90 - 3 * math.sqrt(0.9 * 0.1 / n_reps), min(1.0, 0.98 + 3 * math.sqrt(0.98 * 0.02 / n_reps))


def coverage(chain: tt.AbsorbingChain, n_traces: int, n_reps: int, method: str, seed: int = 0
             ) -> tuple[float, float, float, float]:
    """(coverage of R∞, coverage of R(10), mean width R∞, mean width R(10)) over ``n_reps`` simulated corpora."""
    truth_inf, truth_10 = chain.r_inf, float(chain.reliability(10)[10])
    hits = np.zeros(2)
    widths = np.zeros(2)
    for r in range(n_reps):
        rng = np.random.default_rng(np.random.SeedSequence([seed, n_traces, r]))
        traces = tt.datasets.simulate_traces(chain, n_traces, seed=rng)
        ens: ChainEnsemble
        if method == "posterior":
            fitted = tt.ChainEstimator(states=chain.state_names).fit(traces).fetch_model()
            ens = DirichletPosterior(samples=1000, seed=r).fit(fitted).fetch_model().ensemble
        else:
            ens = TraceBootstrap(samples=200, seed=r, state_names=chain.state_names).fit(traces).fetch_model()
        a = ens.stats("r_inf")
        b = ens.stats("reliability", horizon=10).element(10)
        for j, (s, truth) in enumerate(((a, truth_inf), (b, truth_10))):
            assert s.lower is not None and s.upper is not None
            hits[j] += s.lower <= truth <= s.upper
            widths[j] += s.upper - s.lower
    return hits[0] / n_reps, hits[1] / n_reps, widths[0] / n_reps, widths[1] / n_reps


def test_band_formula() -> None:
    assert band(120) == pytest.approx((0.8178, 1.0), abs=1e-4)
    assert band(10_000)[0] == pytest.approx(0.891, abs=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["posterior", "bootstrap"])
def test_coverage_notation_chain_n200(method: str) -> None:
    lo, hi = band(120)
    cov_inf, cov_10, w_inf, w_10 = coverage(tt.datasets.notation_chain(), 200, 120, method)
    assert lo <= cov_inf <= hi and lo <= cov_10 <= hi
    assert 0.09 < w_inf < 0.17 and 0.09 < w_10 < 0.17  # ≈ 0.13 at n = 200 (study)


@pytest.mark.slow
def test_undercovering_intervals_would_fail() -> None:
    """The check can fail: intervals at a nominal 50% cover far less than the band asks."""
    chain = tt.datasets.notation_chain()
    lo, _ = band(120)
    hits = 0
    for r in range(120):
        traces = tt.datasets.simulate_traces(chain, 200, seed=np.random.default_rng([1, r]))
        fitted = tt.ChainEstimator().fit(traces).fetch_model()
        s = DirichletPosterior(samples=400, seed=r, confidence=0.5).fit(fitted).fetch_model().ensemble.stats(
            "r_inf")
        hits += s.lower <= chain.r_inf <= s.upper  # type: ignore[operator]
    assert hits / 120 < lo


@pytest.mark.slow
@pytest.mark.parametrize("method", ["posterior", "bootstrap"])
@pytest.mark.parametrize("n_traces", [50, 200, 1000])
def test_coverage_random_chain(method: str, n_traces: int) -> None:
    """A random 6-state chain with spread π0 and heterogeneous exits; 300 replicates per cell."""
    lo, hi = band(300)
    cov_inf, cov_10, w_inf, _ = coverage(hetero_chain(6, 7), n_traces, 300, method, seed=3)
    assert lo <= cov_inf <= hi and lo <= cov_10 <= hi
    assert w_inf < 2.2 / math.sqrt(n_traces)  # widths shrink like 1/√n (≈ 1.9/√n in the study)
