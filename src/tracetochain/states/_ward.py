"""Exact Ward clustering of weighted unique rows, weighted silhouette, and the WardStates estimator.

Ward on a matrix with repeated rows equals Ward on its unique rows weighted by their multiplicities: identical points
merge at cost 0, and the Lance–Williams Ward update depends only on cluster sizes and centroids (duplicate rows merged
with their multiplicity as weight give the same tree as Ward on every row). Merge cost Δ(i, j) = n_i n_j / (n_i + n_j)
‖c_i − c_j‖², updated after merging i, j as

    Δ(i∪j, l) = [(n_i + n_l) Δ(i, l) + (n_j + n_l) Δ(j, l) − n_l Δ(i, j)] / (n_i + n_j + n_l)

(Lance & Williams 1967). Merges are found with the nearest-neighbour-chain algorithm (Murtagh 1983): O(u²) time
and memory for u unique rows. The weighted silhouette (Rousseeuw 1987, on the expanded data):
a(x) = Σ_{v∈A} w_v d(x, v) / (W_A − 1), b(x) = min_{B≠A} Σ_{v∈B} w_v d(x, v) / W_B, s = (b − a)/max(a, b)
(s = 0 when W_A = 1), overall Σ w_x s(x) / Σ w — equal to ``sklearn.metrics.silhouette_score`` on the expanded rows.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import EstimatorDisplay

_SILHOUETTE_BLOCK = 2048
_BLOCK_ELEMENTS = 1 << 21  # 16 MB of float64 per row block
_PENDING = 64


def ward_merges(U: NDArray[np.float64], w: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """All u − 1 Ward merges of weighted points, sorted by merge cost.

    Returns ``pairs`` (u − 1, 2) of cluster ids — ids < u are the points, id u + t is the cluster made by merge t
    (scipy's linkage convention) — and ``costs`` (Δ of each merge, non-decreasing: Ward has no inversions).
    """
    u = U.shape[0]
    if u < 2:
        return np.zeros((0, 2), np.int64), np.zeros(0)
    size = np.asarray(w, dtype=np.float64).copy()
    sq = np.einsum("ij,ij->i", U, U)
    # Built in place, one u×u array in all (u = 16k → 2 GB): D = n_i n_j/(n_i+n_j) ‖c_i − c_j‖².
    D = U @ U.T
    D *= -2.0
    D += sq[:, None]
    D += sq[None, :]
    np.maximum(D, 0.0, out=D)
    # Scale by n_i n_j / (n_i + n_j) in row blocks through two reused buffers: fresh large temporaries cost more in
    # page faults than in arithmetic (the same operations in the same order, so the same bits as one expression).
    rows = _block_rows(u)
    prod, total = np.empty((rows, u)), np.empty((rows, u))
    for start in range(0, u, rows):
        stop = min(u, start + rows)
        num, den = prod[: stop - start], total[: stop - start]
        np.multiply(size[start:stop, None], size[None, :], out=num)
        np.add(size[start:stop, None], size[None, :], out=den)
        np.divide(num, den, out=num)
        D[start:stop] *= num
    del prod, total
    np.fill_diagonal(D, np.inf)
    active = np.ones(u, dtype=bool)
    cluster_id = np.arange(u, dtype=np.int64)  # id of the cluster held at each matrix position
    raw: list[tuple[int, int, float]] = []
    chain: list[int] = []
    n_active = u
    prev_row: NDArray[np.float64] | None = None  # the row read last, while the chain only grew since
    # Column writes into a big C-ordered matrix are slow (one page per element), so the column of each merged
    # cluster is kept aside and written in batches; rows read in between are patched from the pending columns.
    pending_pos = np.zeros(_PENDING, np.int64)
    pending_col = np.zeros((_PENDING, u))
    n_pending = 0

    def flush() -> None:
        nonlocal n_pending
        if n_pending:
            pos = pending_pos[:n_pending]
            last = n_pending - 1 - np.unique(pos[::-1], return_index=True)[1]  # latest update of each column wins
            D[:, pos[last]] = pending_col[last, : D.shape[0]].T
            n_pending = 0

    def current_row(i: int) -> NDArray[np.float64]:
        row = np.where(active, D[i], np.inf)
        if n_pending:
            keep_mask = active[pending_pos[:n_pending]]
            row[pending_pos[:n_pending][keep_mask]] = pending_col[:n_pending, i][keep_mask]
        return row

    while n_active > 1:
        if 2 * n_active < D.shape[0] and D.shape[0] > 512:
            # Compact the matrix to the active clusters. Positions keep their relative order, so argmin
            # tie-breaking is unchanged.
            flush()
            keep_pos = np.flatnonzero(active)
            D = D[np.ix_(keep_pos, keep_pos)]
            new_pos = np.full(active.size, -1, np.int64)
            new_pos[keep_pos] = np.arange(keep_pos.size)
            chain = [int(new_pos[c]) for c in chain]
            size, cluster_id = size[keep_pos], cluster_id[keep_pos]
            active = np.ones(keep_pos.size, dtype=bool)
            prev_row = None
        if not chain:
            chain.append(int(np.flatnonzero(active)[0]))
        a = chain[-1]
        row = current_row(a)
        b = int(np.argmin(row))
        # Prefer the previous chain element on ties, so that reciprocal nearest neighbours are always found.
        if len(chain) > 1 and row[chain[-2]] <= row[b]:
            b = chain[-2]
        if len(chain) > 1 and b == chain[-2]:
            chain.pop()
            chain.pop()
            cost = float(row[b])
            keep, drop = min(a, b), max(a, b)
            na, nb = size[a], size[b]
            # Row b was read in the previous iteration (it put a on the chain) and nothing changed since.
            row_b = prev_row if prev_row is not None else current_row(b)
            new = ((na + size) * row + (nb + size) * row_b - size * cost) / (na + nb + size)
            active[drop] = False
            new[keep] = np.inf
            D[keep, :] = new
            # The pending columns cross this rewritten row: bring their entries up to date (symmetry).
            pending_col[:n_pending, keep] = new[pending_pos[:n_pending]]
            if n_pending == _PENDING:
                flush()
            pending_pos[n_pending] = keep
            pending_col[n_pending, : new.size] = new
            n_pending += 1
            size[keep] = na + nb
            raw.append((int(cluster_id[a]), int(cluster_id[b]), cost))
            cluster_id[keep] = u + len(raw) - 1  # provisional id in discovery order, relabelled below
            n_active -= 1
            prev_row = None
        else:
            chain.append(b)
            prev_row = row
    # Relabel merges into cost order (stable), so that merge t creates cluster u + t.
    costs = np.array([c for _, _, c in raw])
    order = np.argsort(costs, kind="stable")
    new_id = np.empty(len(raw), np.int64)
    new_id[order] = np.arange(len(raw))
    pairs = np.empty((len(raw), 2), np.int64)
    for t, idx in enumerate(order):
        a_id, b_id, _ = raw[idx]
        pairs[t] = [a_id if a_id < u else u + new_id[a_id - u], b_id if b_id < u else u + new_id[b_id - u]]
    return pairs, costs[order]


def cut_tree(pairs: NDArray[np.int64], u: int, ks: list[int]) -> dict[int, NDArray[np.int64]]:
    """Labels of the u points for each k in ``ks`` (k clusters = the first u − k merges applied).

    Labels are numbered by first appearance among the points (0, 1, …), so they are deterministic.
    """
    parent = np.arange(2 * u - 1 if u else 0)
    out: dict[int, NDArray[np.int64]] = {}
    wanted = {k for k in ks if 1 <= k <= u}

    def snapshot() -> NDArray[np.int64]:
        root = np.arange(u)
        # Follow parents to the current roots (paths are short: we compress as we go).
        for _ in range(64):
            nxt = parent[root]
            if np.array_equal(nxt, root):
                break
            root = nxt
        _, first_seen = np.unique(root, return_index=True)
        rank = np.empty(first_seen.size, np.int64)
        rank[np.argsort(first_seen)] = np.arange(first_seen.size)
        _, inv = np.unique(root, return_inverse=True)
        return rank[inv.reshape(-1)]

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = int(parent[x])
        return x

    if u in wanted:
        out[u] = np.arange(u, dtype=np.int64)
    for t, (a, b) in enumerate(pairs):
        new = u + t
        parent[find(int(a))] = new
        parent[find(int(b))] = new
        k = u - t - 1
        if k in wanted:
            # Point every node at its root before snapshotting (pointer jumping: log(depth) vectorised passes).
            while True:
                jumped = parent[parent]
                if np.array_equal(jumped, parent):
                    break
                parent[:] = jumped
            out[k] = snapshot()
    return out


def _block_rows(u: int) -> int:
    """Rows per block so that one (rows × u) float64 block is about 16 MB."""
    return max(16, min(u, _BLOCK_ELEMENTS // max(u, 1)))


def weighted_silhouette(U: NDArray[np.float64], w: NDArray[np.float64],
                        labels_by_k: dict[int, NDArray[np.int64]]) -> dict[int, float]:
    """Weighted silhouette of each labelling of the weighted points (equals sklearn's on the expanded data).

    One pass over the pairwise distances, in row blocks: each block of distances is multiplied once by the
    weighted one-hot matrices of every k side by side (u × Σk), so the distances are computed and read once.
    """
    u = U.shape[0]
    w = np.asarray(w, dtype=np.float64)
    ks = sorted(labels_by_k)
    offsets = np.cumsum([0, *ks])
    onehots = np.zeros((u, int(offsets[-1])))
    for k, off in zip(ks, offsets[:-1], strict=True):
        onehots[np.arange(u), off + labels_by_k[k]] = w
    sums = np.empty((u, int(offsets[-1])))
    sq = np.einsum("ij,ij->i", U, U)
    rows = _block_rows(u)
    for start in range(0, u, rows):
        stop = min(u, start + rows)
        d = sq[start:stop, None] + sq[None, :]
        gram = U[start:stop] @ U.T
        gram *= 2.0
        d -= gram  # (‖x‖² + ‖y‖²) − 2 x·y, as one expression would round it
        del gram
        np.maximum(d, 0.0, out=d)
        np.sqrt(d, out=d)
        np.matmul(d, onehots, out=sums[start:stop])
    scores: dict[int, float] = {}
    for k, off in zip(ks, offsets[:-1], strict=True):
        lab = labels_by_k[k]
        sums_k = sums[:, off:off + k]
        W = onehots[:, off:off + k].sum(axis=0)
        own = sums_k[np.arange(u), lab]
        a = np.where(W[lab] > 1, own / np.maximum(W[lab] - 1, 1), 0.0)
        other = sums_k / W[None, :]
        other[np.arange(u), lab] = np.inf
        b = other.min(axis=1)
        denom = np.maximum(a, b)
        s = np.where((W[lab] > 1) & (denom > 0), (b - a) / np.where(denom > 0, denom, 1.0), 0.0)
        scores[k] = float((w * s).sum() / w.sum())
    return scores


# ------------------------------------------------------------------------------------------------- estimator
def _first_appearance_order(step_labels: NDArray[np.int64], k: int) -> NDArray[np.int64]:
    """Permutation old → new so that states are numbered in order of first appearance in the steps."""
    first = np.full(k, np.iinfo(np.int64).max)
    np.minimum.at(first, step_labels, np.arange(step_labels.size))
    order = np.argsort(first, kind="stable")
    remap = np.empty(k, np.int64)
    remap[order] = np.arange(k)
    return remap


class WardStates(EstimatorDisplay):
    """Discover states by Ward clustering of step features, with k chosen by silhouette.

    Exact on every step: Ward runs on the unique feature rows weighted by multiplicity, which gives the same
    partition as Ward on the full matrix. k is the silhouette maximiser over
    [k_min, k_max] (ties → smaller k; k above the number of distinct rows is skipped, as is any k giving fewer than
    2 labels).

    When there are more than ``max_unique`` distinct rows (continuous features), the scalable path runs
    ``MiniBatchKMeans`` to ``n_centroids`` weighted centroids first and then the same weighted Ward on the centroids
    (each step inherits its centroid's state; the silhouette is computed on the weighted centroids).

    Parameters
    ----------
    featurizer : estimator with ``fit(traces).fetch_model().transform(traces)``, default ``RuleFeaturizer()``
    k_min, k_max : int, default 2 and 10 (the paper's range for real corpora)
    max_unique : int, default 16_000 (Ward holds one u × u float64 matrix: 16k rows ≈ 2 GB)
    n_centroids : int, default 500
    seed : int, default 0 (only the scalable path is random)
    """

    def __init__(self, *, featurizer: object | None = None, k_min: int = 2, k_max: int = 10,
                 max_unique: int = 16_000, n_centroids: int = 500, seed: int = 0) -> None:
        self.featurizer = featurizer
        self.k_min = k_min
        self.k_max = k_max
        self.max_unique = max_unique
        self.n_centroids = n_centroids
        self.seed = seed
        self._model: object | None = None

    def fit(self, traces: object) -> WardStates:
        from tracetochain.featurize._base import unique_rows
        from tracetochain.featurize.rules import RuleFeaturizer
        from tracetochain.states._model import StateModel, build_taxonomy, readable_names, taxonomy_infos
        from tracetochain.traces._table import TraceTable

        if not isinstance(traces, TraceTable):
            raise TypeError(f"fit expects a TraceTable, got {type(traces).__name__}")
        if not 1 <= self.k_min <= self.k_max:
            raise ValueError(f"need 1 <= k_min <= k_max, got k_min={self.k_min}, k_max={self.k_max}")
        if traces.n_steps == 0:
            from tracetochain.exceptions import EmptyTraceSetError

            raise EmptyTraceSetError("no steps to cluster")
        featurizer = self.featurizer if self.featurizer is not None else RuleFeaturizer()
        feat_model = featurizer.fit(traces).fetch_model()  # type: ignore[attr-defined]
        features = feat_model.transform(traces)
        U, w, inverse = unique_rows(features)
        kmeans = None
        points: NDArray[np.float64] = U
        weights: NDArray[np.float64] = w.astype(np.float64)
        point_of_unique: NDArray[np.int64] = np.arange(U.shape[0], dtype=np.int64)
        if U.shape[0] > self.max_unique:
            from tracetochain._optional import require

            MiniBatchKMeans = require(
                "sklearn.cluster", f"Ward states on more than max_unique={self.max_unique} distinct feature rows "
                f"(here {U.shape[0]}; it pre-clusters them with k-means)").MiniBatchKMeans

            kmeans = MiniBatchKMeans(n_clusters=self.n_centroids, random_state=self.seed, batch_size=4096,
                                     n_init=3).fit(U, sample_weight=w)
            point_of_unique = kmeans.labels_.astype(np.int64)
            weights = np.bincount(point_of_unique, weights=w, minlength=self.n_centroids).astype(np.float64)
            used = weights > 0
            remap = np.cumsum(used) - 1
            points, weights = kmeans.cluster_centers_[used], weights[used]
            point_of_unique = remap[point_of_unique]
        u = points.shape[0]
        pairs, _ = ward_merges(points, weights)
        ks = [k for k in range(self.k_min, self.k_max + 1) if 2 <= k <= u]
        scores: dict[int, float] = {}
        if ks:
            cuts = cut_tree(pairs, u, ks)
            scores = weighted_silhouette(points, weights, cuts)
            best = ks[0]
            for k in ks:  # strictly greater replaces: ties go to the smaller k
                if scores[k] > scores[best]:
                    best = k
            point_labels = cuts[best]
        else:  # fewer than 2 distinct rows, or fewer than k_min: every distinct row is its own state
            best = max(u, 1)
            point_labels = np.arange(u, dtype=np.int64)
        step_labels = point_labels[point_of_unique][inverse]
        remap_states = _first_appearance_order(step_labels, best)
        step_labels = remap_states[step_labels]
        unique_labels = remap_states[point_labels[point_of_unique]]
        rows = build_taxonomy(step_labels, best, features.descriptor, features.descriptor_names)
        names = readable_names([(dom + _qualifiers(features, step_labels, s, best), share)
                                for s, (dom, _, share, _) in enumerate(rows)])
        centroids = np.vstack([
            np.average(U[unique_labels == s], axis=0, weights=w[unique_labels == s]) for s in range(best)])
        fit_codes = features.row_codes[np.unique(inverse, return_index=True)[1]] \
            if features.row_codes is not None else None
        assign = _Assigner(feat_model, U, fit_codes, unique_labels, centroids, kmeans,
                           remap_states[point_labels] if kmeans is not None else None)
        settings = {"k_min": self.k_min, "k_max": self.k_max, "k": best, "n_steps": features.n_steps,
                    "n_unique_rows": int(U.shape[0]), "path": "exact" if kmeans is None else "minibatch-kmeans",
                    "n_centroids": None if kmeans is None else int(u), "seed": self.seed,
                    "features": list(features.feature_names),
                    "featurizer": feat_model.to_dict() if hasattr(feat_model, "to_dict") else type(feat_model).__name__}
        self._model = StateModel("ward", names, taxonomy_infos(names, rows, features.n_steps), settings, assign,
                                 step_labels, scores)
        return self

    def fetch_model(self) -> object:
        from tracetochain.exceptions import NotFittedError

        if self._model is None:
            raise NotFittedError("call fit(traces) before fetch_model()")
        return self._model


def _qualifiers(features: object, labels: NDArray[np.int64], state: int, k: int) -> str:
    """Secondary traits that set a state apart: a majority of error or retry steps, and where in the trace."""
    names = list(features.feature_names)  # type: ignore[attr-defined]
    X = features.X  # type: ignore[attr-defined]
    mask = labels == state
    if not mask.any():
        return ""
    out = ""
    for flag in ("error", "retry"):
        if flag in names and X[mask, names.index(flag)].mean() >= 0.5:
            out += f" +{flag}"
    depth_cols = [i for i, n in enumerate(names) if n == "depth" or n.startswith("depth_bucket=")]
    if depth_cols:
        if names[depth_cols[0]] == "depth":
            d = float(X[mask, depth_cols[0]].mean())
            scale = float(X[:, depth_cols[0]].max()) or 1.0
            frac = d / scale
        else:
            buckets = X[np.ix_(mask, depth_cols)].mean(axis=0)
            frac = (float(np.argmax(buckets)) + 0.5) / len(depth_cols)
        out += " @early" if frac < 1 / 3 else " @mid" if frac < 2 / 3 else " @late"
    return out


class _Assigner:
    """Maps steps to states: exact lookup of known feature rows, nearest centroid for unseen ones."""

    def __init__(self, feat_model: object, U: NDArray[np.float64], fit_codes: NDArray[np.int64] | None,
                 unique_labels: NDArray[np.int64], centroids: NDArray[np.float64], kmeans: object | None,
                 kmeans_labels: NDArray[np.int64] | None) -> None:
        self.feat_model = feat_model
        self.U = U
        self.fit_codes = fit_codes
        self.unique_labels = unique_labels
        self.centroids = centroids
        self.kmeans = kmeans
        self.kmeans_labels = kmeans_labels
        self._void = None if fit_codes is not None else _as_void(U)
        self._void_order = None if self._void is None else np.argsort(self._void)

    def __call__(self, traces: object) -> NDArray[np.int64]:
        features = self.feat_model.transform(traces)  # type: ignore[attr-defined]
        X = features.X
        n = X.shape[0]
        if X.shape[1] != self.U.shape[1]:
            raise ValueError("feature width differs from the fitted model's")
        out = np.full(n, -1, np.int64)
        if self.fit_codes is not None and features.row_codes is not None:
            pos = np.searchsorted(self.fit_codes, features.row_codes)
            pos = np.minimum(pos, self.fit_codes.size - 1)
            hit = self.fit_codes[pos] == features.row_codes
            out[hit] = self.unique_labels[pos[hit]]
        elif self._void is not None and self._void_order is not None:
            v = _as_void(np.ascontiguousarray(X))
            sorted_void = self._void[self._void_order]
            pos = np.minimum(np.searchsorted(sorted_void, v), sorted_void.size - 1)
            hit = sorted_void[pos] == v
            out[hit] = self.unique_labels[self._void_order[pos[hit]]]
        miss = out < 0
        if miss.any():
            if self.kmeans is not None and self.kmeans_labels is not None:
                out[miss] = self.kmeans_labels[self.kmeans.predict(X[miss])]  # type: ignore[attr-defined]
            else:
                out[miss] = nearest_centroid(X[miss], self.centroids)
        return out


def nearest_centroid(X: NDArray[np.float64], centroids: NDArray[np.float64]) -> NDArray[np.int64]:
    """Index of the nearest centroid (Euclidean) of each row; ties go to the lowest index."""
    out = np.empty(X.shape[0], np.int64)
    for start in range(0, X.shape[0], _SILHOUETTE_BLOCK):  # bounded memory: block × k × d
        diff = X[start:start + _SILHOUETTE_BLOCK, None, :] - centroids[None, :, :]
        out[start:start + _SILHOUETTE_BLOCK] = np.argmin(np.einsum("ijk,ijk->ij", diff, diff), axis=1)
    return out


def _as_void(X: NDArray[np.float64]) -> NDArray[np.void]:
    Xc = np.ascontiguousarray(X)
    return Xc.view(np.dtype((np.void, Xc.dtype.itemsize * max(Xc.shape[1], 1)))).ravel()
