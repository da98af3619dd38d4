"""What-if edits: exactness, first-order term, Prop. 2 bound, bottlenecks, the paper's fallback-tool example."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.numerics.sensitivity import single_row_r_inf
from tracetochain.states import CategoricalStates
from tracetochain.whatif import (
    EditError,
    RemoveState,
    Reroute,
    ScaleEdge,
    SetEdge,
    SetRetry,
    apply_edits,
    bottlenecks,
    load_edits,
    parse_edit,
    what_if,
)


def dense_r_inf(chain: tt.AbsorbingChain) -> float:
    """Independent re-solve: numpy's dense solve of (I − Q) h = R⊕ from scratch."""
    m = chain.n_states
    return float(chain.pi0 @ np.linalg.solve(np.eye(m) - np.array(chain.Q), np.array(chain.R_success)))


@pytest.fixture(scope="module")
def swe_fit_half(shared_data: Path) -> tt.AbsorbingChain:
    """The paper's SS14 fallback: 479 traces, seed-20260606 permutation, first 239 fit; 10 shell categories; α = 1."""
    traces = tt.read_traces(shared_data / "tracetochain-artifact" / "swebench_real" / "corpus.json")
    states = CategoricalStates(vocabulary="shell", keep_unobserved=True).fit(traces).fetch_model()
    fit = traces.select_traces(np.random.default_rng(20260606).permutation(traces.n_traces)[:239])
    return tt.ChainEstimator(pseudocount=1.0, states=states.state_names).fit(states.label(fit)).fetch_model()


def test_paper_fallback_tool_on_swebench(swe_fit_half: tt.AbsorbingChain) -> None:
    chain = swe_fit_half
    assert chain.r_inf == pytest.approx(0.6565, abs=5e-4)  # Table VII, order 1
    result = what_if(chain, [Reroute("*", 0.1)])
    assert result.delta_r_inf == pytest.approx(0.0344, abs=5e-4)  # SS14: 0.6565 → 0.6908
    edited = apply_edits(chain, [Reroute("*", 0.1)])
    np.testing.assert_allclose(edited.R_success, chain.R_success + 0.1 * chain.R_failure, rtol=0, atol=1e-15)
    np.testing.assert_allclose(edited.R_failure, 0.9 * chain.R_failure, rtol=0, atol=1e-15)
    assert edited.r_inf == pytest.approx(dense_r_inf(edited), abs=1e-12)
    assert result.prop2_bound is None and "Prop. 2" in result.notes[0]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), m=st.integers(2, 12), frac=st.floats(0.0, 1.0))
def test_exact_edit_equals_independent_resolve(seed: int, m: int, frac: float) -> None:
    chain = tt.datasets.random_chain(m, seed, rho=0.6)
    state = chain.state_names[seed % m]
    for edits in ([Reroute(state, frac)], [Reroute("*", frac)], [SetRetry(state, 0.3)],
                  [ScaleEdge(state, "failure", 0.5, take_from="success")]):
        edited = apply_edits(chain, edits)
        assert edited.r_inf == pytest.approx(dense_r_inf(edited), abs=1e-12)
        rows = np.column_stack([edited.Q, edited.R_success, edited.R_failure]).sum(axis=1)
        np.testing.assert_allclose(rows, 1.0, atol=1e-12)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), m=st.integers(2, 10))
