"""InformativeStates: base states refined by history features until the chain predicts what follows.

The first-order chain forgets how a step was reached: when failure follows "two failing tests in a row, then
submit", every ``submit`` looks the same to it, and its eventual success from ``submit`` is the overall pass rate.
This state model keeps the chain first-order but lets a state remember what matters, in the spirit of causal-state
splitting (CSSR, Shalizi & Klinkner 2004): a base state (the traces' label, or a vocabulary's category) is split by
a history feature (:mod:`tracetochain.featurize.history`: failing tests so far, errors, retries, repeats, steps
without an edit, a return within a window, the step number) only when the split changes the distribution of what
follows — the next state of the chain, or the outcome after the last step — and the change holds on traces the
split was not chosen on.

**Algorithm.** The fit traces are cut in two halves by a seeded hash of their ids: a selection half A and a
confirmation half B. Each round, with the current states S and Y_i the symbol after step i (the next step's state,
or success/failure after a trace's last step; censored traces' last steps have none):

1. for every state s, feature f and threshold t of the feature's grid with at least ``min_steps`` A-steps on each
   side, the G statistic of the 2 × K table (f < t vs f ≥ t) × Y on A,
   G = 2 Σ O log(O / E), and its χ² p-value with K − 1 degrees of freedom (K: symbols seen after s in A);
2. candidates with p < ``level`` / m (m: the number of candidates of the round, Bonferroni) in order of p;
3. the first that **confirms** on B is accepted: the next-symbol distributions of the two sides and of s whole,
   estimated on A with pseudocount ½ per symbol, give each B trace a held-out log-likelihood gain
   g = Σ_{its steps in s} [log p_side(Y) − log p_s(Y)]; the split confirms when the mean gain over the B traces
   that visit s is positive with z = mean / (sd / √n) ≥ ``z`` (one-sided, clustered by trace).

Rounds stop when nothing confirms or the states reach ``max_states``. The new states change the symbols Y, so a
split propagates back to the states that lead into it (the CSSR recursion): "test failed, 1 failing test before"
predicts "submit after ≥2 failing tests in a row". Every choice is deterministic given ``seed`` (the A/B hash,
ties broken by the order of states, features and thresholds). Only the traces given to ``fit`` are used — the
analysis passes the fit half, so its held-out checks stay out of sample.

**Null behaviour.** When the next symbol depends on the current base state only (a first-order chain), a split
must pass a Bonferroni-corrected test on A and a held-out gain on traces it was not chosen on: spurious splits are
rare (the study ``studies/insight_states.py`` measures the rate).

Each state is named by its base state and its conditions in words ("EDIT after ≥2 failing tests", "submit, 0
errors so far", "lookup, repeated ≥3×"); ``settings["splits"]`` keeps the evidence of every split (G, p, held-out
gain and z).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain._compat import renamed_attribute, renamed_parameters
from tracetochain._display import EstimatorDisplay
from tracetochain._outcome import FAILURE as _FAILURE
from tracetochain._outcome import INVALID as _INVALID
from tracetochain._outcome import SUCCESS as _SUCCESS
from tracetochain.exceptions import EmptyTraceSetError, NotFittedError
from tracetochain.featurize.history import (
    HISTORY_FEATURES,
    MINIMUM,
    THRESHOLDS,
    HistoryFeatures,
    describe_condition,
    history_features,
)
from tracetochain.featurize.vocab import get_vocabulary
from tracetochain.states._model import StateInfo, StateModel
from tracetochain.traces import TraceTable
from tracetochain.traces.shared import fnv1a_hashes, hash_uniforms

#: The hash stream of the selection / confirmation halves (independent of the analysis's split stream).
_AB_STREAM = np.uint64(0x5EC7_C0F1_A7E5_0025)
#: Candidates tried for confirmation per round (in order of p), before the round gives up.
_MAX_TRIES = 20


@dataclass
class _Leaf:
    """One state: a base state and an interval [lo, hi) (hi None: unbounded) per constrained feature."""

    base: int
    bounds: dict[str, tuple[int, int | None]] = field(default_factory=dict)

    def mask(self, base: NDArray[np.int64], feats: HistoryFeatures) -> NDArray[np.bool_]:
        m: NDArray[np.bool_] = np.asarray(base == self.base)
        for f, (lo, hi) in self.bounds.items():
            v = feats[f]
            if lo > MINIMUM.get(f, 0):
                m &= v >= lo
            if hi is not None:
                m &= v < hi
        return m

    def split(self, feature: str, t: int) -> tuple[_Leaf, _Leaf]:
        lo, hi = self.bounds.get(feature, (MINIMUM.get(feature, 0), None))
        left, right = dict(self.bounds), dict(self.bounds)
        left[feature] = (lo, t)
        right[feature] = (t, hi)
        return _Leaf(self.base, left), _Leaf(self.base, right)

    def name(self, base_names: tuple[str, ...]) -> str:
        phrases = [p for f in HISTORY_FEATURES if f in self.bounds
                   for p in [describe_condition(f, *self.bounds[f])] if p]
        base = base_names[self.base]
        if not phrases:
            return base
        glue = " " if phrases[0].startswith(("after ", "at step", "right after", "repeated", "back ")) else ", "
        return base + glue + ", ".join(phrases)

    def to_dict(self, base_names: tuple[str, ...]) -> dict[str, Any]:
        return {"base": base_names[self.base],
                "conditions": {f: {"min": lo, "below": hi} for f, (lo, hi) in self.bounds.items()}}


class _Assign:
    """Maps steps to states: base state of the step, then the leaf whose conditions its history meets."""

    def __init__(self, vocabulary: str | None, base_names: tuple[str, ...], leaves: list[_Leaf]) -> None:
        self.vocabulary = vocabulary
        self.base_names = base_names
        self.leaves = leaves

    def base_codes(self, traces: TraceTable) -> NDArray[np.int64]:
        lookup = {n: i for i, n in enumerate(self.base_names)}
        if self.vocabulary is not None:
            from tracetochain.states._categorical import _vocab_codes

            vocab = get_vocabulary(self.vocabulary)
            to_base = np.array([lookup.get(c, -1) for c in vocab.categories], np.int64)
            return np.asarray(to_base[_vocab_codes(vocab, traces)], np.int64) if traces.n_steps \
                else np.zeros(0, np.int64)
        raw, names = traces.state_labels()
        to_base = np.array([lookup.get(x, -1) for x in names], np.int64)
        return np.asarray(to_base[raw], np.int64) if raw.size else np.zeros(0, np.int64)

    def __call__(self, traces: TraceTable) -> NDArray[np.int64]:
        base = self.base_codes(traces)
        feats = history_features(traces, base, self.base_names)
        return assign_leaves(self.leaves, base, feats)


def assign_leaves(leaves: list[_Leaf], base: NDArray[np.int64], feats: HistoryFeatures) -> NDArray[np.int64]:
    out = np.full(base.size, -1, np.int64)
    for i, leaf in enumerate(leaves):
        out[leaf.mask(base, feats)] = i
    return out


def _g_test(left: NDArray[np.float64], right: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """G = 2 Σ O log(O/E) of each 2 × K table (rows: thresholds × K symbols), and its degrees of freedom K' − 1
    (K': symbols seen on either side)."""
    total = left + right
    n_l = left.sum(axis=1, keepdims=True)
    n_r = right.sum(axis=1, keepdims=True)
    n = n_l + n_r
    with np.errstate(divide="ignore", invalid="ignore"):
        e_l = n_l * total / n
        e_r = n_r * total / n
        g_l = np.where(left > 0, left * np.log(left / e_l), 0.0)
        g_r = np.where(right > 0, right * np.log(right / e_r), 0.0)
    G = 2.0 * (g_l.sum(axis=1) + g_r.sum(axis=1))
    df = (total > 0).sum(axis=1) - 1
    return np.maximum(G, 0.0), df.astype(np.int64)


class InformativeStates(EstimatorDisplay):
    """Base states refined by history features while the refinement predicts what follows (module docstring).

    Parameters
    ----------
    vocabulary : str, optional
        Base states = the vocabulary's categories (``"shell"``, ``"chat"`` …); default: the traces' own labels.
    max_states : int, default 40
        Cap on the number of states.
    level : float, default 0.01
        Family-wise level of the selection test of each round (Bonferroni over the round's candidate splits).
        (``alpha=`` is its deprecated spelling, one release.)
    z : float, default 1.645
        One-sided z the held-out gain must reach on the confirmation half (5 %).
    min_steps : int, default 10
        Smallest number of selection-half steps on each side of a split.
    features : sequence of str, optional
        The history features tried (default: all of :data:`~tracetochain.featurize.history.HISTORY_FEATURES`).
    seed : int, default 0
        Seeds the selection / confirmation halves (a hash of the trace ids: the same on any engine or order).
    """

    alpha = renamed_attribute("alpha", "level")

    @renamed_parameters(alpha="level")
    def __init__(self, *, vocabulary: str | None = None, max_states: int = 40, level: float = 0.01,
                 z: float = 1.645, min_steps: int = 10, features: tuple[str, ...] | list[str] | None = None,
                 seed: int = 0) -> None:
        self.vocabulary = vocabulary
        self.max_states = max_states
        self.level = level
        self.z = z
        self.min_steps = min_steps
        self.features = features
        self.seed = seed
        self._model: StateModel | None = None

    def fit(self, traces: TraceTable) -> InformativeStates:
        from scipy.special import gammaincc  # χ² survival function: sf(G; d) = Q(d/2, G/2)

        if not isinstance(traces, TraceTable):
            raise TypeError(f"fit expects a TraceTable, got {type(traces).__name__}")
        features = tuple(self.features) if self.features is not None else HISTORY_FEATURES
        unknown = [f for f in features if f not in HISTORY_FEATURES]
        if unknown or not features:
            raise ValueError(f"unknown history feature {unknown[0] if unknown else '(none)'}; use some of "
                             f"{', '.join(HISTORY_FEATURES)}")
        if not 0 < self.level < 1 or self.max_states < 1 or self.min_steps < 1:
            raise ValueError("need 0 < level < 1, max_states >= 1 and min_steps >= 1")
        outcomes = traces.outcomes()
        traces = traces.select_traces(outcomes != _INVALID)
        if traces.n_steps == 0:
            raise EmptyTraceSetError("no steps to label")
        outcomes = traces.outcomes()
        # Base states: the vocabulary's observed categories in its order, or the labels sorted.
        if self.vocabulary is not None:
            from tracetochain.states._categorical import _vocab_codes

            vocab = get_vocabulary(self.vocabulary)
            cat = _vocab_codes(vocab, traces)
            observed = np.unique(cat)
            base_names = tuple(vocab.categories[i] for i in observed)
            position = np.full(len(vocab.categories), -1, np.int64)
            position[observed] = np.arange(observed.size)
            base = position[cat]
        else:
            # Sorted, so that the model does not depend on the order of the traces (nor do its tie-breaks).
            raw, label_names = traces.state_labels()
            order = np.argsort(np.array(label_names, dtype=object), kind="stable") if label_names else \
                np.zeros(0, np.int64)
            base_names = tuple(label_names[i] for i in order)
            rank = np.empty(len(label_names), np.int64)
            rank[order] = np.arange(len(label_names))
            base = rank[np.asarray(raw, np.int64)]
        feats = history_features(traces, base, base_names)
        n = traces.n_steps
        offsets = np.asarray(traces.offsets)
        trace_of = np.asarray(traces.trace_index)
        last = np.zeros(n, bool)
        last[offsets[1:] - 1] = True
        # Its own stream: the analysis's fit half is itself a hash split, which this one must cut across.
        in_b = (hash_uniforms(fnv1a_hashes(traces.trace_id_array), _AB_STREAM, self.seed) < 0.5)[trace_of]
        leaves = [_Leaf(b) for b in range(len(base_names))]
        splits: list[dict[str, Any]] = []
        state = base.copy()
        while len(leaves) < self.max_states:
            K = len(leaves) + 2
            y = np.full(n, -1, np.int64)
            y[:-1] = state[1:]
            out = outcomes[trace_of[last]]
            y[last] = np.where(out == _SUCCESS, K - 2, np.where(out == _FAILURE, K - 1, -1))
            accepted = self._round(leaves, state, y, K, feats, features, in_b, trace_of, gammaincc)
            if accepted is None:
                break
            i, f, t, evidence = accepted
            parent = leaves[i].name(base_names)
            left, right = leaves[i].split(f, t)
            leaves[i:i + 1] = [left, right]
            splits.append({"state": parent, "feature": f, "threshold": t,
                           "into": [left.name(base_names), right.name(base_names)], **evidence})
            state = assign_leaves(leaves, base, feats)
        names = _unique([leaf.name(base_names) for leaf in leaves])
        sizes = np.bincount(state, minlength=len(leaves))
        taxonomy = tuple(StateInfo(nm, int(sz), float(sz / n), {base_names[leaf.base]: 1.0})
                         for nm, sz, leaf in zip(names, sizes, leaves, strict=True))
        settings = {"vocabulary": self.vocabulary, "k": len(leaves), "n_base_states": len(base_names),
                    "base_states": list(base_names), "max_states": self.max_states, "level": self.level,
                    "z": self.z, "min_steps": self.min_steps, "features": list(features), "seed": self.seed,
                    "n_steps": n, "n_traces": traces.n_traces, "uses_outcomes": True,
                    "states": [leaf.to_dict(base_names) for leaf in leaves], "splits": splits}
        self._model = StateModel("informative", names, taxonomy, settings, _Assign(self.vocabulary, base_names,
                                                                                   leaves), state)
        return self

    def _round(self, leaves: list[_Leaf], state: NDArray[np.int64], y: NDArray[np.int64], K: int,
               feats: HistoryFeatures, features: tuple[str, ...], in_b: NDArray[np.bool_],
               trace_of: NDArray[np.int64], gammaincc: Any) -> tuple[int, str, int, dict[str, Any]] | None:
        """The split accepted this round (leaf, feature, threshold, evidence), or None."""
        has_y = y >= 0
        cands: list[tuple[float, float, int, int, int, str, int]] = []
        m = 0
        # The selection-half steps with a symbol, grouped by state once (one sort, not one pass per state).
        rows = np.flatnonzero(has_y & ~in_b)
        rows = rows[np.argsort(state[rows], kind="stable")]
        edges = np.searchsorted(state[rows], np.arange(len(leaves) + 1))
        for i in range(len(leaves)):
            sel = rows[edges[i]:edges[i + 1]]
            if sel.size < 2 * self.min_steps:
                continue
            ys = y[sel]
            for fi, f in enumerate(features):
                grid = np.asarray(THRESHOLDS[f], np.int64)
                v = feats[f][sel]
                bins = np.searchsorted(grid, v, side="right")  # v < grid[k] ⇔ bin ≤ k
                table = np.bincount(bins * K + ys, minlength=(grid.size + 1) * K).reshape(grid.size + 1, K)
                left = np.cumsum(table, axis=0)[:-1].astype(np.float64)
                right = table.sum(axis=0)[None, :] - left
                n_l, n_r = left.sum(axis=1), right.sum(axis=1)
                ok = (n_l >= self.min_steps) & (n_r >= self.min_steps)
                if not ok.any():
                    continue
                G, df = _g_test(left, right)
                for k in np.flatnonzero(ok):
                    m += 1
                    if df[k] < 1:
                        continue
                    p = float(gammaincc(df[k] / 2.0, G[k] / 2.0))
                    cands.append((p, -float(G[k]), i, fi, int(k), f, int(df[k])))
        if not cands:
            return None
        level = self.level / max(m, 1)
        cands.sort(key=lambda c: c[:5])
        for p, neg_g, leaf, _, at, feature, dof in cands[:_MAX_TRIES]:
            if p >= level:
                break
            t = int(THRESHOLDS[feature][at])
            gain = self._confirm(leaf, feature, t, state, y, K, feats, in_b, trace_of)
            if gain is not None:
                return leaf, feature, t, {"g": -neg_g, "df": dof, "p_value": p, "level": level, "n_candidates": m,
                                          **gain}
        return None

    def _confirm(self, i: int, f: str, t: int, state: NDArray[np.int64], y: NDArray[np.int64], K: int,
                 feats: HistoryFeatures, in_b: NDArray[np.bool_], trace_of: NDArray[np.int64]
                 ) -> dict[str, Any] | None:
        """The held-out gain of splitting state i at f < t on the confirmation half, when it confirms (else None)."""
        at = (state == i) & (y >= 0)
        side = feats[f] >= t
        a, b = at & ~in_b, at & in_b
        if not b.any():
            return None

        def dist(mask: NDArray[np.bool_]) -> NDArray[np.float64]:
            c = np.bincount(y[mask], minlength=K).astype(np.float64) + 0.5
            out: NDArray[np.float64] = c / c.sum()
            return out

        p_all = dist(a)
        p_l, p_r = dist(a & ~side), dist(a & side)
        yb = y[b]
        gain = np.where(side[b], np.log(p_r[yb]), np.log(p_l[yb])) - np.log(p_all[yb])
        _, unit = np.unique(trace_of[b], return_inverse=True)
        per = np.bincount(unit.reshape(-1), weights=gain)
        n_units = per.size
        if n_units < 2:
            return None
        mean = float(per.mean())
        sd = float(per.std(ddof=1))
        z = mean / (sd / math.sqrt(n_units)) if sd > 0 else (math.inf if mean > 0 else 0.0)
        if not (mean > 0 and z >= self.z):
            return None
        return {"heldout_gain_per_trace": mean, "heldout_z": z if math.isfinite(z) else None,
                "n_heldout_traces": int(n_units), "n_steps_a": int(a.sum()), "n_steps_b": int(b.sum())}

    def fetch_model(self) -> StateModel:
        if self._model is None:
            raise NotFittedError("call fit(traces) before fetch_model()")
        return self._model


def _unique(names: list[str]) -> tuple[str, ...]:
    seen: dict[str, int] = {}
    out = []
    for nm in names:
        seen[nm] = seen.get(nm, 0) + 1
        out.append(nm if seen[nm] == 1 else f"{nm} #{seen[nm]}")
    return tuple(out)
