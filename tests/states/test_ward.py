"""Exact weighted-unique Ward and weighted silhouette against scikit-learn on the expanded data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import adjusted_rand_score, silhouette_score

import tracetochain as tt
from tracetochain.featurize import RuleFeaturizer
from tracetochain.states import WardStates, cut_tree, ward_merges, weighted_silhouette


def corpus(seed: int, u: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(u, p)), rng.integers(1, 12, size=u)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), u=st.integers(3, 120), p=st.integers(1, 6))
def test_weighted_unique_ward_equals_sklearn_on_expanded_rows(seed: int, u: int, p: int) -> None:
    U, w = corpus(seed, u, p)  # continuous random points: no ties in merge costs
    X = np.repeat(U, w, axis=0)
    inverse = np.repeat(np.arange(u), w)
    pairs, costs = ward_merges(U, w.astype(float))
    assert np.all(np.diff(costs) >= -1e-9)  # Ward has no inversions
    ks = [k for k in (2, 3, 5, 8) if k <= u]
    labels = cut_tree(pairs, u, ks)
    sil = weighted_silhouette(U, w.astype(float), labels)
    for k in ks:
        expected = AgglomerativeClustering(n_clusters=k, linkage="ward").fit(X).labels_
        assert adjusted_rand_score(expected, labels[k][inverse]) == 1.0
        # Distances come from the Gram identity ‖a‖² + ‖b‖² − 2a·b, good to ~1e-8 on unit-scale data.
        assert sil[k] == pytest.approx(silhouette_score(X, labels[k][inverse]), abs=1e-8)


@pytest.mark.slow
def test_larger_corpus_exercises_compaction_and_batched_columns() -> None:
    U, w = corpus(7, 1400, 3)  # > 512 rows: the matrix is compacted and columns are written in batches
    X = np.repeat(U, w, axis=0)
    inverse = np.repeat(np.arange(1400), w)
    pairs, _ = ward_merges(U, w.astype(float))
    labels = cut_tree(pairs, 1400, [4, 9])
    for k in (4, 9):
        expected = AgglomerativeClustering(n_clusters=k, linkage="ward").fit(X).labels_
        assert adjusted_rand_score(expected, labels[k][inverse]) == 1.0


def test_cut_tree_extremes() -> None:
    U, w = corpus(1, 6, 2)
    pairs, _ = ward_merges(U, w.astype(float))
    labels = cut_tree(pairs, 6, [1, 6])
    assert labels[1].tolist() == [0] * 6 and sorted(labels[6].tolist()) == list(range(6))
    assert ward_merges(U[:1], w[:1].astype(float))[0].shape == (0, 2)


def test_silhouette_of_identical_copies_is_one() -> None:
    U = np.array([[0.0], [10.0]])
    w = np.array([5.0, 3.0])
    assert weighted_silhouette(U, w, {2: np.array([0, 1])})[2] == pytest.approx(1.0)


def test_k_choice_prefers_smaller_k_on_ties_and_predict_reproduces() -> None:
    t = tt.datasets.load_example()
    model = WardStates(featurizer=RuleFeaturizer(retry=True), k_min=2, k_max=10).fit(t).fetch_model()
    best = model.settings["k"]
    assert model.scores[best] == max(model.scores.values())
    assert all(model.scores[k] < model.scores[best] for k in model.scores if k < best)
    np.testing.assert_array_equal(model.predict(t), model.fit_labels)
    assert model.settings["path"] == "exact" and model.settings["n_steps"] == t.n_steps


def test_predict_maps_unseen_rows_to_nearest_centroid() -> None:
    t = tt.datasets.load_example()
    model = WardStates().fit(t).fetch_model()
    new = tt.TraceTable.from_records([
        {"trace_id": "n", "step_idx": 0, "step_kind": "tool", "tool_name": "never_seen_tool", "outcome": "success"},
        {"trace_id": "n", "step_idx": 1, "step_kind": "llm", "outcome": "success"},
    ])
    labels = model.predict(new)
    assert labels.shape == (2,) and labels.min() >= 0 and labels.max() < model.n_states
    assert model.state_names[labels[1]].startswith("llm")


@pytest.mark.slow
def test_scalable_path_on_continuous_features() -> None:
    rng = np.random.default_rng(0)
    recs = [{"trace_id": f"t{i}", "step_idx": j, "step_kind": "tool", "tool_name": "bash",
             "text": f"cmd{rng.integers(0, 400)} arg{rng.integers(0, 50)}",
             "outcome": "success" if i % 3 else "failure"}
            for i in range(200) for j in range(8)]
    t = tt.TraceTable.from_records(recs)
    model = WardStates(featurizer=tt.featurize.TextFeaturizer(n_components=6), max_unique=300, n_centroids=60,
                       k_max=6).fit(t).fetch_model()
    assert model.settings["path"] == "minibatch-kmeans"
    np.testing.assert_array_equal(model.predict(t), model.fit_labels)
    again = WardStates(featurizer=tt.featurize.TextFeaturizer(n_components=6), max_unique=300, n_centroids=60,
                       k_max=6).fit(t).fetch_model()
    np.testing.assert_array_equal(again.fit_labels, model.fit_labels)  # seeded


def test_parameter_errors() -> None:
    t = tt.datasets.load_example()
    with pytest.raises(ValueError, match="k_min"):
        WardStates(k_min=5, k_max=2).fit(t)
    with pytest.raises(TypeError):
        WardStates().fit([1, 2])
    with pytest.raises(tt.exceptions.NotFittedError):
        WardStates().fetch_model()


def test_depth_codes_do_not_depend_on_the_table() -> None:
    """predict() on a superset of the fitted traces labels the shared steps exactly as at fit time."""
    t = tt.datasets.load_example()
    first = t.select_traces(np.arange(120))
    model = WardStates(featurizer=RuleFeaturizer(depth="hindsight-fraction")).fit(first).fetch_model()
    np.testing.assert_array_equal(model.predict(first), model.fit_labels)
    labels_all = model.predict(t)
    np.testing.assert_array_equal(labels_all[: first.n_steps], model.fit_labels)


def lines_corpus(seed: int, u: int, n_lines: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Points on parallel lines: a one-hot category and one continuous column, as the rule features with depth."""
    rng = np.random.default_rng(seed)
    cat = rng.integers(0, n_lines, size=u)
    U = np.zeros((u, n_lines + 1))
    U[np.arange(u), cat] = 1.0
    U[:, -1] = rng.uniform(0.0, scale, size=u)  # continuous: no two points at one place, no tied costs
    return U, rng.integers(1, 9, size=u).astype(float)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), u=st.integers(64, 400), n_lines=st.integers(1, 6),
       scale=st.sampled_from([0.05, 1.0, 4.0]))
