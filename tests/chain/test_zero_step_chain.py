"""Episodes that ended before any agent step are trials: the chain's start distribution has direct exits to success
and failure (``start_exits``), so R∞, R(d), the mean steps and the failure shares count them — and a chain without
them is the paper's chain, bit for bit."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

import tracetochain as tt
from tracetochain import numerics as nx
from tracetochain.chain import (
    TransitionCounts,
    count_transitions_from_codes,
    estimate_chain,
    initial_distribution,
    start_distribution,
    zero_step_outcome_codes,
)
from tracetochain.exceptions import ChainValidationError, EmptyTraceSetError, SchemaVersionError
from tracetochain.numerics.batched import ChainBatch
from tracetochain.report import to_dot, to_mermaid, to_prism
from tracetochain.traces._build import build_table, records_to_arrow

PROPERTY = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def table(steps: list[tuple[list[str], str]], zero: list[str]) -> tt.TraceTable:
    """Traces with steps, then zero-step episodes (one record without step fields each), through the readers' door."""
    recs: list[dict[str, Any]] = [{"trace_id": f"t{i}", "step_idx": j, "state": s, "outcome": out, "task_id": f"k{i}"}
                                  for i, (states, out) in enumerate(steps) for j, s in enumerate(states)]
    recs += [{"trace_id": f"z{i}", "outcome": out, "task_id": f"k{i}"} for i, out in enumerate(zero)]
    return build_table(records_to_arrow(recs), on_error="raise", source="test", format="records", problems=[],
                       locations=None, location_kind="row", zero_step=bool(zero))


STEPS = [(["a", "b", "b"], "success"), (["a", "a"], "failure"), (["b", "a"], "censored"), (["a", "b"], "invalid"),
         (["b"], "success")]
ZERO = ["success", "success", "failure", "censored", "invalid"]


# ------------------------------------------------------------------------------------------------ counting
def test_zero_step_episodes_are_counted_as_start_exits() -> None:
    t = table(STEPS, ZERO)
    assert t.n_traces == 5 and t.report.n_zero_step == 5
    c = tt.count_transitions(t)
    assert c.start_exits.tolist() == [2, 1]
    # every episode counted by outcome; the zero-step censored one adds nothing else, the invalid one is invalid
    assert c.n_traces == {"success": 4, "failure": 2, "censored": 2, "invalid": 2}
    assert c.initial.tolist() == [2, 2] and c.transitions.sum() == 4
    assert c.n_fitted_traces == 8 and c.n_start_exits == 3
    back = TransitionCounts.from_dict(json.loads(json.dumps(c.to_dict())))
    assert back.to_dict() == c.to_dict()
    codes, names = t.state_labels()
    raw = count_transitions_from_codes(codes, t.offsets, t.outcomes(), names,
                                       zero_step_outcomes=zero_step_outcome_codes(t.report.zero_step))
    assert raw.to_dict() == c.to_dict()


def test_old_count_documents_have_no_start_exits() -> None:
    doc = tt.count_transitions(table(STEPS, [])).to_dict()
    doc.pop("start_exits")
    assert TransitionCounts.from_dict(doc).start_exits.tolist() == [0, 0]
    with pytest.raises(ValueError, match="start_exits"):
        TransitionCounts(("a",), np.zeros((1, 1), np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64),
                         np.zeros(1, np.int64), {}, np.array([1, -1]))


def test_a_subset_of_traces_does_not_count_the_zero_step_episodes_again() -> None:
    t = table(STEPS, ZERO)
    half = t.select_traces(np.array([0, 1]))
    assert half.report.zero_step == [] and t.report.n_zero_step == 5
    assert tt.count_transitions(half).start_exits.tolist() == [0, 0]


# ------------------------------------------------------------------------------------------------ estimation
def test_mle_r_inf_is_the_pass_rate_counting_zero_step_episodes() -> None:
    steps = [(["a", "b"], "success"), (["a"], "failure"), (["b", "b", "a"], "failure"), (["b"], "success")]
    t = table(steps, ["success", "success", "failure"])
    chain = tt.ChainEstimator(pseudocount=0).fit(t).fetch_model()
    assert chain.r_inf == pytest.approx(4 / 7, abs=1e-15)
    assert chain.failure_probability == pytest.approx(3 / 7, abs=1e-15)
    assert chain.start_exits.tolist() == pytest.approx([2 / 7, 1 / 7], abs=1e-15)
    assert chain.pi0.tolist() == pytest.approx([2 / 7, 2 / 7], abs=1e-15)
    assert chain.metadata["counts"]["start_exits"] == [2, 1]
    modal = tt.ChainEstimator(pseudocount=0, initial="modal").fit(t).fetch_model()
    assert modal.start_exits.tolist() == [0.0, 0.0] and modal.pi0.tolist() == [1.0, 0.0]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.lists(st.sampled_from("abc"), min_size=1, max_size=6),
                          st.sampled_from(["success", "failure"])), min_size=1, max_size=30),
       st.lists(st.sampled_from(["success", "failure", "censored", "invalid"]), max_size=12))
