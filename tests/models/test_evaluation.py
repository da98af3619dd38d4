"""Held-out checks of a family on its compiled chain: the task-clustered timing null, R∞, L∞."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import tracetochain as tt
from tests.models.conftest import concat
from tracetochain.models import MarkovModel, MixtureModel, evaluate_heldout
from tracetochain.models._encoded import encode_traces
from tracetochain.models.evaluation import timing_check


def test_timing_check_accepts_the_true_model_and_rejects_a_wrong_clock() -> None:
    truth = tt.datasets.notation_chain()
    model = MarkovModel().fit(tt.datasets.simulate_traces(truth, 3000, seed=1))
    test = tt.datasets.simulate_traces(truth, 400, seed=2)
    ev = evaluate_heldout(model, test, n_bootstrap=199, seed=0)
    assert ev.timing_passes()
    assert ev.r_inf_check.holds and ev.l_inf < 0.06
    json_doc = ev.to_dict()
    assert json_doc["timing"]["mode"] == "monte-carlo"
    slow = truth.with_changes(Q=truth.Q * 0.5, R_success=truth.R_success + truth.Q.sum(axis=1) * 0.25,
                              R_failure=truth.R_failure + truth.Q.sum(axis=1) * 0.25)
    wrong = evaluate_heldout(model, tt.datasets.simulate_traces(slow, 400, seed=3), n_bootstrap=199, seed=0)
    assert not wrong.timing_passes()


def test_clustered_null_is_wider_when_trials_of_a_task_share_a_class(two_class_chains) -> None:  # type: ignore[no-untyped-def]
    A, B = two_class_chains
    rng = np.random.default_rng(0)
    parts = []
    for j in range(120):
        a = tt.datasets.simulate_traces(A if rng.random() < 0.5 else B, 4, seed=int(rng.integers(2**31))).to_arrow()
        parts.append(tt.TraceTable.from_arrow(a.append_column("task_id", pa.array([f"k{j}"] * a.num_rows))))
    t = concat(*parts)
    model = MixtureModel(2, seed=0).fit(t)
    enc = encode_traces(t, model.state_names_)
    grouped = timing_check(model.to_chain(), enc, n_bootstrap=199, seed=1)
    iid = timing_check(model.to_chain(), enc.select(np.arange(enc.n_traces)).__class__(
        enc.codes, enc.offsets, enc.outcomes, enc.state_names, np.arange(enc.n_traces), "trace"),
        n_bootstrap=199, seed=1)
    assert grouped.statistic == iid.statistic
    q = grouped.bootstrap["d_star_quantiles"]["0.95"], iid.bootstrap["d_star_quantiles"]["0.95"]
    assert q[0] > q[1]


def test_refitting_null_carries_the_fit_noise_and_like_keeps_the_size() -> None:
    from tracetochain.models import DurationModel, LiftedModel, TaskClassModel

    truth = tt.datasets.notation_chain()
    fit, test = tt.datasets.simulate_traces(truth, 150, seed=1), tt.datasets.simulate_traces(truth, 150, seed=2)
    model = MarkovModel().fit(fit)
    fixed = evaluate_heldout(model, test, n_bootstrap=99, seed=0)
    refit = evaluate_heldout(model, test, n_bootstrap=99, seed=0, fit=fit)
    assert refit.timing.statistic == fixed.timing.statistic and refit.timing.settings["refit"]
    # the fit half's noise widens the null
    assert refit.timing.bootstrap["d_star_quantiles"]["0.5"] > fixed.timing.bootstrap["d_star_quantiles"]["0.5"]
    assert refit.timing_passes()
    dur = DurationModel(buckets=(2, 5)).fit(fit)
    assert dur.like().buckets == dur.edges and not dur.like().state_names_
    tc = TaskClassModel(LiftedModel(3), 2, seed=4).like()
    assert isinstance(tc.base, LiftedModel) and tc.base.order == 3 and tc.n_classes == 2 and tc.seed == 4


def test_a_sequential_screen_stops_early_when_the_model_fits_and_runs_out_when_it_does_not() -> None:
    """Besag & Clifford's sequential p (h / l): a fitting model stops after h exceedances; a rejected one draws
    every replicate and keeps the smallest attainable p (the screen can still reject)."""
    truth = tt.datasets.notation_chain()
    model = MarkovModel().fit(tt.datasets.simulate_traces(truth, 3000, seed=1))
    compiled = model.to_chain()
    test = encode_traces(tt.datasets.simulate_traces(truth, 400, seed=2), model.state_names_)
    full = timing_check(compiled, test, n_bootstrap=199, seed=0)
    seq = timing_check(compiled, test, n_bootstrap=199, seed=0, stop_after=10)
    assert seq.statistic == full.statistic
    drawn = seq.settings["sequential"]["replicates_drawn"]
    assert drawn < 199 and seq.p_value == 10 / drawn and seq.p_value > 0.05
    slow = truth.with_changes(Q=truth.Q * 0.5, R_success=truth.R_success + truth.Q.sum(axis=1) * 0.25,
                              R_failure=truth.R_failure + truth.Q.sum(axis=1) * 0.25)
    bad = encode_traces(tt.datasets.simulate_traces(slow, 400, seed=3), model.state_names_)
    rej = timing_check(compiled, bad, n_bootstrap=199, seed=0, stop_after=10)
    assert "sequential" not in rej.settings and rej.p_value == timing_check(compiled, bad, n_bootstrap=199,
                                                                             seed=0).p_value == 1 / 200


@pytest.mark.slow
def test_the_sequential_p_value_is_the_full_one_below_h_over_b_and_keeps_its_size() -> None:
    """The chosen model's timing null stops at h = B / 10 exceedances (analysis._models.certificate_stop_after).
    Corpus by corpus, the sequential p equals the full test's whenever the full run has fewer than h exceedances,
    and is at least h / B otherwise; over 300 corpora drawn from the model its size stays within the level."""
    truth = tt.datasets.notation_chain()
    model = MarkovModel().fit(tt.datasets.simulate_traces(truth, 20_000, seed=1))
    compiled = model.to_chain()
    B, h = 99, 10
    seq_p, full_p = [], []
    for i in range(300):
        test = encode_traces(tt.datasets.simulate_traces(truth, 60, seed=100 + i), model.state_names_)
        full = timing_check(compiled, test, n_bootstrap=B, seed=i)
        seq = timing_check(compiled, test, n_bootstrap=B, seed=i, stop_after=h)
        assert seq.statistic == full.statistic
        g = round(full.p_value * (B + 1)) - 1  # exceedances of the full run
        if g < h:
            assert seq.p_value == full.p_value and "sequential" not in seq.settings, (i, g)
        else:
            assert seq.p_value >= h / B - 1e-12, (i, g, seq.p_value)
        seq_p.append(seq.p_value)
        full_p.append(full.p_value)
    seq_a, full_a = np.array(seq_p), np.array(full_p)
    assert np.array_equal(seq_a <= 0.05, full_a <= 0.05)  # every decision at 5 % is the full test's
    for t in (0.05, 0.1, 0.25, 0.5):
        # super-uniform up to Monte Carlo error (3 binomial standard errors of 300 corpora)
        assert np.mean(seq_a <= t) <= t + 3 * np.sqrt(t * (1 - t) / 300), (t, np.mean(seq_a <= t))
