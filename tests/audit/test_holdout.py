"""Held-out protocol: split before featurization, RDC/L∞, R∞ vs pass rate with an interval (the paper's SS9 protocol).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.audit import TimingSettings, holdout_audit, r_inf_check, split_traces
from tracetochain.audit._holdout import (
    clopper_pearson_interval,
    empirical_rdc,
    fit_states_and_chain,
    l_inf_distance,
    label_traces,
    mover_p_value,
    r_inf_check_counts,
    split_indices,
    wilson_interval,
)
from tracetochain.datasets import simulate_memory_traces, ss7_chain
from tracetochain.states import CategoricalStates


def _tasks(n_tasks: int, trials: int) -> tt.TraceTable:
    recs = [{"trace_id": f"{t}/{k}", "task_id": f"task{t}", "trial": k, "step_idx": j, "state": "a",
             "outcome": "success" if (t + k) % 3 else "failure"}
            for t in range(n_tasks) for k in range(trials) for j in range(1 + (t + k) % 3)]
    return tt.TraceTable.from_records(recs)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 60), st.floats(0.05, 0.95), st.integers(0, 2**31))
def test_split_by_trace_is_a_seeded_partition(n: int, f: float, seed: int) -> None:
    t = tt.datasets.simulate_traces(tt.datasets.notation_chain(), n, seed=0)
    try:
        fit, test = split_indices(t, f, seed=seed)
    except ValueError:
        assert np.floor(n * (1 - f) + 1e-9) in (0, n)
        return
    assert np.intersect1d(fit, test).size == 0 and np.union1d(fit, test).size == n
    assert fit.size == int(np.floor(n * (1 - f) + 1e-9))
    again = split_indices(t, f, seed=seed)
    np.testing.assert_array_equal(fit, again[0])


def test_split_by_task_keeps_trials_together() -> None:
    t = _tasks(10, 4)
    fit, test = split_traces(t, 0.3, by="task", seed=5)
    tasks_fit = set(fit.trace_column("task_id").to_pylist())
    tasks_test = set(test.trace_column("task_id").to_pylist())
    assert not tasks_fit & tasks_test and len(tasks_fit) == 7 and len(tasks_test) == 3
    assert fit.n_traces == 28 and test.n_traces == 12
    with pytest.raises(ValueError, match="task_id"):
        split_traces(tt.datasets.simulate_traces(tt.datasets.notation_chain(), 10), by="task")
    with pytest.raises(ValueError):
        split_traces(t, 1.0)


def test_empirical_rdc_keeps_failures_and_censored_in_the_denominator() -> None:
    t = tt.TraceTable.from_records([
        {"trace_id": "a", "step_idx": 0, "state": "x", "outcome": "success"},
        {"trace_id": "b", "step_idx": 0, "state": "x", "outcome": "success"},
        {"trace_id": "b", "step_idx": 1, "state": "x", "outcome": "success"},
        {"trace_id": "c", "step_idx": 0, "state": "x", "outcome": "failure"},
        {"trace_id": "d", "step_idx": 0, "state": "x", "outcome": "censored"},
        {"trace_id": "e", "step_idx": 0, "state": "x", "outcome": "invalid"},
    ])
    np.testing.assert_allclose(empirical_rdc(t, 3), [0.0, 0.25, 0.5, 0.5])
    assert l_inf_distance(np.array([0.0, 0.3, 0.5, 0.5]), empirical_rdc(t, 3)) == pytest.approx(0.05)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (84, 200), (200, 200)])
def test_intervals_match_scipy(k: int, n: int) -> None:
    res = scipy.stats.binomtest(k, n)
    lo, hi = wilson_interval(k, n)
    ref = res.proportion_ci(0.95, method="wilson")
    assert (lo, hi) == pytest.approx((ref.low, ref.high), abs=1e-12)
    lo, hi = clopper_pearson_interval(k, n)
    ref = res.proportion_ci(0.95, method="exact")
    assert (lo, hi) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_r_inf_check() -> None:
    t = _tasks(10, 4)
    chk = r_inf_check(0.6, t)
    assert chk.pass_rate == pytest.approx(26 / 40) and chk.successes == 26 and chk.n == 40
    assert chk.holds and not chk.in_sample and chk.abs_error == pytest.approx(0.05)
    assert not r_inf_check(0.3, t).holds
    assert json.dumps(chk.to_dict(), allow_nan=False)


def test_label_traces_drops_traces_with_unseen_states() -> None:
    train = tt.TraceTable.from_records([{"trace_id": "a", "step_idx": 0, "state": "x", "outcome": "success"}])
    test = tt.TraceTable.from_records([
        {"trace_id": "b", "step_idx": 0, "state": "x", "outcome": "success"},
        {"trace_id": "c", "step_idx": 0, "state": "y", "outcome": "failure"}])
    model = CategoricalStates().fit(train).fetch_model()
    labelled, kept = label_traces(model, test)
    assert kept.tolist() == [True, False] and labelled.n_traces == 1 and labelled.state_labels()[1] == ["x"]


def test_holdout_audit_on_a_markov_chain() -> None:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 400, seed=8)
    res = holdout_audit(traces, seed=3, timing=TimingSettings(n_bootstrap=99))
    assert res.split["n_train"] == 200 and res.split["n_test"] == 200
    assert res.timing.settings["refit"] == "train" and res.timing.settings["n_fit_traces"] == 200
    assert res.timing.p_value > 0.05 and res.r_inf_check.holds  # type: ignore[operator]
    assert res.order.n_traces == 200  # the order layer runs on the fit half
    assert res.l_inf < 0.1 and len(res.model_rdc) == res.horizon + 1
    doc = res.to_dict()
    json.dumps(doc, allow_nan=False)
    assert "held-out split by trace" in str(res)


# ------------------------------------------------------------------------------------------------ real data
def _corpus(shared_data: Path) -> dict:
    return json.loads((shared_data / "tracetochain-artifact" / "swebench_real" / "corpus.json").read_text())


def test_ss10_rdc_and_l_inf_are_reproduced_exactly(shared_data: Path) -> None:
    """SS10: chain on the 80-trace fit half (α = 1, modal s0), R(d) and the held-out RDC for d = 0..80, L∞ 0.26011."""
    from tracetochain.featurize.vocab import categorize_shell_paper

    corpus = _corpus(shared_data)
    summary = json.loads((shared_data / "tracetochain-artifact" / "swebench_real" / "SS10_summary.json").read_text())
    ids = list(corpus)
    sub = np.sort(np.random.default_rng(20260606).choice(len(ids), 160, replace=False))
    perm = np.random.default_rng(20260606).permutation(160)
    order = [ids[sub[i]] for i in perm]
    merge = dict.fromkeys(("FILEOP", "OTHER", "NONE", "INSPECT"), "MIXED")

    def table(iids: list[str]) -> tt.TraceTable:
        def cat(tok: str) -> str:
            c = categorize_shell_paper(None, tok, None)
            return merge.get(c, c)
        return tt.TraceTable.from_records([
            {"trace_id": i, "step_idx": j, "state": cat(tok), "outcome": "success" if corpus[i]["resolved"]
             else "failure"} for i in iids for j, tok in enumerate(corpus[i]["toks"])])

    fit, test = table(order[:80]), table(order[80:])
    chain = tt.ChainEstimator(pseudocount=1.0, initial="modal").fit(fit).fetch_model()
    np.testing.assert_allclose(chain.reliability(80), summary["R_analytic"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(empirical_rdc(test, 80), summary["R_emp"], rtol=0, atol=1e-15)
    assert l_inf_distance(chain.reliability(80), empirical_rdc(test, 80)) == pytest.approx(
        summary["rdc"]["L_inf"], abs=1e-12)
    assert r_inf_check(chain.r_inf, test).pass_rate == pytest.approx(53 / 80)  # SS11: held-out pass rate 0.663


def test_ss14_split_r_inf_and_l_inf(shared_data: Path) -> None:
    """SS14 (Table VII, order 1): split seed 20260606 → 239/240, held-out pass 0.6833, R∞ 0.6565, L∞ 0.2233 (the
    10 action categories as states, α = 1, π0 empirical). The paper-mode KS D ≈ 0.341 is statistical."""
    from tracetochain.featurize.vocab import categorize_shell_paper

    corpus = _corpus(shared_data)

    def cat(tok: str) -> str:  # the artifact keeps `PYTHONPATH=…` as a token of its own (OTHER)
        return "OTHER" if tok.startswith("PYTHONPATH=") else categorize_shell_paper(None, tok, None)

    traces = tt.TraceTable.from_records([
        {"trace_id": i, "step_idx": j, "state": cat(tok), "outcome": "success" if corpus[i]["resolved"]
         else "failure"} for i in corpus for j, tok in enumerate(corpus[i]["toks"])])
    res = holdout_audit(traces, states="label", pseudocount=1, seed=20260606, horizon=80,
                        timing=TimingSettings(mode="paper", n_model=20_000, paper_max_steps=400))
    assert (res.split["n_train"], res.split["n_test"]) == (239, 240)
    assert res.r_inf_check.pass_rate == pytest.approx(0.6833, abs=5e-5)
    assert res.chain.n_states == 10
    assert res.chain.r_inf == pytest.approx(0.6565, abs=5e-5)
    assert res.l_inf == pytest.approx(0.2233, abs=5e-5)
    assert res.timing.statistic == pytest.approx(0.3407, abs=0.03) and res.timing.p_value < 1e-6  # type: ignore[operator]
    # The library's own shell vocabulary (which strips `VAR=…` prefixes) gives the same chain to 1e-3.
    read = tt.read_traces(shared_data / "tracetochain-artifact" / "swebench_real" / "corpus.json")
    ours = holdout_audit(read, states=CategoricalStates(vocabulary="shell", keep_unobserved=True), pseudocount=1,
                         seed=20260606, horizon=80, timing=TimingSettings(mode="paper", n_model=2000))
    assert ours.chain.r_inf == pytest.approx(0.6565, abs=1e-3) and ours.l_inf == pytest.approx(0.2233, abs=1e-3)


def test_states_can_be_an_estimator_a_fitted_model_or_a_callable() -> None:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 120, seed=4)
    fitted = CategoricalStates().fit(traces).fetch_model()
    calls: list[int] = []

    def discover(train: tt.TraceTable) -> object:
        calls.append(train.n_traces)
        return CategoricalStates().fit(train).fetch_model()

    settings = TimingSettings(n_bootstrap=9)
    results = [holdout_audit(traces, states=s, seed=1, timing=settings)
               for s in (CategoricalStates(), fitted, discover, "label")]
    assert calls == [60]  # the callable sees the fit half only
    r_infs = {round(r.chain.r_inf, 12) for r in results}
    assert len(r_infs) == 1  # all four routes give the same chain here
    assert results[2].settings["states"] == "callable discover"
    with pytest.raises(TypeError):
        holdout_audit(traces, states=42, timing=settings)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from("abcd"), min_size=1, max_size=6),
                          st.sampled_from(["success", "failure", "censored"])), min_size=2, max_size=25),
       st.sampled_from([None, 0.5, 1.0]))
def test_fitted_or_callable_states_give_fit_chains_chain(seqs: list[tuple[list[str], str]],
                                                         pseudocount: float | None) -> None:
    """One "states → chain": a fitted state model or a callable handed to fit_states_and_chain gives, bit for bit,
    the chain (rows, start, metadata) and labelled traces the pipeline's fit_chain (states learned on all the traces
    given, as the audit's training halves) gives for the estimator behind it."""
    from tracetochain.pipeline import fit_chain

    traces = tt.TraceTable.from_records([{"trace_id": f"t{i}", "step_idx": j, "state": s, "outcome": out}
                                         for i, (states, out) in enumerate(seqs) for j, s in enumerate(states)])
    reference = fit_chain(traces, states=CategoricalStates(), pseudocount=pseudocount)
    fitted = CategoricalStates().fit(traces).fetch_model()
    for states in (fitted, lambda train: CategoricalStates().fit(train).fetch_model()):
        chain, model, labelled = fit_states_and_chain(traces, states, pseudocount=pseudocount)
        assert model.state_names == reference.states.state_names
        assert labelled.state_labels()[0].tolist() == reference.labelled.state_labels()[0].tolist()
        for name in ("Q", "R_success", "R_failure", "pi0", "start_exits"):
            assert getattr(chain, name).tobytes() == getattr(reference.chain, name).tobytes(), name
        assert json.dumps(chain.to_dict()) == json.dumps(reference.chain.to_dict())