def test_pass_rate_identity_with_zero_step_episodes(steps: list[tuple[list[str], str]], zero: list[str]) -> None:
    """α = 0, empirical start, no censoring among the episodes with steps ⇒ R∞ is the pass rate of every episode
    with an outcome (zero-step successes in the numerator, zero-step successes and failures in the denominator)."""
    chain = tt.ChainEstimator(pseudocount=0).fit(table(steps, zero)).fetch_model()
    succ = sum(o == "success" for _, o in steps) + zero.count("success")
    n = len(steps) + zero.count("success") + zero.count("failure")
    assert chain.r_inf == pytest.approx(succ / n, abs=1e-12)
    assert chain.pi0.sum() + chain.start_exits.sum() == pytest.approx(1.0, abs=1e-12)


def test_only_zero_step_episodes_cannot_be_fitted() -> None:
    t = table([], ["success", "failure"])
    with pytest.raises(EmptyTraceSetError, match="ended before any step"):
        tt.ChainEstimator().fit(t)


def test_start_distribution_without_exits_is_initial_distribution() -> None:
    init = np.array([[3, 0, 5], [1, 1, 0]])
    for how in ("empirical", "modal"):
        pi0, exits = start_distribution(init, np.zeros((2, 2)), how)
        assert_array_equal(pi0, initial_distribution(init, how))
        assert not exits.any()
    pi0, exits = start_distribution(init, np.array([[2, 0], [0, 2]]), "empirical")
    assert_allclose(pi0.sum(axis=1) + exits.sum(axis=1), 1.0, atol=1e-15)
    assert exits.tolist() == [[0.2, 0.0], [0.0, 0.5]]


# ------------------------------------------------------------------------------------------------ the chain
def one_state(s: float, f: float, q: float = 0.5, r: float = 0.3) -> tt.AbsorbingChain:
    return tt.AbsorbingChain([[q]], [r], [1 - q - r], pi0=0, start_exits=(s, f))


def test_closed_forms_of_a_one_state_chain_with_start_exits() -> None:
    """π0 = 1 − s − f on the state, which exits with r⊕ = 0.3, r⊖ = 0.2 and retries with 0.5: from it success has
    probability 0.6 after a geometric number of steps with mean 2. Exact in rationals."""
    s, f = Fraction(1, 10), Fraction(1, 20)
    c = one_state(float(s), float(f))
    p = 1 - s - f
    assert c.pi0.tolist() == [float(p)] and c.start_success == 0.1 and c.start_failure == 0.05
    assert c.r_inf == pytest.approx(float(s + p * Fraction(3, 5)), abs=1e-15)
    assert c.failure_probability == pytest.approx(float(f + p * Fraction(2, 5)), abs=1e-15)
    rel = [s + p * Fraction(3, 10) * sum(Fraction(1, 2) ** k for k in range(d)) for d in range(6)]
    assert_allclose(c.reliability(5), [float(x) for x in rel], rtol=0, atol=1e-15)
    sw = c.sweep(5)
    assert sw.success_pmf[0] == 0.1 and sw.failure_pmf[0] == 0.05 and sw.survival[0] == pytest.approx(float(p))
    assert_allclose(sw.residual, c.r_inf - sw.reliability, atol=1e-15)  # the tail π_d·h is unchanged
    assert c.mean_steps() == pytest.approx(float(p * 2), abs=1e-15)  # zero-step episodes take 0 steps
    # E[T²] = p·E[G²] with G geometric(1/2) on {1, 2, …}: E[G²] = 6
    assert c.steps_variance() == pytest.approx(float(p * 6 - (p * 2) ** 2), abs=1e-14)
    assert c.mean_steps_given_success() == pytest.approx(float(p * Fraction(3, 5) * 2 / (s + p * Fraction(3, 5))))
    assert c.mean_steps_given_failure() == pytest.approx(float(p * Fraction(2, 5) * 2 / (f + p * Fraction(2, 5))))
    share = c.failure_attribution()
    assert c.start_failure_share() == pytest.approx(float(f / (f + p * Fraction(2, 5))), abs=1e-15)
    assert share.sum() + c.start_failure_share() == pytest.approx(1.0, abs=1e-15)
    assert_allclose(c.pass_hat_k([1, 2]), [c.r_inf, c.r_inf ** 2])
    assert c.success_conditional_cdf(3)[0] == pytest.approx(0.1 / c.r_inf)


