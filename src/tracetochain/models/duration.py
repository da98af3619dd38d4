"""Duration-aware chains: time-inhomogeneous rows, causal by construction.

The context of a step is its observed state s and the bucket b(t) of its step index t (0-based position in the
trace — known the moment the step happens, unlike a depth j/(L − 1) that needs the final length L). Each (s, b) row is
shrunk toward the homogeneous row of s, which is shrunk toward the pooled root (hierarchical Dirichlet, one
empirical-Bayes concentration per state by default: a state whose behaviour does not change with time keeps its
homogeneous row, one that does gets rows of its own where the data support them).

Bucket edges come from the data: for B buckets, the step-index quantiles i/B (i = 1 … B − 1) of the fit events,
rounded and made distinct; B is chosen among :data:`BUCKET_CHOICES` by the marginal likelihood (evidence) of the
bucketed rows around their homogeneous parents — B = 1 is the plain first-order chain, so the family never does worse
than it by construction of the comparison.

Compiled chain: the state is (s, t) for t < H (H = the last edge) and (s, ≥H) after it, so the step clock is exact
and R(d), the success-time law and every metric are those of the time-inhomogeneous model (a discrete phase-type law
with H + 1 phases per state).

>>> import tracetochain as tt
>>> from tracetochain.models import DurationModel
>>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 1000, seed=1)
>>> DurationModel().fit(traces).n_buckets   # first-order data: no bucket pays for itself
1
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain.models._context import (
    CompiledArrays,
    ContextChainModel,
    ContextScheme,
    KappaBy,
    dense_transitions,
    events,
    fit_context_rows,
)
from tracetochain.models._encoded import EncodedTraces, Grouping

#: Numbers of step buckets tried when ``buckets="auto"``.
BUCKET_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16, 24)
#: Largest compiled chain (states = observed states × (H + 1)); later buckets are merged to stay under it.
DEFAULT_MAX_STATES = 2000


def quantile_edges(positions: NDArray[np.int64], n_buckets: int) -> tuple[int, ...]:
    """Distinct integer edges at the step-index quantiles i/B, i = 1 … B − 1 (bucket b = #edges ≤ t).

    >>> quantile_edges(np.arange(100), 4)
    (25, 50, 75)
    """
    if n_buckets <= 1 or positions.size == 0:
        return ()
    qs = np.quantile(positions, np.arange(1, n_buckets) / n_buckets, method="higher")
    edges = sorted({int(q) for q in qs if q > 0})
    return tuple(edges)


class StepBucketScheme(ContextScheme):
    """Contexts (s, b(t)) below the first-order contexts s; edges given or chosen by evidence."""

    name = "state x step bucket"

    def __init__(self, buckets: int | str | tuple[int, ...] = "auto", *, kappa_by: KappaBy = "parent",
                 max_states: int = DEFAULT_MAX_STATES) -> None:
        self.buckets = buckets
        self.kappa_by = kappa_by
        self.max_states = max_states
        self.m = 0
        self.edges: tuple[int, ...] = ()
        self.evidence: dict[int, float] = {}

    @property
    def n_buckets(self) -> int:
        return len(self.edges) + 1

    def _set(self, m: int, edges: tuple[int, ...]) -> None:
        self.m = m
        self.edges = edges
        B = len(edges) + 1
        if B == 1:
            self.parent = np.full(m, -1, np.int64)
            self.level = np.ones(m, np.int64)
        else:
            self.parent = np.r_[np.full(m, -1, np.int64), np.repeat(np.arange(m, dtype=np.int64), B)]
            self.level = np.r_[np.ones(m, np.int64), np.full(m * B, 2, np.int64)]

    def _cap(self, m: int, edges: tuple[int, ...]) -> tuple[int, ...]:
        """Drop the last edges until the compiled chain (m × (H + 1) states) fits ``max_states``."""
        while edges and m * (edges[-1] + 1) > self.max_states:
            edges = edges[:-1]
        return edges

    def setup(self, enc: EncodedTraces) -> None:
        m = enc.n_symbols
        pos = enc.position[enc.next_outcome() >= 0]
        if isinstance(self.buckets, tuple):
            edges = tuple(sorted({int(e) for e in self.buckets if int(e) > 0}))
            self._set(m, self._cap(m, edges))
            return
        choices = BUCKET_CHOICES if self.buckets == "auto" else (int(self.buckets),)
        if not isinstance(self.buckets, str) and int(self.buckets) < 1:
            raise ValueError(f"buckets must be >= 1, 'auto' or a tuple of edges, got {self.buckets!r}")
        if isinstance(self.buckets, str) and self.buckets != "auto":
            raise ValueError(f"buckets must be >= 1, 'auto' or a tuple of edges, got {self.buckets!r}")
        best: tuple[float, tuple[int, ...]] | None = None
        self.evidence = {}
        tried: set[tuple[int, ...]] = set()
        for B in choices:
            edges = self._cap(m, quantile_edges(pos, B))
            if edges in tried:
                continue
            tried.add(edges)
            self._set(m, edges)
            score = self._evidence(enc)
            self.evidence[len(edges) + 1] = score
            if best is None or score > best[0] + 1e-9:
                best = (score, edges)
        assert best is not None
        self._set(m, best[1])

    def _evidence(self, enc: EncodedTraces) -> float:
        """Penalised evidence gain of the bucket rows over their homogeneous parents (0 for one bucket)."""
        if self.n_buckets == 1:
            return 0.0
        fit = fit_context_rows(self, events(enc, self), self.m, kappa_by=self.kappa_by)
        return float(sum(fit.gains.values()))

    def bucket(self, t: NDArray[np.int64]) -> NDArray[np.int64]:
        out: NDArray[np.int64] = np.searchsorted(np.asarray(self.edges, np.int64), t, side="right").astype(np.int64)
        return out

    def contexts(self, enc: EncodedTraces) -> NDArray[np.int64]:
        if self.n_buckets == 1:
            return enc.codes.copy()
        out: NDArray[np.int64] = self.m + enc.codes * self.n_buckets + self.bucket(enc.position)
        return out

    def expanded_index(self, enc: EncodedTraces, node: NDArray[np.int64]) -> NDArray[np.int64]:
        """State (s, min(t, H)) of the compiled chain, index min(t, H)·m + s."""
        if self.n_buckets == 1:
            return enc.codes.copy()
        out: NDArray[np.int64] = np.minimum(enc.position, self.edges[-1]) * self.m + enc.codes
        return out

    def compile(self, rows: NDArray[np.float64], pi0: NDArray[np.float64], observed_names: tuple[str, ...]
                ) -> CompiledArrays:
        m = self.m
        if self.n_buckets == 1:
            return CompiledArrays(*dense_transitions(rows[:m, :m]), rows[:m, m].copy(), rows[:m, m + 1].copy(),
                                  pi0.copy(), np.arange(m, dtype=np.int64), lambda: observed_names)
        H = self.edges[-1]
        T = H + 1  # clock values 0 … H, H meaning "H or later"
        t = np.arange(T)
        node = m + np.arange(m)[None, :] * self.n_buckets + self.bucket(t)[:, None]  # (T, m)
        r = rows[node.ravel()]  # state index = t·m + s
        n = T * m
        nxt_t = np.minimum(t + 1, H)
        # state (s, t) moves to (s', min(t + 1, H)) with the row of its context
        cols = (np.repeat(nxt_t, m) * m)[:, None] + np.arange(m)[None, :]
        p0 = np.zeros(n)
        p0[:m] = pi0

        def names() -> tuple[str, ...]:
            return tuple(f"{observed_names[s]}@{'≥' if tt == H else ''}{tt}" for tt in range(T) for s in range(m))

        return CompiledArrays(np.repeat(np.arange(n), m), cols.ravel(), r[:, :m].ravel(), r[:, m].copy(),
                              r[:, m + 1].copy(), p0, np.tile(np.arange(m), T), names)

    def settings(self) -> dict[str, Any]:
        return {"scheme": self.name, "edges": list(self.edges), "n_buckets": self.n_buckets,
                "evidence_by_buckets": {str(k): v for k, v in self.evidence.items()}, "kappa_by": self.kappa_by}


class DurationModel(ContextChainModel):
    """Time-inhomogeneous chain on (state, step bucket), compiled on (state, step) (module docstring).

    Parameters
    ----------
    buckets : "auto", int or tuple of int
        ``"auto"``: choose B among :data:`BUCKET_CHOICES` by evidence; an int: B quantile buckets; a tuple: the
        edges themselves (bucket b holds steps t with edges[b − 1] ≤ t < edges[b]).
    kappa_by : {"parent", "level"}
        One shrinkage concentration per state (default) or one for all bucket rows.
    max_states : int
        Cap on the compiled chain's size (the last edges are dropped to respect it).
    """

    family = "duration"

    def __init__(self, buckets: int | str | tuple[int, ...] = "auto", *, kappa_by: KappaBy = "parent",
                 max_states: int = DEFAULT_MAX_STATES, group: Grouping = "auto") -> None:
        super().__init__(group=group)
        self.buckets = buckets
        self.kappa_by = kappa_by
        self.max_states = max_states

    def _make_scheme(self) -> ContextScheme:
        return StepBucketScheme(self.buckets, kappa_by=self.kappa_by, max_states=self.max_states)

    def like(self) -> DurationModel:
        """Same bucket edges once fitted (the choice of B is not redone), else the same settings."""
        buckets = self.edges if self.scheme_ is not None else self.buckets
        return DurationModel(buckets, kappa_by=self.kappa_by, max_states=self.max_states, group=self.group)

    @property
    def n_buckets(self) -> int:
        self._check_fitted()
        assert isinstance(self.scheme_, StepBucketScheme)
        return self.scheme_.n_buckets

    @property
    def edges(self) -> tuple[int, ...]:
        self._check_fitted()
        assert isinstance(self.scheme_, StepBucketScheme)
        return self.scheme_.edges

    @property
    def size(self) -> int | None:
        return self.n_buckets if self.scheme_ is not None else None

    @property
    def label(self) -> str:
        if self.scheme_ is None:
            return "duration"
        return f"duration(B={self.n_buckets})"

