"""Held-out discrimination: does the model's probability of success, given the path so far, separate the runs that
fail from the runs that succeed?

The certificate's R∞ layer asks whether the chain's *overall* success rate is calibrated. It says nothing about the
states: a chain whose every state has the same eventual success (SWE-bench runs that all end in ``submit``, the
verdict applied after it) passes it and still has nothing to say about *which* runs fail. Failure attribution, the
bottleneck, what-if gains and sensitivities are advice about states; they rest on the states separating outcomes.
This module measures that, on the certificate's own held-out halves.

**Prediction.** For held-out trace i of split s and a position t of its path, p_s(i, t) = P(success | path up to
step t) under the model fitted on split s's fit half:

* first-order chain — the eventual success h = N R⊕ of the state of step t (``AbsorbingChain.success_probabilities``
  of the split's fit-half chain; a state that chain does not have gets the fit half's base rate);
* an expanded model (lifted, mixture, HMM, duration: a :class:`~tracetochain.models.CompiledModel`, a chain on hidden
  states with emissions E to the observed ones) — the forward filter α_0 ∝ π0 ∘ E[:, o_0],
  α_{t+1} ∝ (α_t Q) ∘ E[:, o_{t+1}] (Rabiner 1989, eq. 19–20, restricted to transient states because another step
  was observed), and p = α_t · h (:func:`filtered_success`).

Positions: the **last transient step** (t = L − 1: everything the path holds before the verdict) and the step at
each fraction f ∈ {25 %, 50 %, 75 %} of the path (t = max(⌈f·L⌉ − 1, 0)).

**Scores** on the held-out, non-censored traces (censored traces have no outcome: excluded, counted):

* AUC — the Mann–Whitney probability that a succeeding run's p exceeds a failing run's, ties counted half:
  AUC = Σ_{i∈⊕} Σ_{j∈⊖} [1(p_i > p_j) + ½·1(p_i = p_j)] / (n⊕ n⊖) (Hanley & McNeil 1982). 0.5 = no separation.
  Predictions are compared on a grid of :data:`TIE_DECIMALS` decimals: two states whose success probabilities are
  equal in exact arithmetic (an expanded context whose future is its parent's) come out of a solve a few ulps apart,
  and ranking that noise moved the held-out AUC of order-3 contexts on the SWE-bench trajectories from 0.53 to 0.49
  with a change of linear solver alone.
* log-loss gain — mean log-loss of the constant base rate b (the fit half's share of successes among its
  non-censored traces) minus the model's, in nats per trace: G = (1/n) Σ_i [ℓ(b, y_i) − ℓ(p_i, y_i)],
  ℓ(p, y) = −y log p − (1 − y) log(1 − p); positive = the model predicts outcomes better than the pass rate. Both
  p and b are clipped to [ε, 1 − ε], ε = 1/(2 n_fit), since a probability estimated from n_fit traces cannot be
  resolved below that (a chain with pseudocount 0 gives exactly 0 or 1 from some states).

**Combining splits.** The point estimate is the mean over the splits where the score is defined (both outcomes among
the held-out traces) of the split's score — every held-out prediction pooled within its split, the splits averaged
(each trace is held out in about a fraction f of them, so splits are not independent; averaging is what reduces the
split-to-split noise of one random half).

**Interval: cluster bootstrap per split, averaged.** Units are tasks when a task has ≥ 2 usable traces (trials of one
task share its difficulty, so treating them as independent would understate the variance), otherwise traces.
Replicate b gives every unit a Poisson(1) weight, drawn from a generator seeded by the analysis's seed in the order
of the units' sorted id hashes; the summary holds the same units whether the corpus was read whole or in partitions
on any engine, so the replicates are the same too. Each split's held-out score gets its own percentile interval over
the replicates, with the split's fitted model held fixed — valid conditionally on that model: when the path carries
no information about the outcome, a held-out outcome is independent of a prediction made from the fit half, so the
split's score is centred at 0.5. The reported interval is the mean over the splits of their intervals' endpoints.
Holding every split's model fixed and averaging the replicates instead would be too narrow: the splits' scores are
correlated through traces that are held out in one split and fitted in another, which a fixed-model bootstrap does
not see (measured: 7.5 % of 200 no-information corpora of 300 traces called informative at a nominal 2.5 %). Since
the standard deviation of an average is at most the average of the standard deviations, averaging the splits'
intervals is conservative instead (``studies/discrimination_interval.py`` archives its size and coverage). DeLong's
(1988) variance would need independent traces within one split and has no clustered form over overlapping splits.

**Rule.** The states are **informative** iff the lower bound of the interval of the held-out AUC at the last
transient step is strictly above 0.5 (a one-sided test at level (1 − confidence)/2). Otherwise the advice outputs
about states (:data:`STATE_ADVICE_OUTPUTS`) are **uninformative** in the certificate: neither certified (nothing says
their ranking of states separates outcomes) nor withheld (no assumption was rejected).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table
from tracetochain._outcome import CENSORED, SUCCESS
from tracetochain.audit._common import json_dict

#: The fractions of the path, besides the last transient step, the prediction is scored at.
FRACTIONS: tuple[float, ...] = (0.25, 0.5, 0.75)
#: Outputs that are advice about states: they rest on the states separating outcomes.
STATE_ADVICE_OUTPUTS: tuple[str, ...] = ("attribution", "delta_R_inf", "whatif", "sensitivity")
#: Bootstrap replicates of the discrimination interval.
DEFAULT_DISCRIMINATION_BOOTSTRAP = 1000
#: Predictions equal to this many decimals are ties (module docstring): far below any difference an estimate from
#: traces can resolve, far above the rounding of a solve.
TIE_DECIMALS = 12
#: Offset of the replicate indices, so these weights are not the analysis's interval replicates.
_STREAM = 7_000_000
#: Replicates whose weights are drawn together (the weights' stream depends on it, so it is fixed while memory allows)
_BLOCK = 250
#: At most this many units × replicates of weights at once (128 MB): above 67,108 held-out units (tasks or traces),
#: fewer replicates a block (another stream, the same law), so a million traces do not hold 2 GB of weights.
_BLOCK_CELLS = 1 << 24
RULE = ("informative iff the lower bound of the held-out AUC interval at the last transient step is above 0.5; "
        "otherwise attribution, bottleneck, what-if gains and sensitivities are uninformative")


# ---------------------------------------------------------------------------------------------------- positions
def prefix_steps(offsets: NDArray[np.int64]) -> NDArray[np.int64]:
    """(n, 1 + len(FRACTIONS)) global step indices: the last step of each trace, then the step at each fraction f of
    its path (t = max(⌈f·L⌉ − 1, 0)). Traces of length 0 get −1.

    >>> prefix_steps(np.array([0, 4, 5])).tolist()
    [[3, 0, 1, 2], [4, 4, 4, 4]]
    """
    offsets = np.asarray(offsets, np.int64)
    start, L = offsets[:-1], np.diff(offsets)
    cols = [L - 1] + [np.maximum(np.ceil(f * L - 1e-9).astype(np.int64) - 1, 0) for f in FRACTIONS]
    out = start[:, None] + np.stack(cols, axis=1)
    out[L == 0] = -1
    result: NDArray[np.int64] = out.astype(np.int64)
    return result


@dataclass(frozen=True, eq=False)
class TracePoints:
    """Per usable trace with at least one step, what the discrimination needs (a part of the corpus summary that
    adds up across partitions): its id hash, its unit's (task's, else its own) id hash, its outcome code, which
    splits hold it out (n × S) and its state code at the positions of :func:`prefix_steps` (n × 4). Kept sorted by
    id hash, so that any partitioning gives the same arrays."""

    trace_hash: NDArray[np.uint64]
    unit: NDArray[np.uint64]
    outcome: NDArray[np.int8]
    test: NDArray[np.bool_]
    codes: NDArray[np.int64]

    @staticmethod
    def build(trace_hash: NDArray[np.uint64], unit: NDArray[np.uint64], outcome: NDArray[Any], test: NDArray[np.bool_],
              codes: NDArray[np.int64], offsets: NDArray[np.int64]) -> TracePoints:
        """Points of traces whose steps have state ``codes`` (cut by ``offsets``); traces without steps are left out
        (no path, nothing to predict from)."""
        pos = prefix_steps(offsets)
        keep = pos[:, 0] >= 0
        at = np.where(pos >= 0, pos, 0)
        c = np.asarray(codes, np.int64)[at] if len(codes) else np.zeros_like(pos)
        t = test if test.ndim == 2 else np.zeros((len(trace_hash), 0), bool)
        return TracePoints(np.asarray(trace_hash, np.uint64)[keep], np.asarray(unit, np.uint64)[keep],
                           np.asarray(outcome, np.int8)[keep], t[keep], c[keep])._sorted()

    def _sorted(self) -> TracePoints:
        o = np.argsort(self.trace_hash, kind="stable")
        return TracePoints(self.trace_hash[o], self.unit[o], self.outcome[o], self.test[o], self.codes[o])

    @property
    def n(self) -> int:
        return int(self.trace_hash.size)

    def merge(self, other: TracePoints) -> TracePoints:
        return TracePoints(np.concatenate([self.trace_hash, other.trace_hash]),
                           np.concatenate([self.unit, other.unit]), np.concatenate([self.outcome, other.outcome]),
                           np.concatenate([self.test, other.test]), np.concatenate([self.codes, other.codes]))._sorted()

    def reindexed(self, idx: NDArray[np.int64]) -> TracePoints:
        """Codes moved to a new vocabulary (``idx[old] = new``)."""
        return replace(self, codes=np.asarray(idx, np.int64)[self.codes] if self.codes.size else self.codes)


# ---------------------------------------------------------------------------------------------------- predictions
def chain_point_predictions(success: NDArray[np.float64], codes: NDArray[np.int64]) -> NDArray[np.float64]:
    """p = h[state] at each position (``success`` indexed by the summary's state codes)."""
    return np.asarray(success, np.float64)[codes]


def filtered_success(Q: NDArray[np.float64], h: NDArray[np.float64], pi0: NDArray[np.float64],
                     emission: NDArray[np.float64], codes: NDArray[np.int64], offsets: NDArray[np.int64],
                     steps: NDArray[np.int64], fallback: float) -> tuple[NDArray[np.float64], int]:
    """P(success | observed states up to each step in ``steps``) under a chain on hidden states with emissions
    (module docstring: α_0 ∝ π0 ∘ E[:, o_0], α_{t+1} ∝ (α_t Q) ∘ E[:, o_{t+1}], p = α_t · h).

    ``steps`` (n × P) are global step indices (−1: none); an observation the model gives probability 0 leaves the
    trace at ``fallback`` from there on. Returns the predictions and the number of traces that needed the fallback.

    >>> Q = np.zeros((2, 2)); E = np.eye(2)
    >>> p, bad = filtered_success(Q, np.array([0.9, 0.2]), np.array([0.5, 0.5]), E, np.array([0, 1]),
    ...                           np.array([0, 1, 2]), np.array([[0], [1]]), 0.5)
    >>> p.ravel().tolist(), bad
    ([0.9, 0.2], 0)
    """
    offsets = np.asarray(offsets, np.int64)
    n = offsets.size - 1
    L = np.diff(offsets)
    out = np.full(steps.shape, float(fallback))
    if n == 0:
        return out, 0
    E = np.asarray(emission, np.float64)
    dead = np.zeros(n, bool)
    local = np.where(steps >= 0, steps - offsets[:-1, None], -1)
    if _read_off(Q, pi0, E, codes, offsets, L, h, local, out, dead):
        return np.clip(out, 0.0, 1.0), int(dead.sum())
    alpha = np.zeros((n, Q.shape[0]))
    for t in range(int(L.max()) if n else 0):
        live = np.flatnonzero(L > t)
        obs = codes[offsets[live] + t]
        a = (pi0[None, :] if t == 0 else alpha[live] @ Q) * E[:, obs].T
        z = a.sum(axis=1)
        ok = z > 0
        dead[live[~ok]] = True
        a[ok] /= z[ok, None]
        a[~ok] = 0.0
        alpha[live] = a
        p = a @ h
        good = ~dead[live]
        for j in range(local.shape[1]):
            hit = (local[live, j] == t) & good
            out[live[hit], j] = p[hit]
    return np.clip(out, 0.0, 1.0), int(dead.sum())


def _read_off(Q: NDArray[np.float64], pi0: NDArray[np.float64], E: NDArray[np.float64], codes: NDArray[np.int64],
              offsets: NDArray[np.int64], L: NDArray[np.int64], h: NDArray[np.float64], local: NDArray[np.int64],
              out: NDArray[np.float64], dead: NDArray[np.bool_]) -> bool:
    """The filter of :func:`filtered_success` when the hidden state is read off the observations, filling ``out`` and
    ``dead`` in place; False (nothing done) when it is not.

    A chain on contexts (an order-k model's last k states) emits one observed state per expanded state, starts in
    at most one state per first observation, and has at most one successor per (state, next observation): α is then
    one-hot at every step (α_t Q masked by the observation keeps one entry, normalised to exactly 1), so
    p = α_t · h is h at the tracked state, bit for bit, and an observation with no successor is the filter's z = 0.
    Tracking the state costs a lookup per step, where the dense recursion cost traces × states² (2.3 s for an
    order-3 model's 2,187 contexts on SWE-bench's held-out halves).
    """
    if not (np.all((E == 0.0) | (E == 1.0)) and np.all(E.sum(axis=1) == 1.0)):
        return False
    K = E.shape[1]
    emit = np.argmax(E, axis=1)
    rows, cols = np.nonzero(Q > 0)
    key = rows * K + emit[cols]
    starts = np.flatnonzero(pi0 > 0)
    if np.unique(key).size != key.size or np.unique(emit[starts]).size != starts.size:
        return False
    successor = np.full(Q.shape[0] * K, -1, np.int64)
    successor[key] = cols
    first = np.full(K, -1, np.int64)
    first[emit[starts]] = starts
    state = np.full(L.size, -1, np.int64)
    for t in range(int(L.max())):
        live = np.flatnonzero((L > t) & ~dead)
        obs = codes[offsets[live] + t]
        nxt = first[obs] if t == 0 else successor[state[live] * K + obs]
        lost = nxt < 0
        dead[live[lost]] = True
        live, nxt = live[~lost], nxt[~lost]
        state[live] = nxt
        p = h[nxt]
        for j in range(local.shape[1]):
            hit = local[live, j] == t
            out[live[hit], j] = p[hit]
    return True


# ---------------------------------------------------------------------------------------------------- scores
def _table_scores(vals: NDArray[np.float64], pos: NDArray[np.float64], neg: NDArray[np.float64], base: float,
                  eps: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """AUC (ties half) and log-loss gain from the weight of succeeding (``pos``) and failing (``neg``) runs at each
    distinct prediction ``vals`` (sorted ascending; K × B, one column per replicate); NaN where undefined."""
    P, N = pos.sum(axis=0), neg.sum(axis=0)
    below = np.cumsum(neg, axis=0) - neg  # failing weight strictly below each value
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = (pos * (below + 0.5 * neg)).sum(axis=0) / (P * N)
        q = np.clip(vals, eps, 1.0 - eps)
        b = min(max(base, eps), 1.0 - eps)
        ll_model = -(pos * np.log(q)[:, None]).sum(axis=0) - (neg * np.log1p(-q)[:, None]).sum(axis=0)
        ll_base = -P * math.log(b) - N * math.log1p(-b)
        gain = (ll_base - ll_model) / (P + N)
    auc = np.where((P > 0) & (N > 0), auc, np.nan)
    gain = np.where((P + N) > 0, gain, np.nan)
    return auc, gain


def _interval(points: NDArray[np.float64], reps: NDArray[np.float64], confidence: float) -> dict[str, Any]:
    """Mean over the splits of the split's score, and the mean over the splits of each split's own percentile
    interval (``points``: S; ``reps``: S × B; splits where the score is undefined, or with fewer than 10 defined
    replicates, left out)."""
    a = (1.0 - confidence) / 2.0
    ok = np.isfinite(points)
    if not ok.any():
        return {"point": None, "lower": None, "upper": None}
    point = float(np.mean(points[ok]))
    los, his = [], []
    for s in np.flatnonzero(ok):
        r = reps[s][np.isfinite(reps[s])]
        if r.size < 10:
            continue
        lo, hi = np.quantile(r, [a, 1.0 - a])
        los.append(lo)
        his.append(hi)
    if not los:
        return {"point": point, "lower": None, "upper": None}
    return {"point": point, "lower": float(min(np.mean(los), point)), "upper": float(max(np.mean(his), point))}


@dataclass(frozen=True, repr=False)
class PrefixScore:
    """AUC and log-loss gain (each ``{point, lower, upper}``) of the prediction at one position of the path."""

    position: str  # "last" or the fraction as text
    fraction: float | None
    auc: dict[str, Any]
    log_loss_gain: dict[str, Any]
    n: int
    split_auc: tuple[float | None, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return json_dict({"fraction": self.fraction, "position": self.position, "auc": self.auc,
                          "log_loss_gain": self.log_loss_gain, "n": self.n, "split_auc": list(self.split_auc)})


@dataclass(frozen=True, repr=False)
class Discrimination(ResultDisplay):
    """How well the model's P(success | path so far) separates failing from succeeding held-out runs (module
    docstring). ``available`` False (with ``reason``) when it could not be measured (no held-out splits, no failing
    or no succeeding held-out run, a model that exposes no prediction)."""

    available: bool
    reason: str
    model: str = "markov"
    last: PrefixScore | None = None
    by_prefix: tuple[PrefixScore, ...] = ()
    n_traces: int = 0
    n_censored: int = 0
    n_without_steps: int = 0
    n_splits: int = 0
    clustered_by: str = "trace"
    n_clusters: int = 0
    n_bootstrap: int = 0
    confidence: float = 0.95
    base_rate: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def auc(self) -> dict[str, Any]:
        return self.last.auc if self.last is not None else {"point": None, "lower": None, "upper": None}

    @property
    def log_loss_gain(self) -> dict[str, Any]:
        return self.last.log_loss_gain if self.last is not None else {"point": None, "lower": None, "upper": None}

    @property
    def informative(self) -> bool | None:
        """The rule of the module docstring; None when not measured (the certificate is then left as it is)."""
        lo = self.auc.get("lower")
        if not self.available or lo is None:
            return None
        return bool(lo > 0.5)

    def auc_text(self) -> str:
        a = self.auc
        if a.get("point") is None:
            return "AUC not available"
        if a.get("lower") is None:
            return f"AUC {a['point']:.2f}"
        return f"AUC {a['point']:.2f} [{a['lower']:.2f}, {a['upper']:.2f}]"

    def describe(self) -> str:
        if not self.available:
            return f"discrimination not available: {self.reason}"
        g = self.log_loss_gain
        gain = "" if g.get("point") is None else f", log-loss gain {g['point']:+.3f} nats/trace" + (
            f" [{g['lower']:+.3f}, {g['upper']:+.3f}]" if g.get("lower") is not None else "")
        verdict = {True: "the states separate failing from succeeding runs",
                   False: "nothing in the path separates failing runs from succeeding ones",
                   None: "too few held-out runs of one outcome to tell"}[self.informative]
        return (f"held-out {self.auc_text()} at the last step{gain} ({self.n_traces} runs, {self.confidence:.0%} "
                f"interval clustered by {self.clustered_by}): {verdict}")

    def to_dict(self) -> dict[str, Any]:
        return json_dict({
            "available": self.available, "reason": self.reason, "model": self.model,
            "auc": self.auc, "log_loss_gain": self.log_loss_gain, "position": "last transient step",
            "by_prefix": [s.to_dict() for s in self.by_prefix], "n_traces": self.n_traces,
            "n_censored_excluded": self.n_censored, "n_without_steps_excluded": self.n_without_steps,
            "n_splits": self.n_splits, "clustered_by": self.clustered_by, "n_clusters": self.n_clusters,
            "n_bootstrap": self.n_bootstrap, "confidence": self.confidence, "base_rate": self.base_rate,
            "informative": self.informative, "rule": RULE,
            "interval": "per split: percentile cluster bootstrap (Poisson(1) weight per unit) with the split's fitted "
                        "model held fixed; endpoints averaged over the splits (conservative)",
            "log_loss_units": "nats per trace, base-rate log-loss minus model log-loss",
            "notes": list(self.notes)})

    def _display(self) -> Display:
        rows = tuple((s.position, s.auc.get("point"), s.auc.get("lower"), s.auc.get("upper"),
                      s.log_loss_gain.get("point"), s.log_loss_gain.get("lower"), s.log_loss_gain.get("upper"), s.n)
                     for s in ((self.last,) if self.last else ()) + self.by_prefix)
        table = Table("discrimination", ("position", "auc", "auc_lower", "auc_upper", "log_loss_gain",
                                         "gain_lower", "gain_upper", "n"), rows)
        title = (self.auc_text() if self.available else "not available")
        return Display(title, kind="Discrimination", lines=(self.describe(), *self.notes), tables=(table,))


def uninformative_sentence(d: Discrimination) -> str:
    """The sentence every surface prints for uninformative state advice."""
    return (f"nothing in the path separates failing runs from succeeding ones: {d.auc_text()} (held out); the "
            "verdict is decided after the last step, so failure attribution, the bottleneck, what-if gains and "
            "sensitivities are uninformative")


def score_discrimination(pred: NDArray[np.float64], test: NDArray[np.bool_], outcome: NDArray[Any],
                         unit: NDArray[np.uint64], base_rates: NDArray[np.float64], n_fit: NDArray[np.int64], *,
                         tasks_repeat: bool, model: str = "markov", n_without_steps: int = 0,
                         n_bootstrap: int = DEFAULT_DISCRIMINATION_BOOTSTRAP, confidence: float = 0.95, seed: int = 0,
                         notes: tuple[str, ...] = ()) -> Discrimination:
    """Score predictions ``pred`` (S × n × P: split, trace, position) on each split's held-out traces (``test``, n × S)
    against ``outcome`` (module docstring); ``unit`` the id hash of each trace's cluster, ``base_rates`` and ``n_fit``
    each split's fit-half base rate and non-censored size."""
    S = test.shape[1] if test.ndim == 2 else 0
    outcome = np.asarray(outcome)
    scored = outcome != CENSORED
    n_cens = int((~scored & test.any(axis=1)).sum()) if S else 0
    clustered = "task" if tasks_repeat else "trace"
    common: dict[str, Any] = {"model": model, "n_splits": S, "clustered_by": clustered, "confidence": confidence,
                              "n_censored": n_cens, "n_without_steps": n_without_steps, "notes": notes}
    if S == 0:
        return Discrimination(False, "no held-out splits (the audit ran in-sample or was not run)", **common)
    used = test & scored[:, None]
    n_used = int(used.any(axis=1).sum())
    y = outcome == SUCCESS
    if not (used.any(axis=1) & y).any() or not (used.any(axis=1) & ~y).any():
        return Discrimination(False, "every held-out run has the same outcome: nothing to separate",
                              n_traces=n_used, **common)
    from scipy import sparse

    P = pred.shape[2]
    B = int(n_bootstrap)
    members = np.flatnonzero(used.any(axis=1))
    # One sparse indicator of (split, position, distinct prediction, outcome) × trace: every replicate's tables are
    # one product with the replicate weights.
    cells: list[tuple[int, int, NDArray[np.float64], int]] = []
    rows_i: list[NDArray[np.int64]] = []
    cols_i: list[NDArray[np.int64]] = []
    R = 0
    col_of = np.full(outcome.size, -1, np.int64)
    col_of[members] = np.arange(members.size)
    for s in range(S):
        idx = np.flatnonzero(used[:, s])
        for j in range(P):
            vals, inv = np.unique(np.round(pred[s, idx, j], TIE_DECIMALS), return_inverse=True)
            cells.append((s, j, vals, R))
            rows_i.append(R + 2 * inv + (~y[idx]).astype(np.int64))
            cols_i.append(col_of[idx])
            R += 2 * vals.size
    M = sparse.csr_array((np.ones(sum(r.size for r in rows_i)), (np.concatenate(rows_i), np.concatenate(cols_i))),
                         shape=(R, members.size))
    point_auc = np.full((S, P), np.nan)
    point_gain = np.full((S, P), np.nan)
    rep_auc = np.full((S, P, B), np.nan)
    rep_gain = np.full((S, P, B), np.nan)
    ones = np.asarray(M @ np.ones((members.size, 1)))
    for s, j, vals, r0 in cells:
        t = ones[r0: r0 + 2 * vals.size]
        eps = 0.5 / max(1, int(n_fit[s]))
        a, g = _table_scores(vals, t[0::2], t[1::2], float(base_rates[s]), eps)
        point_auc[s, j], point_gain[s, j] = a[0], g[0]
    # Poisson(1) weights per unit, drawn in the order of the units' sorted id hashes: the set of held-out units is the
    # same however the corpus was partitioned, so the replicates are too.
    units, unit_of = np.unique(unit[members], return_inverse=True)
    # The tables summed by unit first (R × units): a replicate's weights then need no copy per trace, and sums of
    # integer weights are exact either way, so the tables are the same.
    by_unit = (M @ sparse.csr_array((np.ones(members.size), (np.arange(members.size), unit_of)),
                                    shape=(members.size, units.size))).tocsr()
    rng = np.random.default_rng([int(seed), _STREAM])
    block = max(1, min(_BLOCK, _BLOCK_CELLS // max(1, units.size)))
    for start in range(0, B, block):
        stop = min(B, start + block)
        W = rng.poisson(1.0, size=(units.size, stop - start)).astype(np.float64)
        T = np.asarray(by_unit @ W)
        for s, j, vals, r0 in cells:
            t = T[r0: r0 + 2 * vals.size]
            eps = 0.5 / max(1, int(n_fit[s]))
            rep_auc[s, j, start:stop], rep_gain[s, j, start:stop] = _table_scores(vals, t[0::2], t[1::2],
                                                                                  float(base_rates[s]), eps)
    names = ("last", *(f"{f:.0%}" for f in FRACTIONS))
    fracs: tuple[float | None, ...] = (None, *FRACTIONS)
    scores = []
    for j in range(P):
        scores.append(PrefixScore(names[j], fracs[j], _interval(point_auc[:, j], rep_auc[:, j], confidence),
                                  _interval(point_gain[:, j], rep_gain[:, j], confidence), n_used,
                                  tuple(None if not np.isfinite(x) else float(x) for x in point_auc[:, j])))
    n_clusters = int(np.unique(unit[members]).size)
    return Discrimination(True, "measured", last=scores[0], by_prefix=tuple(scores[1:]), n_traces=n_used,
                          n_clusters=n_clusters, n_bootstrap=B, base_rate=float(np.mean(base_rates)), **common)


def not_available(reason: str, *, model: str = "markov", **fields: Any) -> Discrimination:
    return Discrimination(False, reason, model=model, **fields)


__all__ = ["DEFAULT_DISCRIMINATION_BOOTSTRAP", "FRACTIONS", "STATE_ADVICE_OUTPUTS", "Discrimination", "PrefixScore",
           "TracePoints", "filtered_success", "not_available", "prefix_steps", "score_discrimination",
           "uninformative_sentence"]
