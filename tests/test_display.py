"""How estimators and results show themselves (``tracetochain._display``): parameter reprs, one number rule, escaped
HTML, and DataFrames holding the same values the objects carry."""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
import pytest

import tracetochain as tt
from tracetochain._display import (
    Display,
    EstimatorDisplay,
    ResultDisplay,
    Table,
    fmt_amount,
    fmt_interval,
    fmt_number,
    params_repr,
)
from tracetochain._outcome import OutcomeCode
from tracetochain.exceptions import TraceToChainError

HOSTILE = '<script>alert("x")</script>'


# ---------------------------------------------------------------------------------------------------- numbers
@pytest.mark.parametrize(("value", "digits", "expected"), [
    (0.625, 3, "0.625"), (0.625, 4, "0.6250"), (0.0, 3, "0.000"), (1.0, 2, "1.00"),
    (None, 3, "—"), (float("nan"), 3, "—"), (float("inf"), 3, "—"), (-float("inf"), 3, "—"),
    (3.1e-5, 3, "3.1e-05"), (0.0009, 3, "9.0e-04"), (0.001, 3, "0.001"), (-2e-7, 4, "-2.0e-07"),
    (12, 3, "12"), (np.int64(7), 3, "7"), (np.float32(0.5), 3, "0.500"), (2.5e7, 3, "2.500e+07"),
    (123456.789, 1, "123456.8"), (True, 3, "True"),
])
def test_one_number_rule(value: Any, digits: int, expected: str) -> None:
    assert fmt_number(value, digits) == expected


def test_a_nonzero_number_never_prints_as_zero() -> None:
    for digits in (1, 2, 3, 4, 6):
        for x in (10.0 ** -k for k in range(1, 12)):
            text = fmt_number(x, digits)
            assert float(text) != 0.0, (x, digits, text)


def test_signed_interval_and_amount_variants() -> None:
    assert fmt_number(0.0234, signed=True) == "+0.023" and fmt_number(-0.0234, signed=True) == "-0.023"
    assert fmt_interval(0.1, 0.2) == "[0.100, 0.200]" and fmt_interval(None, 1.0) == "[no interval]"
    assert fmt_amount(0.45563, "USD") == "$0.4556" and fmt_amount(2500.0, "USD") == "$2,500"
    assert fmt_amount(12345.4, "tokens") == "12,345 tokens" and fmt_amount(float("nan"), "s") == "—"


# ---------------------------------------------------------------------------------------------------- estimators
def _estimators() -> list[Any]:
    from tracetochain import models

    out: list[Any] = [tt.ChainEstimator(), tt.ChainEstimator(pseudocount=1.0, states=["a", "b"]),
                      tt.DirichletPosterior(samples=50), tt.TraceBootstrap(samples=20, seed=3),
                      tt.WardStates(featurizer=tt.RuleFeaturizer(tool=False)), tt.CategoricalStates(),
                      tt.RuleFeaturizer(), tt.TextFeaturizer(), models.MarkovModel(), models.LiftedModel(order=3),
                      models.HiddenMarkovModel(n_states=2), models.MixtureModel(n_classes=3),
                      models.DurationModel(), models.TaskClassModel(models.MarkovModel())]
    return out


@pytest.mark.parametrize("estimator", _estimators(), ids=lambda e: type(e).__name__)
def test_estimator_repr_names_every_parameter(estimator: Any) -> None:
    assert isinstance(estimator, EstimatorDisplay)
    text = repr(estimator)
    assert text.startswith(type(estimator).__name__ + "(") and " object at 0x" not in text
    params = estimator.get_params()
    assert params and list(params) == list(type(estimator)._param_names())
    for name in params:
        assert f"{name}=" in text, name
    assert all(len(line) <= 100 for line in text.splitlines()), text
    html = estimator._repr_html_()
    assert "<table>" in html and all(f"<td>{name}</td>" in html for name in params)