def test_int_start_state_takes_the_episodes_with_a_step() -> None:
    c = tt.AbsorbingChain([[0.5, 0.2], [0.0, 0.4]], [0.1, 0.3], [0.2, 0.3], pi0=1, start_exits=[0.25, 0.25])
    assert c.pi0.tolist() == [0.0, 0.5]


@pytest.mark.parametrize(("pi0", "exits", "needle"), [
    ([0.5, 0.5], (0.1, 0.0), "together they must be 1"),
    ([0.5, 0.3], (0.1, 0.0), "together they must be 1"),
    ([0.5, 0.5], (-0.1, 0.1), "non-negative"),
    ([0.5, 0.5], (0.1,), "two probabilities"),
    ([0.0, 0.0], (0.7, 0.6), "at most every episode"),
    ([0.5, 0.5], (float("nan"), 0.0), "finite"),
])
def test_bad_start_exits_are_named(pi0: list[float], exits: tuple[float, ...], needle: str) -> None:
    with pytest.raises(ChainValidationError, match=needle):
        tt.AbsorbingChain([[0.5, 0.2], [0.0, 0.4]], [0.1, 0.3], [0.2, 0.3], pi0=pi0, start_exits=exits)


def test_json_round_trip_and_version_1_documents() -> None:
    c = one_state(0.1, 0.05).with_metadata(note="x")
    doc = json.loads(c.to_json())
    assert doc["schema_version"] == 2 and doc["start_exits"] == [0.1, 0.05]
    back = tt.AbsorbingChain.from_json(json.dumps(doc))
    assert back.start_exits.tolist() == [0.1, 0.05] and back.r_inf == c.r_inf and back.metadata["note"] == "x"
    assert_array_equal(back.pi0, c.pi0)
    # A version 1 document (written before zero-step episodes were counted) loads with no start exits.
    old = tt.AbsorbingChain([[0.5]], [0.3], [0.2]).to_dict()
    old["schema_version"] = 1
    del old["start_exits"]
    v1 = tt.AbsorbingChain.from_dict(old)
    assert v1.start_exits.tolist() == [0.0, 0.0] and v1.r_inf == pytest.approx(0.6)
    with pytest.raises(ChainValidationError, match="start_exits"):
        tt.AbsorbingChain.from_dict({k: v for k, v in doc.items() if k != "start_exits"})
    for bad in (3, True, "2"):
        with pytest.raises(SchemaVersionError):
            tt.AbsorbingChain.from_dict(dict(doc, schema_version=bad))


def test_derived_chains_keep_the_start_exits() -> None:
    c = one_state(0.1, 0.05)
    assert c.with_changes(R_success=[0.4], R_failure=[0.1]).start_exits.tolist() == [0.1, 0.05]
    assert c.with_changes(pi0=0).pi0.tolist() == [0.85]
    assert c.with_changes(pi0=[1.0], start_exits=(0, 0)).r_inf == pytest.approx(0.6)
    with pytest.raises(ChainValidationError, match="together they must be 1"):
        c.with_changes(pi0=[1.0])
    assert c.with_metadata(a=1).start_exits.tolist() == [0.1, 0.05]