def test_ward_on_parallel_lines_equals_sklearn_on_expanded_rows(seed: int, u: int, n_lines: int,
                                                                scale: float) -> None:
    """The one-dimensional prefix (cheap merges inside each line) gives exactly Ward's tree: from lines packed so
    tightly that the prefix does almost everything (scale 0.05) to lines so long that it stops early (scale 4)."""
    from scipy.spatial.distance import pdist, squareform

    U, w = lines_corpus(seed, u, n_lines, scale)
    X = np.repeat(U, w.astype(int), axis=0)
    exact = squareform(pdist(X))
    inverse = np.repeat(np.arange(u), w.astype(int))
    pairs, costs = ward_merges(U, w)
    assert np.all(np.diff(costs) >= 0)
    ks = [2, 3, 5, 8]
    labels = cut_tree(pairs, u, ks)
    sil = weighted_silhouette(U, w, labels)
    for k in ks:
        expected = AgglomerativeClustering(n_clusters=k, linkage="ward").fit(X).labels_
        assert adjusted_rand_score(expected, labels[k][inverse]) == 1.0
        # Against distances from exact coordinate differences: sklearn's Gram-identity distances lose ~1e-8 on
        # points this close, the silhouette on lines does not.
        assert sil[k] == pytest.approx(silhouette_score(exact, labels[k][inverse], metric="precomputed"),
                                       abs=1e-12)


def test_ward_costs_on_lines_match_scipy_linkage_heights() -> None:
    """Merge costs Δ are half the squared Ward linkage heights of scipy on the expanded rows."""
    from scipy.cluster.hierarchy import linkage

    U, w = lines_corpus(5, 150, 3, 1.0)
    X = np.repeat(U, w.astype(int), axis=0)
    _, costs = ward_merges(U, w)
    heights = linkage(X, method="ward")[:, 2]
    # Merges of identical copies cost 0 on the expanded rows; the rest are the weighted merges, in order.
    np.testing.assert_allclose(costs, np.sort(heights[heights > 1e-12]) ** 2 / 2, rtol=1e-9)


def test_the_line_prefix_leaves_few_clusters_to_the_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    import tracetochain.states._ward as ward

    seen: list[int] = []
    chain = ward._nn_chain
    monkeypatch.setattr(ward, "_nn_chain", lambda U, *a: (seen.append(U.shape[0]), chain(U, *a))[1])
    U, w = lines_corpus(2, 3000, 8, 1.0)
    ward_merges(U, w)
    assert seen and seen[0] < 300  # 3,000 points on 8 lines: the chain sees only the clusters left
    seen.clear()
    U, w = corpus(2, 300, 3)  # scattered points: no lines, the chain does all the work
    ward_merges(U, w.astype(float))
    assert seen == [300]


def test_ward_on_lines_with_fractional_weights_and_one_line() -> None:
    rng = np.random.default_rng(9)
    for n_lines in (1, 3):
        U, _ = lines_corpus(9, 200, n_lines, 1.0)
        w = rng.uniform(0.05, 3.0, size=200)  # weights below 1: the bound τ = ½ w_min δ² shrinks with them
        pairs, costs = ward_merges(U, w)
        reference_pairs, reference_costs = ward_merges_reference(U, w)
        for k in (2, 4, 7):
            a, b = cut_tree(pairs, 200, [k])[k], cut_tree(reference_pairs, 200, [k])[k]
            assert adjusted_rand_score(a, b) == 1.0
        np.testing.assert_allclose(costs, reference_costs, rtol=1e-9, atol=1e-12)  # the oracle: Gram rounding


def ward_merges_reference(U: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The nearest-neighbour chain alone (no line prefix): the pre-existing algorithm as the oracle."""
    import tracetochain.states._ward as ward

    raw: list[tuple[int, int, float]] = []
    ward._nn_chain(U, w, np.arange(U.shape[0], dtype=np.int64), U.shape[0], raw)
    return ward._in_cost_order(raw, U.shape[0])
