"""Task classes on top of a family: exit tilts and row tilts, EM, compiled copies, pass^k."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import tracetochain as tt
from tests.models.conftest import concat
from tracetochain.models import HiddenMarkovModel, LiftedModel, MarkovModel, MixtureModel, TaskClassModel


def _hard_and_easy_tasks(n_tasks: int, trials: int, seed: int) -> tuple[tt.TraceTable, list[float]]:
    """Same dynamics, but a task is hard (success share of exits 0.1) or easy (0.9): only the outcome differs."""
    rng = np.random.default_rng(seed)
    base = tt.datasets.notation_chain()
    exits = base.R_success + base.R_failure
    parts, rates = [], []
    for j in range(n_tasks):
        q = 0.1 if rng.random() < 0.5 else 0.9
        ch = base.with_changes(R_success=exits * q, R_failure=exits * (1 - q))
        rates.append(ch.r_inf)
        a = tt.datasets.simulate_traces(ch, trials, seed=int(rng.integers(2**31))).to_arrow()
        parts.append(tt.TraceTable.from_arrow(a.append_column("task_id", pa.array([f"task{j}"] * a.num_rows))))
    return concat(*parts), rates


def test_one_class_is_the_base_model() -> None:
    t, _ = _hard_and_easy_tasks(40, 3, 1)
    one, base = TaskClassModel(MarkovModel(), 1).fit(t), MarkovModel().fit(t)
    np.testing.assert_allclose(one.trace_loglik(t), base.trace_loglik(t), rtol=1e-12)
    assert one.n_parameters == base.n_parameters


@pytest.mark.slow
@pytest.mark.parametrize("tilt", ["outcome", "all"])
def test_task_classes_recover_hard_and_easy_tasks(tilt: str) -> None:
    t, rates = _hard_and_easy_tasks(200, 4, 2)
    model = TaskClassModel(MarkovModel(), 2, tilt=tilt).fit(t)  # type: ignore[arg-type]
    c = model.to_chain()
    assert c.trials == "task" and c.n_components == 2
    ks = np.arange(1, 6)
    truth = np.mean([r ** ks for r in rates], axis=0)
    np.testing.assert_allclose(c.pass_hat_k(ks), truth, atol=0.05)
    np.testing.assert_allclose(np.sort(c.component_r_inf()), sorted(set(np.round(rates, 6))), atol=0.06)
    # the class weights are the share of hard tasks and the held-out tasks are predicted better than i.i.d.
    test, _ = _hard_and_easy_tasks(200, 4, 3)
    assert model.loglik(test) > MarkovModel().fit(t).loglik(test) + 50
    assert np.all(c.pass_hat_k([2, 3]) > c.chain.r_inf ** np.array([2, 3]))


def test_compiled_copies_keep_the_dynamics_and_tilt_the_exits() -> None:
    t, _ = _hard_and_easy_tasks(80, 3, 4)
    model = TaskClassModel(MarkovModel(), 2, tilt="outcome").fit(t)
    c, base = model.to_chain(), model.base.to_chain().chain
    n = base.n_states
    for j in range(2):
        sl = slice(j * n, (j + 1) * n)
        np.testing.assert_allclose(c.chain.Q[sl, sl], base.Q, atol=1e-12)
        np.testing.assert_allclose(c.chain.R_success[sl] + c.chain.R_failure[sl], base.R_success + base.R_failure,
                                   atol=1e-12)
    assert c.chain.n_states == 2 * n


def test_row_tilts_are_the_weighted_maximum_likelihood() -> None:
    """At the fitted tilts the gradient of each class's weighted log-likelihood (plus ridge) vanishes."""
    from tracetochain.models._context import events
    from tracetochain.models.tasks import TILT_RIDGE

    t, _ = _hard_and_easy_tasks(60, 3, 5)
    model = TaskClassModel(LiftedModel(2), 2, tilt="all").fit(t)
    enc = model.encode(t)
    ev = events(enc, model.base.scheme_)
    J = enc.n_symbols + 2
    A = np.bincount(ev.node * J + ev.col, minlength=model.base.scheme_.n_nodes * J).reshape(-1, J).astype(float)
    beta = model._newton_tilts(A[None], np.zeros((1, J)))[0]
    P = model._base_rows()
    w = P * np.exp(beta)
    pt = w / w.sum(axis=1, keepdims=True)
    grad = A.sum(axis=0) - A.sum(axis=1) @ pt - TILT_RIDGE * beta
    assert np.abs(grad).max() < 1e-6


def test_hidden_states_get_exit_tilts_and_mixtures_are_refused() -> None:
    t, _ = _hard_and_easy_tasks(60, 3, 6)
    model = TaskClassModel(HiddenMarkovModel(2, n_init=2, seed=0), 2).fit(t)
    assert model.to_chain().n_components == 2 and model.label == "hmm(K=2)+tasks(C=2)"
    with pytest.raises(ValueError, match="mixture"):
        TaskClassModel(MixtureModel(2), 2)
    with pytest.raises(ValueError, match="contexts"):
        TaskClassModel(HiddenMarkovModel(2), 2, tilt="all")


def test_tau_bench_pass_k_inside_the_task_bootstrap_intervals(shared_data) -> None:  # type: ignore[no-untyped-def]
    """The model the selector picks on τ-bench airline (order-3 contexts with two task classes) reproduces the
    per-task pass^1..4 within their 95 % task-bootstrap intervals (the i.i.d. chain gives 0.42/0.18/0.08/0.03)."""
    from tracetochain.models import empirical_pass_k
    from tracetochain.states import CategoricalStates

    raw = tt.read_traces(shared_data / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json")
    t = CategoricalStates(vocabulary="chat").fit(raw).fetch_model().label(raw)
    model = TaskClassModel(LiftedModel(3), 2).fit(t)
    est = empirical_pass_k(t, [1, 2, 3, 4], n_bootstrap=2000, seed=0)
    np.testing.assert_allclose(est.pass_hat_k, [0.42, 0.27333333, 0.22, 0.2], atol=1e-6)
    got = model.pass_hat_k([1, 2, 3, 4])
    for k, v in zip([1, 2, 3, 4], got, strict=True):
        lo, hi = est.interval(k)
        assert lo <= v <= hi, (k, v, lo, hi)
    iid = model.to_chain().chain.r_inf ** np.arange(1, 5)
    assert iid[2] < est.interval(3)[0]  # the i.i.d. value is outside