def test_held_out_r_inf_check_counts_the_noise_of_both_halves() -> None:
    """MOVER interval of R∞ − p̂ from the Wilson limits of both sides; in-sample the paper's rule is unchanged."""
    chk = r_inf_check_counts(0.60, 270, 500, n_fit=500)
    l1, u1 = wilson_interval(0.60 * 500, 500)
    l2, u2 = wilson_interval(270, 500)
    d = 0.60 - 0.54
    assert chk.difference_lower == pytest.approx(d - math.sqrt((0.60 - l1) ** 2 + (u2 - 0.54) ** 2))
    assert chk.difference_upper == pytest.approx(d + math.sqrt((u1 - 0.60) ** 2 + (0.54 - l2) ** 2))
    # 0.60 is outside the held-out interval [0.496, 0.583] but within the reach of both halves' noise.
    assert not (chk.lower <= 0.60 <= chk.upper) and chk.holds
    assert "consistent" in chk.describe() and chk.to_dict()["difference_interval"] is not None
    assert not r_inf_check_counts(0.70, 270, 500, n_fit=500).holds
    same = r_inf_check_counts(0.60, 270, 500, n_fit=500, in_sample=True)
    assert same.difference_lower is None and not same.holds


@pytest.mark.parametrize(("r", "n_fit", "k", "n"), [(0.55, 200, 40, 100), (0.5, 100, 40, 100),
                                                      (0.6, 150, 45, 100), (0.3, 400, 45, 100)])
