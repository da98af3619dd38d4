"""The candidate patterns of a corpus and which traces contain them, as one sparse trace × candidate matrix.

Kinds (every one a yes/no property of a whole trace):

* ``variant`` — the whole path with consecutive repeats collapsed (``a → a → b`` is the variant ``a → b``);
* ``ngram`` — a run of ``n`` consecutive states, ``n = 1 … max_length`` (``n = 1``: the state is visited);
* ``loop`` — a state left and entered again (a cycle ``a → … → a``: the state occurs twice in the collapsed path);
* ``revisit`` — a state visited on at least ``r`` steps, for each ``r`` in ``revisits``;
* ``errors`` — at least ``k`` consecutive steps with the ``error`` flag set (anywhere), and a state failing on at
  least ``k`` of its visits in a row (steps of other states in between do not break the run: "test failing ≥ 2
  times in a row" with edits between the tests), for each ``k`` in ``error_runs``.

The family tested is stated before any outcome is looked at: a candidate is kept when at least ``min_support``
traces contain it and at least ``min_support`` do not (else there is no contrast to estimate), and candidates that
are contained in exactly the same traces are one hypothesis (the first by kind and length is reported; the others are
its ``aliases``). Both rules read only the presence matrix, never the outcomes, so conditional tests stay valid.
Presence is computed with array operations over all steps at once (no loop over candidates × traces).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from tracetochain.paths._sequences import PathSequences

KINDS = ("variant", "ngram", "loop", "revisit", "errors")
ARROW = " → "


@dataclass(frozen=True)
class CandidateSettings:
    """What is enumerated (module docstring). ``min_support`` is ``max(min_traces, ceil(min_share · n_traces))``."""

    max_length: int = 4
    revisits: tuple[int, ...] = (3, 5, 10)
    error_runs: tuple[int, ...] = (1, 2, 3)
    min_traces: int = 5
    min_share: float = 0.01
    kinds: tuple[str, ...] = KINDS

    def __post_init__(self) -> None:
        if not 1 <= self.max_length <= 8:
            raise ValueError(f"max_length must be between 1 and 8, got {self.max_length}")
        if self.min_traces < 1:
            raise ValueError(f"min_traces must be >= 1, got {self.min_traces}")
        if not 0.0 <= self.min_share < 0.5:
            raise ValueError(f"min_share must be in [0, 0.5), got {self.min_share}")
        if any(r < 2 for r in self.revisits):
            raise ValueError(f"revisit thresholds must be >= 2, got {self.revisits}")
        if any(k < 1 for k in self.error_runs):
            raise ValueError(f"error-run lengths must be >= 1, got {self.error_runs}")
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown or not self.kinds:
            raise ValueError(f"kinds must be among {', '.join(KINDS)}, got {self.kinds}")

    def min_support(self, n_traces: int) -> int:
        return max(self.min_traces, math.ceil(self.min_share * n_traces))

    def to_dict(self) -> dict[str, object]:
        return {"max_length": self.max_length, "revisits": list(self.revisits), "error_runs": list(self.error_runs),
                "min_traces": self.min_traces, "min_share": self.min_share, "kinds": list(self.kinds)}


@dataclass(frozen=True)
class Pattern:
    """One candidate: its kind, the states it names and its threshold (``k`` of a revisit or error run)."""

    kind: str
    states: tuple[str, ...] = ()
    k: int = 0

    @property
    def text(self) -> str:
        if self.kind in ("variant", "ngram"):
            return ARROW.join(self.states)
        if self.kind == "loop":
            return f"{self.states[0]} → … → {self.states[0]}"
        if self.kind == "revisit":
            return f"{self.states[0]} visited ≥ {self.k} times"
        if self.states:
            return f"{self.states[0]} failing ≥ {self.k} time{'s' if self.k > 1 else ''} in a row"
        return f"≥ {self.k} consecutive error steps" if self.k > 1 else "an error step"


@dataclass(frozen=True, eq=False)
class Candidates:
    """The tested family: ``presence`` (traces × candidates, CSC, 0/1), the ``patterns``, their ``aliases`` (other
    patterns in exactly the same traces) and the support threshold used."""

    presence: sp.csc_matrix
    patterns: tuple[Pattern, ...]
    aliases: tuple[tuple[Pattern, ...], ...]
    min_support: int
    n_enumerated: int
    notes: tuple[str, ...] = field(default=())

    @property
    def n_candidates(self) -> int:
        return len(self.patterns)


# ---------------------------------------------------------------------------------------------------- enumeration
def _pairs_unique(trace: NDArray[np.int64], key: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Distinct (trace, key) pairs."""
    if trace.size == 0:
        return trace, key
    order = np.lexsort((key, trace))
    t, k = trace[order], key[order]
    keep = np.ones(t.size, bool)
    keep[1:] = (t[1:] != t[:-1]) | (k[1:] != k[:-1])
    return t[keep], k[keep]


