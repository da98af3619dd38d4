"""interval_summary: an interval for every number summarize() reports, JSON-ready, with its provenance."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.pipeline import fit_chain
from tracetochain.states import CategoricalStates
from tracetochain.uncertainty import interval_summary


@pytest.fixture(scope="module")
def fit() -> object:
    traces = tt.datasets.simulate_traces(tt.datasets.random_chain(4, seed=5, rho=0.7), 150, seed=3)
    return fit_chain(traces, states="label")


def _numbers(d: object, prefix: str = "") -> set[str]:
    """Dotted paths of every number (and list of numbers) in a summarize() document."""
    out: set[str] = set()
    if isinstance(d, dict):
        for k, v in d.items():
            out |= _numbers(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(d, list) and d and isinstance(d[0], dict):
        for v in d:
            out |= _numbers(v, f"{prefix}[]")
    elif isinstance(d, (int, float, list)) and not isinstance(d, bool):
        out.add(prefix)
    return out


@pytest.mark.parametrize("method", ["posterior", "bootstrap"])
def test_every_summarized_number_has_an_interval(fit: object, method: str) -> None:
    chain = fit.chain  # type: ignore[attr-defined]
    doc = interval_summary(fit, intervals=method, samples=200, seed=4, horizon=20, ks=(1, 3))
    text = json.dumps(doc, allow_nan=False)  # JSON-ready: no NaN anywhere
    assert doc["method"] == method and doc["confidence"] == 0.95 and doc["samples"] == 200 and doc["seed"] == 4
    assert doc["n_draws"] == 200 and "ChainEstimator" in doc["point_estimator"]
    summary = tt.summarize(chain, horizon=20, ks=(1, 3)).to_dict()
    inputs = {"n_states", "horizon", "ks", "schema_version", "step_budget.delta", "states[].name"}
    wanted = {p for p in _numbers(summary) if p not in inputs and not p.startswith("chain_metadata")}
    assert len(wanted) >= 20 and "step_budget.prop8_bound" in wanted and "states[].sensitivity" in wanted
    metrics = doc["metrics"]
    for path in sorted(wanted):
        node: object = metrics
        for part in path.replace("[]", "").split("."):
            node = node[0] if isinstance(node, list) else node  # states: check the first
            assert isinstance(node, dict) and part in node, f"no interval for {path}"
            node = node[part]
        assert isinstance(node, dict) and {"lower", "upper", "point"} <= set(node), path
    # Points are the reported numbers.
    assert metrics["r_inf"]["point"] == pytest.approx(summary["r_inf"], rel=1e-12)
    np.testing.assert_allclose(metrics["reliability"]["point"], summary["reliability"], rtol=1e-12)
    assert metrics["pass_hat_k"]["3"]["point"] == pytest.approx(summary["pass_hat_k"]["3"])
    assert metrics["step_budget"]["exact"]["point"] == summary["step_budget"]["exact"]
    assert metrics["states"][2]["failure_share"]["point"] == pytest.approx(summary["states"][2]["failure_share"])
    lo, hi = metrics["r_inf"]["lower"], metrics["r_inf"]["upper"]
    assert lo < summary["r_inf"] < hi
    assert len(metrics["reliability"]["upper"]) == 21
    assert doc["entries"]["method"] == ("beta" if method == "posterior" else "percentile")
    assert "NaN" not in text


def test_posterior_from_chain_counts_and_labelled_traces_agree(fit: object) -> None:
    chain = fit.chain  # type: ignore[attr-defined]
    a = interval_summary(chain, samples=100, seed=1)
    b = interval_summary(fit, samples=100, seed=1)
    c = interval_summary(fit.labelled, samples=100, seed=1)  # type: ignore[attr-defined]
    assert a["metrics"]["r_inf"] == b["metrics"]["r_inf"]
    assert a["metrics"]["r_inf"]["lower"] == pytest.approx(c["metrics"]["r_inf"]["lower"])


def test_bootstrap_needs_the_labelled_traces(fit: object) -> None:
    chain = fit.chain  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="labelled traces"):
        interval_summary(chain, intervals="bootstrap")
    doc = interval_summary(chain, intervals="bootstrap", traces=fit.labelled, samples=50)  # type: ignore[attr-defined]
    assert doc["metrics"]["r_inf"]["point"] == pytest.approx(chain.r_inf, rel=1e-12)
    assert doc["settings"]["path"] == "fast"


def test_bootstrap_full_needs_a_state_estimator(fit: object) -> None:
    with pytest.raises(ValueError, match="state estimator"):
        interval_summary(fit, intervals="bootstrap-full")
    doc = interval_summary(fit, intervals="bootstrap-full", states=CategoricalStates(), samples=10)
    assert doc["method"] == "bootstrap-full" and doc["settings"]["align"] == "names"


def test_undefined_metric_is_none_with_reason() -> None:
    t = tt.TraceTable.from_records([{"trace_id": f"t{i}", "step_idx": 0, "state": "a", "outcome": "failure"}
                                    for i in range(5)])
    chain = tt.ChainEstimator(pseudocount=0).fit(t).fetch_model()  # success unreachable
    doc = interval_summary(chain, samples=50)
    m = doc["metrics"]["mean_steps_given_success"]
    assert m["point"] is None and m["lower"] is None and m["n_excluded"] == 50
    assert m["point_undefined"] and m["excluded"]
    json.dumps(doc, allow_nan=False)


def test_bad_inputs(fit: object) -> None:
    with pytest.raises(ValueError, match="intervals must be"):
        interval_summary(fit, intervals="jackknife")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        interval_summary("chain.json")
    with pytest.raises(ValueError, match="confidence"):
        interval_summary(fit, confidence=95)