def test_estimator_repr_evaluates_back_to_the_same_parameters() -> None:
    from tracetochain import ChainEstimator, DirichletPosterior, TraceBootstrap  # noqa: F401 (names for eval)

    for est in (tt.ChainEstimator(pseudocount=0.5, unvisited="failure", states=["plan", "act"]),
                tt.DirichletPosterior(confidence=0.9, samples=10, seed=4),
                tt.TraceBootstrap(samples=30, by="task", seed=None)):
        again = eval(repr(est))
        assert again.get_params() == est.get_params()


def test_set_params_changes_the_fit_and_refuses_unknown_names() -> None:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 200, seed=0)
    est = tt.ChainEstimator()
    assert est.set_params(pseudocount=0) is est and repr(est).startswith("ChainEstimator(pseudocount=0,")
    fitted = est.fit(traces).fetch_model()
    assert fitted.r_inf == pytest.approx(float(np.mean(traces.outcomes() == OutcomeCode.SUCCESS)))
    with pytest.raises(ValueError, match=r"no parameter 'alpha'.*pseudocount"):
        est.set_params(alpha=1)


def test_long_values_are_shortened_and_nested_estimators_indented() -> None:
    text = repr(tt.ChainEstimator(states=[f"state-{i}" for i in range(200)]))
    assert "state-199" not in text and "..." in text
    nested = repr(tt.WardStates(featurizer=tt.RuleFeaturizer()))
    assert "\n" in nested and all(len(line) <= 100 for line in nested.splitlines())
    assert params_repr("X", {"a": 1}) == "X(a=1)"


# ---------------------------------------------------------------------------------------------------- results
@pytest.fixture(scope="module")
def hostile() -> dict[str, Any]:
    """Every kind of result, computed from traces whose state names are HTML."""
    chain = tt.datasets.notation_chain()
    names = (HOSTILE, "act & <b>bold</b>", "verify\"'><img src=x onerror=alert(1)>")
    chain = tt.AbsorbingChain(chain.Q, chain.R_success, chain.R_failure, chain.pi0, state_names=names)
    traces = tt.datasets.simulate_traces(chain, 300, seed=1)
    other = tt.datasets.simulate_traces(chain, 300, seed=2)
    result = tt.analyze(traces, n_bootstrap=39, n_permutations=39, samples=100)
    fitted = result.chain
    from tracetochain.compare import compare
    from tracetochain.whatif import Reroute

    out: dict[str, Any] = {
        "summary": tt.summarize(fitted, horizon=20),
        "chain": fitted,
        "analysis": result,
        "certificate": result.certificate,
        "intervals": result.intervals(horizon=20),
        "ensemble": result.ensemble,
        "quantity": result.ensemble.stats("expected_visits"),
        "counts": tt.count_transitions(traces),
        "posterior": tt.DirichletPosterior(samples=100).fit(fitted).fetch_model(),
        "comparison": compare(traces, other, samples=50),
        "whatif": tt.what_if(fitted, [Reroute(HOSTILE, 0.1)]),
        "bottlenecks": tt.bottlenecks(fitted),
    }
    for name, layer in result.certificate.layers.items():
        detail = layer.detail[0] if isinstance(layer.detail, (list, tuple)) and layer.detail else layer.detail
        if isinstance(detail, ResultDisplay):
            out[f"layer:{name}"] = detail
    return out


def test_every_result_escapes_hostile_state_names_in_html(hostile: dict[str, Any]) -> None:
    assert {"layer:r_inf", "layer:timing", "layer:order"} <= set(hostile)
    for key, result in hostile.items():
        html = result._repr_html_()
        assert "<script" not in html and "<img" not in html and "<b>bold" not in html, key
        if key in ("summary", "chain", "analysis", "counts", "posterior", "intervals", "bottlenecks", "whatif",
                   "comparison"):
            assert "&lt;script&gt;" in html, key


def test_every_result_prints_converts_and_never_shows_nan(hostile: dict[str, Any]) -> None:
    for key, result in hostile.items():
        assert isinstance(result, ResultDisplay), key
        text = str(result)
        assert text and "nan" not in text.lower().replace("nano", ""), key
        assert " object at 0x" not in repr(result) and len(repr(result)) < 400, key
        for name in result.frame_names():
            frame = result.to_frame(name)
            assert len(frame.columns) >= 2, (key, name)


