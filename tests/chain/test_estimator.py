"""ChainEstimator and count_transitions: counting rules, smoothing, identities, degenerate input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.exceptions import EmptyTraceSetError, NonAbsorbingError, NotFittedError, TraceValidationError


def traces_from(seqs: list[tuple[list[str], str]]) -> tt.TraceTable:
    recs = [{"trace_id": f"t{i}", "step_idx": j, "state": s, "outcome": out}
            for i, (states, out) in enumerate(seqs) for j, s in enumerate(states)]
    return tt.TraceTable.from_records(recs)


def test_counts_follow_the_paper_rules() -> None:
    t = traces_from([
        (["a", "b", "b"], "success"),
        (["a", "a"], "failure"),
        (["b", "a"], "censored"),  # transitions only, no exit
        (["a", "b"], "invalid"),  # excluded entirely
    ])
    c = tt.count_transitions(t)
    assert c.state_names == ("a", "b")
    assert c.transitions.tolist() == [[1, 1], [1, 1]]  # a→b, b→b | a→a | b→a; never across traces
    assert c.exits_success.tolist() == [0, 1]
    assert c.exits_failure.tolist() == [1, 0]
    assert c.initial.tolist() == [2, 1]
    assert c.n_traces == {"success": 1, "failure": 1, "censored": 1, "invalid": 1}
    assert c.row_totals.tolist() == [3, 3]


def test_laplace_formula_and_row_sums() -> None:
    t = traces_from([(["a", "b", "b"], "success"), (["a", "a"], "failure"), (["b", "a"], "censored")])
    chain = tt.ChainEstimator(pseudocount=1.0).fit(t).fetch_model()
    # Row a: a→b, a→a, a⊖, and the censored trace's last move out of a (seen not to end there), split over a's
    # observed next states 1:1 → [1.5, 1.5 | 0 | 1], 4 counts + 4 pseudo-counts. Row b: [1, 1 | 1 | 0] + 4.
    da, db = 4 + 4, 3 + 4
    np.testing.assert_allclose(chain.Q, [[2.5 / da, 2.5 / da], [2 / db, 2 / db]], rtol=0, atol=1e-15)
    np.testing.assert_allclose(chain.R_success, [1 / da, 2 / db], atol=1e-15)
    np.testing.assert_allclose(chain.R_failure, [2 / da, 1 / db], atol=1e-15)
    np.testing.assert_allclose(chain.pi0, [2 / 3, 1 / 3])
    assert chain.metadata["pseudocount"] == 1.0
    assert chain.metadata["n_traces"]["censored"] == 1


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from("abcd"), min_size=1, max_size=8),
                          st.sampled_from(["success", "failure"])), min_size=1, max_size=40))
def test_pass_rate_identity_with_zero_pseudocount(seqs: list[tuple[list[str], str]]) -> None:
    """α = 0, empirical π0, no censoring ⇒ R∞ equals the fit set's pass rate exactly."""
    t = traces_from(seqs)
    chain = tt.ChainEstimator(pseudocount=0).fit(t).fetch_model()
    pass_rate = sum(out == "success" for _, out in seqs) / len(seqs)
    assert chain.r_inf == pytest.approx(pass_rate, abs=1e-12)


def test_pass_rate_identity_on_the_bundled_example() -> None:
    t = tt.datasets.load_example()
    chain = tt.ChainEstimator(pseudocount=0).fit(t).fetch_model()
    assert chain.r_inf == pytest.approx(84 / 200, abs=1e-12)
    smoothed = tt.ChainEstimator(pseudocount=1).fit(t).fetch_model()
    assert smoothed.r_inf != pytest.approx(84 / 200, abs=1e-4)


def test_refit_recovers_simulated_chain() -> None:
    truth = tt.datasets.notation_chain()
    t = tt.datasets.simulate_traces(truth, 50_000, seed=3)
    chain = tt.ChainEstimator(pseudocount=0).fit(t).fetch_model()
    order = [chain.state_names.index(n) for n in truth.state_names]
    np.testing.assert_allclose(chain.Q[np.ix_(order, order)], truth.Q, atol=0.01)
    np.testing.assert_allclose(chain.R_success[order], truth.R_success, atol=0.01)
    assert chain.r_inf == pytest.approx(truth.r_inf, abs=0.01)


def test_unvisited_rows_policies() -> None:
    # 'z' only ever appears as the last step of a censored trace: no outgoing data.
    t = traces_from([(["a", "b"], "success"), (["a", "z"], "censored"), (["b"], "failure")])
    prior = tt.ChainEstimator(pseudocount=1).fit(t).fetch_model()
    z = prior.state_index("z")
    np.testing.assert_allclose(prior.Q[z], 1 / 5)
    assert prior.metadata["unvisited_states"] == ["z"] and prior.metadata["unvisited_policy"] == "prior"
    fail = tt.ChainEstimator(pseudocount=1, unvisited="failure").fit(t).fetch_model()
    assert fail.R_failure[z] == 1.0 and fail.Q[z].sum() == 0.0
    assert fail.r_inf < prior.r_inf
    auto0 = tt.ChainEstimator(pseudocount=0).fit(t).fetch_model()
    assert auto0.metadata["unvisited_policy"] == "failure" and auto0.R_failure[auto0.state_index("z")] == 1.0
    with pytest.raises(ValueError, match=r"needs a prior with mass \(pseudocount > 0\)"):
        tt.ChainEstimator(pseudocount=0, unvisited="prior").fit(t)
    # The default episode prior gives the unvisited row the pooled outcomes of all rows plus the pseudo-episode:
    # a → b, a → z, b → success, b → failure, plus ½ success and ½ failure: (a, b, z, ⊕, ⊖) ∝ (0, 1, 1, 1.5, 1.5).
    episode = tt.ChainEstimator().fit(t).fetch_model()
    ze = episode.state_index("z")
    assert episode.state_names == ("a", "b", "z") and episode.metadata["unvisited_policy"] == "prior"
    np.testing.assert_allclose(episode.Q[ze], [0.0, 0.2, 0.2], rtol=0, atol=1e-15)
    assert (episode.R_success[ze], episode.R_failure[ze]) == pytest.approx((0.3, 0.3), abs=1e-15)


