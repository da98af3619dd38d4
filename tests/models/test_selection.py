"""Model choice by held-out likelihood: the splits, the rule, the table, and the per-layer checks."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tracetochain as tt
from tests.models.conftest import concat
from tracetochain.models import MarkovModel, choose_model
from tracetochain.models.selection import Candidate, unit_splits


def test_unit_splits_are_repeated_k_fold() -> None:
    splits = unit_splits(23, 10, 0.2, seed=0)
    first, second = np.concatenate(splits[:5]), np.concatenate(splits[5:])
    assert sorted(first.tolist()) == list(range(23)) and sorted(second.tolist()) == list(range(23))
    assert splits[0].tolist() != splits[5].tolist()
    with pytest.raises(ValueError):
        unit_splits(3, 5, 0.2, seed=0)


@pytest.mark.slow
def test_first_order_data_keep_the_plain_chain() -> None:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 600, seed=11)
    choice = choose_model(traces, candidates=("markov", "lifted", "duration", "mixture"), sizes={"mixture": (2,)},
                          n_timing_bootstrap=49)
    assert choice.chosen == "markov"
    assert "no candidate beats" in choice.reason
    assert choice.model is not None and choice.model.family == "markov"
    row = choice.score("markov")
    assert row.verdict == "chosen" and row.timing_passes is not None and row.timing_passes[1] == 5
    doc = choice.to_dict()
    json.dumps(doc, allow_nan=False)
    assert {c["name"] for c in doc["candidates"]} >= {"markov", "lifted(k=2)", "duration", "mixture(C=2)"}
    text = choice.describe()
    assert "chose markov" in text and "timing ok" in text
    assert "<script>" not in choice._repr_html_()


@pytest.mark.slow
def test_a_two_class_mixture_is_chosen_over_the_plain_chain(two_class_chains) -> None:  # type: ignore[no-untyped-def]
    A, B = two_class_chains
    traces = concat(tt.datasets.simulate_traces(A, 300, seed=1), tt.datasets.simulate_traces(B, 300, seed=2))
    choice = choose_model(traces, candidates=("markov", "mixture"), sizes={"mixture": (2, 3)}, checks=False)
    assert choice.chosen == "mixture(C=2)"
    assert choice.score("mixture(C=2)").z_vs_baseline > 2
    # the simpler of two models within one standard error wins
    assert choice.score("mixture(C=3)").verdict in ("better than the baseline, not chosen",
                                                      "not better than the baseline")


def test_ready_made_candidates_and_failures_are_reported() -> None:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 200, seed=3)

    class Broken(MarkovModel):
        family = "broken"

        def _fit(self, enc):  # type: ignore[no-untyped-def]
            raise ValueError("cannot fit this")

    choice = choose_model(traces, candidates=["markov", Candidate("broken", "broken", None, Broken)], checks=False)
    row = choice.score("broken")
    assert row.verdict == "failed" and "cannot fit this" in row.reason
    assert choice.chosen == "markov"
    with pytest.raises(ValueError, match="unknown model family"):
        choose_model(traces, candidates=("markov", "nonsense"))


def test_fit_model_one_call_for_each_choice() -> None:
    from tracetochain.models import fit_model
    from tracetochain.models.selection import MODEL_CHOICES

    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=4)
    plain = fit_model(traces, "markov")
    assert plain.choice is None and plain.compiled.chain.n_states == 3
    lifted = fit_model(traces, "lifted", checks=False)
    assert lifted.model.family == "lifted" and lifted.name in ("lifted(k=2)", "lifted(k=3)")
    assert lifted.choice is not None and lifted.choice.chosen == lifted.name
    doc = lifted.to_dict(horizon=5)
    json.dumps(doc, allow_nan=False)
    assert doc["summary"]["trials"] == "iid" and set(doc["summary"]["pass_hat_k"]) == {"1", "2", "3", "4", "5", "8"}
    assert set(MODEL_CHOICES) == {"auto", "markov", "mixture", "lifted", "hmm", "duration"}
    with pytest.raises(ValueError, match="unknown model"):
        fit_model(traces, "bayes")


def test_decide_applies_the_rule_to_unit_scores() -> None:
    from tracetochain.models.selection import decide

    rng = np.random.default_rng(0)
    base = rng.normal(-10, 1, 200)
    scores = {"markov": base, "big": base + rng.normal(0.5, 0.1, 200), "small": base + rng.normal(0.49, 0.1, 200),
              "noise": base + rng.normal(0.0, 0.1, 200)}
    d = decide(scores, {"markov": 3, "big": 30, "small": 10, "noise": 5})
    assert set(d.better) == {"big", "small"} and d.chosen == "small" and d.best == "big"
    assert d.z_threshold == pytest.approx(2.128, abs=1e-3)  # one-sided Bonferroni, 3 candidates, 5 %
    assert decide({"markov": base, "noise": scores["noise"]}, {"markov": 3, "noise": 5}).chosen == "markov"


def test_too_few_units_keep_the_plain_chain_and_say_so() -> None:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 12, seed=5)
    choice = choose_model(traces)
    assert choice.chosen == "markov" and "at least 20" in choice.reason and choice.candidates == ()
    assert choice.model is not None
    json.dumps(choice.to_dict(), allow_nan=False)
    assert "at least 20" in str(choice) and "markov" in choice._repr_html_()


def test_a_candidate_that_collapses_onto_the_baseline_is_not_better() -> None:
    """A mixture whose classes coincide scores like the first-order chain up to rounding: a gain of hundredths of a
    nat with a standard error far smaller (z in the hundreds). It must not be chosen (MIN_GAIN)."""
    from tracetochain.models.selection import decide

    base = np.random.default_rng(1).normal(-4.5, 1.0, 500)
    collapsed = base + 3e-5 + np.random.default_rng(2).normal(0.0, 2e-7, 500)
    d = decide({"markov": base, "mixture(C=3)": collapsed}, {"markov": 17, "mixture(C=3)": 25})
    assert d.chosen == "markov" and not d.better
    assert decide({"markov": base, "mixture(C=3)": collapsed}, {"markov": 17, "mixture(C=3)": 25},
                  min_gain=0.0).chosen == "mixture(C=3)"  # the degenerate case the floor exists for


def test_choice_stability_counts_the_rule_over_resampled_units() -> None:
    """A candidate far better on every unit is chosen in every resample; two that the units cannot tell apart split
    the resamples, and the note says the choice is not settled. The shares sum to one and repeat for a seed."""
    from tracetochain.models.selection import SETTLED_SHARE, choice_stability, decide, stability_note

    rng = np.random.default_rng(4)
    base = rng.normal(-20.0, 2.0, 120)
    params = {"markov": 10, "a": 20, "b": 20}
    clear = {"markov": base, "a": base + 1.0, "b": base + rng.normal(0.0, 0.01, 120)}
    assert choice_stability(clear, params, z_threshold=2.0) == {"a": 1.0}
    assert stability_note("a", {"a": 1.0}) is None
    # a and b both beat the baseline by the same total; which one has the larger gain depends on the units drawn
    noise = rng.normal(0.0, 1.0, 120)
    close = {"markov": base, "a": base + 0.6 + noise, "b": base + 0.6 + rng.permutation(noise)}
    shares = choice_stability(close, params, z_threshold=2.0, seed=1)
    assert set(shares) == {"a", "b"} and sum(shares.values()) == pytest.approx(1.0)
    assert shares == choice_stability(close, params, z_threshold=2.0, seed=1)
    chosen = decide(close, params, z_threshold=2.0).chosen
    assert shares[chosen] < SETTLED_SHARE
    note = stability_note(chosen, shares)
    assert note is not None and "not settled" in note and f"{shares[chosen]:.0%}" in note


def test_the_choice_reports_its_stability() -> None:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 200, seed=3)
    choice = choose_model(traces, candidates=("markov", "lifted"), sizes={"lifted": (2,)}, checks=False)
    assert choice.stability and sum(choice.stability.values()) == pytest.approx(1.0)
    assert choice.chosen in choice.stability
    doc = json.loads(json.dumps(choice.to_dict(), allow_nan=False))
    assert doc["stability"]["shares"] == choice.stability and doc["stability"]["n_resamples"] == 200
    assert "choice stability" in choice.describe()