def test_monte_carlo_matches_the_horizon_law_and_the_means() -> None:
    chain = tt.AbsorbingChain([[0.2, 0.5, 0.0], [0.1, 0.3, 0.4], [0.0, 0.2, 0.5]], [0.2, 0.1, 0.2],
                              [0.1, 0.1, 0.1], pi0=[0.4, 0.3, 0.1], start_exits=(0.12, 0.08))
    n = 200_000
    sim = chain.simulate(n, seed=7)
    assert (sim.length == 0).mean() == pytest.approx(0.2, abs=4.5 * np.sqrt(0.16 / n))
    succ = sim.outcome == nx.simulate.SUCCESS
    rel = chain.reliability(12)
    for d in range(13):
        p = rel[d]
        assert (succ & (sim.length <= d)).mean() == pytest.approx(p, abs=4.5 * np.sqrt(p * (1 - p) / n) + 1e-12)
    assert succ.mean() == pytest.approx(chain.r_inf, abs=4.5 * np.sqrt(chain.r_inf * (1 - chain.r_inf) / n))
    sd = np.sqrt(chain.steps_variance())
    assert sim.length.mean() == pytest.approx(chain.mean_steps(), abs=4.5 * sd / np.sqrt(n))
    assert sim.length.var() == pytest.approx(chain.steps_variance(), rel=0.03)
    assert sim.length[succ].mean() == pytest.approx(chain.mean_steps_given_success(), rel=0.02)
    zero_fail = ((sim.length == 0) & (sim.outcome == nx.simulate.FAILURE)).sum()
    assert zero_fail / (~succ).sum() == pytest.approx(chain.start_failure_share(), abs=0.01)
    paths = chain.simulate(1000, seed=1, record_paths=True)
    assert paths.offsets is not None and paths.states is not None
    assert_array_equal(np.diff(paths.offsets), paths.length) and paths.states.size == paths.length.sum()


def test_simulated_traces_keep_zero_step_episodes_and_refit() -> None:
    chain = one_state(0.3, 0.1)
    t = tt.datasets.simulate_traces(chain, 4000, seed=2)
    zero = t.report.zero_step_outcomes()
    assert t.n_traces + t.report.n_zero_step == 4000 and zero["censored"] == 0
    fit = tt.ChainEstimator(pseudocount=0).fit(t).fetch_model()
    assert fit.start_exits.tolist() == pytest.approx([zero["success"] / 4000, zero["failure"] / 4000])
    assert fit.r_inf == pytest.approx(chain.r_inf, abs=4.5 * np.sqrt(0.25 / 4000))


# ------------------------------------------------------------------------------------------------ no exits: bit for bit
@st.composite
def chains(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    m = draw(st.integers(1, 7))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 6, size=(m, m + 2)) * (rng.random((m, m + 2)) < 0.7)
    counts[:, m + rng.integers(0, 2)] += 1  # every row exits
    rows = counts / counts.sum(axis=1, keepdims=True)
    pi0 = rng.integers(0, 4, size=m).astype(float)
    pi0[rng.integers(0, m)] += 1
    return rows[:, :m], rows[:, m], rows[:, m + 1], pi0 / pi0.sum()


@PROPERTY
@given(chains(), st.integers(0, 40))
def test_without_start_exits_every_number_is_the_papers_bit_for_bit(arrays: Any, horizon: int) -> None:
    """The chain without zero-step episodes computes exactly what it computed before start exits existed: each
    quantity equals its start-exit-free formula bit for bit, whether (0, 0) is given or not."""
    Q, rs, rf, pi0 = arrays
    plain = tt.AbsorbingChain(Q, rs, rf, pi0)
    zeros = tt.AbsorbingChain(Q, rs, rf, pi0, start_exits=(0.0, 0.0))
    h, g = plain.success_probabilities, plain.failure_probabilities
    assert plain.r_inf == float(pi0 @ h) == zeros.r_inf
    assert plain.failure_probability == float(pi0 @ g) == zeros.failure_probability
    legacy = nx.forward_sweep(Q, plain.R_success, plain.R_failure, plain.pi0, horizon, h)
    for c in (plain, zeros):
        sw = c.sweep(horizon)
        for name in ("reliability", "success_pmf", "failure_pmf", "survival", "residual"):
            assert_array_equal(getattr(sw, name), getattr(legacy, name))
        assert_array_equal(c.failure_attribution(), nx.failure_attribution(c.expected_visits(), c.R_failure))
        assert c.mean_steps() == plain.mean_steps() and c.steps_variance() == plain.steps_variance()
        sim = c.simulate(200, seed=horizon, max_steps=50, record_paths=True)
        raw = nx.simulate_traces(Q, plain.R_success, plain.R_failure, plain.pi0, 200,
                                 np.random.default_rng(horizon), max_steps=50, record_paths=True)
        assert_array_equal(sim.length, raw.length) and assert_array_equal(sim.outcome, raw.outcome)
        assert_array_equal(sim.states, raw.states)  # type: ignore[arg-type]
    b0 = ChainBatch(plain.Q[None], plain.R_success[None], plain.R_failure[None], plain.pi0[None])
    bz = ChainBatch(plain.Q[None], plain.R_success[None], plain.R_failure[None], plain.pi0[None], np.zeros((1, 2)))
    assert_array_equal(b0.r_inf(), bz.r_inf())
    assert_array_equal(b0.failure_attribution()[0], bz.failure_attribution()[0])
    assert_array_equal(b0.sweep(horizon)["reliability"], bz.sweep(horizon)["reliability"])
    assert tt.AbsorbingChain.from_json(plain.to_json()).to_dict() == plain.to_dict()


