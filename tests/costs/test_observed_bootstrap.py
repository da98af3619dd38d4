"""The observed spend per success's episode bootstrap (``costs._analysis._bootstrap_sums``): the metrics of one cost
report share one set of resample weights, drawn in blocks of bounded memory; up to 5,000 episodes they are the
multinomial draws of every earlier release, above it the same law drawn faster."""

from __future__ import annotations

import numpy as np
import pytest

import tracetochain as tt
import tracetochain.costs._analysis as _analysis
from tracetochain.costs import CostModel, observed_costs
from tracetochain.costs._analysis import observed_costs_of

CHAIN = tt.AbsorbingChain(Q=[[0.2, 0.5, 0.1], [0.1, 0.3, 0.4], [0.2, 0.1, 0.2]], R_success=[0.0, 0.0, 0.35],
                          R_failure=[0.2, 0.2, 0.15], pi0=0, state_names=["plan", "act", "verify"])


def fitted(n: int, seed: int = 0) -> tuple[tt.TraceTable, CostModel]:
    traces = tt.datasets.simulate_traces(CHAIN, n, seed=seed, costs={
        "cost_usd": ([0.02, 0.05, 0.01], [1e-4, 4e-4, 0.0]), "tokens_in": ([1000, 3000, 500], [1e5, 4e5, 0])})
    fit = tt.fit_chain(traces)
    return fit.labelled, CostModel.from_traces(fit.labelled, fit.chain.state_names)


def former_interval(totals: np.ndarray, success: np.ndarray, n_boot: int = 2000, seed: int = 0) -> tuple[float, ...]:
    """The interval as every earlier release drew it: all the multinomial weights at once."""
    rng = np.random.default_rng(seed)
    n_t = totals.size
    W = rng.multinomial(n_t, np.full(n_t, 1.0 / n_t), size=n_boot).astype(np.float64)
    spend, wins = W @ totals, W @ success.astype(np.float64)
    ratio = spend[wins > 0] / wins[wins > 0]
    return float(np.quantile(ratio, 0.025)), float(np.quantile(ratio, 0.975))


def test_the_figures_are_those_of_one_metric_alone_and_of_earlier_releases() -> None:
    labelled, model = fitted(400)
    both = observed_costs_of(labelled, model, ["cost_usd", "tokens_in"])
    for metric, obs in both.items():
        alone = observed_costs(labelled, model, metric)
        assert obs.per_success_interval == alone.per_success_interval
        assert obs.per_success == alone.per_success and obs.n_traces == alone.n_traces
        assert obs.per_success_interval == former_interval(obs.totals, obs.success)


def test_blocks_of_replicates_keep_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights drawn a few replicates at a time are the rows of one draw of them all (to the dot product's
    rounding, which a block size can change)."""
    labelled, model = fitted(300, seed=1)
    monkeypatch.setattr(_analysis, "_BOOTSTRAP_BLOCK_CELLS", 300 * 7)  # 7 replicates a block
    blocked = observed_costs(labelled, model, "cost_usd")
    assert blocked.per_success_interval == pytest.approx(former_interval(blocked.totals, blocked.success), rel=1e-12)


def test_large_corpora_draw_the_same_law_another_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts of n uniform picks are Multinomial(n, 1/n): the two draws' intervals agree to their Monte Carlo error
    (2,000 replicates: about 3 % of the interval's half-width at each end)."""
    labelled, model = fitted(3000, seed=2)
    multinomial = observed_costs(labelled, model, "cost_usd")
    monkeypatch.setattr(_analysis, "_MULTINOMIAL_MAX_EPISODES", 100)
    picks = observed_costs(labelled, model, "cost_usd")
    lo, hi = multinomial.per_success_interval
    half = (hi - lo) / 2
    assert picks.per_success_interval != multinomial.per_success_interval  # the other path ran
    assert picks.per_success_interval[0] == pytest.approx(lo, abs=0.1 * half)
    assert picks.per_success_interval[1] == pytest.approx(hi, abs=0.1 * half)


def test_weights_never_hold_every_replicate_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 replicates × a million episodes were 16 GB of weights: each block now holds at most the cap."""
    largest = []
    real = np.bincount

    def spy(x: np.ndarray, *args: object, **kwargs: object) -> np.ndarray:
        largest.append(x.size)
        return real(x, *args, **kwargs)  # type: ignore[arg-type]

    totals = np.random.default_rng(0).gamma(2.0, 1.0, 60_000)
    success = np.random.default_rng(1).random(60_000) < 0.4
    monkeypatch.setattr(_analysis.np, "bincount", spy)
    sums = _analysis._bootstrap_sums({"cost_usd": (totals, success)}, 200, 0)
    monkeypatch.undo()
    assert max(largest) <= _analysis._BOOTSTRAP_BLOCK_CELLS
    spend, wins = sums["cost_usd"]
    ratio = spend / wins
    point = totals.sum() / success.sum()
    assert abs(np.median(ratio) - point) < 0.02 * point


def test_no_resamples_gives_the_point_without_an_interval() -> None:
    """What compare asks for (it shows the observed figure as a point): the same point, no bootstrap drawn."""
    labelled, model = fitted(300, seed=3)
    full, bare = observed_costs(labelled, model, "cost_usd"), observed_costs(labelled, model, "cost_usd", n_boot=0)
    assert bare.per_success == full.per_success and bare.mean_per_trace == full.mean_per_trace
    assert bare.per_success_interval is None and full.per_success_interval is not None
