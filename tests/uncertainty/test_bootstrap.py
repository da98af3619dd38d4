"""TraceBootstrap: the vectorised fast path equals a per-replicate refit bit for bit; seeds, tasks, full path."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.chain import per_trace_counts
from tracetochain.exceptions import EmptyTraceSetError, NotFittedError
from tracetochain.featurize import RuleFeaturizer
from tracetochain.partitioned import poisson_weights
from tracetochain.states import CategoricalStates, WardStates
from tracetochain.traces._hashing import fnv1a_hashes, unit_hashes
from tracetochain.uncertainty import TraceBootstrap
from tracetochain.uncertainty._align import match_by_centroids, match_by_exit_profile, match_by_names
from tracetochain.uncertainty._bootstrap import take_traces


def traces_from(seqs: list[tuple[list[str], str]], tasks: list[str] | None = None) -> tt.TraceTable:
    recs = [{"trace_id": f"t{i}", "step_idx": j, "state": s, "outcome": out,
             **({"task_id": tasks[i]} if tasks else {})}
            for i, (states, out) in enumerate(seqs) for j, s in enumerate(states)]
    return tt.TraceTable.from_records(recs)


@pytest.fixture(scope="module")
def traces() -> tt.TraceTable:
    t = tt.datasets.simulate_traces(tt.datasets.random_chain(4, seed=3, rho=0.75), 120, seed=2, max_steps=12)
    return t  # some traces are censored at 12 steps


def test_per_trace_counts_sum_to_count_transitions(traces: tt.TraceTable) -> None:
    codes, names = traces.state_labels()
    P = per_trace_counts(codes, traces.offsets, traces.outcomes(), len(names))
    total = np.asarray(P.sum(axis=0))[0]
    c = tt.count_transitions(traces)
    m = len(names)
    assert total[: m * m].reshape(m, m).tolist() == c.transitions.tolist()
    assert total[m * m: m * m + m].tolist() == c.exits_success.tolist()
    assert total[m * m + m: m * m + 2 * m].tolist() == c.exits_failure.tolist()
    assert total[m * m + 2 * m:].tolist() == c.initial.tolist()


@settings(max_examples=40, deadline=None)
@given(seqs=st.lists(st.tuples(st.lists(st.sampled_from("abc"), min_size=1, max_size=6),
                               st.sampled_from(["success", "failure", "censored"])), min_size=1, max_size=8),
       weights=st.lists(st.integers(0, 3), min_size=8, max_size=8))
def test_weighted_per_trace_counts_equal_counting_the_resample(seqs: list[tuple[list[str], str]],
                                                               weights: list[int]) -> None:
    """w @ P (the fast path's counts) == count_transitions on the table with trace i repeated w_i times."""
    t = traces_from(seqs)
    codes, names = t.state_labels()
    P = per_trace_counts(codes, t.offsets, t.outcomes(), len(names))
    w = np.asarray(weights[: t.n_traces])
    if w.sum() == 0:
        return
    resample, _ = take_traces(t, np.repeat(np.arange(w.size), w))
    c = tt.count_transitions(resample, names)
    m = len(names)
    got = np.asarray(P.T @ w.astype(float))
    assert got[: m * m].reshape(m, m).tolist() == c.transitions.tolist()
    assert got[m * m: m * m + m].tolist() == c.exits_success.tolist()
    assert got[m * m + m: m * m + 2 * m].tolist() == c.exits_failure.tolist()
    assert got[m * m + 2 * m:].tolist() == c.initial.tolist()


def test_reference_is_the_estimator_chain(traces: tt.TraceTable) -> None:
    ens = TraceBootstrap(samples=5).fit(traces).fetch_model()
    chain = tt.ChainEstimator().fit(traces).fetch_model()
    np.testing.assert_array_equal(ens.reference.Q, chain.Q)
    np.testing.assert_array_equal(ens.reference.pi0, chain.pi0)
    assert ens.reference.metadata["counts"] == chain.metadata["counts"]


def test_vectorised_driver_equals_each_replicate_refit(traces: tt.TraceTable) -> None:
    """run() (one sparse product for all replicates) == replicate_arrays(i) == ChainEstimator on the resample (the
    prior at its mean, draw_prior=False)."""
    boot = TraceBootstrap(samples=300, seed=11, draw_prior=False).fit(traces)  # > one chunk of 128
    ens = boot.fetch_model()
    plan = boot.plan_
    assert plan is not None
    for i in (0, 127, 128, 299):
        one = plan.replicate_arrays(i)
        np.testing.assert_array_equal(one["Q"][0], ens.Q[i])
        np.testing.assert_array_equal(one["pi0"][0], ens.pi0[i])
        w = plan.trace_weights(plan.seeds[i]).astype(int)
        resample, _ = take_traces(traces, np.repeat(np.arange(w.size), w))
        refit = tt.ChainEstimator(states=ens.state_names).fit(resample).fetch_model()
        np.testing.assert_array_equal(refit.Q, ens.Q[i])
        np.testing.assert_array_equal(refit.R_success, ens.R_success[i])
        np.testing.assert_array_equal(refit.pi0, ens.pi0[i])
    c = plan.replicate(5)
    np.testing.assert_array_equal(c.Q, ens.Q[5])


def test_drawn_prior_replicates_add_gamma_pseudo_counts_to_the_resample(traces: tt.TraceTable) -> None:
    """By default every replicate's row i is (x_i^b + G_i^b) / Σ, with x^b the resample's counts and G^b Gamma draws
    of the episode prior's pseudo-counts on the reference counts (½ c_i / C on each exit, nothing on transitions),
    replicate b drawing from its own stream SeedSequence([seed, 0x9D1A, b])."""
    ens_boot = TraceBootstrap(samples=150, seed=11).fit(traces)
    ens, plan = ens_boot.fetch_model(), ens_boot.plan_
    assert plan is not None and ens.info["draw_prior"] is True
    names = ens.state_names
    m = len(names)
    ref = tt.count_transitions(traces, names)
    c = np.column_stack([ref.transitions, ref.exits_success, ref.exits_failure]).sum(axis=1).astype(float)
    a = np.zeros((m, m + 2))
    a[:, m] = a[:, m + 1] = 0.5 * c / c.sum()
    for b in (0, 77, 149):
        w = plan.trace_weights(plan.seeds[b]).astype(int)
        resample, _ = take_traces(traces, np.repeat(np.arange(w.size), w))
        x = tt.count_transitions(resample, names)
        rows = x.outcome_matrix(censored_moves=True)  # censored traces' last moves allocated, as the estimator does
        rng = np.random.default_rng(np.random.SeedSequence([11, 0x9D1A, b]))
        rows = rows + rng.standard_gamma(np.broadcast_to(a, (1, m, m + 2)))[0]
        rows /= rows.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(ens.Q[b], rows[:, :m], rtol=1e-13, atol=0)
        np.testing.assert_allclose(ens.R_success[b], rows[:, m], rtol=1e-13, atol=0)
        np.testing.assert_allclose(ens.R_failure[b], rows[:, m + 1], rtol=1e-13, atol=0)


def test_replicate_seeds_are_spawned_children(traces: tt.TraceTable) -> None:
    """Multinomial resampling (the paper's): replicate i resamples n of n traces from child i of SeedSequence(seed).
    Poisson weights (default): replicate i weighs each trace by the Poisson(1) draw of its id hash."""
    boot = TraceBootstrap(samples=10, seed=42, weights="multinomial").fit(traces)
    assert boot.plan_ is not None
    kids = np.random.SeedSequence(42).spawn(10)
    rng = np.random.default_rng(kids[3])
    n = traces.n_traces
    expected = np.bincount(rng.integers(0, n, n), minlength=n)
    np.testing.assert_array_equal(boot.plan_.trace_weights(boot.plan_.seeds[3]), expected)
    poisson = TraceBootstrap(samples=10, seed=42).fit(traces)
    assert poisson.plan_ is not None
    by_id = poisson_weights(unit_hashes(traces.trace_id_array), 42, range(3, 4))[:, 0]
    np.testing.assert_array_equal(poisson.plan_.trace_weights(poisson.plan_.seeds[3]), by_id)
    for weights in ("multinomial", "poisson"):
        first = TraceBootstrap(samples=10, seed=42, weights=weights).fit(traces).fetch_model()  # type: ignore[arg-type]
        again = TraceBootstrap(samples=10, seed=42, weights=weights).fit(traces).fetch_model()  # type: ignore[arg-type]
        np.testing.assert_array_equal(again.Q, first.Q)
        other = TraceBootstrap(samples=10, seed=43, weights=weights).fit(traces).fetch_model()  # type: ignore[arg-type]
        assert not np.array_equal(other.Q, again.Q)
        # More replicates extend, never reshuffle, the first ones.
        more = TraceBootstrap(samples=20, seed=42, weights=weights).fit(traces).fetch_model()  # type: ignore[arg-type]
        np.testing.assert_array_equal(more.Q[:10], again.Q)


def test_engine_mapping_seeds_gives_the_same_numbers(traces: tt.TraceTable) -> None:
    """Any engine with map_seeds(fn, seed, n) — here a minimal one — reproduces the local driver exactly."""

    class ListEngine:
        def map_seeds(self, fn, seed, n):  # type: ignore[no-untyped-def]
            return [fn(s) for s in reversed(np.random.SeedSequence(seed).spawn(n))][::-1]

    local = TraceBootstrap(samples=40, seed=5).fit(traces).fetch_model()
    mapped = TraceBootstrap(samples=40, seed=5, engine=ListEngine()).fit(traces).fetch_model()
    np.testing.assert_array_equal(local.Q, mapped.Q)
    np.testing.assert_array_equal(local.pi0, mapped.pi0)


def test_engine_from_the_library_if_present(traces: tt.TraceTable) -> None:
    engines = pytest.importorskip("tracetochain.engines")
    local_engine = getattr(engines, "LocalEngine", None)
    if local_engine is None:
        pytest.skip("tracetochain.engines has no LocalEngine")
    with local_engine() as eng:
        mapped = TraceBootstrap(samples=30, seed=9, engine=eng).fit(traces).fetch_model()
    local = TraceBootstrap(samples=30, seed=9).fit(traces).fetch_model()
    np.testing.assert_array_equal(local.R_failure, mapped.R_failure)


def test_task_bootstrap_resamples_whole_tasks() -> None:
    seqs = [(["a", "b"], "success"), (["a"], "failure"), (["b", "a"], "success"), (["a", "a"], "failure"),
            (["b"], "success"), (["a", "b", "b"], "failure")]
    t = traces_from(seqs, tasks=["x", "x", "y", "y", "z", "z"])
    boot = TraceBootstrap(samples=50, by="task", seed=0, weights="multinomial").fit(t)
    plan = boot.plan_
    assert plan is not None and plan.n_units == 3
    for i in range(50):
        w = plan.trace_weights(plan.seeds[i])
        assert w[0] == w[1] and w[2] == w[3] and w[4] == w[5] and w.sum() == 6
    assert boot.fetch_model().info["by"] == "task"
    # Poisson weights (default) by task: every trial of a task gets the Poisson(1) draw of the task id's hash.
    auto = TraceBootstrap(samples=50, seed=0).fit(t)  # "auto": tasks repeat, so by task
    assert auto.plan_ is not None and auto.fetch_model().info["by"] == "task"
    task_w = poisson_weights(fnv1a_hashes(pa.array(["x", "y", "z"])), 0, range(50))
    for i in range(50):
        np.testing.assert_array_equal(auto.plan_.trace_weights(auto.plan_.seeds[i]), np.repeat(task_w[:, i], 2))


def test_task_bootstrap_without_task_ids_is_the_trace_bootstrap(traces: tt.TraceTable) -> None:
    a = TraceBootstrap(samples=20, by="task", seed=1).fit(traces).fetch_model()
    assert a.info["n_units"] == traces.n_traces


def test_poisson_weights(traces: tt.TraceTable) -> None:
    boot = TraceBootstrap(samples=30, weights="poisson", seed=2).fit(traces)
    assert boot.plan_ is not None
    totals = [boot.plan_.trace_weights(s).sum() for s in boot.plan_.seeds]
    assert len(set(totals)) > 1
    assert boot.fetch_model().info["weights"] == "poisson"


def test_poisson_replicates_with_no_trace_are_dropped_and_counted() -> None:
    t = traces_from([(["a"], "success"), (["a", "b"], "failure")])
    ens = TraceBootstrap(samples=60, weights="poisson", seed=0).fit(t).fetch_model()
    assert ens.info["n_dropped"] > 0  # e^{-2} ≈ 13.5% of replicates draw nothing
    assert ens.n_samples == 60 - ens.info["n_dropped"]


def test_invalid_traces_are_not_resampled() -> None:
    t = traces_from([(["a", "b"], "success"), (["b"], "invalid"), (["a"], "failure")])
    ens = TraceBootstrap(samples=10).fit(t).fetch_model()
    assert ens.info["n_traces"] == 2
    assert ens.reference.metadata["n_traces"]["invalid"] == 1
    with pytest.raises(EmptyTraceSetError):
        TraceBootstrap().fit(traces_from([(["a"], "invalid")]))


def test_state_names_fix_the_order(traces: tt.TraceTable) -> None:
    names = sorted(traces.state_labels()[1], reverse=True)
    ens = TraceBootstrap(samples=3, state_names=names).fit(traces).fetch_model()
    assert ens.state_names == tuple(names)
    with pytest.raises(tt.exceptions.TraceValidationError):
        TraceBootstrap(state_names=names[:-1]).fit(traces)


def test_full_path_with_name_alignment_equals_fast_path_for_fixed_categories(traces: tt.TraceTable) -> None:
    """Categorical states are the same on every replicate, so re-discovering them changes nothing."""
    fast = TraceBootstrap(samples=15, states=CategoricalStates(), seed=3).fit(traces).fetch_model()
    full = TraceBootstrap(samples=15, states=CategoricalStates(), path="full", seed=3).fit(traces).fetch_model()
    assert full.method == "bootstrap-full" and full.info["align"] == "names"
    np.testing.assert_array_equal(fast.Q, full.Q)
    np.testing.assert_array_equal(fast.pi0, full.pi0)


def _one_hot_traces(chain: tt.AbsorbingChain, n: int, seed: int) -> tt.TraceTable:
    """Simulated traces whose tool_name is the true state, so RuleFeaturizer gives one-hot features."""
    t = tt.datasets.simulate_traces(chain, n, seed=seed)
    a = t.to_arrow()
    a = a.append_column("tool_name", a.column("state")).append_column("step_kind", pa.array(["tool"] * a.num_rows))
    return tt.TraceTable.from_dataframe(a.drop_columns(["state"]))


def test_full_path_with_ward_recovers_the_reference_states() -> None:
    """One-hot features: Ward finds the same 4 states on every replicate; Hungarian alignment on centroids maps them
    back exactly, so the full path equals the fast path (the paper's 4.7× in SS13 is not a property of the data)."""
    from _uq_generators import ss13_chain

    t = _one_hot_traces(ss13_chain(), 150, seed=0)
    est = WardStates(featurizer=RuleFeaturizer(kind=False, error=False), k_min=2, k_max=6)
    fast = TraceBootstrap(samples=12, states=est, seed=1).fit(t).fetch_model()
    full = TraceBootstrap(samples=12, states=est, path="full", seed=1).fit(t).fetch_model()
    assert full.info["align"] == "centroids" and full.info["n_states_found"] == {"4": 12}
    np.testing.assert_array_equal(fast.Q, full.Q)
    # The artifact's greedy R⊕ alignment swaps states a and b (equal true R⊕) and inflates the widths.
    greedy = TraceBootstrap(samples=12, states=est, path="full", align="exit-profile", seed=1).fit(
        t).fetch_model()
    w_fast = np.median(fast.entry_intervals().widths()["Q"])
    w_greedy = np.median(greedy.entry_intervals().widths()["Q"])
    assert w_greedy > 1.2 * w_fast


def test_full_path_records_missing_and_merged_states() -> None:
    """A state seen in one trace only is missing from replicates that skip that trace: empty row (prior)."""
    seqs = [(["a", "b"], "success")] * 20 + [(["a", "c", "b"], "failure")]
    t = traces_from(seqs)
    ens = TraceBootstrap(samples=30, states=CategoricalStates(), path="full", seed=0, pseudocount=1,
                         draw_prior=False).fit(t).fetch_model()
    assert ens.info["replicates_missing_states"] > 0
    missing = [d for d in ens.info["replicates"] if d["missing_reference_states"]]
    i = missing[0]["replicate"]
    c = ens.state_names.index("c")
    m = ens.n_states
    np.testing.assert_allclose(ens.Q[i, c], 1 / (m + 2))  # Laplace prior row: nothing observed from "c"
    # The default draws the episode prior's pseudo-counts in every replicate, on the full path as on the fast one.
    full = TraceBootstrap(samples=30, states=CategoricalStates(), path="full", seed=0).fit(t).fetch_model()
    fast = TraceBootstrap(samples=30, states=CategoricalStates(), seed=0).fit(t).fetch_model()
    np.testing.assert_array_equal(full.Q, fast.Q)
    np.testing.assert_array_equal(full.R_failure, fast.R_failure)
    assert full.info["draw_prior"] is True
    np.testing.assert_allclose(full.Q[:, c].sum(axis=1) + full.R_success[:, c] + full.R_failure[:, c], 1.0)


def test_nearest_centroid_relabel_runs_on_ward_states() -> None:
    from _uq_generators import ss13_chain

    t = _one_hot_traces(ss13_chain(), 80, seed=1)
    est = WardStates(featurizer=RuleFeaturizer(kind=False, error=False), k_min=2, k_max=6)
    a = TraceBootstrap(samples=5, states=est, relabel="nearest-centroid").fit(t).fetch_model()
    b = TraceBootstrap(samples=5, states=est).fit(t).fetch_model()
    np.testing.assert_array_equal(a.Q, b.Q)  # one-hot: the nearest centroid is the cluster itself
    assert a.info["relabel"] == "nearest-centroid"


def test_alignment_helpers() -> None:
    ref = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    rep = np.array([[0.0, 0.9], [0.1, 0.0], [1.0, 0.1], [0.9, 0.0]])  # 4 states: one extra, near ref 1
    mapping, cost = match_by_centroids(ref, rep)
    assert mapping.tolist() == [2, 0, 1, 1] and cost.shape == (4,)
    assert match_by_names(("a", "b"), ("b", "a")).tolist() == [1, 0]
    with pytest.raises(ValueError, match="not a reference state"):
        match_by_names(("a",), ("z",))
    assert match_by_exit_profile(np.array([0.1, 0.5]), np.array([0.45, 0.12, 0.11])).tolist() == [1, 0, 0]


def test_take_traces_allows_repeats(traces: tt.TraceTable) -> None:
    t, rows = take_traces(traces, np.array([2, 2, 0]))
    assert t.n_traces == 3 and t.trace_ids[1].endswith("#1")
    assert t.n_steps == 2 * (traces.offsets[3] - traces.offsets[2]) + traces.offsets[1]
    assert rows[0] == traces.offsets[2]


@pytest.mark.parametrize("kw", [{"samples": 0}, {"by": "episode"}, {"path": "slow"}, {"weights": "bayes"},
                                {"pseudocount": -1.0}, {"confidence": 0.0}, {"path": "full"},
                                {"relabel": "nearest-centroid"}, {"path": "full", "states": CategoricalStates(),
                                                                  "align": "centroids"}])
def test_bad_parameters(kw: dict[str, object], traces: tt.TraceTable) -> None:
    with pytest.raises(ValueError):
        TraceBootstrap(**kw).fit(traces)  # type: ignore[arg-type]


def test_fetch_before_fit_and_wrong_input() -> None:
    with pytest.raises(NotFittedError):
        TraceBootstrap().fetch_model()
    with pytest.raises(TypeError):
        TraceBootstrap().fit(tt.datasets.notation_chain())  # type: ignore[arg-type]


def test_seed_none_records_the_entropy(traces: tt.TraceTable) -> None:
    ens = TraceBootstrap(samples=4, seed=None).fit(traces).fetch_model()
    again = TraceBootstrap(samples=4, seed=ens.info["seed"]).fit(traces).fetch_model()
    np.testing.assert_array_equal(ens.Q, again.Q)