def test_sherman_morrison_single_row_matches_refit(seed: int, m: int) -> None:
    chain = tt.datasets.random_chain(m, seed, rho=0.6)
    i = seed % m
    j = (seed // 7) % m
    edited = apply_edits(chain, [SetEdge(chain.state_names[i], chain.state_names[j], 0.05, take_from="failure")])
    dq = edited.Q[i] - chain.Q[i]
    N_col = chain._solver.solve(np.eye(m)[:, i])
    sm = single_row_r_inf(chain.r_inf, float(chain.expected_visits()[i]), chain.success_probabilities, N_col, dq,
                          float(edited.R_success[i] - chain.R_success[i]))
    assert sm == pytest.approx(edited.r_inf, abs=1e-12)


def test_first_order_term_and_prop2_bound() -> None:
    chain = tt.datasets.notation_chain()
    # A tiny Q change with R⊕ fixed (mass to failure): first order ≈ exact, and the bound holds.
    small = what_if(chain, [SetEdge("plan", "act", 0.29, take_from="failure")])
    assert small.first_order == pytest.approx(small.delta_r_inf, abs=1e-3)
    assert small.prop2_bound is not None and small.prop2_bound >= abs(small.delta_r_inf)
    # Linear in exits: rerouting failure to success is exact at first order.
    lin = what_if(chain, [Reroute("verify", 0.5)])
    assert lin.first_order == pytest.approx(lin.delta_r_inf, abs=1e-12)


def test_prop2_bound_is_valid_on_random_chains() -> None:
    """SS2 in miniature: proportional removal of 1–10% of each row's transient mass, rerouted to failure."""
    rng = np.random.default_rng(0)
    ratios = []
    for s in range(100):
        chain = tt.datasets.random_chain(10, s, rho=float(rng.uniform(0.4, 0.85)))
        r = rng.uniform(0.01, 0.1, size=10)
        Q = chain.Q * (1 - 0.1 * r)[:, None]  # ε = 0.1
        edited = chain.with_changes(Q=Q, R_failure=chain.R_failure + (chain.Q - Q).sum(axis=1))
        res = what_if(chain, [])
        dQ = edited.Q - chain.Q
        from tracetochain.numerics.sensitivity import prop2_bound

        bound = prop2_bound(float(np.max(chain._t)), dQ, chain.R_success)
        true = abs(edited.r_inf - chain.r_inf)
        assert bound is not None and bound >= true
        ratios.append(bound / true)
        del res
    assert 1.0 <= float(np.median(ratios)) < 10.0


def test_remove_state_bypass_keeps_r_inf() -> None:
    chain = tt.datasets.notation_chain()
    bypass = apply_edits(chain, [RemoveState("act")])
    assert bypass.state_names == ("plan", "verify")
    assert bypass.r_inf == pytest.approx(chain.r_inf, abs=1e-12)  # every path through `act` is kept
    assert bypass.mean_steps() < chain.mean_steps()
    to_fail = apply_edits(chain, [RemoveState("act", "failure")])
    assert to_fail.r_inf < chain.r_inf
    # Runs that start in `plan` and leave it straight to an outcome end before any step: start exits, R∞ kept.
    no_plan = apply_edits(chain, [RemoveState("plan")])
    assert no_plan.r_inf == pytest.approx(chain.r_inf, abs=1e-12) and no_plan.start_exits.sum() > 0


def test_edit_errors() -> None:
    chain = tt.datasets.notation_chain()
    with pytest.raises(EditError, match="unknown state 'nope'"):
        apply_edits(chain, [Reroute("nope", 0.1)])
    with pytest.raises(EditError, match=r"in \[0, 1\]"):
        apply_edits(chain, [Reroute("plan", 1.5)])
    with pytest.raises(EditError, match="holds only"):
        apply_edits(chain, [SetEdge("plan", "act", 0.9, take_from="failure")])


def test_bottlenecks() -> None:
    chain = tt.datasets.notation_chain()
    report = bottlenecks(chain, fraction=0.1)
    assert [b.state for b in report.by_failure_share] == ["plan", "act", "verify"]
    np.testing.assert_allclose([b.failure_share for b in report.by_failure_share], [0.5333333, 0.2666667, 0.2],
                               atol=1e-6)
    # Exact gain of a fallback at plan: z_plan · 0.1 · r⊖_plan = 2 · 0.01 (linear in exits).
    assert report.by_gain[0].state == "plan" and report.by_gain[0].fallback_gain == pytest.approx(0.02, abs=1e-12)
    text = str(report)
    assert "Most failures leave from `plan` (53%)" in text and "+0.0200" in text


def test_parse_cli_edits() -> None:
    assert parse_edit("reroute", "tool:search->success:0.1") == Reroute("tool:search", 0.1, "success")
    assert parse_edit("reroute", "*->success:0.25") == Reroute("*", 0.25)
    assert parse_edit("set_edge", "plan->act=0.3") == SetEdge("plan", "act", 0.3)
    assert parse_edit("scale_edge", "plan->failure*0.5") == ScaleEdge("plan", "failure", 0.5)
    assert parse_edit("retry", "tool:search=0.2") == SetRetry("tool:search", 0.2)
    assert parse_edit("remove", "tool:lint") == RemoveState("tool:lint")
    with pytest.raises(EditError, match="write STATE->TARGET:FRACTION"):
        parse_edit("reroute", "plan->0.1")
    with pytest.raises(EditError, match="must be a number"):
        parse_edit("retry", "plan=lots")


def test_edit_file(tmp_path: Path) -> None:
    path = tmp_path / "e.toml"
    path.write_text('[[edit]]\nkind = "reroute"\nstate = "*"\nfraction = 0.1\n\n'
                    '[[edit]]\nkind = "retry"\nstate = "plan"\nprobabilty = 0.2\n')
    with pytest.raises(EditError) as info:
        load_edits(path)
    assert f"{path}:9:" in str(info.value) and "unknown field 'probabilty'" in str(info.value)
    assert "valid fields are kind, state, probability" in str(info.value)
    path.write_text(path.read_text().replace("probabilty", "probability"))
    assert load_edits(path) == [Reroute("*", 0.1), SetRetry("plan", 0.2)]


def test_what_if_interval_through_the_posterior_ensemble() -> None:
    chain = tt.ChainEstimator().fit(tt.datasets.load_example()).fetch_model()
    ensemble = tt.DirichletPosterior(samples=300, seed=1).fit(chain).fetch_model().ensemble
    result = what_if(chain, [Reroute("*", 0.1)], ensemble=ensemble)
    iv = result.delta_r_inf_interval
    assert iv is not None and 0 < iv["lower"] < result.delta_r_inf < iv["upper"]
    assert iv["method"] == "posterior" and "interval" in str(result)