def test_summary_frames_hold_the_exact_values(hostile: dict[str, Any]) -> None:
    s = hostile["summary"]
    states = s.to_frame()  # the default table: per-state metrics
    assert list(states["state"]) == [m.name for m in s.states]
    np.testing.assert_array_equal(states["failure_share"].to_numpy(), [m.failure_share for m in s.states])
    np.testing.assert_array_equal(states["expected_visits"].to_numpy(), [m.expected_visits for m in s.states])
    pass_k = s.to_frame("pass_k")
    assert list(pass_k["k"]) == s.ks and list(pass_k["pass_hat_k"]) == s.pass_hat_k
    curve = s.to_frame("reliability")
    assert list(curve["reliability"]) == s.reliability and list(curve["d"]) == list(range(s.horizon + 1))
    summary = dict(zip(*s.to_frame("summary").to_dict("list").values(), strict=True))
    assert summary["R∞ (eventual success)"] == s.r_inf
    # The text rounds; the frame does not.
    assert f"{s.r_inf:.4f}" in str(s) and repr(s.r_inf) not in str(s)


def test_interval_and_certificate_frames_match_their_documents(hostile: dict[str, Any]) -> None:
    iv = hostile["intervals"]
    frame = iv.to_frame()
    row = frame[frame["quantity"] == "r_inf"].iloc[0]
    assert row["point"] == iv["metrics"]["r_inf"]["point"] and row["lower"] == iv["metrics"]["r_inf"]["lower"]
    hat2 = frame[(frame["quantity"] == "pass_hat_k") & (frame["parameter"] == "k=2")].iloc[0]
    assert hat2["upper"] == iv["metrics"]["pass_hat_k"]["2"]["upper"]
    band = iv.to_frame("reliability")
    assert list(band["upper"]) == iv["metrics"]["reliability"]["upper"]
    cert = hostile["certificate"]
    layers = cert.to_frame("layers")
    doc = cert.to_dict()["layers"]
    for _, r in layers.iterrows():
        p = doc[r["layer"]]["p_value"]
        assert (p is None and (r["p_value"] is None or math.isnan(r["p_value"]))) or r["p_value"] == p
    outputs = cert.to_frame("outputs")
    assert dict(zip(outputs["output"], outputs["status"], strict=True)) == {
        k: v["status"] for k, v in cert.to_dict()["outputs"].items()}


def test_polars_backend_and_unknown_tables(hostile: dict[str, Any]) -> None:
    pl = pytest.importorskip("polars")
    s = hostile["summary"]
    frame = s.to_frame("states", backend="polars")
    assert isinstance(frame, pl.DataFrame) and frame["state"].to_list() == [m.name for m in s.states]
    with pytest.raises(ValueError, match=r"no table 'nope'.*'states'"):
        s.to_frame("nope")
    with pytest.raises(ValueError, match="backend must be"):
        s.to_frame(backend="spark")


def test_to_frame_without_pandas_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now raises ImportError
    summary = tt.summarize(tt.datasets.notation_chain(), horizon=5)
    with pytest.raises(TraceToChainError, match=r"needs pandas.*pip install 'tracetochain\[pandas\]'"):
        summary.to_frame()


def test_tables_render_text_and_html_from_the_same_rows() -> None:
    t = Table("t", ("name", "p"), tuple((f"s{i}", 1.0 / (i + 1)) for i in range(100)))
    d = Display("title", kind="Kind", fields=(("x", None), ("y", 2.5)), tables=(t,))
    text = d.text()
    assert text.splitlines()[0] == "Kind: title" and "  x  —" in text and "… 40 more rows" in text
    assert d.html().count("<tr>") == 2 + 1 + 60 and "40 more rows" in d.html()
    with pytest.raises(ValueError, match="row 0 has 1 cells for 2 columns"):
        Table("bad", ("a", "b"), (("x",),))
