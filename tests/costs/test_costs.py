"""The cost model and the cost figures of a fitted chain: estimation from steps and from episode totals, the
sufficient statistics, intervals, budgets, the observed counterparts, and the shared mini-swe-agent runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.costs import (
    CostModel,
    cost_budget_curve,
    cost_report,
    observed_costs,
    step_cap_costs,
    summarize_costs,
)
from tracetochain.costs._report import cost_certification
from tracetochain.exceptions import SchemaVersionError

MINI_RUN = Path("swebench-verified-mini-swe-agent-gemini-3-pro/swebench_results/20251118_gemini-3-pro-74pct")
TRUE_CHAIN = tt.AbsorbingChain(Q=[[0.2, 0.5, 0.1], [0.1, 0.3, 0.4], [0.2, 0.1, 0.2]], R_success=[0.0, 0.0, 0.35],
                               R_failure=[0.2, 0.2, 0.15], pi0=0, state_names=["plan", "act", "verify"])
COST_MEAN = np.array([0.02, 0.05, 0.01])
COST_VAR = np.array([1e-4, 4e-4, 0.0])


def simulated(n: int = 3000, seed: int = 0, chain: tt.AbsorbingChain = TRUE_CHAIN) -> tt.TraceTable:
    return tt.datasets.simulate_traces(chain, n, seed=seed, costs={"cost_usd": (COST_MEAN, COST_VAR),
                                                                   "tokens_in": ([1000, 3000, 500], [1e5, 4e5, 0])})


# ------------------------------------------------------------------------------------------------ the model


def test_per_visit_estimates_and_sufficient_statistics() -> None:
    traces = simulated()
    model = CostModel.from_traces(traces, TRUE_CHAIN.state_names)
    assert model.available == ("cost_usd", "tokens_in")
    assert set(model.absent) == {"tokens", "tokens_out", "seconds", "api_calls"}
    pv = model.per_visit("cost_usd")
    assert pv.source == "steps" and not pv.imputed.any()
    assert np.all(np.abs(pv.mean - COST_MEAN) < 4 * pv.std_error + 1e-12)
    assert pv.variance[2] == pytest.approx(0.0, abs=1e-15)  # a fixed cost has no spread
    x = traces.to_arrow().column("cost_usd").to_numpy()
    codes, names = traces.state_labels()
    for i, name in enumerate(TRUE_CHAIN.state_names):
        vals = x[codes == names.index(name)]
        assert pv.mean[i] == pytest.approx(vals.mean(), rel=1e-12)
        assert pv.variance[i] == pytest.approx(vals.var(ddof=1), rel=1e-9, abs=1e-15)
        assert pv.n[i] == vals.size


def test_statistics_add_up_over_partitions() -> None:
    traces = simulated(600, seed=3)
    whole = CostModel.from_traces(traces)
    half = traces.n_traces // 2
    first = CostModel.from_traces(traces.select_traces(np.arange(half)))
    second = CostModel.from_traces(traces.select_traces(np.arange(half, traces.n_traces)))
    merged = first.merge(second)
    assert set(merged.state_names) == set(whole.state_names)
    order = np.array([merged.state_names.index(s) for s in whole.state_names])
    np.testing.assert_array_equal(whole.visits, merged.visits[order])
    for metric in whole.available:
        a, b = whole.metrics[metric], merged.metrics[metric]
        np.testing.assert_array_equal(a.n, b.n[order])
        np.testing.assert_allclose(a.total, b.total[order], rtol=1e-12)
        np.testing.assert_allclose(a.total_sq, b.total_sq[order], rtol=1e-12)
        np.testing.assert_allclose(whole.per_visit(metric).mean,
                                   merged.per_visit(metric, whole.state_names).mean, rtol=1e-12)


def test_round_trip_and_schema_checks() -> None:
    model = CostModel.from_traces(simulated(200))
    doc = json.loads(json.dumps(model.to_dict(), allow_nan=False))
    back = CostModel.from_dict(doc)
    np.testing.assert_array_equal(back.per_visit("cost_usd").mean, model.per_visit("cost_usd").mean)
    with pytest.raises(SchemaVersionError, match="schema_version"):
        CostModel.from_dict({**doc, "schema_version": 99})
    with pytest.raises(SchemaVersionError, match="not a tracetochain cost model"):
        CostModel.from_dict({"kind": "other"})


def test_empty_cells_beside_values_cost_nothing_and_episodes_without_values_are_left_out() -> None:
    records = [
        # a turn's usage sits on its first step; the second step of the turn is empty: it cost nothing extra
        {"trace_id": "a", "step_idx": 0, "state": "x", "outcome": "success", "cost_usd": 0.4},
        {"trace_id": "a", "step_idx": 1, "state": "y", "outcome": "success"},
        # an episode with no usage at all is unknown, not free
        {"trace_id": "b", "step_idx": 0, "state": "x", "outcome": "failure"},
        {"trace_id": "b", "step_idx": 1, "state": "y", "outcome": "failure"},
        {"trace_id": "c", "step_idx": 0, "state": "x", "outcome": "failure", "cost_usd": 0.2},
    ]
    model = CostModel.from_traces(tt.TraceTable.from_records(records))
    st = model.metrics["cost_usd"]
    assert st.n.tolist() == [2, 1] and st.total.tolist() == [pytest.approx(0.6), 0.0]
    assert (st.traces_with_values, st.traces_without_values) == (2, 1)
    assert any("1 of 3 episodes have no dollars" in f for f in model.findings("cost_usd"))


def test_seconds_from_end_times_or_gaps_and_negative_durations_counted() -> None:
    records = [
        {"trace_id": "a", "step_idx": 0, "state": "x", "outcome": "success", "t_start": 10.0, "t_end": 12.0},
        {"trace_id": "a", "step_idx": 1, "state": "y", "outcome": "success", "t_start": 13.0},
        {"trace_id": "a", "step_idx": 2, "state": "x", "outcome": "success", "t_start": 20.0},
        {"trace_id": "b", "step_idx": 0, "state": "x", "outcome": "failure", "t_start": 5.0, "t_end": 4.0},
    ]
    model = CostModel.from_traces(tt.TraceTable.from_records(records))
    st = model.metrics["seconds"]
    # x: 2 s (t_end) ; y: 7 s (gap to the next start); the last x of "a" has neither; b's x is negative
    assert st.n.tolist() == [1, 1] and st.total.tolist() == [2.0, 7.0]
    text = " ".join(model.findings("seconds"))
    assert "1 step durations have no end time" in text and "1 negative step durations" in text


def test_no_cost_data_says_so_and_names_the_reader() -> None:
    traces = tt.datasets.simulate_traces(TRUE_CHAIN, 50, seed=1)
    fit = tt.fit_chain(traces)
    doc = cost_report(fit, intervals=None)
    assert doc["available"] is False and doc["metrics"] == {}
    assert "no cost data" in doc["reason"]
    model = CostModel.from_dict({**CostModel.from_traces(traces).to_dict(), "source_format": "tau-bench"})
    assert "only the simulated user's cost" in model.absence_reason()
    bare = tt.AbsorbingChain(TRUE_CHAIN.Q, TRUE_CHAIN.R_success, TRUE_CHAIN.R_failure, 0)
    doc = cost_report(bare, intervals=None)
    assert doc["available"] is False and "carries no cost model" in doc["reason"]


def test_imputed_states_get_the_pooled_law_and_are_named() -> None:
    records = [
        {"trace_id": "a", "step_idx": 0, "state": "x", "outcome": "success", "cost_usd": 0.4},
        {"trace_id": "b", "step_idx": 0, "state": "x", "outcome": "failure", "cost_usd": 0.2},
    ]
    model = CostModel.from_traces(tt.TraceTable.from_records(records))
    pv = model.per_visit("cost_usd", ("x", "never-seen"))
    assert pv.imputed.tolist() == [False, True]
    assert pv.mean[1] == pytest.approx(0.3)


# ------------------------------------------------------------------------------------------------ totals route


def test_costs_from_episode_totals_by_nonnegative_least_squares() -> None:
    """Only episode totals (as SWE-agent's model_stats): the per-visit means are recovered by NNLS on the visit
    counts, and the report says it took that route."""
    traces = simulated(4000, seed=5)
    table = traces.to_pandas()
    totals = table.groupby("trace_id", sort=False)["cost_usd"].sum()
    table["total_cost_usd"] = table["trace_id"].map(totals)
    table = table.drop(columns=["cost_usd", "tokens_in"])
    only_totals = tt.TraceTable.from_dataframe(table)
    model = CostModel.from_traces(only_totals, TRUE_CHAIN.state_names)
    assert model.available == ("cost_usd",)
    pv = model.per_visit("cost_usd")
    assert pv.source == "trace totals" and pv.covariance is not None
    assert np.all(np.abs(pv.mean - COST_MEAN) < 4 * pv.std_error)
    assert np.all(pv.std_error < 0.004)
    assert any("non-negative least squares" in f for f in model.findings("cost_usd"))
    # the same figures as from the steps, within sampling error
    fit = tt.fit_chain(only_totals)
    s = summarize_costs(fit.chain, model, "cost_usd")
    exact = TRUE_CHAIN.accumulated_cost(COST_MEAN).mean
    assert s.mean == pytest.approx(exact, rel=0.05)


def test_totals_check_against_step_values() -> None:
    traces = simulated(100, seed=2)
    table = traces.to_pandas()
    table["total_cost_usd"] = table["trace_id"].map(table.groupby("trace_id")["cost_usd"].sum() * 2.0)
    model = CostModel.from_traces(tt.TraceTable.from_dataframe(table))
    assert any("add up to 50.0% of them" in f for f in model.findings("cost_usd"))


# ------------------------------------------------------------------------------------------------ figures


def test_mle_chain_reproduces_the_observed_spend_exactly() -> None:
    """Unsmoothed MLE, empirical π0, no censoring: expected visits are the observed visits per episode, so
    E[C] is the observed mean spend per episode and E[C]/R∞ the observed spend per success, exactly. (E[C | S] is
    no such identity: the model's success probabilities from each state are not the observed ones.)"""
    traces = simulated(500, seed=4)
    fit = tt.fit_chain(traces, pseudocount=0)
    model = CostModel.from_traces(fit.labelled, fit.chain.state_names)
    s = summarize_costs(fit.chain, model, "cost_usd")
    obs = observed_costs(fit.labelled, model, "cost_usd")
    assert s.mean == pytest.approx(obs.mean_per_trace, rel=1e-10)
    assert s.per_success == pytest.approx(obs.per_success, rel=1e-10)


def test_summary_figures_and_sentences() -> None:
    fit = tt.fit_chain(simulated(1000, seed=6))
    model = CostModel.of_chain(fit.chain)
    assert model is not None  # fit_chain attaches the cost model to the chain
    s = summarize_costs(fit.chain, model, "cost_usd")
    assert s.per_success == pytest.approx(s.mean / fit.chain.r_inf)
    assert s.failed_share == pytest.approx(s.spend_on_failure / s.mean)
    assert sum(st.spend for st in s.states) == pytest.approx(s.mean)
    assert sum(st.failed_spend_share for st in s.states) == pytest.approx(1.0)
    text = " ".join(s.sentences())
    assert "One success costs $" in text and "goes to attempts that fail" in text
    json.dumps(s.to_dict(), allow_nan=False)


def test_budget_curve_brackets_and_listed_points() -> None:
    fit = tt.fit_chain(simulated(800, seed=7))
    model = CostModel.of_chain(fit.chain)
    assert model is not None
    curve = cost_budget_curve(fit.chain, model, "cost_usd")
    lo, hi = np.array(curve.lower), np.array(curve.upper)
    assert (lo <= hi).all() and (np.diff(lo) >= -1e-12).all()
    assert curve.error_bound < 0.01 and curve.residual < 0.01
    assert hi[-1] <= fit.chain.r_inf + 1e-12
    low, up = curve.at(0.1)
    assert low <= up and curve.at(1e9)[1] == pytest.approx(fit.chain.r_inf)
    target = 0.5 * fit.chain.r_inf
    b = curve.budget_for(target)
    assert b is not None and curve.at(b)[0] >= target


def test_step_cap_costs() -> None:
    fit = tt.fit_chain(simulated(800, seed=8))
    model = CostModel.of_chain(fit.chain)
    assert model is not None
    target = 0.9 * fit.chain.r_inf
    cap = step_cap_costs(fit.chain, model, "cost_usd", target=target, horizon=300)
    assert cap.steps_for_target is not None
    rel = fit.chain.reliability(cap.steps_for_target)
    assert rel[-1] >= target > rel[-2]
    assert cap.per_success_uncapped == pytest.approx(summarize_costs(fit.chain, model, "cost_usd").per_success)
    unreachable = step_cap_costs(fit.chain, model, "cost_usd", target=0.999, horizon=50)
    assert unreachable.steps_for_target is None and "stays below" in (unreachable.note or "")


# ------------------------------------------------------------------------------------------------ intervals


@pytest.mark.slow
@pytest.mark.parametrize("method", ["posterior", "bootstrap"])
def test_intervals_cover_the_truth(method: str) -> None:
    """On a simulated chain with known per-state costs the interval of each headline figure holds the true value."""
    traces = simulated(2000, seed=9)
    fit = tt.fit_chain(traces)
    doc = cost_report(fit, intervals=method, samples=400 if method == "posterior" else 150, seed=1)
    entry = doc["metrics"]["cost_usd"]
    truth = TRUE_CHAIN.accumulated_cost(COST_MEAN, COST_VAR)
    r = TRUE_CHAIN.r_inf
    want = {"mean": truth.mean, "per_success": truth.mean / r, "mean_given_success": truth.mean_success / r,
            "mean_given_failure": truth.mean_failure / (1 - r), "failed_share": truth.mean_failure / truth.mean}
    for key, value in want.items():
        iv = entry["intervals"][key]
        assert iv["lower"] <= value <= iv["upper"], (key, iv, value)
        assert iv["lower"] <= iv["point"] <= iv["upper"]
    assert entry["agreement"]["observed_inside_interval"] is True
    json.dumps(doc, allow_nan=False)


@pytest.mark.slow
def test_bootstrap_cost_draws_move_with_the_resample() -> None:
    """Paired bootstrap: the per-visit means are recomputed on each replicate, so their spread matches their
    standard errors."""
    traces = simulated(1500, seed=10)
    fit = tt.fit_chain(traces)
    doc = cost_report(fit, intervals="bootstrap", samples=300, seed=2)
    per_visit = doc["metrics"]["cost_usd"]["intervals"]["states"]["per_visit_mean"]
    se = CostModel.of_chain(fit.chain).per_visit("cost_usd").std_error  # type: ignore[union-attr]
    for i, iv in enumerate(per_visit):
        width = iv["upper"] - iv["lower"]
        if se[i] > 0:
            assert 0.6 < width / (2 * 1.96 * se[i]) < 1.5
        else:
            assert width == pytest.approx(0.0, abs=1e-15)


def test_certification_follows_the_layers() -> None:
    assert cost_certification(None)["status"] == "untested"
    assert cost_certification({"certified": ["R_inf", "mean_steps"], "withheld": []})["status"] == "certified"
    partial = cost_certification({"certified": ["R_inf"], "withheld": ["R(d)", "mean_steps"]})
    assert partial["status"] == "withheld" and "timing" in partial["reason"]
    assert partial["rests_on"] == ["timing", "r_inf"]

    class WithStatus:
        def status(self, output: str) -> str:
            assert output == "costs"
            return "certified"

    assert cost_certification(WithStatus())["status"] == "certified"


# ------------------------------------------------------------------------------------------------ real runs


@pytest.mark.slow
def test_mini_swe_agent_observed_cost_per_success_inside_the_chain_interval(shared_data: Path) -> None:
    """Acceptance: on the shared mini-swe-agent runs the observed dollars per success lie inside the chain's
    interval of E[C]/R∞ (and the report shows both)."""
    run = shared_data / MINI_RUN
    if not run.exists():
        pytest.skip("the mini-swe-agent sample is not in ../shared/data")
    from tracetochain._display import fmt_amount
    from tracetochain.analysis import analyze
    from tracetochain.report import build_report, render_html

    traces = tt.read_traces(run)
    result = analyze(traces, states="categorical", state_options={"vocabulary": "shell"}, audit=False,
                     samples=500)
    report = build_report(result)
    doc = report["costs"]
    assert doc["available"] and doc["primary"] == "cost_usd"
    entry = doc["metrics"]["cost_usd"]
    assert entry["observed"]["per_success"] == pytest.approx(0.6223057561475409, rel=1e-9)  # $113.88 / 183
    agreement = entry["agreement"]
    assert agreement["observed_inside_interval"] is True, agreement
    assert 0.85 < agreement["model_over_observed"] < 1.15
    for metric in ("tokens", "seconds"):
        assert doc["metrics"][metric]["agreement"]["observed_inside_interval"] is True, metric
    assert math.isfinite(entry["budget"]["error_bound"]) and entry["budget"]["error_bound"] < 0.01
    # the report shows both: the chain's dollars per success (with its interval) beside the observed ones
    page = render_html(report)
    table = page[page.index('id="cost-table"'):]
    table = table[: table.index("</table>")]
    assert fmt_amount(entry["summary"]["per_success"], "USD") in table
    assert fmt_amount(entry["observed"]["per_success"], "USD") in table
    assert fmt_amount(entry["intervals"]["per_success"]["lower"], "USD") in table


# ------------------------------------------------------------------------------------------------ integration


def test_chain_file_carries_the_cost_model_and_old_files_still_load(tmp_path: Path) -> None:
    fit = tt.fit_chain(simulated(300, seed=11))
    path = tmp_path / "chain.json"
    fit.chain.to_json(path)
    back = tt.AbsorbingChain.from_json(path)
    model = CostModel.of_chain(back)
    assert model is not None and model.available == ("cost_usd", "tokens_in")
    doc = cost_report(back, intervals="posterior", samples=200)
    assert doc["available"] and "observed" not in doc["metrics"]["cost_usd"]  # no traces: no observed figures
    assert doc["metrics"]["cost_usd"]["intervals"]["per_success"]["lower"] is not None
    # a chain document written before costs were recorded (no metadata["costs"]) loads and says so
    old = json.loads(path.read_text())
    del old["metadata"]["costs"]
    legacy = tt.AbsorbingChain.from_dict(old)
    assert CostModel.of_chain(legacy) is None
    assert "carries no cost model" in cost_report(legacy, intervals=None)["reason"]


def test_partitioned_fit_carries_the_same_cost_model(tmp_path: Path) -> None:
    traces = simulated(400, seed=12)
    path = tmp_path / "traces.jsonl"
    traces.write(path)
    in_memory = tt.fit_chain(tt.read_traces(path))
    chain = tt.fit_partitioned(path, rows_per_partition=500)
    a, b = CostModel.of_chain(in_memory.chain), CostModel.of_chain(chain)
    assert a is not None and b is not None and a.state_names == b.state_names
    for metric in a.available:
        np.testing.assert_array_equal(a.metrics[metric].n, b.metrics[metric].n)
        np.testing.assert_allclose(a.metrics[metric].total, b.metrics[metric].total, rtol=1e-12)
        np.testing.assert_allclose(a.metrics[metric].total_sq, b.metrics[metric].total_sq, rtol=1e-12)


def test_what_if_reports_the_cost_per_success_beside_delta_r_inf() -> None:
    from tracetochain.uncertainty import DirichletPosterior
    from tracetochain.whatif import EdgeCost, Reroute, what_if

    fit = tt.fit_chain(simulated(1500, seed=13))
    chain = fit.chain
    free = what_if(chain, [Reroute("act", 0.1)])
    assert free.costs is not None and free.costs["metric"] == "cost_usd"
    # rescuing failures for free makes each success cheaper
    assert free.delta_r_inf > 0 and free.costs["delta_per_success"] < 0
    ens = DirichletPosterior(samples=300, seed=0).fit(chain).fetch_model().ensemble
    priced = what_if(chain, [Reroute("act", 0.1)], ensemble=ens, edge_costs=[EdgeCost("act", "success", 1.0)])
    c = priced.costs
    assert c is not None and c["edited"]["per_attempt"] > free.costs["edited"]["per_attempt"]
    # the exact added spend: z_act × (moved mass) × price
    moved = 0.1 * chain.R_failure[chain.state_index("act")]
    z_act = chain.expected_visits()[chain.state_index("act")]
    edited = free.costs["edited"]["per_attempt"]
    assert c["edited"]["per_attempt"] == pytest.approx(edited + z_act * moved * 1.0, rel=1e-9)
    iv = c["delta_per_success_interval"]
    assert iv["lower"] <= c["delta_per_success"] <= iv["upper"]
    assert "cost_usd per success" in str(priced)
    json.dumps(priced.to_dict(), allow_nan=False)


def test_compare_reports_delta_cost_per_success_with_an_interval() -> None:
    """Two configurations with known costs: B's visits to `act` cost twice as much. The interval of
    Δ dollars per success holds the true difference, and is clear of 0."""
    from tracetochain.compare import compare

    a = simulated(1500, seed=14)
    b = tt.datasets.simulate_traces(TRUE_CHAIN, 1500, seed=15,
                                    costs={"cost_usd": (COST_MEAN * [1, 2, 1], COST_VAR * [1, 4, 1])})
    r = compare(a, b, samples=150)
    (row,) = [c for c in r.costs if c["metric"] == "cost_usd"]
    truth_a = TRUE_CHAIN.accumulated_cost(COST_MEAN).mean / TRUE_CHAIN.r_inf
    truth_b = TRUE_CHAIN.accumulated_cost(COST_MEAN * [1, 2, 1]).mean / TRUE_CHAIN.r_inf
    lo, hi = row["delta_interval"]
    assert lo <= truth_b - truth_a <= hi and lo > 0
    assert row["observed_b"] > row["observed_a"]
    assert "cost_usd per success" in str(r) and "`cost_usd` per success" in r.to_markdown()
    json.dumps(r.to_dict(), allow_nan=False)


@pytest.mark.slow
@pytest.mark.parametrize("matplotlib", [True, False])
def test_report_document_and_html_show_the_costs(matplotlib: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import xml.etree.ElementTree as ET

    import tracetochain.report._plots as plots
    from tracetochain.analysis import analyze
    from tracetochain.report import build_report, render_html

    if matplotlib:
        pytest.importorskip("matplotlib")
    else:
        monkeypatch.setattr(plots, "have_matplotlib", lambda: False)
    records = simulated(600, seed=16).to_pandas()
    records.loc[records["state"] == "act", "state"] = "<script>alert(1)</script>"  # trace text is untrusted
    doc = build_report(analyze(tt.TraceTable.from_dataframe(records), audit=False, samples=200))
    costs = doc["costs"]
    assert costs["available"] and costs["certification"]["status"] == "untested"
    page = render_html(doc)
    assert 'id="costs"' in page and 'id="budget-plot"><svg' in page and "per success (observed)" in page
    assert "<script>alert" not in page
    section = page[page.index('id="budget-plot">') + len('id="budget-plot">'):]
    ET.fromstring(section[: section.index("</svg>") + len("</svg>")])  # a well-formed SVG
    assert "cost_usd" in doc.to_markdown()
    json.dumps(doc, allow_nan=False)


@pytest.mark.slow
def test_cli_fit_metrics_and_whatif_report_costs(tmp_path: Path) -> None:
    from cli_runner import run_cli as run

    src = tmp_path / "runs.jsonl"
    simulated(300, seed=17).write(src)
    chain_file = tmp_path / "chain.json"

    r = run("fit", str(src), "-o", str(chain_file), "--json", "--samples", "100")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["costs"]["available"] and doc["costs"]["metrics"]["cost_usd"]["observed"]["per_success"] > 0
    assert "costs" not in doc["chain_metadata"]
    r = run("metrics", str(chain_file), "--json", "--samples", "100")
    assert r.returncode == 0, r.stderr
    costs = json.loads(r.stdout)["costs"]
    assert costs["metrics"]["cost_usd"]["intervals"]["per_success"]["lower"] is not None
    r = run("metrics", str(chain_file), "--samples", "100")
    assert r.returncode == 0 and "What reliability costs" in r.stdout and "One success costs $" in r.stdout
    r = run("whatif", str(chain_file), "--reroute", "act->success:0.1", "--edge-cost", "act->success=0.5")
    assert r.returncode == 0, r.stderr
    assert "cost_usd per success" in r.stdout
    r = run("whatif", str(chain_file), "--reroute", "act->success:0.1", "--edge-cost", "act->success")
    assert r.returncode == 2 and "STATE->TARGET=COST" in r.stderr


@pytest.mark.slow
def test_withheld_costs_are_not_shown_as_numbers() -> None:
    """A certificate that withholds the timing outputs withholds the cost figures: the page and the comment say
    withheld where the model's numbers would be, and keep the observed ones."""
    from dataclasses import replace

    from tracetochain.analysis import analyze
    from tracetochain.audit import LayerResult
    from tracetochain.audit._certificate import build_certificate
    from tracetochain.report import build_report, render_html

    res = analyze(simulated(300, seed=18), intervals=None, n_bootstrap=19, n_permutations=19)
    layers = {name: LayerResult(name, "pass", 0.5, "consistent", "fits") for name in ("r_inf", "order", "trials")}
    layers["timing"] = LayerResult("timing", "reject", 0.001, "rejected", "the success-time law is rejected")
    cert = build_certificate(layers)
    costs = cost_report(res.chain, traces=res.traces, intervals=None, certificate=cert)
    assert costs["certification"]["status"] == "withheld" and costs["certification"]["rests_on"] == ["timing",
                                                                                                      "r_inf"]
    doc = build_report(replace(res, certificate=cert))
    page = render_html(doc)
    section = page[page.index('id="costs"'):page.index('id="states"')]
    assert "withheld" in section and "One success costs" not in section
    model = costs["metrics"]["cost_usd"]["summary"]["per_success"]
    assert f"${model:.4g}" not in section
    assert "withheld" in doc.to_markdown().split("| cost |")[1]


def test_a_withheld_cost_section_skips_the_band_and_says_so() -> None:
    """The R(B) band is an interval of a curve no report shows when the costs are withheld: it is not drawn, the
    document says why, and every other figure is the certified run's."""
    from tracetochain.audit import LayerResult
    from tracetochain.audit._certificate import build_certificate

    fit = tt.fit_chain(simulated(300, seed=21))
    layers = {name: LayerResult(name, "pass", 0.5, "consistent", "fits") for name in ("r_inf", "order", "trials")}
    ok = build_certificate({**layers, "timing": LayerResult("timing", "pass", 0.5, "consistent", "fits")})
    bad = build_certificate({**layers, "timing": LayerResult("timing", "reject", 0.001, "rejected", "no")})
    kw = {"intervals": "posterior", "samples": 60, "seed": 3}
    full, held = cost_report(fit, certificate=ok, **kw), cost_report(fit, certificate=bad, **kw)
    primary = full["primary"]
    assert full["metrics"][primary]["budget_band"] is not None and held["metrics"][primary]["budget_band"] is None
    assert any("R(B) band" in n and "withheld" in n for n in held["notes"])
    for metric, entry in full["metrics"].items():
        assert {k: v for k, v in held["metrics"][metric].items() if k != "budget_band"} == \
            {k: v for k, v in entry.items() if k != "budget_band"}


@pytest.mark.slow
def test_cost_gate() -> None:
    from tracetochain.analysis import analyze
    from tracetochain.report import build_report
    from tracetochain.report.gates import GateError, evaluate_gate

    doc = build_report(analyze(simulated(400, seed=19), samples=200, n_bootstrap=19, n_permutations=19))
    costs = doc["costs"]
    per = costs["metrics"]["cost_usd"]["summary"]["per_success"]
    upper = costs["metrics"]["cost_usd"]["intervals"]["per_success"]["upper"]
    assert evaluate_gate(f"cost_per_success<={per * 1.01}", doc).passed
    assert not evaluate_gate(f"cost_per_success(cost_usd)<={per * 0.99}", doc).passed
    conservative = evaluate_gate(f"cost_per_success<={per * 1.01}", doc, use="lower")
    assert conservative.value == pytest.approx(upper) and not conservative.passed
    with pytest.raises(GateError, match="no seconds"):
        evaluate_gate("cost_per_success(seconds)<=1", doc)


def test_observed_costs_count_zero_step_episodes_as_trials() -> None:
    traces = simulated(200, seed=20)
    model = CostModel.from_traces(traces)
    before = observed_costs(traces, model, "cost_usd")
    traces.report.zero_step.extend([{"trace_id": "z1", "outcome": "success"}, {"trace_id": "z2", "outcome": "failure"},
                                    {"trace_id": "z3", "outcome": "invalid"}])
    after = observed_costs(traces, model, "cost_usd")
    assert (after.n_traces, after.n_successes) == (before.n_traces + 2, before.n_successes + 1)
    assert after.per_success == pytest.approx(before.totals.sum() / (before.n_successes + 1))


def test_batched_figures_equal_the_per_chain_figures() -> None:
    """The batched computation over an ensemble gives, draw by draw, what summarize_costs gives on that draw's
    chain with that draw's cost means."""
    from tracetochain.costs._intervals import batched_cost_figures
    from tracetochain.uncertainty import DirichletPosterior

    fit = tt.fit_chain(simulated(400, seed=21))
    model = CostModel.of_chain(fit.chain)
    assert model is not None
    ens = DirichletPosterior(samples=20, seed=3).fit(fit.chain).fetch_model().ensemble
    pv = model.per_visit("cost_usd", fit.chain.state_names)
    rng = np.random.default_rng(0)
    c = pv.draw_means(20, rng)
    figures, used = batched_cost_figures(ens, c, pv.variance)
    assert used.all()
    for i in (0, 7, 19):
        chain = ens.chain(i)
        mom = chain.accumulated_cost(c[i], pv.variance)
        assert figures["mean"][i] == pytest.approx(mom.mean, rel=1e-10)
        assert figures["per_success"][i] == pytest.approx(mom.mean / chain.r_inf, rel=1e-10)
        assert figures["sd"][i] == pytest.approx(math.sqrt(mom.second - mom.mean**2), rel=1e-8)
        assert figures["mean_given_failure"][i] == pytest.approx(mom.mean_failure / chain.failure_probability,
                                                                 rel=1e-10)
    lean, _ = batched_cost_figures(ens, c, pv.variance, spreads=False)
    assert "sd" not in lean and np.allclose(lean["per_success"], figures["per_success"], rtol=1e-12)


def test_episodes_recording_only_zeros_did_not_track_the_metric() -> None:
    """τ²-bench writes cost 0.0 for agents whose cost is not tracked: an episode whose values are all zero is
    unknown for that metric, not free."""
    records = [
        {"trace_id": "a", "step_idx": 0, "state": "x", "outcome": "success", "cost_usd": 0.0},
        {"trace_id": "a", "step_idx": 1, "state": "y", "outcome": "success"},
        {"trace_id": "b", "step_idx": 0, "state": "x", "outcome": "failure", "cost_usd": 0.3},
        {"trace_id": "b", "step_idx": 1, "state": "y", "outcome": "failure", "cost_usd": 0.0},
    ]
    model = CostModel.from_traces(tt.TraceTable.from_records(records))
    st = model.metrics["cost_usd"]
    assert st.n.tolist() == [1, 1] and st.total.tolist() == [0.3, 0.0]  # only b counts; its free step is 0
    assert any("1 episode(s) record only zeros for dollars" in f for f in model.findings("cost_usd"))
    only_zeros = CostModel.from_traces(tt.TraceTable.from_records(records[:2]))
    assert "cost_usd" not in only_zeros.available


def test_the_printed_cost_table_computes_only_what_it_prints_and_the_same_numbers() -> None:
    """``display=True`` (the command line's text output): the primary metric's R(B) curve (its step and error bound
    are printed) and no other curve nor band — every figure it does compute equal to the full document's."""
    traces = simulated(300, seed=21)
    fit = tt.fit_chain(traces)
    curves = ("cost_usd", "tokens_in")  # the metrics whose R(B) curve is computed
    full = cost_report(fit, intervals="posterior", samples=60, seed=3, budget_metrics=curves)
    shown = cost_report(fit, intervals="posterior", samples=60, seed=3, budget_metrics=curves, display=True)
    primary = full["primary"]
    assert shown["primary"] == primary and set(full["metrics"]) == set(shown["metrics"]) == {"cost_usd", "tokens_in"}
    assert full["metrics"]["tokens_in"]["budget"] is not None and "budget_band" in full["metrics"][primary]
    for metric, entry in full["metrics"].items():
        got = dict(shown["metrics"][metric])
        want = dict(entry)
        assert "budget_band" not in got
        want.pop("budget_band", None)
        if metric == primary:
            assert got["budget"] == want["budget"] is not None
        else:
            assert got.pop("budget") is None and want.pop("budget") is not None
            got["observed"] = {k: v for k, v in got["observed"].items() if k != "reliability_at_budgets"}
            want["observed"] = {k: v for k, v in want["observed"].items() if k != "reliability_at_budgets"}
        assert got == want, metric
