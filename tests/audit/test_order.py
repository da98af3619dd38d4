"""Markov-order layer: same-observation per-trace likelihoods, G², permutation test, artifact AIC (docs/statistics.md
§5)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.audit import order_test
from tracetochain.audit._order import artifact_aic, order_observations
from tracetochain.datasets import simulate_memory_traces, ss7_chain


def traces_from(seqs: list[tuple[list[str], str]]) -> tt.TraceTable:
    recs = [{"trace_id": f"t{i}", "step_idx": j, "state": s, "outcome": out}
            for i, (states, out) in enumerate(seqs) for j, s in enumerate(states)]
    return tt.TraceTable.from_records(recs)


def _reference(seqs: list[tuple[list[str], str]], names: list[str], include_outcomes: bool = True) -> dict:
    """Plain-Python likelihoods on the documented observations (the spec, written out)."""
    triples: Counter[tuple[str, str, str]] = Counter()
    for states, out in seqs:
        if out == "invalid":
            continue
        sym = list(states) + ([out.upper()] if include_outcomes and out in ("success", "failure") else [])
        for t in range(1, len(sym)):
            triples[(sym[t - 2] if t >= 2 else "START", sym[t - 1], sym[t])] += 1
    pairs: Counter[tuple[str, str]] = Counter()
    ctx1: Counter[str] = Counter()
    ctx2: Counter[tuple[str, str]] = Counter()
    for (a, b, c), n in triples.items():
        pairs[(b, c)] += n
        ctx1[b] += n
        ctx2[(a, b)] += n
    l1 = sum(n * math.log(n / ctx1[b]) for (b, _), n in pairs.items())
    l2 = sum(n * math.log(n / ctx2[(a, b)]) for (a, b, _), n in triples.items())
    p1 = sum(len({c for (b2, c) in pairs if b2 == b}) - 1 for b in ctx1)
    p2 = sum(len({c for (a2, b2, c) in triples if (a2, b2) == ab}) - 1 for ab in ctx2)
    return {"n": sum(triples.values()), "l1": l1, "l2": l2, "p1": p1, "p2": p2}


seq_strategy = st.lists(
    st.tuples(st.lists(st.sampled_from("abc"), min_size=1, max_size=7),
              st.sampled_from(["success", "failure", "censored", "invalid"])), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(seq_strategy, st.booleans())
def test_per_trace_likelihoods_match_the_written_out_definition(seqs: list[tuple[list[str], str]],
                                                                outcomes: bool) -> None:
    t = traces_from(seqs)
    names = list(t.state_labels()[1])
    ref = _reference(seqs, names, outcomes)
    res = order_test(t, names, include_outcomes=outcomes, n_permutations=0)
    assert res.n_observations == ref["n"]
    if ref["n"] == 0:
        assert res.delta_aic is None and res.keeps_order1
        return
    assert res.loglik1 == pytest.approx(ref["l1"], abs=1e-9)
    assert res.loglik2 == pytest.approx(ref["l2"], abs=1e-9)
    assert (res.params1, res.params2) == (ref["p1"], ref["p2"])
    assert res.g2 == pytest.approx(max(0.0, 2 * (ref["l2"] - ref["l1"])), abs=1e-8)
    assert res.delta_aic == pytest.approx(-2 * ref["l1"] + 2 * ref["p1"] + 2 * ref["l2"] - 2 * ref["p2"], abs=1e-8)


@settings(max_examples=40, deadline=None)
@given(seq_strategy, st.randoms(use_true_random=False))
def test_no_pair_crosses_a_trace_boundary(seqs: list[tuple[list[str], str]], rnd: object) -> None:
    """Reordering the traces cannot change a per-trace likelihood (the artifact's concatenation would)."""
    shuffled = list(seqs)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    names = sorted({s for states, _ in seqs for s in states})
    a = order_test(traces_from(seqs), names, n_permutations=0)
    b = order_test(traces_from(shuffled), names, n_permutations=0)
    assert a.n_observations == b.n_observations
    if a.loglik1 is not None:
        assert a.loglik1 == pytest.approx(b.loglik1, abs=1e-9) and a.loglik2 == pytest.approx(b.loglik2, abs=1e-9)


def test_observations_are_transitions_plus_exits() -> None:
    t = traces_from([(["a", "b", "b"], "success"), (["b"], "failure"), (["a", "a"], "censored"),
                     (["b", "a"], "invalid")])
    obs = order_observations(t, ["a", "b"])
    # a→b, b→b (trace 1), exit b→S; exit b→F (trace 2); a→a (censored: no exit). Invalid left out.
    got = sorted(zip(obs.prev.tolist(), obs.cur.tolist(), obs.nxt.tolist(), strict=True))
    START, S, F = 2, 2, 3
    assert got == sorted([(START, 0, 1), (0, 1, 1), (1, 1, S), (START, 1, F), (START, 0, 0)])
    assert obs.n_symbols == 4 and obs.n_traces == 3
    without = order_observations(t, ["a", "b"], include_outcomes=False)
    assert without.cur.size == 3 and without.n_symbols == 2


def test_full_parameter_counts_and_chi2_df() -> None:
    t = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 150, seed=2)
    res = order_test(t, parameter_count="full", n_permutations=0)
    m, s = 3, 5
    assert (res.params1, res.params2) == (m * (s - 1), (m + 1) * m * (s - 1))
    assert res.bic1 is not None and res.delta_bic == pytest.approx(
        res.bic1 - res.bic2)  # type: ignore[operator]
    # notation chain: a→{a, b}, b→{b, c}, c→{c}; plus outcomes: every state has 2 or 3 successors + 2 exits.
    assert res.df is not None and res.df > 0 and 0.0 < res.p_chi2 <= 1.0  # type: ignore[operator]


