"""ChainEnsemble.stats: the batched built-ins equal the per-chain methods; exclusions are counted, never NaN."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.exceptions import ChainValidationError, UndefinedMetricError
from tracetochain.uncertainty import ChainEnsemble, DirichletPosterior, QuantityStats
from tracetochain.uncertainty._ensemble import BUILTINS


@pytest.fixture(scope="module")
def ensemble() -> ChainEnsemble:
    traces = tt.datasets.simulate_traces(tt.datasets.random_chain(5, seed=2, rho=0.8), 150, seed=4)
    chain = tt.ChainEstimator().fit(traces).fetch_model()
    return DirichletPosterior(samples=60, seed=1).fit(chain).fetch_model().ensemble


KWARGS: dict[str, dict[str, Any]] = {
    "reliability": {"horizon": 12}, "success_pmf": {"horizon": 12}, "failure_pmf": {"horizon": 12},
    "survival": {"horizon": 12}, "residual": {"horizon": 12}, "success_conditional_cdf": {"horizon": 12},
    "pass_at_k": {"k": [1, 2, 5]}, "pass_hat_k": {"k": 3}, "step_budget": {"delta": 0.02},
    "step_budget_bound": {"delta": 0.02},
}


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_builtin_equals_the_chain_method_on_every_draw(ensemble: ChainEnsemble, name: str) -> None:
    """Each batched built-in reproduces AbsorbingChain's own computation on each draw (and on the reference)."""
    kw = KWARGS.get(name, {})
    s = ensemble.stats(name, return_samples=True, **kw)
    assert s.n_samples == ensemble.n_samples and s.samples is not None
    spec = BUILTINS[name]
    for i in (0, 17, 59):
        expected = np.asarray(spec.on_chain(ensemble.chain(i), {**spec.params, **kw}), dtype=float)
        np.testing.assert_allclose(s.samples[i], expected, rtol=1e-9, atol=1e-12, err_msg=f"{name} draw {i}")
    ref = np.asarray(spec.on_chain(ensemble.reference, {**spec.params, **kw}), dtype=float)
    np.testing.assert_array_equal(np.asarray(s.point), ref)


def test_summary_statistics_are_percentiles_of_the_draws(ensemble: ChainEnsemble) -> None:
    s = ensemble.stats("r_inf", confidence=0.8, return_samples=True)
    x = s.samples
    assert x is not None
    assert s.lower == pytest.approx(np.quantile(x, 0.1)) and s.upper == pytest.approx(np.quantile(x, 0.9))
    assert s.mean == pytest.approx(x.mean()) and s.std == pytest.approx(x.std(ddof=1))
    assert s.confidence == 0.8 and s.method == "posterior"
    assert "ChainEstimator" in s.point_estimator


def test_band_is_elementwise_and_element_matches(ensemble: ChainEnsemble) -> None:
    band = ensemble.stats("reliability", horizon=20)
    assert isinstance(band.lower, np.ndarray) and band.lower.shape == (21,)
    assert np.all(np.diff(band.upper) >= -1e-12)  # R(d) non-decreasing ⇒ so are its quantiles
    one = band.element(20)
    assert one.lower == band.lower[20] and one.point == band.point[20]


def test_callable_gives_the_same_as_the_builtin(ensemble: ChainEnsemble) -> None:
    a = ensemble.stats("mean_steps_given_success")
    b = ensemble.stats(lambda c: c.mean_steps_given_success())
    assert (a.lower, a.upper, a.mean) == pytest.approx((b.lower, b.upper, b.mean), rel=1e-9)
    c = ensemble.stats(lambda c, horizon: c.reliability(horizon), horizon=5)
    np.testing.assert_allclose(c.upper, ensemble.stats("reliability", horizon=5).upper, rtol=1e-9)


def test_whatif_delta_plugs_in_as_a_callable(ensemble: ChainEnsemble) -> None:
    def fallback_gain(c: tt.AbsorbingChain) -> float:
        moved = 0.1 * c.R_failure
        return c.with_changes(R_success=c.R_success + moved, R_failure=c.R_failure - moved).r_inf - c.r_inf

    s = ensemble.stats(fallback_gain)
    assert s.quantity == "fallback_gain" and 0 < s.lower < s.point < s.upper


