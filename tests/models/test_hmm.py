"""Absorbing HMM: forward likelihood against brute-force enumeration, EM, recovery, compiled hidden chain."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tracetochain as tt
from tests.models.conftest import records
from tracetochain.models._base import sample_compiled
from tracetochain.models._encoded import encode_traces
from tracetochain.models.hmm import HiddenMarkovModel, HMMParams, _forward, _layout, _posterior


def _brute(p: HMMParams, seq: list[int], outcome: int) -> float:
    K = p.pi.size
    total = 0.0
    for z in itertools.product(range(K), repeat=len(seq)):
        pr = p.pi[z[0]] * p.B[z[0], seq[0]]
        for t in range(1, len(seq)):
            pr *= p.A[z[t - 1], z[t]] * p.B[z[t], seq[t]]
        pr *= 1.0 if outcome == 2 else p.exits[z[-1], outcome]
        total += pr
    return float(np.log(total))


def test_forward_equals_enumeration_over_hidden_paths() -> None:
    rng = np.random.default_rng(0)
    K, m = 3, 2
    rows = rng.dirichlet(np.ones(K + 2), size=K)
    p = HMMParams(rng.dirichlet(np.ones(K)), rows[:, :K], rows[:, K:], rng.dirichlet(np.ones(m), size=K))
    t = records([(["a", "b", "b"], "success"), (["b"], "failure"), (["a", "a", "b", "a"], "censored"),
                 (["b", "a"], "failure")])
    enc = encode_traces(t, ("a", "b"))
    _, _, _, logp = _forward([p], _layout(enc))
    lay = _layout(enc)
    got = np.empty(enc.n_traces)
    got[lay.order] = logp[0]
    want = [_brute(p, enc.codes[enc.offsets[i]:enc.offsets[i + 1]].tolist(), int(enc.outcomes[i]))
            for i in range(enc.n_traces)]
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_several_starts_at_once_are_each_start_alone(hmm3) -> None:  # type: ignore[no-untyped-def]
    """EM runs its random starts in step (one forward–backward pass for all): every start's expected counts, and
    its whole EM path with its own stopping iteration, are bit for bit those of the start run alone."""
    t = sample_compiled(hmm3, 200, np.random.default_rng(5))
    enc = encode_traces(t)
    lay = _layout(enc)
    model = HiddenMarkovModel(3, max_iter=40, tol=1e-4, seed=0)
    freq = (np.bincount(enc.codes, minlength=enc.n_symbols) + 0.5) / (enc.n_steps + 0.5 * enc.n_symbols)
    rng = np.random.default_rng(7)
    starts = [model._random_start(rng, freq, 0.1, 0.5) for _ in range(5)]
    together = _posterior(starts, lay)
    for p, post in zip(starts, together, strict=True):
        alone = _posterior([p], lay)[0]
        for field in ("loglik", "start", "trans", "exits", "emit"):
            assert np.array_equal(getattr(post, field), getattr(alone, field)), field
    runs = model._em(starts, lay, freq, 40)
    iterations = {r[2] for r in runs}
    assert len(iterations) > 1  # the starts stop at different iterations
    for p, (q, total, it, conv) in zip(starts, runs, strict=True):
        q1, total1, it1, conv1 = model._em([p], lay, freq, 40)[0]
        assert (total, it, conv) == (total1, it1, conv1)
        assert all(np.array_equal(getattr(q, f), getattr(q1, f)) for f in ("pi", "A", "exits", "B"))


def test_em_never_decreases_the_likelihood(hmm3) -> None:  # type: ignore[no-untyped-def]
    t = sample_compiled(hmm3, 300, np.random.default_rng(1))
    model = HiddenMarkovModel(3, n_init=1, max_iter=1, seed=0)
    values = []
    for it in (1, 2, 5, 10, 30):
        model.max_iter = it
        model.fit(t)
        values.append(model.loglik_)
    assert all(b >= a - 1e-6 for a, b in itertools.pairwise(values))


@pytest.mark.slow
def test_hmm_recovers_the_generating_model(hmm3) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(2)
    fit, test = sample_compiled(hmm3, 1000, rng), sample_compiled(hmm3, 1000, rng)
    models = {k: HiddenMarkovModel(k, seed=0).fit(fit) for k in (2, 3)}
    assert models[3].loglik(test) > models[2].loglik(test) + 100
    c = models[3].to_chain()
    assert c.chain.r_inf == pytest.approx(hmm3.chain.r_inf, abs=0.03)
    # EM reaches at least the likelihood of the generating parameters (the MLE's basin, not a poor local optimum)
    truth = HMMParams(hmm3.chain.pi0, hmm3.chain.Q, np.column_stack([hmm3.chain.R_success, hmm3.chain.R_failure]),
                      hmm3.emission)
    enc = encode_traces(fit, models[3].state_names_)
    assert models[3].loglik_ >= float(_forward([truth], _layout(enc))[3][0].sum())
    # each true hidden state's emission row is found, each by a different fitted state (L1 distance under 0.45 at
    # this size, while the true rows are 1.0–1.6 apart from one another)
    B = models[3].params_.B
    dist = np.abs(B[:, None, :] - hmm3.emission[None, :, :]).sum(axis=2)
    match = dist.argmin(axis=0)
    assert sorted(match.tolist()) == [0, 1, 2]
    assert dist[match, np.arange(3)].max() < 0.45
    names = models[3].hidden_state_names()
    assert len(set(names)) == 3 and all(n.startswith("h") for n in names)


@pytest.mark.slow
def test_compiled_hidden_chain_predicts_the_success_rate_of_its_own_samples(hmm3) -> None:  # type: ignore[no-untyped-def]
    model = HiddenMarkovModel(3, seed=0).fit(sample_compiled(hmm3, 600, np.random.default_rng(3)))
    c = model.to_chain()
    sample = model.sample(4000, seed=4)
    rate = sample.outcome_counts()["success"] / sample.n_traces
    assert rate == pytest.approx(c.chain.r_inf, abs=0.025)
    assert c.emission.shape == (3, 4) and np.allclose(c.emission.sum(axis=1), 1.0)
    obs = c.to_observed(c.chain.expected_visits())
    assert obs.sum() == pytest.approx(c.chain.expected_visits().sum())


def test_last_step_splits_the_likelihood_into_prefix_and_exit(hmm3) -> None:  # type: ignore[no-untyped-def]
    t = sample_compiled(hmm3, 50, np.random.default_rng(5))
    model = HiddenMarkovModel(3, seed=0).fit(t)
    enc = model.encode(t)
    last = model.last_step(enc)
    ch = model.to_chain().chain
    exits = np.where(enc.outcomes == 0, last.exit_factor(ch.R_success), last.exit_factor(ch.R_failure))
    np.testing.assert_allclose(last.prefix + np.log(exits), model.trace_loglik(enc), rtol=1e-10)
    assert isinstance(tt.models.HiddenMarkovModel, type)
