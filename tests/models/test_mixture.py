"""Mixtures of absorbing chains: EM, task-level classes, predictive scores, the compiled block chain, pass^k."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

import tracetochain as tt
from tests.models.conftest import concat
from tracetochain.models import MarkovModel
from tracetochain.models._context import context_loglik, events
from tracetochain.models.mixture import MixtureModel


def _two_class(A: tt.AbsorbingChain, B: tt.AbsorbingChain, n: int, seed: int) -> tt.TraceTable:
    return concat(tt.datasets.simulate_traces(A, n, seed=seed), tt.datasets.simulate_traces(B, n, seed=seed + 100))


def test_one_class_is_the_component_family(two_class_chains) -> None:  # type: ignore[no-untyped-def]
    t = _two_class(*two_class_chains, 200, 1)
    one, markov = MixtureModel(1).fit(t), MarkovModel().fit(t)
    np.testing.assert_allclose(one.trace_loglik(t), markov.trace_loglik(t), rtol=1e-12)
    assert one.to_chain().chain.r_inf == pytest.approx(markov.to_chain().chain.r_inf, abs=1e-12)


def test_em_recovers_two_classes_of_traces(two_class_chains) -> None:  # type: ignore[no-untyped-def]
    A, B = two_class_chains
    t = _two_class(A, B, 600, 2)
    model = MixtureModel(2, seed=0).fit(t)
    assert model.converged_
    np.testing.assert_allclose(model.weights_, [0.5, 0.5], atol=0.08)
    r = np.sort(model.to_chain().component_r_inf())
    np.testing.assert_allclose(r, sorted([B.r_inf, A.r_inf]), atol=0.07)
    test = _two_class(A, B, 400, 3)
    assert model.loglik(test) > MarkovModel().fit(t).loglik(test) + 100
    # classes drawn per trace: trials are i.i.d., pass^k is R∞^k
    c = model.to_chain()
    assert c.trials == "iid"
    np.testing.assert_allclose(c.pass_hat_k([1, 2, 3]), c.chain.r_inf ** np.array([1, 2, 3]), rtol=1e-12)


def _tasks(A: tt.AbsorbingChain, B: tt.AbsorbingChain, n_tasks: int, trials: int, seed: int,
           classes: list[tt.AbsorbingChain] | None = None) -> tt.TraceTable:
    """Tasks of class A (40 %) or B, ``trials`` runs each; the class of every task is appended to ``classes``."""
    rng = np.random.default_rng(seed)
    parts = []
    for j in range(n_tasks):
        ch = A if rng.random() < 0.4 else B
        if classes is not None:
            classes.append(ch)
        t = tt.datasets.simulate_traces(ch, trials, seed=int(rng.integers(2**31)))
        a = t.to_arrow()
        import pyarrow as pa

        a = a.append_column("task_id", pa.array([f"task{j}"] * a.num_rows))
        parts.append(tt.TraceTable.from_arrow(a))
    return concat(*parts)


def test_task_classes_tie_the_trials_and_give_heterogeneous_pass_k(two_class_chains) -> None:  # type: ignore[no-untyped-def]
    A, B = two_class_chains
    drawn: list[tt.AbsorbingChain] = []
    t = _tasks(A, B, 150, 4, 4, drawn)
    model = MixtureModel(2, seed=0).fit(t)
    c = model.to_chain()
    assert model.grouped_by_ == "task" and c.trials == "task"
    # the classes are the generating chains (R∞ 0.63 and 0.27), and pass^k is that of the drawn tasks,
    # mean_t R_{class(t)}^k (within the outcome noise of 600 trials), far above the i.i.d. R∞^k; the between-task
    # variance pass^2 − (pass^1)² is recovered
    np.testing.assert_allclose(np.sort(c.component_r_inf()), [B.r_inf, A.r_inf], atol=0.06)
    ks = np.arange(1, 6)
    truth = np.mean([ch.r_inf ** ks for ch in drawn], axis=0)
    got = c.pass_hat_k(ks)
    np.testing.assert_allclose(got, truth, atol=0.05)
    assert got[1] - got[0] ** 2 == pytest.approx(truth[1] - truth[0] ** 2, abs=0.01)
    assert np.all(c.pass_hat_k([2, 3, 4]) > c.chain.r_inf ** np.array([2, 3, 4]))  # Jensen
    # the predictive terms of a task sum to its joint mixture log-likelihood
    enc = model.encode(t)
    ev = events(enc, model.scheme_)
    ll = np.column_stack([context_loglik(f, ev) for f in model.fits_])
    joint = logsumexp(np.column_stack([enc.units_of(ll[:, j]) for j in range(2)]) + np.log(model.weights_), axis=1)
    np.testing.assert_allclose(enc.units_of(model.trace_loglik(enc)), joint, rtol=1e-10)


def test_compiled_mixture_is_one_block_diagonal_chain(two_class_chains) -> None:  # type: ignore[no-untyped-def]
    t = _tasks(*two_class_chains, 60, 3, 5)
    c = MixtureModel(2, seed=1).fit(t).to_chain()
    n = c.n_states
    blocks = [np.flatnonzero(c.component == k) for k in range(2)]
    assert sum(b.size for b in blocks) == n
    assert np.all(c.chain.Q[np.ix_(blocks[0], blocks[1])] == 0) and np.all(c.chain.Q[np.ix_(blocks[1], blocks[0])] == 0)
    # R∞ of the union is the weighted R∞ of the classes
    assert c.chain.r_inf == pytest.approx(float(c.component_weights @ c.component_r_inf()), abs=1e-12)
    for k in range(2):
        assert c.component_chain(k).r_inf == pytest.approx(c.component_r_inf()[k], abs=1e-12)
    summary = c.summary(horizon=10)
    assert len(summary["classes"]) == 2 and summary["trials"] == "task"
    shares = c.failure_attribution()
    assert sum(shares["overall"].values()) == pytest.approx(1.0)
    # every metric of the chain works on the union (e.g. a what-if)
    from tracetochain.whatif import Reroute, what_if

    assert what_if(c.chain, [Reroute("*", 0.1)]).delta_r_inf > 0


@pytest.mark.parametrize("component", ["lifted", "duration"])
def test_mixture_of_richer_components_fits_and_compiles(two_class_chains, component) -> None:  # type: ignore[no-untyped-def]
    t = _two_class(*two_class_chains, 300, 6)
    model = MixtureModel(2, component=component, order=2, seed=0).fit(t)
    c = model.to_chain()
    assert c.n_components == 2 and np.isfinite(model.trace_loglik(t)).all()
    assert model.label.startswith("mixture(C=2, ")