def test_permutation_p_value_is_seeded_and_bounded() -> None:
    t = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 150, seed=2)
    a = order_test(t, n_permutations=99, seed=4)
    b = order_test(t, n_permutations=99, seed=4)
    assert a.p_permutation == b.p_permutation and 0.01 <= a.p_permutation <= 1.0  # type: ignore[operator]
    assert a.p_value == a.p_permutation
    assert order_test(t, criterion="permutation", n_permutations=99, seed=4).keeps_order1 == (a.p_permutation > 0.05)
    with pytest.raises(ValueError):
        order_test(t, criterion="permutation", n_permutations=0)


def test_memory_is_detected_and_markov_is_kept() -> None:
    chain = ss7_chain()
    markov = order_test(simulate_memory_traces(chain, 300, memory=0.0, seed=1), chain, n_permutations=99, seed=1)
    memory = order_test(simulate_memory_traces(chain, 300, memory=0.6, seed=1), chain, n_permutations=99, seed=1)
    assert markov.keeps_order1 and markov.p_permutation > 0.05  # type: ignore[operator]
    assert not memory.keeps_order1 and memory.p_permutation == pytest.approx(0.01)
    assert memory.g2 > 1000 and memory.delta_bic > 0  # type: ignore[operator]
    # The memory pulls every state back to its predecessor: every state carries G² mass.
    assert min(memory.g2_by_state.values()) > 10


def test_artifact_aic_by_hand() -> None:
    # Stream 0 1 0 0 1 (k = 2): pairs 01 10 00 01 → P1[0] = (1/3, 2/3), P1[1] = (1, 0);
    # triples 010 100 001 → each context has a single successor, ℓ2 = 0.
    r = artifact_aic([0, 1, 0, 0, 1], 2)
    l1 = 2 * math.log(2 / 3) + math.log(1 / 3) + math.log(1.0)
    assert r["loglik1"] == pytest.approx(l1, abs=1e-9)
    assert r["loglik2"] == pytest.approx(0.0, abs=1e-9)
    assert (r["params1"], r["params2"]) == (2, 4)
    assert r["delta_aic"] == pytest.approx((2 * 2 - 2 * l1) - (2 * 4 - 0.0), abs=1e-9)
    assert (r["n_pairs"], r["n_triples"]) == (4, 3)


def test_artifact_mode_concatenates_in_table_order() -> None:
    t = traces_from([(["a", "b"], "success"), (["a", "a", "b"], "failure")])
    res = order_test(t, ["a", "b"], mode="artifact")
    ref = artifact_aic([0, 1, 0, 0, 1], 2)  # the cross-boundary pair b→a is included
    assert res.delta_aic == pytest.approx(ref["delta_aic"]) and res.g2 is None and "g2" in res.undefined
    assert res.keeps_order1 == (ref["aic1"] <= ref["aic2"])
    with pytest.raises(ValueError):
        order_test(t, mode="artifact", criterion="permutation")