def _step_frame(seq: PathSequences) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(trace of every step, position of every step in its trace)."""
    lengths = seq.lengths
    trace = np.repeat(np.arange(seq.n_traces, dtype=np.int64), lengths)
    pos = np.arange(seq.codes.size, dtype=np.int64) - np.repeat(seq.offsets[:-1], lengths)
    return trace, pos


def _run_lengths(flag: NDArray[np.bool_], start: NDArray[np.bool_]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """For runs of ``flag`` steps (a run starts where ``start``): (index of each run's first step, run length)."""
    starts = np.flatnonzero(start & flag)
    if starts.size == 0:
        return starts, starts
    run_id = np.cumsum(start & flag) - 1
    lengths = np.bincount(run_id[flag], minlength=starts.size).astype(np.int64)
    return starts, lengths


def enumerate_candidates(seq: PathSequences, settings: CandidateSettings | None = None) -> Candidates:
    """The candidate family of ``seq`` (module docstring)."""
    cfg = settings or CandidateSettings()
    n = seq.n_traces
    m = max(1, len(seq.state_names))
    names = seq.state_names
    support = cfg.min_support(n)
    trace, pos = _step_frame(seq)
    c = seq.codes
    first = pos == 0
    blocks: list[tuple[NDArray[np.int64], NDArray[np.int64], list[Pattern]]] = []
    notes: list[str] = []

    def add(t: NDArray[np.int64], key: NDArray[np.int64], decode: list[Pattern] | None = None,
            make: object = None) -> None:
        t, key = _pairs_unique(t, key)
        uniq, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
        ok = (counts >= support) & (counts <= n - support)
        kept = np.flatnonzero(ok)
        if kept.size == 0:
            return
        new_col = np.full(uniq.size, -1, np.int64)
        new_col[kept] = np.arange(kept.size)
        col = new_col[inv]
        sel = col >= 0
        pats = [make(int(u)) for u in uniq[kept]] if callable(make) else [decode[int(u)] for u in uniq[kept]]  # type: ignore[index]
        blocks.append((t[sel], col[sel], pats))

    collapsed_keep = first.copy()
    if c.size:
        collapsed_keep[1:] |= c[1:] != c[:-1]
    cc, ct = c[collapsed_keep], trace[collapsed_keep]
    if "variant" in cfg.kinds and n:
        cut = np.concatenate([[0], np.cumsum(np.bincount(ct, minlength=n))]).astype(np.int64)
        keys = [cc[cut[i]:cut[i + 1]].tobytes() for i in range(n)]
        distinct = sorted(set(keys))
        index = {k: i for i, k in enumerate(distinct)}
        vkey = np.fromiter((index[k] for k in keys), np.int64, count=n)
        decode = [Pattern("variant", tuple(names[int(x)] for x in np.frombuffer(k, np.int64))) for k in distinct]
        add(np.arange(n, dtype=np.int64), vkey, decode)
    if "ngram" in cfg.kinds:
        lengths_of_step = np.repeat(seq.lengths, seq.lengths)
        for length in range(1, cfg.max_length + 1):
            if m ** length >= 2 ** 62:
                notes.append(f"n-grams of length ≥ {length} were not enumerated: {m} states")
                break
            valid = np.flatnonzero(pos + length <= lengths_of_step)
            key = np.zeros(valid.size, np.int64)
            for j in range(length):
                key = key * m + c[valid + j]

            def make_ngram(k: int, length: int = length) -> Pattern:
                digits = []
                for _ in range(length):
                    k, r = divmod(k, m)
                    digits.append(names[r])
                return Pattern("ngram", tuple(reversed(digits)))

            add(trace[valid], key, make=make_ngram)
    if "loop" in cfg.kinds and cc.size:
        pair = ct * m + cc
        uniq, counts = np.unique(pair, return_counts=True)
        hit = uniq[counts >= 2]
        add(hit // m, hit % m, make=lambda s: Pattern("loop", (names[s],)))
    if "revisit" in cfg.kinds and c.size and cfg.revisits:
        uniq, counts = np.unique(trace * m + c, return_counts=True)
        rs = sorted(set(cfg.revisits))
        for ri, r in enumerate(rs):
            hit = uniq[counts >= r]
            add(hit // m, (hit % m) * len(rs) + ri,
                make=lambda key, rs=rs: Pattern("revisit", (names[key // len(rs)],), rs[key % len(rs)]))
    if "errors" in cfg.kinds and c.size and seq.errors.any() and cfg.error_runs:
        err = seq.errors
        ks = sorted(set(cfg.error_runs))
        prev_err = np.concatenate([[False], err[:-1]])
        starts, lengths = _run_lengths(err, first | ~prev_err)
        for ki, k in enumerate(ks):
            sel = lengths >= k
            add(trace[starts[sel]], np.full(int(sel.sum()), ki, np.int64),
                make=lambda key, ks=ks: Pattern("errors", (), ks[key]))
        # Within one state: the trace's visits to that state in order (steps of other states in between do not
        # break the run: "test failed twice in a row" with edits between the tests).
        by_state = np.lexsort((pos, c, trace))
        e2, c2, t2 = err[by_state], c[by_state], trace[by_state]
        new_group = np.ones(c2.size, bool)
        new_group[1:] = (c2[1:] != c2[:-1]) | (t2[1:] != t2[:-1])
        prev2 = np.concatenate([[False], e2[:-1]])
        starts, lengths = _run_lengths(e2, new_group | ~prev2)
        for ki, k in enumerate(ks):
            sel = lengths >= k
            add(t2[starts[sel]], c2[starts[sel]] * len(ks) + ki,
                make=lambda key, ks=ks: Pattern("errors", (names[key // len(ks)],), ks[key % len(ks)]))
    rows = [b[0] for b in blocks]
    cols: list[NDArray[np.int64]] = []
    patterns: list[Pattern] = []
    for _, col, pats in blocks:
        cols.append(col + len(patterns))
        patterns.extend(pats)
    row_idx = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    col_idx = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    matrix = sp.csc_matrix((np.ones(row_idx.size, np.int8), (row_idx, col_idx)), shape=(n, len(patterns)))
    matrix.sort_indices()
    return _deduplicate(matrix, patterns, support, notes)


def _deduplicate(matrix: sp.csc_matrix, patterns: list[Pattern], support: int, notes: list[str]) -> Candidates:
    """One column per distinct set of traces; the first pattern (kind order, then as enumerated) names it."""
    first_of: dict[bytes, int] = {}
    aliases: dict[int, list[Pattern]] = {}
    keep: list[int] = []
    ind, ptr = matrix.indices, matrix.indptr
    for j in range(len(patterns)):
        key = ind[ptr[j]:ptr[j + 1]].tobytes()
        owner = first_of.get(key)
        if owner is None:
            first_of[key] = j
            keep.append(j)
            aliases[j] = []
        else:
            aliases[owner].append(patterns[j])
    sub = matrix[:, keep] if keep else matrix[:, :0]
    return Candidates(presence=sp.csc_matrix(sub), patterns=tuple(patterns[j] for j in keep),
                      aliases=tuple(tuple(aliases[j]) for j in keep), min_support=support,
                      n_enumerated=len(patterns), notes=tuple(notes))