@PROPERTY
@given(chains(), st.floats(0.0, 0.4), st.floats(0.0, 0.4), st.integers(0, 30))
def test_the_batched_numerics_agree_with_the_chain_with_start_exits(arrays: Any, s: float, f: float,
                                                                    horizon: int) -> None:
    Q, rs, rf, pi0 = arrays
    c = tt.AbsorbingChain(Q, rs, rf, pi0 * (1 - s - f), start_exits=(s, f))
    b = ChainBatch(c.Q[None], c.R_success[None], c.R_failure[None], c.pi0[None], c.start_exits[None])
    assert b.valid[0]
    assert b.r_inf()[0] == pytest.approx(c.r_inf, abs=1e-12)
    assert b.failure_probability()[0] == pytest.approx(c.failure_probability, abs=1e-12)
    assert b.r_inf()[0] + b.failure_probability()[0] == pytest.approx(1.0, abs=1e-9)
    sw, ref = b.sweep(horizon), c.sweep(horizon)
    for name in ("reliability", "success_pmf", "failure_pmf", "survival", "residual"):
        assert_allclose(sw[name][0], getattr(ref, name), rtol=0, atol=1e-12)
    assert b.mean_steps()[0] == pytest.approx(c.mean_steps(), rel=1e-10, abs=1e-12)
    assert b.steps_variance()[0] == pytest.approx(c.steps_variance(), rel=1e-8, abs=1e-10)
    share, ok = b.failure_attribution()
    if c.failure_probability > 0:
        assert ok[0]
        assert_allclose(share[0], c.failure_attribution(), atol=1e-12)
    for outcome, method in (("success", c.mean_steps_given_success), ("failure", c.mean_steps_given_failure)):
        v, defined = b.conditional_mean_steps(outcome)
        if defined[0]:
            assert v[0] == pytest.approx(method(), rel=1e-10, abs=1e-12)


# ------------------------------------------------------------------------------------------------ exports
def test_exports_draw_a_start_node_only_with_start_exits() -> None:
    plain = tt.AbsorbingChain([[0.5]], [0.3], [0.2]).to_dict()
    assert "start" not in to_dot(plain) and "start" not in to_mermaid(plain)
    doc = one_state(0.1, 0.05).to_dict()
    dot, mer, prism = to_dot(doc), to_mermaid(doc), to_prism(doc)
    assert 'start -> success [label="0.100"' in dot and 'start -> failure [label="0.050"' in dot
    assert "start -.->|0.100| success" in mer and "start -.->|0.850| s0" in mer
    assert "[] s=3 -> 0.85:(s'=0) + 0.1:(s'=1) + 0.05:(s'=2);" in prism
    assert "[] s=3 -> 1.0:(s'=0);" in to_prism(plain)


def test_removing_a_start_state_keeps_the_episodes() -> None:
    from tracetochain.whatif import RemoveState, apply_edits

    c = tt.AbsorbingChain([[0.0, 0.6], [0.0, 0.5]], [0.3, 0.3], [0.1, 0.2], pi0=[0.5, 0.3], start_exits=(0.15, 0.05))
    bypassed = apply_edits(c, [RemoveState("s0")])  # runs starting in s0 that exit at once now end before any step
    assert bypassed.r_inf == pytest.approx(c.r_inf, abs=1e-12)
    assert bypassed.start_exits.tolist() == pytest.approx([0.15 + 0.5 * 0.3, 0.05 + 0.5 * 0.1])
    cut = apply_edits(c, [RemoveState("s0", redistribute="proportional")])
    assert cut.start_exits.tolist() == [0.15, 0.05] and cut.pi0.tolist() == pytest.approx([0.8])


def test_counts_reach_the_estimator_with_their_exits() -> None:
    c = tt.count_transitions(table(STEPS, ZERO))
    chain = estimate_chain(c, pseudocount=0.0)
    assert chain.start_exits.tolist() == pytest.approx([2 / 7, 1 / 7])  # 4 first states + 3 zero-step exits