def test_to_dict_is_json_safe() -> None:
    t = traces_from([(["a"], "success"), (["b"], "failure")])
    res = order_test(t, include_outcomes=False)
    assert res.delta_aic is None and res.keeps_order1 and "delta_aic" in res.undefined
    json.dumps(res.to_dict(), allow_nan=False)
    tie = order_test(t)  # the two exits are the only observations: both orders fit them perfectly
    assert tie.delta_aic == 0.0 and tie.keeps_order1 and tie.p_chi2 is None
    full = order_test(tt.datasets.simulate_traces(tt.datasets.notation_chain(), 50, seed=0), n_permutations=9)
    doc = full.to_dict()
    json.dumps(doc, allow_nan=False)
    assert doc["observations"].startswith("every transition inside a trace")
    assert "<table>" in full._repr_html_() and "ΔAIC" in str(full)


# ------------------------------------------------------------------------------------------------ SS10/SS11
def _ss10_fit_half(shared_data: Path, merge: dict[str, str]) -> tt.TraceTable:
    """The artifact's SS10 fit half: 160 of 479 traces (default_rng(20260606).choice, sorted), then
    default_rng(20260606).permutation(160), first 80 — in that order (it matters for the concatenated stream)."""
    from tracetochain.featurize.vocab import categorize_shell_paper

    corpus = json.loads((shared_data / "tracetochain-artifact" / "swebench_real" / "corpus.json").read_text())
    ids = list(corpus)
    sub = np.sort(np.random.default_rng(20260606).choice(len(ids), 160, replace=False))
    perm = np.random.default_rng(20260606).permutation(160)
    fit = [ids[sub[i]] for i in perm[:80]]

    def category(tok: str) -> str:  # the artifact keeps `PYTHONPATH=…` as a token of its own (OTHER)
        c = "OTHER" if tok.startswith("PYTHONPATH=") else categorize_shell_paper(None, tok, None)
        return merge.get(c, c)

    recs = [{"trace_id": i, "step_idx": j, "state": category(tok),
             "outcome": "success" if corpus[i]["resolved"] else "failure"}
            for i in fit for j, tok in enumerate(corpus[i]["toks"])]
    return tt.TraceTable.from_records(recs)


def test_artifact_mode_reproduces_ss10_delta_aic(shared_data: Path) -> None:
    """SS10 (Table V): m = 7 Ward states on cat+depth = the 6 pure categories + one FILEOP/OTHER/NONE/INSPECT mix
    (SS10_summary.json state_taxonomy); ΔAIC = +817.2336580804422, AIC1 = 11786.2086, AIC2 = 10968.9750."""
    fit = _ss10_fit_half(shared_data, dict.fromkeys(("FILEOP", "OTHER", "NONE", "INSPECT"), "MIXED"))
    sizes = dict(zip(*np.unique(fit.state_labels()[0], return_counts=True), strict=True))
    names = fit.state_labels()[1]
    assert {names[k]: int(v) for k, v in sizes.items()} == {
        "EXECUTE": 1697, "MIXED": 199, "VIEW": 1016, "EDIT": 1127, "SEARCH": 580, "VCS": 210, "SUBMIT": 159}
    res = order_test(fit, mode="artifact")
    assert res.n_states == 7
    assert res.aic1 == pytest.approx(11786.208624003435, rel=1e-10)
    assert res.aic2 == pytest.approx(10968.974965922993, rel=1e-10)
    assert res.delta_aic == pytest.approx(817.2336580804422, rel=1e-9)
    assert not res.keeps_order1
    # Our default (per-trace, same observations) agrees that first order is rejected.
    assert not order_test(fit, n_permutations=99).keeps_order1


def test_artifact_mode_reproduces_ss11_category_only(shared_data: Path) -> None:
    """SS11 (Table VI), cat-only features, k_max = 10: the 10 categories are the states and ΔAIC = −125.5 — the
    artifact AIC keeps first order; the per-trace G² test on the same fit half does not."""
    fit = _ss10_fit_half(shared_data, {})
    res = order_test(fit, mode="artifact")
    assert res.n_states == 10
    assert round(res.delta_aic, 1) == -125.5  # type: ignore[arg-type]
    assert res.keeps_order1
    ours = order_test(fit, n_permutations=99, criterion="permutation")
    assert not ours.keeps_order1 and ours.delta_aic > 0  # type: ignore[operator]
