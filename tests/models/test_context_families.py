"""First-order, order-k and duration families: exact likelihoods, exact compiled chains, causal contexts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tests.models.conftest import compiled_path_loglik, records
from tracetochain.datasets import simulate_memory_traces, ss7_chain
from tracetochain.models import DurationModel, LiftedModel, MarkovModel
from tracetochain.models._encoded import encode_traces
from tracetochain.models._shrinkage import root_row


def test_markov_rows_are_counts_shrunk_toward_the_pooled_row() -> None:
    t = records([(["a", "b", "a"], "success"), (["a", "a"], "failure"), (["b"], "success")])
    model = MarkovModel().fit(t)
    fit = model.fit_
    assert fit is not None
    # the exit factor of row "a": counts continue 2 (a→b, a→a), exit 1 (a ⊖ at the end of trace 2) ... shrunk
    counts = fit.counts
    assert counts.tolist() == [[1, 1, 1, 1], [1, 0, 1, 0]]  # rows a, b over (a, b, ⊕, ⊖)
    k = fit.kappas["exit:level1"]
    exit_counts = np.array([[2.0, 2.0], [1.0, 1.0]])  # (continue, exit) for a and b
    root = root_row(exit_counts)
    h = (exit_counts + k * root) / (exit_counts.sum(axis=1, keepdims=True) + k)
    np.testing.assert_allclose(fit.parts["exit"], h, rtol=1e-12)
    # rows sum to 1 and the compiled chain is the rows themselves
    np.testing.assert_allclose(fit.rows.sum(axis=1), 1.0)
    ch = model.to_chain().chain
    np.testing.assert_allclose(np.column_stack([ch.Q, ch.R_success, ch.R_failure]), fit.rows, atol=1e-12)


def test_markov_recovers_a_chain_and_its_likelihood_matches_the_compiled_chain() -> None:
    truth = tt.datasets.notation_chain()
    traces = tt.datasets.simulate_traces(truth, 4000, seed=1)
    model = MarkovModel().fit(traces)
    ch = model.to_chain().chain
    assert ch.r_inf == pytest.approx(truth.r_inf, abs=0.02)
    np.testing.assert_allclose(ch.Q, truth.Q, atol=0.03)
    test = tt.datasets.simulate_traces(truth, 50, seed=2)
    enc = model.encode(test)
    np.testing.assert_allclose(model.trace_loglik(enc), compiled_path_loglik(model.to_chain(), enc.codes, enc),
                               rtol=1e-10)


@pytest.mark.parametrize("make", [lambda: LiftedModel(2), lambda: LiftedModel(3),
                                  lambda: DurationModel(buckets=(2, 4, 7))])
def test_compiled_chain_reproduces_the_family_likelihood_exactly(make) -> None:  # type: ignore[no-untyped-def]
    """Along each trace's path of expanded states, the compiled chain gives the family's own log-likelihood: the
    compilation (contexts with backoff, the step clock) is exact."""
    fit = simulate_memory_traces(ss7_chain(), 600, memory=0.6, seed=3)
    model = make().fit(fit)
    test = simulate_memory_traces(ss7_chain(), 80, memory=0.6, seed=4)
    enc = model.encode(test)
    scheme = model.scheme_
    expanded = scheme.expanded_index(enc, scheme.contexts(enc))
    got = model.trace_loglik(enc)
    want = compiled_path_loglik(model.to_chain(), expanded, enc)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    ch = model.to_chain().chain
    np.testing.assert_allclose(ch.Q.sum(axis=1) + ch.R_success + ch.R_failure, 1.0, atol=1e-12)


def test_lifted_model_finds_memory_and_first_order_data_gives_the_markov_model() -> None:
    mem = simulate_memory_traces(ss7_chain(), 1500, memory=0.6, seed=5)
    test = simulate_memory_traces(ss7_chain(), 1500, memory=0.6, seed=6)
    assert LiftedModel(2).fit(mem).loglik(test) > MarkovModel().fit(mem).loglik(test) + 50
    plain = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 2000, seed=7)
    lifted, markov = LiftedModel(2).fit(plain), MarkovModel().fit(plain)
    # no refinement pays for itself: the order-2 rows are the first-order rows exactly
    assert not any(math.isfinite(v) for k, v in lifted.fit_.kappas.items() if "level2" in k)
    np.testing.assert_allclose(lifted.trace_loglik(plain), markov.trace_loglik(plain), rtol=1e-12)
    assert lifted.to_chain().chain.r_inf == pytest.approx(markov.to_chain().chain.r_inf, abs=1e-12)


def _time_dependent_traces(n: int, seed: int) -> tt.TraceTable:
    """Exit hazard rising with the step index: exits impossible before step 4, likely after step 8."""
    rng = np.random.default_rng(seed)
    recs = []
    for i in range(n):
        t = 0
        while True:
            s = "work" if rng.random() < 0.7 else "check"
            recs.append({"trace_id": f"t{i}", "step_idx": t, "state": s, "outcome": None})
            hazard = 0.0 if t < 4 else (0.15 if t < 8 else 0.5)
            if rng.random() < hazard:
                out = "success" if (s == "check" or rng.random() < 0.4) else "failure"
                break
            t += 1
        for r in recs[-(t + 1):]:
            r["outcome"] = out
    return tt.TraceTable.from_records(recs)


def test_duration_model_learns_a_time_dependent_hazard() -> None:
    fit, test = _time_dependent_traces(1500, 1), _time_dependent_traces(1500, 2)
    dur, markov = DurationModel().fit(fit), MarkovModel().fit(fit)
    assert dur.n_buckets > 1
    assert dur.loglik(test) > markov.loglik(test) + 100
    # nobody succeeds in fewer than 5 steps, in the data and in the duration model's R(d)
    ch = dur.to_chain().chain
    assert ch.reliability(4)[-1] < 0.02 and markov.to_chain().chain.reliability(4)[-1] > 0.1


def test_duration_on_first_order_data_keeps_one_bucket() -> None:
    plain = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 3000, seed=8)
    assert DurationModel().fit(plain).n_buckets == 1


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.sampled_from("abc"), min_size=1, max_size=12), min_size=2, max_size=6),
       st.integers(0, 11))
def test_contexts_are_causal(seqs: list[list[str]], cut: int) -> None:
    """The context of step t depends only on steps ≤ t: cutting every trace after step ``cut`` leaves the contexts
    of the kept steps unchanged (no feature looks at the final length)."""
    full = records([(s, "success") for s in seqs] + [(["a", "b", "c", "a", "b", "c", "a"], "failure")])
    cut_t = records([(s[: cut + 1], "censored") for s in seqs] + [(["a", "b", "c", "a", "b", "c", "a"][: cut + 1],
                                                                   "censored")])
    for model in (LiftedModel(3), DurationModel(buckets=(1, 3, 6))):
        model.fit(full)
        e_full, e_cut = encode_traces(full, model.state_names_), encode_traces(cut_t, model.state_names_)
        c_full = model.scheme_.contexts(e_full)
        c_cut = model.scheme_.contexts(e_cut)
        keep = e_full.position <= cut
        assert c_full[keep].tolist() == c_cut.tolist()


def test_unseen_context_backs_off_to_its_longest_seen_suffix() -> None:
    model = LiftedModel(2).fit(records([(["a", "b", "a", "b"], "success"), (["a", "a"], "failure")]))
    enc = model.encode(records([(["b", "b"], "success")]))  # (b, b) and (^, b) were never seen
    nodes = model.scheme_.contexts(enc)
    assert nodes.tolist() == [1, 1]  # the first-order node of "b"
    assert np.isfinite(model.trace_loglik(enc)).all()
