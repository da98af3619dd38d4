"""Speed work on Ward and the silhouette must not move the states: the SWE-bench protocols' partitions are pinned.

Three pins per protocol: the partitions for k = 2..10 (what every downstream number depends on; unchanged since
they were first pinned), the merge tree with its costs, and the silhouette scores, bit for bit on the project's
x86-64/OpenBLAS machines. A change that moves the partitions changes the states and with them every downstream
number: it must be deliberate, with new digests and a reason. Re-pinned once, on purpose, when Ward started finding
the cheap merges inside each line by one-dimensional Ward (the costs are now computed from centroids rather than
Lance–Williams updates, and equal-cost ties may pair differently below k = 10) and the silhouette started computing
distances on the lines exactly (no Gram cancellation): the partitions stayed the same and the scores moved by
< 1e-11.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.featurize._base import unique_rows
from tracetochain.states._spec import states_from_spec
from tracetochain.states._ward import cut_tree, nearest_centroid, ward_merges, weighted_silhouette

PINNED = {
    "sub": ("cb039fdc5f9bc56e41c8ae1c2b7e3995", "bc84abfd9ba0163d9d744c59d92d833d",
            ["0x1.a0cdc9abb6e6fp-2", "0x1.1d87d2babf5bep-1", "0x1.5cbb12b506ef3p-1", "0x1.7ed74bf7d5d3ep-1",
             "0x1.8e0004fc2b3ccp-1", "0x1.9a0e8e340f440p-1", "0x1.788b31fdac67dp-1", "0x1.7f14238fd5091p-1",
             "0x1.6bfb23dc91066p-1"]),
    "all": ("5b242d45b021f47b8b1891f950e74ffb", "3507a30abc98bbab906dffe64bc84af5",
            ["0x1.a0ec937c48809p-2", "0x1.1ed3ea13c4402p-1", "0x1.5fc58f16cfd8fp-1", "0x1.80931e1f19bdap-1",
             "0x1.8d801e2c43cb7p-1", "0x1.995d5063a24ecp-1", "0x1.76a0485c9aab5p-1", "0x1.7d06b725587fep-1",
             "0x1.63b22e61e87cbp-1"]),
}
#: The scores before the re-pinning (Gram-matrix distances): the new ones agree to 1e-10.
SCORES_BEFORE = {
    "sub": ["0x1.a0cdc9abb30c8p-2", "0x1.1d87d2babd152p-1", "0x1.5cbb12b504196p-1", "0x1.7ed74bf7d27efp-1",
            "0x1.8e0004fc27310p-1", "0x1.9a0e8e340a986p-1", "0x1.788b31fd9e7a6p-1", "0x1.7f14238fc61f1p-1",
            "0x1.6bfb23dc8010ap-1"],
    "all": ["0x1.a0ec937c4615cp-2", "0x1.1ed3ea13c2d39p-1", "0x1.5fc58f16cdfcdp-1", "0x1.80931e1f178cdp-1",
            "0x1.8d801e2c4144bp-1", "0x1.995d50639f507p-1", "0x1.76a0485c92204p-1", "0x1.7d06b7254f46dp-1",
            "0x1.63b22e61db8fcp-1"],
}


def fit_half(corpus: Path, case: str) -> tt.TraceTable:
    """The fit half of benchmarks/bench_protocols.py's split."""
    traces = tt.read_traces(corpus)
    rng_seed = 20260606
    if case == "sub":
        sub = np.sort(np.random.default_rng(rng_seed).choice(traces.n_traces, 160, replace=False))
        order = sub[np.random.default_rng(rng_seed).permutation(160)]
    else:
        order = np.random.default_rng(rng_seed).permutation(traces.n_traces)
    return traces.select_traces(order[: len(order) // 2])


@pytest.mark.parametrize("case", ["sub", "all"])
def test_swebench_protocol_ward_tree_and_silhouette_are_pinned(shared_data: Path, case: str) -> None:
    fit = fit_half(shared_data / "tracetochain-artifact" / "swebench_real" / "corpus.json", case)
    featurizer = states_from_spec("ward", vocabulary="shell-paper", features="kind,tool,hindsight-depth").featurizer
    U, w, _ = unique_rows(featurizer.fit(fit).fetch_model().transform(fit))
    pairs, costs = ward_merges(U, w.astype(np.float64))
    cuts = cut_tree(pairs, U.shape[0], list(range(2, 11)))
    partitions = hashlib.sha256(b"".join(cuts[k].astype("<i8").tobytes() for k in range(2, 11))).hexdigest()[:32]
    tree = hashlib.sha256(pairs.astype("<i8").tobytes() + costs.astype("<f8").tobytes()).hexdigest()[:32]
    scores = weighted_silhouette(U, w.astype(np.float64), cuts)
    assert (partitions, tree, [scores[k].hex() for k in range(2, 11)]) == PINNED[case]
    before = [float.fromhex(h) for h in SCORES_BEFORE[case]]
    assert [scores[k] for k in range(2, 11)] == pytest.approx(before, rel=1e-10)


def _silhouette_reference(U: np.ndarray, w: np.ndarray, labels_by_k: dict[int, np.ndarray]) -> dict[int, float]:
    """The textbook weighted silhouette on the full distance matrix (an independent oracle)."""
    d = np.sqrt(np.maximum(((U[:, None, :] - U[None, :, :]) ** 2).sum(-1), 0.0))
    out = {}
    for k, lab in labels_by_k.items():
        s = np.zeros(len(U))
        for i in range(len(U)):
            W = np.bincount(lab, weights=w, minlength=k)
            sums = np.bincount(lab, weights=w * d[i], minlength=k)
            if W[lab[i]] <= 1:
                continue
            a = sums[lab[i]] / (W[lab[i]] - 1)
            b = min(sums[c] / W[c] for c in range(k) if c != lab[i] and W[c] > 0)
            s[i] = (b - a) / max(a, b) if max(a, b) > 0 else 0.0
        out[k] = float((w * s).sum() / w.sum())
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_blocked_silhouette_equals_the_reference(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import tracetochain.states._ward as ward

    monkeypatch.setattr(ward, "_BLOCK_ELEMENTS", 7 * 300)  # many small blocks, and a ragged last one
    rng = np.random.default_rng(seed)
    U = np.round(rng.standard_normal((300, 4)), 1)
    w = rng.integers(1, 4, 300).astype(np.float64)
    pairs, _ = ward_merges(U, w)
    cuts = cut_tree(pairs, 300, [2, 3, 5])
    got, want = ward.weighted_silhouette(U, w, cuts), _silhouette_reference(U, w, cuts)
    for k in cuts:
        assert got[k] == pytest.approx(want[k], rel=1e-8, abs=1e-10)  # ‖x‖²+‖y‖²−2x·y vs (x−y)²: rounding only


def test_nearest_centroid_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    X, C = rng.standard_normal((5000, 6)), rng.standard_normal((7, 6))
    brute = np.argmin(((X[:, None, :] - C[None, :, :]) ** 2).sum(-1), axis=1)
    assert np.array_equal(nearest_centroid(X, C), brute)
    assert np.array_equal(nearest_centroid(np.zeros((3, 2)), np.zeros((2, 2))), [0, 0, 0])  # ties → lowest index