def _two_state_ensemble() -> ChainEnsemble:
    """Draw 1 can never succeed (R⊕ = 0 everywhere): E[T | success] is undefined there."""
    ref = tt.AbsorbingChain([[0.5, 0.2], [0.1, 0.6]], [0.2, 0.1], [0.1, 0.2], [1.0, 0.0], ["a", "b"])
    Q = np.array([[[0.5, 0.2], [0.1, 0.6]], [[0.5, 0.2], [0.1, 0.6]], [[0.4, 0.3], [0.2, 0.5]]])
    rs = np.array([[0.2, 0.1], [0.0, 0.0], [0.2, 0.2]])
    rf = 1.0 - Q.sum(axis=2) - rs
    return ChainEnsemble(ref, {"Q": Q, "R_success": rs, "R_failure": rf}, method="test")


def test_undefined_draws_are_excluded_and_counted_never_nan() -> None:
    ens = _two_state_ensemble()
    s = ens.stats("mean_steps_given_success")
    assert s.n_samples == 2 and s.n_excluded == 1
    assert list(s.excluded.values()) == [1] and "success unreachable" in next(iter(s.excluded))
    assert np.isfinite([s.mean, s.lower, s.upper]).all()
    json.dumps(s.to_dict(), allow_nan=False)
    # The same through a callable raising UndefinedMetricError.
    c = ens.stats(lambda ch: ch.mean_steps_given_success())
    assert c.n_excluded == 1 and c.lower == pytest.approx(s.lower)
    # R∞ itself is defined on every draw (it is 0 on draw 1).
    assert ens.stats("r_inf").n_excluded == 0


def test_all_draws_excluded_gives_none_not_nan() -> None:
    ref = tt.AbsorbingChain([[0.5]], [0.0], [0.5], 0)
    ens = ChainEnsemble(ref, [ref, ref], method="test")
    s = ens.stats("mean_steps_given_success")
    assert s.n_samples == 0 and s.mean is None and s.lower is None
    assert s.point is None and "undefined" in (s.point_undefined or "")
    d = s.to_dict()
    assert d["lower"] is None and d["n_excluded"] == 2
    json.dumps(d, allow_nan=False)
    assert "no interval" in str(s)


def test_non_absorbing_draws_are_excluded() -> None:
    ref = tt.AbsorbingChain([[0.5, 0.5], [0.0, 0.5]], [0.0, 0.25], [0.0, 0.25], 0, ["a", "b"])
    Q = np.array([[[0.5, 0.5], [0.0, 0.5]], [[1.0, 0.0], [0.0, 0.5]]])  # draw 1: a loops on itself forever
    rs = np.array([[0.0, 0.25], [0.0, 0.25]])
    ens = ChainEnsemble(ref, {"Q": Q, "R_success": rs, "R_failure": rs})
    s = ens.stats("r_inf")
    assert s.n_samples == 1 and any("non-absorbing" in k for k in s.excluded)
    assert ens.stats(lambda c: c.r_inf).n_excluded == 1
    assert ens.stats("reliability", horizon=4).n_excluded == 1  # no solve needed, still not a chain
    assert ens.stats("Q").n_samples == 2  # raw entries need no solve


def test_str_format() -> None:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 200, seed=1)
    chain = tt.ChainEstimator().fit(traces).fetch_model()
    ens = DirichletPosterior(samples=2000).fit(chain).fetch_model().ensemble
    text = str(ens.stats("r_inf"))
    assert text.endswith("(95%, posterior, 2000 draws)")
    head = text.split(" (")[0]
    point, lo, hi = (float(x) for x in head.replace("[", "").replace("]", "").replace(",", "").split())
    assert lo < point < hi and len(head.split()[0].split(".")[1]) == 3
    assert "reliability" in str(ens.stats("reliability", horizon=30)) and "…" in str(ens.stats("reliability",
                                                                                                  horizon=30))
    assert "<b>r_inf (95%" in ens.stats("r_inf")._repr_html_()
    assert "<table>" in ens.stats("reliability", horizon=3)._repr_html_()
    assert "2000 chains" in str(ens) and "ChainEnsemble" in ens._repr_html_()


