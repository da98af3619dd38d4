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

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import EstimatorDisplay
from tracetochain.featurize.shared import mixed_radix

_SILHOUETTE_BLOCK = 2048
_SILHOUETTE_MAX_LINES = 256  # the lines' gap matrix is built from an n_lines² × p array
_BLOCK_ELEMENTS = 1 << 21  # 16 MB of float64 per row block
_PENDING = 64


def ward_merges(U: NDArray[np.float64], w: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """All u − 1 Ward merges of weighted points, sorted by merge cost.

    Returns ``pairs`` (u − 1, 2) of cluster ids — ids < u are the points, id u + t is the cluster made by merge t
    (scipy's linkage convention) — and ``costs`` (Δ of each merge, non-decreasing: Ward has no inversions).

    When the points lie on a few parallel lines (categorical one-hots plus one continuous column, such as depth), the
    cheap merges inside each line are found first by one-dimensional Ward (:func:`_line_prefix`), and the
    nearest-neighbour chain runs only on what is left: the same merges, in a fraction of the time and memory.
    """
    return _ward_merges(U, w, _find_lines(U))


def _ward_merges(U: NDArray[np.float64], w: NDArray[np.float64], lines: _Lines | None
                 ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """:func:`ward_merges` with the points' lines already found (:func:`_find_lines`; None: not on few lines)."""
    u = U.shape[0]
    if u < 2:
        return np.zeros((0, 2), np.int64), np.zeros(0)
    weights = np.asarray(w, dtype=np.float64)
    raw: list[tuple[int, int, float]] = []
    prefix = _line_prefix(U, weights, lines, raw) if lines is not None else None
    if prefix is None:
        _nn_chain(U, weights, np.arange(u, dtype=np.int64), u, raw)
    else:
        centroids, sizes, ids = prefix
        _nn_chain(centroids, sizes, ids, u, raw)
    return _in_cost_order(raw, u)


def _nn_chain(U: NDArray[np.float64], w: NDArray[np.float64], ids: NDArray[np.int64], u_all: int,
              raw: list[tuple[int, int, float]]) -> None:
    """Ward merges of weighted points with the nearest-neighbour chain, appended to ``raw`` in discovery order.

    ``ids`` are the points' cluster ids; a merge appended as ``raw[t]`` creates the provisional id ``u_all + t``.
    """
    u = U.shape[0]
    if u < 2:
        return
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
    cluster_id = ids.copy()  # id of the cluster held at each matrix position
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
            cluster_id[keep] = u_all + len(raw) - 1  # provisional id in discovery order, relabelled later
            n_active -= 1
            prev_row = None
        else:
            chain.append(b)
            prev_row = row


def _in_cost_order(raw: list[tuple[int, int, float]], u: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Relabel merges found in discovery order into cost order (stable), so that merge t creates cluster u + t.

    A merge's cost is raised to its children's where rounding made it a hair lower (Ward has no inversions in exact
    arithmetic), so that every cluster is created before it is merged again.
    """
    costs = np.array([c for _, _, c in raw])
    for t, (a_id, b_id, _) in enumerate(raw):
        for child in (a_id, b_id):
            if child >= u and costs[child - u] > costs[t]:
                costs[t] = costs[child - u]
    order = np.argsort(costs, kind="stable")
    new_id = np.empty(len(raw), np.int64)
    new_id[order] = np.arange(len(raw))
    pairs = np.empty((len(raw), 2), np.int64)
    for t, idx in enumerate(order):
        a_id, b_id, _ = raw[idx]
        pairs[t] = [a_id if a_id < u else u + new_id[a_id - u], b_id if b_id < u else u + new_id[b_id - u]]
    return pairs, costs[order]


_LINES_MIN_POINTS = 64
_LINES_MAX_LINES = 4096
_LINES_MAX_COLUMNS = 128


class _Lines(NamedTuple):
    """Points grouped by every column but ``axis``: each group lies on one line parallel to that axis."""

    axis: int
    group: NDArray[np.int64]  # line of each point (0, 1, …)
    keys: NDArray[np.float64]  # each line's coordinates outside ``axis`` (n_lines × (p − 1))

    @property
    def n_lines(self) -> int:
        return int(self.keys.shape[0])

    def squared_gaps(self) -> NDArray[np.float64]:
        """Squared distance between every two lines (n_lines × n_lines), from exact coordinate differences."""
        diff = self.keys[:, None, :] - self.keys[None, :, :]
        gaps: NDArray[np.float64] = np.einsum("abk,abk->ab", diff, diff)
        return gaps


def _find_lines(U: NDArray[np.float64]) -> _Lines | None:
    """The axis whose removal leaves the fewest distinct rows, when that leaves few enough lines to exploit."""
    u, p = U.shape
    if u < _LINES_MIN_POINTS or not 1 <= p <= _LINES_MAX_COLUMNS:
        return None
    # Each column as integer codes, so that grouping by all columns but one is a 1-D unique of a mixed-radix key.
    columns = [np.unique(U[:, c], return_inverse=True) for c in range(p)]
    codes = [inverse.reshape(-1).astype(np.int64) for _, inverse in columns]
    radix = [values.size for values, _ in columns]
    best: tuple[int, int, NDArray[np.int64]] | None = None
    for j in range(p):
        key = mixed_radix([(codes[c], radix[c]) for c in range(p) if c != j], u)
        if key is None:
            return None  # too many combinations for one integer key: not a few lines anyway
        _, group = np.unique(key, return_inverse=True)
        n_groups = int(group.max()) + 1
        if best is None or n_groups < best[1]:
            best = (j, n_groups, group.reshape(-1).astype(np.int64))
    assert best is not None
    j, n_lines, group = best
    if n_lines > min(u // 4, _LINES_MAX_LINES):
        return None
    first = np.unique(group, return_index=True)[1]
    return _Lines(j, group, np.delete(U[first], j, axis=1))


def _line_prefix(U: NDArray[np.float64], w: NDArray[np.float64], lines: _Lines, raw: list[tuple[int, int, float]]
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    """The Ward merges that happen inside lines before any merge across them, by one-dimensional Ward.

    Group the points by every column but one (column j, chosen to give the fewest groups): each group lies on a line
    parallel to axis j. While every cluster lies within one line, a merge across lines a ≠ b costs
    n_a n_b/(n_a + n_b) ‖c_a − c_b‖² ≥ ½ min(n_a, n_b) δ² ≥ ½ w_min δ² = τ, with δ the smallest distance between
    two lines and w_min the smallest point weight. So every Ward merge cheaper than τ happens inside a line, and
    merges in different lines do not affect each other: Ward's merges below τ are exactly the one-dimensional Ward
    merges of each line below τ. In one dimension the cheapest pair of clusters is always adjacent in centroid order
    (for centroids a < e < b with t = (e − a)/(b − a), Δ(a, e) and Δ(e, b) both exceeding Δ(a, b) would need
    t > √p and 1 − t > √(1 − p), p = n_b/(n_a + n_b), yet √p + √(1 − p) ≥ 1), so each line is a heap of
    adjacent pairs: O(n log n).

    Appends the merges to ``raw`` and returns the clusters left (centroids, weights, ids) for the
    nearest-neighbour chain.
    """
    u, p = U.shape
    j, group, keys = lines
    if lines.n_lines == 1:
        tau = np.inf
    else:
        delta2 = min(float(((keys[i + 1:] - keys[i]) ** 2).sum(axis=1).min()) for i in range(lines.n_lines - 1))
        # A hair below the bound, so that rounding in either cost can never put a cross-line merge under it.
        tau = 0.5 * float(w.min()) * delta2 * (1.0 - 1e-9)
    out_x: list[float] = []
    out_w: list[float] = []
    out_id: list[int] = []
    out_line: list[int] = []
    x_all = U[:, j]
    for line in range(lines.n_lines):
        members = np.flatnonzero(group == line)
        members = members[np.argsort(x_all[members], kind="stable")]
        xs, ws, cs = _line_ward(x_all[members].tolist(), w[members].tolist(), members.tolist(), tau, u, raw)
        out_x += xs
        out_w += ws
        out_id += cs
        out_line += [line] * len(xs)
    centroids = np.insert(keys[np.asarray(out_line, np.int64)], j, out_x, axis=1) if p > 1 \
        else np.asarray(out_x)[:, None]
    return centroids, np.asarray(out_w), np.asarray(out_id, np.int64)


def _line_ward(x: list[float], w: list[float], ids: list[int], tau: float, u: int,
               raw: list[tuple[int, int, float]]) -> tuple[list[float], list[float], list[int]]:
    """One-dimensional Ward on points sorted by x: merge the cheapest adjacent pair while it costs less than tau.

    Appends the merges to ``raw`` (a merge appended as ``raw[t]`` creates id ``u + t``) and returns the clusters
    left, in x order. Ties go to the leftmost pair.
    """
    import heapq

    n = len(x)
    nxt = list(range(1, n + 1))
    prv = list(range(-1, n - 1))
    version = [0] * n
    alive = [True] * n
    heap: list[tuple[float, int, int, int, int]] = []

    def push(a: int, b: int) -> None:
        wa, wb = w[a], w[b]
        d = x[b] - x[a]
        heapq.heappush(heap, (wa * wb / (wa + wb) * d * d, a, b, version[a], version[b]))

    for i in range(n - 1):
        push(i, i + 1)
    while heap:
        cost, a, b, va, vb = heap[0]
        if version[a] != va or version[b] != vb or not alive[a] or not alive[b]:
            heapq.heappop(heap)
            continue
        if not cost < tau:
            break
        heapq.heappop(heap)
        total = w[a] + w[b]
        x[a] = (w[a] * x[a] + w[b] * x[b]) / total
        w[a] = total
        alive[b] = False
        raw.append((ids[a], ids[b], cost))
        ids[a] = u + len(raw) - 1
        version[a] += 1
        nxt[a] = nxt[b]
        if nxt[a] < n:
            prv[nxt[a]] = a
            push(a, nxt[a])
        if prv[a] >= 0:
            push(prv[a], a)
    keep = [i for i in range(n) if alive[i]]
    return [x[i] for i in keep], [w[i] for i in keep], [ids[i] for i in keep]


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

    One pass over the pairwise distances, in row blocks. Cuts of one tree are nested, so each block is reduced once
    to the sums per cluster of the finest labelling and every coarser one adds those up; labellings that do not
    nest are multiplied by their one-hot matrices side by side (u × Σk). Points on a few lines get their distances
    from the lines' gaps (:func:`_distance_sums_on_lines`), others from the Gram identity.
    """
    return _weighted_silhouette(U, w, labels_by_k, _find_lines(U))


def _weighted_silhouette(U: NDArray[np.float64], w: NDArray[np.float64], labels_by_k: dict[int, NDArray[np.int64]],
                         lines: _Lines | None) -> dict[int, float]:
    """:func:`weighted_silhouette` with the points' lines already found (:func:`_find_lines`)."""
    u = U.shape[0]
    w = np.asarray(w, dtype=np.float64)
    ks = sorted(labels_by_k)
    basis = _finest_refinement(labels_by_k)
    width = int(basis.max()) + 1 if basis is not None else int(sum(ks))
    if basis is not None and lines is not None and lines.n_lines <= _SILHOUETTE_MAX_LINES:
        sums_basis = _distance_sums_on_lines(U, w, basis, width, lines)
    else:
        onehots = np.zeros((u, width))
        if basis is not None:
            onehots[np.arange(u), basis] = w
        else:
            for k, off in zip(ks, np.cumsum([0, *ks])[:-1], strict=True):
                onehots[np.arange(u), off + labels_by_k[k]] = w
        sums_basis = np.empty((u, width))
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
            np.matmul(d, onehots, out=sums_basis[start:stop])
    # Per k: the (u × k) sums of weighted distances to each cluster, and the clusters' weights.
    per_k: dict[int, tuple[NDArray[np.float64], NDArray[np.float64]]] = {}
    off = 0
    for k in ks:
        lab = labels_by_k[k]
        if basis is not None:
            merge = np.zeros((width, k))
            merge[basis, lab] = 1.0  # finest cluster → the coarse cluster that contains it
            per_k[k] = (sums_basis @ merge, np.bincount(lab, weights=w, minlength=k).astype(np.float64))
        else:
            per_k[k] = (sums_basis[:, off:off + k], np.bincount(lab, weights=w, minlength=k).astype(np.float64))
            off += k
    scores: dict[int, float] = {}
    for k in ks:
        lab = labels_by_k[k]
        sums_k, W = per_k[k]
        own = sums_k[np.arange(u), lab]
        a = np.where(W[lab] > 1, own / np.maximum(W[lab] - 1, 1), 0.0)
        other = sums_k / W[None, :]
        other[np.arange(u), lab] = np.inf
        b = other.min(axis=1)
        denom = np.maximum(a, b)
        s = np.where((W[lab] > 1) & (denom > 0), (b - a) / np.where(denom > 0, denom, 1.0), 0.0)
        scores[k] = float((w * s).sum() / w.sum())
    return scores


def _distance_sums_on_lines(U: NDArray[np.float64], w: NDArray[np.float64], basis: NDArray[np.int64], width: int,
                            lines: _Lines) -> NDArray[np.float64]:
    """Σ_{v ∈ C} w_v ‖x − v‖ for every point x and every cluster C of ``basis``, for points on a few lines.

    Two points on lines a and b (coordinate t along the lines' axis) are ‖x − v‖ = √(δ_ab² + (t_x − t_v)²) apart:
    an outer difference, a square, the lines' gap and a root per pair — no Gram matrix and its cancellation, no
    matrix product (each row block is reduced over the columns sorted by cluster).
    """
    u = U.shape[0]
    t = U[:, lines.axis]
    gaps = lines.squared_gaps()
    col = np.argsort(basis, kind="stable")  # columns grouped by cluster
    t_col, w_col, line_col = t[col], w[col], lines.group[col]
    starts = np.searchsorted(basis[col], np.arange(width))  # every cluster has a point: strictly increasing
    sums = np.empty((u, width))
    rows = _block_rows(u)
    block = np.empty((rows, u))
    for line in range(lines.n_lines):
        members = np.flatnonzero(lines.group == line)
        gap_to_col = gaps[line][line_col]
        for first in range(0, members.size, rows):
            idx = members[first:first + rows]
            d = block[: idx.size]
            np.subtract.outer(t[idx], t_col, out=d)
            np.square(d, out=d)
            d += gap_to_col
            np.sqrt(d, out=d)
            d *= w_col
            sums[idx] = np.add.reduceat(d, starts, axis=1)
    return sums


def _finest_refinement(labels_by_k: dict[int, NDArray[np.int64]]) -> NDArray[np.int64] | None:
    """Labels (0, 1, …) of the labelling that refines every other one (cuts of one tree always nest), or None."""
    if not labels_by_k:
        return None
    _, first, fine = np.unique(labels_by_k[max(labels_by_k)], return_index=True, return_inverse=True)
    fine = fine.reshape(-1)
    for lab in labels_by_k.values():
        if not np.array_equal(lab, lab[first][fine]):  # constant on every finest cluster?
            return None
    return fine.astype(np.int64)


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
        from tracetochain.featurize import unique_rows
        from tracetochain.featurize.rules import RuleFeaturizer
        from tracetochain.states._model import StateModel, build_taxonomy, readable_names, taxonomy_infos
        from tracetochain.traces import TraceTable

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
        lines = _find_lines(points)  # once, for the merges and the silhouette
        pairs, _ = _ward_merges(points, weights, lines)
        ks = [k for k in range(self.k_min, self.k_max + 1) if 2 <= k <= u]
        scores: dict[int, float] = {}
        if ks:
            cuts = cut_tree(pairs, u, ks)
            scores = _weighted_silhouette(points, weights, cuts, lines)
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