def test_fixed_state_vocabulary() -> None:
    t = traces_from([(["a", "b"], "success")])
    chain = tt.ChainEstimator(states=["b", "c", "a"]).fit(t).fetch_model()
    assert chain.state_names == ("b", "c", "a")
    assert chain.metadata["unvisited_states"] == ["c"]
    with pytest.raises(TraceValidationError, match="'a' occurs in the traces but is not in the given states"):
        tt.ChainEstimator(states=["b"]).fit(t)


def test_modal_initial_state() -> None:
    t = traces_from([(["a"], "success"), (["b"], "success"), (["b"], "failure")])
    chain = tt.ChainEstimator(initial="modal").fit(t).fetch_model()
    assert chain.pi0.tolist() == [0.0, 1.0]


def test_closed_loop_with_zero_pseudocount_is_named() -> None:
    # x ↔ y only in censored traces: with α = 0 they can never exit.
    t = traces_from([(["a"], "success"), (["x", "y", "x", "y"], "censored"), (["y", "x", "y"], "censored")])
    with pytest.raises(NonAbsorbingError) as info:
        tt.ChainEstimator(pseudocount=0).fit(t)
    assert set(info.value.states) == {"x", "y"}
    assert "'x'" in str(info.value) and "pseudocount" in str(info.value)
    # With smoothing the same data fits.
    assert tt.ChainEstimator(pseudocount=1).fit(t).fetch_model().n_states == 3


def test_success_unreachable_is_reported_not_nan() -> None:
    t = traces_from([(["a", "b"], "failure"), (["b"], "failure")])
    chain = tt.ChainEstimator(pseudocount=0).fit(t).fetch_model()
    assert chain.r_inf == 0.0
    s = tt.summarize(chain)
    assert s.mean_steps_given_success is None
    assert "unreachable" in s.undefined["mean_steps_given_success"]
    assert all(np.isfinite(s.reliability))


def test_empty_and_all_invalid_trace_sets() -> None:
    with pytest.raises(EmptyTraceSetError, match="1 invalid trace"):
        tt.ChainEstimator().fit(traces_from([(["a"], "invalid")]))
    empty = tt.TraceTable.from_records([{"trace_id": "a", "step_idx": 0, "state": "s", "outcome": "invalid"}])
    with pytest.raises(EmptyTraceSetError):
        tt.ChainEstimator().fit(empty)


def test_parameter_validation_and_not_fitted() -> None:
    with pytest.raises(NotFittedError):
        tt.ChainEstimator().fetch_model()
    t = traces_from([(["a"], "success")])
    for bad in (dict(pseudocount=-1), dict(pseudocount=float("nan")), dict(unvisited="x"), dict(initial="x")):
        with pytest.raises(ValueError):
            tt.ChainEstimator(**bad).fit(t)
    with pytest.raises(TypeError):
        tt.ChainEstimator().fit([1, 2])


def test_fit_from_counts_equals_fit_from_traces() -> None:
    t = tt.datasets.load_example()
    a = tt.ChainEstimator().fit(t).fetch_model()
    b = tt.ChainEstimator().fit(tt.count_transitions(t)).fetch_model()
    np.testing.assert_array_equal(a.Q, b.Q)
    assert a.r_inf == b.r_inf


def test_counting_matches_a_python_loop_oracle() -> None:
    rng = np.random.default_rng(11)
    seqs = [([str(x) for x in rng.integers(0, 5, rng.integers(1, 12))],
             str(rng.choice(["success", "failure", "censored", "invalid"]))) for _ in range(300)]
    t = traces_from(seqs)
    c = tt.count_transitions(t)
    idx = {s: i for i, s in enumerate(c.state_names)}
    T = np.zeros((c.n_states, c.n_states), int)
    es = np.zeros(c.n_states, int)
    ef = np.zeros(c.n_states, int)
    for states, out in seqs:
        if out == "invalid":
            continue
        for u, v in itertools.pairwise(states):
            T[idx[u], idx[v]] += 1
        if out == "success":
            es[idx[states[-1]]] += 1
        elif out == "failure":
            ef[idx[states[-1]]] += 1
    np.testing.assert_array_equal(c.transitions, T)
    np.testing.assert_array_equal(c.exits_success, es)
    np.testing.assert_array_equal(c.exits_failure, ef)


def test_chain_json_round_trip_keeps_metadata(tmp_path) -> None:
    chain = tt.ChainEstimator().fit(tt.datasets.load_example()).fetch_model()
    path = tmp_path / "c.json"
    chain.to_json(path)
    back = tt.AbsorbingChain.from_json(path)
    np.testing.assert_array_equal(back.Q, chain.Q)
    assert back.state_names == chain.state_names and back.r_inf == chain.r_inf
    assert back.metadata["counts"]["transitions"] == chain.metadata["counts"]["transitions"]