def test_mover_p_value_is_where_zero_meets_the_interval(r: float, n_fit: int, k: int, n: int) -> None:
    """Oracle: the closed-form MOVER limit (written out from Wilson's formula) that faces 0, solved for the level by
    Brent's method; the p-value is 1 − that level, and the check holds at 95 % iff p > 0.05."""

    def wilson(x: float, size: int, conf: float) -> tuple[float, float]:
        z = scipy.stats.norm.ppf(0.5 + conf / 2)
        p, den = x / size, 1 + z * z / size
        centre = (p + z * z / (2 * size)) / den
        half = z * math.sqrt(p * (1 - p) / size + z * z / (4 * size * size)) / den
        return centre - half, centre + half

    def facing_limit(conf: float) -> float:
        l1, u1 = wilson(r * n_fit, n_fit, conf)
        l2, u2 = wilson(k, n, conf)
        p = k / n
        if r > p:
            return r - p - math.sqrt((r - l1) ** 2 + (u2 - p) ** 2)
        return r - p + math.sqrt((u1 - r) ** 2 + (p - l2) ** 2)

    gamma = scipy.optimize.brentq(facing_limit, 1e-9, 1 - 1e-12, xtol=1e-14)
    p_value = mover_p_value(r, n_fit, k, n)
    assert p_value == pytest.approx(1 - gamma, rel=1e-7, abs=1e-12)
    chk = r_inf_check_counts(r, k, n, n_fit=n_fit)
    assert chk.p_value == p_value and chk.holds == (p_value > 0.05)


@pytest.mark.slow
def test_held_out_r_inf_check_keeps_its_level_on_sound_chains() -> None:
    """SS7 truth, 600 traces split 50/50: the old rule (R∞ in the held-out interval) failed 20% of sound chains."""
    chain = ss7_chain()
    old = new = 0
    for i in range(150):
        t = simulate_memory_traces(chain, 600, memory=0.0, seed=i, max_steps=200)
        f, te = split_indices(t, 0.5, seed=i)
        fit, test = t.select_traces(f), t.select_traces(te)
        r = tt.ChainEstimator(states=chain.state_names).fit(fit).fetch_model().r_inf
        old += not r_inf_check(r, test).holds
        new += not r_inf_check(r, test, n_fit=fit.n_traces).holds
    assert old / 150 > 0.12 and new / 150 < 0.10