def test_unknown_quantity_and_bad_arguments(ensemble: ChainEnsemble) -> None:
    with pytest.raises(ValueError, match="unknown quantity"):
        ensemble.stats("r_infinity")
    with pytest.raises(TypeError, match="needs horizon"):
        ensemble.stats("reliability")
    with pytest.raises(TypeError, match="unexpected"):
        ensemble.stats("r_inf", horizon=3)
    with pytest.raises(ValueError, match="horizon"):
        ensemble.stats("reliability", horizon=-1)
    with pytest.raises(ValueError, match="k must"):
        ensemble.stats("pass_at_k", k=0)
    with pytest.raises(ValueError, match="confidence"):
        ensemble.stats("r_inf", confidence=95)
    assert set(ChainEnsemble.quantities()) == set(BUILTINS)


def test_constructor_from_chains_and_validation() -> None:
    ref = tt.datasets.notation_chain()
    other = ref.with_changes(R_success=[0.15, 0.2, 0.3], R_failure=[0.05, 0.1, 0.1])
    ens = ChainEnsemble(ref, [ref, other], method="custom", seed=3)
    assert len(ens) == 2 and ens.chain(1).R_success[0] == pytest.approx(0.15)
    assert ens.point_estimator == "the reference chain as given"
    with pytest.raises(ValueError, match="at least one"):
        ChainEnsemble(ref, [])
    bad = {"Q": ref.Q[None] * 1.1, "R_success": ref.R_success[None], "R_failure": ref.R_failure[None]}
    with pytest.raises(ChainValidationError, match="draw 0"):
        ChainEnsemble(ref, bad)
    with pytest.raises(ChainValidationError, match="shapes"):
        ChainEnsemble(ref, {"Q": ref.Q, "R_success": ref.R_success, "R_failure": ref.R_failure})
    renamed = tt.AbsorbingChain(ref.Q, ref.R_success, ref.R_failure, 0, ["x", "y", "z"])
    with pytest.raises(ChainValidationError, match="align the states"):
        ChainEnsemble(ref, [renamed])
    with pytest.raises(IndexError):
        ens.chain(2)


def test_callable_with_inconsistent_shape_is_an_error(ensemble: ChainEnsemble) -> None:
    calls = {"n": 0}

    def ragged(c: tt.AbsorbingChain) -> np.ndarray:
        calls["n"] += 1
        return np.zeros(calls["n"] % 2 + 1)

    with pytest.raises(ValueError, match="same shape"):
        ensemble.stats(ragged)


def test_point_undefined_is_reported() -> None:
    ref = tt.AbsorbingChain([[0.5]], [0.0], [0.5], 0)
    ok = tt.AbsorbingChain([[0.5]], [0.25], [0.25], 0)
    s = ChainEnsemble(ref, [ok, ok]).stats("mean_steps_given_success")
    assert s.point is None and s.n_samples == 2 and s.mean == pytest.approx(2.0)

    def boom(c: tt.AbsorbingChain) -> float:
        raise UndefinedMetricError("never defined")

    t = ChainEnsemble(ref, [ok]).stats(boom)
    assert t.point_undefined == "never defined" and t.excluded == {"never defined": 1}


def test_quantity_stats_to_dict_is_json_ready(ensemble: ChainEnsemble) -> None:
    s = ensemble.stats("sensitivity_Q", return_samples=True)
    d = s.to_dict(include_samples=True)
    text = json.dumps(d, allow_nan=False)
    assert '"method": "posterior"' in text and len(d["samples"]) == ensemble.n_samples
    assert isinstance(s, QuantityStats) and s.shape == (5, 5)
    assert s.width is not None and np.all(np.asarray(s.width) >= 0)
