"""Live analysis: running count tables per window, the chain and its intervals, drift and threshold alerts.

Every decided episode adds its transitions, exit and first state to the count table of its window and to the
running total (:class:`RunningCounts`; counts add up, so a window, a span of windows or the whole stream is a sum
of tables and nothing is ever re-read). From a table, :func:`~tracetochain.chain._estimator.estimate_chain` gives
the chain with the library's default prior and :func:`~tracetochain.uncertainty.interval_summary` the intervals of
R∞, R(d), per-state vulnerability R⊖_i and failure attribution z_i R⊖_i / (1 − R∞) (Dirichlet posterior of the
counts).

Windows are tumbling: consecutive blocks of ``size`` episodes in the order they were decided (``by="count"``), or
of ``size`` seconds of episode start time (``by="time"``; an episode without timestamps takes the time it was
decided).

Drift (the ``monitor`` command's test and error control, on a stream): each *completed* window with at least
``min_traces`` episodes is compared with the baseline (the first such window) by the per-state homogeneity G² test
from counts (Anderson & Goodman 1957; χ² reference, as the partitioned audit does, since only counts are kept). An
unbounded stream cannot be Bonferroni-corrected by the number of windows, so the j-th comparison uses
α_j = α · 6 / (π² j²): Σ_j α_j = α, hence the probability that a stationary stream ever raises a drift alert is at
most α (alpha spending; the stream version of ``monitor``'s α / #windows), up to the χ² approximation, which is
slightly liberal on small windows (measured 6.8% at 60 episodes per window, 5.5% at 100, 4.7% at 200). States
whose rows differ are named by Holm's step-down at α_j.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import math
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from tracetochain._compat import renamed_attribute, renamed_parameters
from tracetochain._limits import _BYTES_PER_DRAW_ENTRY, memory_budget, time_problem
from tracetochain.chain import AbsorbingChain, TransitionCounts, estimate_chain
from tracetochain.exceptions import TraceToChainError
from tracetochain.quantities import QUANTITIES, reported_scalars
from tracetochain.serve._store import EpisodeRow

SUCCESS, FAILURE = "success", "failure"
#: The state that stands for every state beyond ``--max-states`` in the live chain.
OTHER_STATE = "(other states)"
#: The live view's default limit on distinct states: one refresh (1,000 posterior draws of an m-state chain, each an
#: m × m solve) stays at a few seconds of CPU (measured: 50 states 1.3 s, 100 states 16 s on a loaded 2-core VM).
DEFAULT_LIVE_MAX_STATES = 60
UNLABELLED = "unlabelled"
_OUTCOMES = ("success", "failure", "censored", "invalid", UNLABELLED)
#: Fewest episodes of each kind (labelled, unlabelled) before the two are compared (:meth:`RunningCounts.label_test`).
LABEL_TEST_MIN = 20
#: Moves only unlabelled episodes took, listed at most (the live document stays bounded).
_UNLABELLED_EDGES = 100
_EXAMPLES = 5
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h|hr|d|w)?\s*$")
_UNIT = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0,
         "w": 604800.0}


def parse_duration(text: str) -> float:
    """``"90s"``, ``"5m"``, ``"1h"``, ``"2d"`` (or a bare number of seconds) as seconds.

    >>> parse_duration("1h"), parse_duration("90")
    (3600.0, 90.0)
    """
    m = _DURATION_RE.match(str(text))
    if not m:
        raise ValueError(f"not a duration: {text!r} (write e.g. 30s, 5m, 1h, 1d)")
    value = float(m.group(1)) * _UNIT[m.group(2) or "s"]
    if not math.isfinite(value) or value > 1e9:  # 30 years: a window or a rule span beyond is a typo
        raise ValueError(f"the duration {text[:40]!r} is too long (at most 1e9 seconds)")
    if value <= 0:
        raise ValueError(f"a duration must be positive, got {text!r}")
    return value


@dataclass(frozen=True)
class WindowSpec:
    """Tumbling windows: ``by="count"`` (``size`` episodes) or ``by="time"`` (``size`` seconds)."""

    by: Literal["count", "time"]
    size: float

    @classmethod
    def parse(cls, text: str) -> WindowSpec:
        """``"500"`` / ``"500 traces"`` → count windows; ``"5m"``, ``"1h"`` → time windows.

        >>> WindowSpec.parse("200 traces"), WindowSpec.parse("5m")
        (WindowSpec(by='count', size=200.0), WindowSpec(by='time', size=300.0))
        """
        t = str(text).strip().lower()
        m = re.fullmatch(r"(\d+)\s*(traces?|episodes?)?", t)
        if m:
            n = int(m.group(1))
            if n < 1:
                raise ValueError("a count window holds at least 1 trace")
            return cls("count", float(n))
        return cls("time", parse_duration(t))

    def describe(self) -> str:
        return f"{int(self.size)} traces" if self.by == "count" else f"{_fmt_duration(self.size)}"


def _fmt_duration(s: float) -> str:
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n and s % n == 0:
            return f"{int(s // n)}{unit}"
    return f"{s:g}s"


class RunningCounts:
    """A count table kept by state name (so a growing vocabulary needs no re-indexing), plus example episodes.

    ``add`` follows the counting rules of :func:`~tracetochain.chain._counts.count_transitions`: transitions between
    consecutive steps, an exit from the last step of a success/failure episode, the first state of every valid
    episode; censored episodes add transitions only; invalid ones only their count.

    **Unlabelled** episodes (no verdict by ``--verdict-timeout``) are kept in tallies of their own: their transitions
    (``u_transitions``), the state they ended in (``u_ends``), their first state, and their usage. The chain — R∞
    and every outcome-based figure — is fitted on the labelled episodes only (``transitions``, exits), so it rests
    on ``n_fitted`` of them and is the chain an offline ``fit`` of those episodes gives. Budget censoring is not
    the right model for an unlabelled run: it *did* end (it left its last state for success or failure, we do not
    know which), while a censored run was stopped before its next step; folding the unlabelled runs' transitions
    into the labelled chain as censored traces would drop those exits and bias every exit probability of the
    states they end in downward. Whether the labelled episodes are representative is tested, not assumed
    (:meth:`label_test`). Steps, cost, tokens and time are tallied for both kinds (``usage``).
    """

    __slots__ = ("examples", "exits_failure", "exits_success", "first_seen", "initial", "last_seen", "n_traces",
                 "transitions", "u_ends", "u_initial", "u_transitions", "usage", "version")

    def __init__(self) -> None:
        self.transitions: Counter[tuple[str, str]] = Counter()
        self.exits_success: Counter[str] = Counter()
        self.exits_failure: Counter[str] = Counter()
        self.initial: Counter[str] = Counter()
        self.u_transitions: Counter[tuple[str, str]] = Counter()
        self.u_ends: Counter[str] = Counter()
        self.u_initial: Counter[str] = Counter()
        # kind (labelled / unlabelled) → [episodes, steps, cost (USD), tokens, duration (s), episodes with cost,
        # episodes with tokens, episodes with a duration]
        self.usage: dict[str, list[float]] = {"labelled": [0.0] * 8, UNLABELLED: [0.0] * 8}
        self.n_traces: dict[str, int] = dict.fromkeys(_OUTCOMES, 0)
        self.examples: dict[tuple[str, str], deque[str]] = {}
        self.version = 0
        self.first_seen: float | None = None
        self.last_seen: float | None = None

    @property
    def n_fitted(self) -> int:
        return self.n_traces["success"] + self.n_traces["failure"] + self.n_traces["censored"]

    @property
    def n_total(self) -> int:
        return sum(self.n_traces.values())

    @property
    def n_unlabelled(self) -> int:
        return self.n_traces.get(UNLABELLED, 0)

    def add(self, states: tuple[str, ...], outcome: str, episode_id: str, at: float | None = None,
            usage: tuple[int | None, float | None, int | None, float | None] | None = None) -> None:
        """Count one episode; ``usage`` = (steps, cost, tokens, duration), None where unknown."""
        self.version += 1
        self.n_traces[outcome] = self.n_traces.get(outcome, 0) + 1
        if at is not None:
            self.first_seen = at if self.first_seen is None else min(self.first_seen, at)
            self.last_seen = at if self.last_seen is None else max(self.last_seen, at)
        if outcome == "invalid":
            return
        u = self.usage[UNLABELLED if outcome == UNLABELLED else "labelled"]
        u[0] += 1
        steps, cost, tokens, duration = usage if usage is not None else (len(states), None, None, None)
        u[1] += steps if steps is not None else len(states)
        for slot, value in ((2, cost), (3, tokens), (4, duration)):
            if value is not None:
                u[slot] += value
                u[slot + 3] += 1
        if not states:
            return
        if outcome == UNLABELLED:
            self.u_initial[states[0]] += 1
            for a, b in itertools.pairwise(states):
                self.u_transitions[(a, b)] += 1
            self.u_ends[states[-1]] += 1
            return
        self.initial[states[0]] += 1
        for a, b in itertools.pairwise(states):
            self.transitions[(a, b)] += 1
            if outcome == FAILURE:
                self._example((a, b), episode_id)
        last = states[-1]
        if outcome == SUCCESS:
            self.exits_success[last] += 1
        elif outcome == FAILURE:
            self.exits_failure[last] += 1
            self._example((last, FAILURE), episode_id)

    def _example(self, key: tuple[str, str], episode_id: str) -> None:
        dq = self.examples.get(key)
        if dq is None:
            dq = self.examples[key] = deque(maxlen=_EXAMPLES)
        dq.append(episode_id)

    def merge(self, other: RunningCounts) -> None:
        """Add ``other``'s counts to these (examples: the most recent kept)."""
        self.version += 1
        self.transitions.update(other.transitions)
        self.exits_success.update(other.exits_success)
        self.exits_failure.update(other.exits_failure)
        self.initial.update(other.initial)
        self.u_transitions.update(other.u_transitions)
        self.u_ends.update(other.u_ends)
        self.u_initial.update(other.u_initial)
        for kind, values in other.usage.items():
            mine = self.usage[kind]
            for i, v in enumerate(values):
                mine[i] += v
        for k, v in other.n_traces.items():
            self.n_traces[k] = self.n_traces.get(k, 0) + v
        for key, dq in other.examples.items():
            for e in dq:
                self._example(key, e)
        for t in (other.first_seen, other.last_seen):
            if t is not None:
                self.first_seen = t if self.first_seen is None else min(self.first_seen, t)
                self.last_seen = t if self.last_seen is None else max(self.last_seen, t)

    @classmethod
    def total_of(cls, parts: Iterable[RunningCounts]) -> RunningCounts:
        out = cls()
        for p in parts:
            out.merge(p)
        return out

    def states(self) -> set[str]:
        """States of the labelled episodes (the chain's vocabulary)."""
        seen = set(self.initial)
        for a, b in self.transitions:
            seen.add(a)
            seen.add(b)
        seen.update(self.exits_success)
        seen.update(self.exits_failure)
        return seen

    def to_counts(self, vocabulary: list[str], alias: dict[str, str] | None = None) -> TransitionCounts:
        """The :class:`TransitionCounts` over ``vocabulary`` (which must hold every state seen here, or map it
        through ``alias`` to one of ``vocabulary``: merged states add up)."""
        pos = {s: i for i, s in enumerate(vocabulary)}
        if alias:
            pos.update({s: pos[t] for s, t in alias.items()})
        m = len(vocabulary)
        T = np.zeros((m, m), np.int64)
        for (a, b), n in self.transitions.items():
            T[pos[a], pos[b]] += n
        cs, cf, ini = (np.zeros(m, np.int64) for _ in range(3))
        for s, n in self.exits_success.items():
            cs[pos[s]] += n
        for s, n in self.exits_failure.items():
            cf[pos[s]] += n
        for s, n in self.initial.items():
            ini[pos[s]] += n
        labelled = {k: v for k, v in self.n_traces.items() if k != UNLABELLED}  # the chain rests on these
        return TransitionCounts(tuple(vocabulary), T, cs, cf, ini, labelled)

    def examples_for(self, a: str, b: str) -> list[str]:
        return list(reversed(self.examples.get((a, b), ())))

    def usage_summary(self) -> dict[str, dict[str, float | int | None]]:
        """Per kind (labelled, unlabelled): episodes, steps, and the mean steps, cost, tokens and duration."""
        out: dict[str, dict[str, float | int | None]] = {}
        for kind, (n, steps, cost, tokens, duration, n_cost, n_tokens, n_duration) in self.usage.items():
            out[kind] = {"episodes": int(n), "steps": int(steps), "mean_steps": steps / n if n else None,
                         "cost_usd": cost if n_cost else None, "mean_cost_usd": cost / n_cost if n_cost else None,
                         "tokens": int(tokens) if n_tokens else None,
                         "mean_tokens": tokens / n_tokens if n_tokens else None,
                         "mean_duration_s": duration / n_duration if n_duration else None}
        return out

    def label_test(self, *, level: float = 0.05, min_each: int = LABEL_TEST_MIN,
                   max_states: int = DEFAULT_LIVE_MAX_STATES) -> dict[str, Any]:
        """Do the labelled episodes take the same paths as the unlabelled ones?

        Each state's row of moves — to each next state, or *end* (the episode ended there: a success or failure
        exit of a labelled episode, the last state of an unlabelled one) — is compared between the two kinds by
        the per-state homogeneity G² test of the drift alerts (Anderson & Goodman 1957):
        G² = 2 Σ_i Σ_k Σ_j O_kij ln(O_kij / E_kij), E_kij = O_k·i · O_·ij / O_··i, on Σ_i (r_i − 1) degrees of
        freedom (r_i: columns of row i seen in either kind), χ² reference (:func:`~tracetochain.audit._homogeneity.
        homogeneity_from_counts`; the end of a budget-censored run is no end and is not counted). A small p-value
        says the labelled episodes are not a random sample of the runs in their paths, so R∞ — fitted on the
        labelled ones — may not describe the unlabelled ones (labels missing not at random); a large one is no
        proof they are. The mean number of steps of each kind is reported beside it. Like every χ² test on
        transitions it treats transitions as independent draws (first-order Markov), and it is slightly liberal on
        small samples. Above ``max_states`` states the least visited are merged into :data:`OTHER_STATE`, as the
        live chain does.
        """
        n_l, n_u = self.n_fitted, self.n_unlabelled
        doc: dict[str, Any] = {"n_labelled": n_l, "n_unlabelled": n_u, "tested": False, "p_value": None}
        if n_u == 0:
            doc["reason"] = "no unlabelled episodes"
            return doc
        if n_l < min_each or n_u < min_each:
            doc["reason"] = f"fewer than {min_each} labelled or unlabelled episodes"
            return doc
        from tracetochain.audit.shared import homogeneity_from_counts

        vocab = sorted(self.states() | set(self.u_ends) | {s for t in self.u_transitions for s in t})
        pos = {s: i for i, s in enumerate(vocab)}
        if len(vocab) > max_states:
            visits: Counter[str] = Counter()
            for table in (self.transitions, self.u_transitions):
                for (x, _), n in table.items():
                    visits[x] += n
            for ends in (self.exits_success, self.exits_failure, self.u_ends):
                visits.update(ends)
            kept = sorted(vocab, key=lambda x: (-visits[x], x))[: max_states - 1]
            vocab = [*sorted(kept), OTHER_STATE]
            pos = {x: len(kept) for x in pos} | {x: i for i, x in enumerate(vocab)}
        m = len(vocab)
        a = np.zeros((m, m + 2))
        b = np.zeros((m, m + 2))
        for (x, y), n in self.transitions.items():
            a[pos[x], pos[y]] += n
        for ends in (self.exits_success, self.exits_failure):
            for x, n in ends.items():
                a[pos[x], m] += n
        for (x, y), n in self.u_transitions.items():
            b[pos[x], pos[y]] += n
        for x, n in self.u_ends.items():
            b[pos[x], m] += n
        h = homogeneity_from_counts(a, b, vocab, level=level, n_traces=(n_l, n_u))
        doc.update({"tested": h.p_value is not None, "p_value": _finite(h.p_value), "g2": _finite(h.g2),
                    "df": h.df, "level": level, "differ": h.p_value is not None and h.p_value <= level,
                    "differing_states": list(h.differing)})
        if h.p_value is None:
            doc["reason"] = "no state is visited by both kinds"
        return doc


def alpha_spent(alpha: float, j: int) -> float:
    """α_j = α · 6 / (π² j²), the level of the j-th drift comparison (Σ_j α_j = α).

    >>> round(sum(alpha_spent(0.05, j) for j in range(1, 100_000)), 4)
    0.05
    """
    return alpha * 6.0 / (math.pi ** 2 * j * j)


@dataclass
class _Window:
    key: int
    counts: RunningCounts
    complete: bool = False
    drift: dict[str, Any] | None = None
    stats: dict[str, Any] | None = None
    stats_version: int = -1


class LiveAnalysis:
    """Count tables per window and the running total; :meth:`snapshot` turns them into the live document.

    Thread-safe: the ingest thread calls :meth:`add_episodes`, the analyzer calls :meth:`snapshot`.
    """

    alpha = renamed_attribute("alpha", "level")

    @renamed_parameters(alpha="level")
    def __init__(self, window: WindowSpec, *, level: float = 0.05, min_traces: int = 100, horizon: int = 30,
                 confidence: float = 0.95, samples: int = 1000, window_samples: int = 400,
                 keep_windows: int = 500, complete_after: float = 0.0, seed: int = 0, total_every: float = 5.0,
                 clock: Callable[[], float] | None = None, max_states: int = DEFAULT_LIVE_MAX_STATES,
                 group: str | None = None, drift: bool = True) -> None:
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level}")
        self.window = window
        self.level = level
        self.min_traces = min_traces
        self.horizon = horizon
        self.confidence = confidence
        self.samples = samples
        self.window_samples = window_samples
        self.keep_windows = keep_windows
        self.complete_after = complete_after
        self.seed = seed
        self.clock = clock or time.time
        self.total = RunningCounts()
        self.windows: dict[int, _Window] = {}
        self.vocabulary: list[str] = []
        self._known: set[str] = set()
        self._lock = threading.Lock()
        self._n_episodes = 0
        self.baseline: int | None = None
        self.comparisons = 0
        self.drift_events: list[dict[str, Any]] = []  # drift alerts not yet handed out
        self.completed: list[int] = []  # windows completed since the rules last looked
        self._total_stats: tuple[int, dict[str, Any], float] | None = None
        self.total_every = total_every
        if max_states < 2:
            raise ValueError(f"max_states must be at least 2, got {max_states}")
        self.max_states = max_states
        #: Why the live document is limited right now (states merged, fewer draws): shown on the dashboard and
        #: /healthz. Rebuilt by every snapshot.
        self.degraded: list[str] = []
        self._notes: set[str] = set()
        self.group = group  # the agent these episodes come from (None: every group, the all-groups view)
        self.drift_enabled = drift

    # ------------------------------------------------------------------ input
    def window_key(self, row: EpisodeRow, ordinal: int) -> int:
        if self.window.by == "count":
            return ordinal // int(self.window.size)
        return math.floor(self.episode_time(row) / self.window.size)

    @staticmethod
    def episode_time(row: EpisodeRow) -> float:
        """The episode's start time, or the time it was decided when it has none or an implausible one (a store
        written before span times were checked may hold one dated 10^21 s: it must not stop the analysis)."""
        t = row.t_start
        if t is None or time_problem(t, now=row.closed) is not None:
            return row.closed
        return t

    def add_episodes(self, rows: Iterable[EpisodeRow]) -> None:
        with self._lock:
            for row in rows:
                key = self.window_key(row, self._n_episodes)
                self._n_episodes += 1
                w = self.windows.get(key)
                if w is None:
                    w = self.windows[key] = _Window(key, RunningCounts())
                at = self.episode_time(row)
                usage = (row.n_steps, row.cost, row.tokens, row.duration)
                w.counts.add(row.states, row.outcome, row.episode_id, at, usage)
                self.total.add(row.states, row.outcome, row.episode_id, at, usage)
                for s in row.states:
                    if s not in self._known:
                        self._known.add(s)
                        self.vocabulary.append(s)
            while len(self.windows) > self.keep_windows:
                del self.windows[min(self.windows)]

    @property
    def n_episodes(self) -> int:
        return self._n_episodes

    # ------------------------------------------------------------------ windows
    def window_label(self, key: int) -> str:
        if self.window.by == "count":
            n = int(self.window.size)
            return f"traces {key * n}–{(key + 1) * n - 1}"
        try:
            start = _dt.datetime.fromtimestamp(key * self.window.size, _dt.UTC)
        except (OverflowError, OSError, ValueError):  # never raised for keys of checked times; a label, not a crash
            return f"window {key}"
        return start.isoformat(timespec="seconds").replace("+00:00", "Z")

    def _current(self, keys: Iterable[int]) -> int | None:
        """The current window: the latest one (count windows), or the latest that has begun by the receive clock
        (time windows: an episode dated ahead of the clock — skew within the day allowed at ingest — does not
        become "current" and push the real window out; N3). Called under the lock."""
        ks = list(keys)
        if not ks:
            return None
        if self.window.by == "count":
            return max(ks)
        now_key = math.floor(self.clock() / self.window.size)
        begun = [k for k in ks if k <= now_key]
        return max(begun) if begun else min(ks)

    def window_bounds(self, key: int) -> dict[str, Any]:
        """What selects the window's episodes in the store: a range of arrival ordinals or of start times."""
        if self.window.by == "count":
            n = int(self.window.size)
            return {"by": "count", "first": key * n, "last": (key + 1) * n - 1}
        return {"by": "time", "start": key * self.window.size, "end": (key + 1) * self.window.size}

    def _update_completion(self) -> None:
        """Mark finished windows complete (count: full; time: its end passed) and run their drift test once."""
        if not self.windows:
            return
        latest = self._current(self.windows)
        assert latest is not None
        now = self.clock()
        for key in sorted(self.windows):
            w = self.windows[key]
            if w.complete:
                continue
            if self.window.by == "count":
                done = w.counts.n_total >= int(self.window.size)
            else:
                done = now >= (key + 1) * self.window.size + self.complete_after or key < latest
            if not done:
                continue
            w.complete = True
            self.completed.append(key)
            self._drift(w)

    def _drift(self, w: _Window) -> None:
        from tracetochain.audit.shared import homogeneity_from_counts

        if not self.drift_enabled:
            w.drift = {"tested": False, "reason": "drift is tested per group"}
            return
        if w.counts.n_fitted < self.min_traces:
            w.drift = {"tested": False, "reason": f"fewer than {self.min_traces} usable traces"}
            return
        if self.baseline is None or self.baseline not in self.windows:
            if self.baseline is None:
                self.baseline = w.key
                w.drift = {"tested": False, "reason": "baseline"}
                return
        base = self.windows[self.baseline].counts
        vocab = sorted(base.states() | w.counts.states())
        self.comparisons += 1
        level = alpha_spent(self.level, self.comparisons)
        baseline, window = base.to_counts(vocab), w.counts.to_counts(vocab)
        h = homogeneity_from_counts(baseline.outcome_matrix(), window.outcome_matrix(), vocab, level=level,
                                    n_traces=(base.n_total, w.counts.n_total))
        alert = h.p_value <= level
        w.drift = {"tested": True, "comparison": self.comparisons, "level": level, "p_value": h.p_value,
                   "g2": h.g2, "df": h.df, "alert": alert, "differing_states": list(h.differing)}
        if alert:
            self.drift_events.append(self._drift_alert(w, h.differing, h.p_value, level))

    def _drift_alert(self, w: _Window, differing: tuple[str, ...], p: float, level: float) -> dict[str, Any]:
        base = self.windows[self.baseline].counts if self.baseline in self.windows else None
        moved = moved_transitions(base, w.counts, differing) if base is not None else []
        examples: list[str] = []
        for m in moved:
            for e in w.counts.examples_for(m["from"], m["to"]):
                if e not in examples:
                    examples.append(e)
        return {"kind": "drift", "group": self.group, "window": w.key, "window_label": self.window_label(w.key),
                "message": (f"window {self.window_label(w.key)} departs from the baseline "
                            f"({self.window_label(self.baseline or 0)}): p = {p:.3g} ≤ {level:.3g}"
                            + (f"; states: {', '.join(differing)}" if differing else "")),
                "p_value": p, "level": level, "differing_states": list(differing), "moved": moved,
                "examples": examples[:_EXAMPLES]}

    def pop_drift_events(self) -> list[dict[str, Any]]:
        with self._lock:
            out, self.drift_events = self.drift_events, []
            return out

    def pop_completed(self) -> list[int]:
        """Windows completed since the last call, oldest first (the rules evaluate each one once, as it closes).

        Completion is checked here again: episodes keep arriving while a snapshot is computed, and a window that
        filled up meanwhile must be handed to the rules before the next one is looked at as the latest."""
        with self._lock:
            self._update_completion()
            out, self.completed = self.completed, []
            return out

    # ------------------------------------------------------------------ views
    def counts_over(self, n_windows: int | None, ending: int | None = None) -> RunningCounts:
        """The sum of the ``n_windows`` windows ending with window ``ending`` (default: the latest, complete or
        not); ``n_windows=None`` → everything counted so far."""
        with self._lock:
            if n_windows is None:
                return RunningCounts.total_of([self.total])
            last = self._current(self.windows) if ending is None else ending
            keys = sorted(k for k in self.windows if last is None or k <= last)[-n_windows:]
            if ending is not None:
                keys = [k for k in keys if k > ending - n_windows]
            return RunningCounts.total_of(self.windows[k].counts for k in keys)

    def latest_key(self) -> int | None:
        with self._lock:
            return self._current(self.windows)

    def chain_of(self, counts: RunningCounts) -> AbsorbingChain | None:
        """The chain of a count table (library default prior), or None when nothing usable was counted.

        Above ``max_states`` distinct states (tool names carrying ids, say) the chain keeps the ``max_states − 1``
        most visited states and merges the others into one state named :data:`OTHER_STATE` (their counts add up),
        so a refresh stays bounded in time and memory whatever the senders label; the live document says so."""
        if counts.n_fitted == 0:
            return None
        seen = counts.states()
        vocab = [s for s in self.vocabulary if s in seen]
        if not vocab:
            return None
        alias: dict[str, str] | None = None
        if len(vocab) > self.max_states:
            visits: Counter[str] = Counter(counts.initial)
            for (a, b), n in counts.transitions.items():
                visits[a] += n
                visits[b] += n
            visits.update(counts.exits_success)
            visits.update(counts.exits_failure)
            order = {s: i for i, s in enumerate(vocab)}
            kept = sorted(vocab, key=lambda s: (-visits[s], order[s]))[: self.max_states - 1]
            keep = set(kept)
            alias = {s: OTHER_STATE for s in vocab if s not in keep}
            self._notes.add(f"{len(vocab):,} distinct states: the live chain keeps the {len(kept):,} most visited and "
                            f"merges the other {len(alias):,} into {OTHER_STATE!r} (--max-states {self.max_states})")
            vocab = [s for s in vocab if s in keep] + [OTHER_STATE]
        try:
            return estimate_chain(counts.to_counts(vocab, alias))
        except TraceToChainError:
            return None

    def draws_for(self, m: int, wanted: int) -> int:
        """Posterior draws for a chain of ``m`` states: ``wanted``, or fewer so that one refresh stays within the
        work of ``wanted`` draws at :data:`DEFAULT_LIVE_MAX_STATES` states (each draw solves an m × m system: cost
        ∝ m³) and within the memory budget of :func:`~tracetochain._limits.check_ensemble_size`; 0 when fewer than
        50 would fit (the intervals are then left out, and the document says why)."""
        by_work = round(wanted * (DEFAULT_LIVE_MAX_STATES / max(m, 1)) ** 3)
        by_memory = memory_budget() // (_BYTES_PER_DRAW_ENTRY * max(m * m, 1))
        n = min(wanted, max(by_work, min(wanted, 200)), by_memory)
        if n < wanted:
            self._notes.add(f"intervals of a {m:,}-state chain from {n:,} posterior draws instead of {wanted:,}"
                            if n >= 50 else f"no intervals for a {m:,}-state chain (memory budget)")
        return n if n >= 50 else 0

    def snapshot(self) -> dict[str, Any]:
        """The live document: totals, per-window series, the latest window's full summary, drift, examples.

        The count tables are copied under the lock and every estimate is computed outside it, so ingest never
        waits for the analysis."""
        self._notes = set()
        with self._lock:
            self._update_completion()
            keys = sorted(self.windows)
            stale = {k: (self.windows[k].counts.version, RunningCounts.total_of([self.windows[k].counts]))
                     for k in keys if self.windows[k].stats_version != self.windows[k].counts.version}
            current_key = self._current(keys)
            latest = RunningCounts.total_of([self.windows[current_key].counts]) if current_key is not None else None
            base = (RunningCounts.total_of([self.windows[self.baseline].counts])
                    if self.baseline in self.windows else None)
            total = RunningCounts.total_of([self.total])
            vocab = list(self.vocabulary)
            n = self._n_episodes
        fresh = {k: (version, self._window_stats(counts)) for k, (version, counts) in stale.items()}
        total_doc = self._cached_total(total)
        current = self._full_summary(latest) if latest is not None else None
        moved = moved_transitions(base, latest, None) if base is not None and latest is not None else []
        with self._lock:
            series = []
            for key in keys:
                w = self.windows.get(key)
                if w is None:  # dropped meanwhile (retention)
                    continue
                if key in fresh:
                    w.stats_version, w.stats = fresh[key]
                series.append({"key": key, "label": self.window_label(key), "complete": w.complete,
                               "n_traces": w.counts.n_total, "outcomes": dict(w.counts.n_traces),
                               **(w.stats or {}), "drift": w.drift, "bounds": self.window_bounds(key)})
        self.degraded = sorted(self._notes)
        return {"kind": "tracetochain.live", "schema_version": 1, "degraded": self.degraded, "group": self.group,
                "window": {"by": self.window.by,
                "size": self.window.size, "describe": self.window.describe()}, "n_episodes": n,
                "states": vocab, "total": total_doc, "current": current,
                "current_key": current_key, "baseline": self.baseline,
                "series": series, "moved": moved, "confidence": self.confidence}

    def _cached_total(self, total: RunningCounts) -> dict[str, Any] | None:
        """The all-traces summary, recomputed when it changed but at most every ``total_every`` seconds (the
        current window is the live view; the total moves slowly and is the costliest)."""
        cached = self._total_stats
        if cached is not None and (cached[0] == total.n_total or time.monotonic() - cached[2] < self.total_every):
            return cached[1]
        doc = self._full_summary(total)
        if doc is not None:
            self._total_stats = (total.n_total, doc, time.monotonic())
        return doc

    def total_is_stale(self) -> bool:
        """The all-traces summary lags the counts (it is throttled while episodes stream in)."""
        cached = self._total_stats
        return cached is not None and cached[0] != self.total.n_total

    @staticmethod
    def _unlabelled_edges(counts: RunningCounts, shown: set[tuple[str, str]],
                          at: Callable[[str], int | None] | None, names: list[str] | None = None
                          ) -> list[dict[str, Any]]:
        """Moves only unlabelled episodes took (no probability: the chain is fitted on labelled ones), on the
        chain's states (``at`` maps a state to its row, merged ones to :data:`OTHER_STATE`), the most taken
        first, at most ``_UNLABELLED_EDGES``."""
        moves: Counter[tuple[str, str]] = Counter()
        for (a, b), n in counts.u_transitions.items():
            if at is not None and names is not None:
                i, j = at(a), at(b)
                if i is None or j is None:
                    continue
                a, b = names[i], names[j]
            if (a, b) not in shown:
                moves[(a, b)] += n
        top = sorted(moves.items(), key=lambda kv: (-kv[1], kv[0]))[:_UNLABELLED_EDGES]
        return [{"from": a, "to": b, "p": None, "count": 0, "count_unlabelled": int(n)} for (a, b), n in top]

    def _posterior(self, chain: AbsorbingChain, n_samples: int) -> Any:
        """The posterior ensemble of ``chain`` (None when no interval fits the budget: see :meth:`draws_for`)."""
        from tracetochain.uncertainty import DirichletPosterior

        n = self.draws_for(chain.n_states, n_samples)
        if n == 0:
            return None
        # The posterior of the chain's own prior (recorded in its metadata), π0 drawn too.
        return DirichletPosterior(confidence=self.confidence, samples=n, seed=self.seed).fit(
            chain).fetch_model().ensemble

    def _window_stats(self, counts: RunningCounts) -> dict[str, Any]:
        chain = self.chain_of(counts)
        if chain is None:
            return {"r_inf": None, "r_inf_lower": None, "r_inf_upper": None, "pass_rate": None}
        ens = self._posterior(chain, self.window_samples)
        r = ens.stats("r_inf") if ens is not None else None
        usable = max(1, counts.n_fitted)
        return {"r_inf": _finite(chain.r_inf), "r_inf_lower": _finite(r.lower) if r else None,
                "r_inf_upper": _finite(r.upper) if r else None,
                "pass_rate": counts.n_traces["success"] / usable}

    def _full_summary(self, counts: RunningCounts | None) -> dict[str, Any] | None:
        """Chain, R∞, R(d), per-state vulnerability and attribution with posterior intervals (the Dirichlet
        posterior of the counts, as ``interval_summary(method="posterior")``; only the quantities shown)."""
        if counts is None:
            return None
        labels = {"n_labelled": counts.n_fitted, "n_unlabelled": counts.n_unlabelled,
                  "label_test": counts.label_test(max_states=self.max_states), "usage": counts.usage_summary()}
        chain = self.chain_of(counts)
        if chain is None:
            if counts.n_total == 0:
                return None
            return {"n_traces": counts.n_total, "outcomes": dict(counts.n_traces), "pass_rate": None,
                    "r_inf": {"point": None, "lower": None, "upper": None}, "mean_steps": None, "quantities": [],
                    "reliability": None, "states": [], "edges": self._unlabelled_edges(counts, set(), None),
                    "initial": {}, "chain": None, **labels}
        ens = self._posterior(chain, self.samples)
        if ens is None:
            ens = _PointOnly(chain)
        r_inf = ens.stats("r_inf")
        rel = ens.stats("reliability", horizon=self.horizon)
        per_state = {q: ens.stats(q) for q in ("vulnerability", "failure_attribution", "success_probabilities",
                                               "expected_visits")}
        names = list(chain.state_names)
        states = [{"name": s, "vulnerability": _entry(per_state["vulnerability"], i),
                   "attribution": _entry(per_state["failure_attribution"], i),
                   "success_probability": _entry(per_state["success_probabilities"], i),
                   "expected_visits": _entry(per_state["expected_visits"], i)} for i, s in enumerate(names)]
        edges = []
        index = {a: i for i, a in enumerate(names)}
        other = index.get(OTHER_STATE) if len(names) >= self.max_states else None

        def at(state: str) -> int | None:
            return index.get(state, other)

        merged: Counter[tuple[int, int]] = Counter()
        for (a, b), n in counts.transitions.items():  # O(observed transitions), not O(m²)
            i, j = at(a), at(b)
            if i is not None and j is not None:
                merged[(i, j)] += n
        unlabelled: Counter[tuple[int, int]] = Counter()  # the moves of unlabelled episodes, on the same states
        for (a, b), n in counts.u_transitions.items():
            i, j = at(a), at(b)
            if i is not None and j is not None:
                unlabelled[(i, j)] += n
        for (i, j), n in sorted(merged.items()):
            if chain.Q[i, j] > 0:
                edge = {"from": names[i], "to": names[j], "p": float(chain.Q[i, j]), "count": int(n)}
                if unlabelled.get((i, j)):
                    edge["count_unlabelled"] = int(unlabelled[(i, j)])
                edges.append(edge)
        for to, vec, cnt in ((SUCCESS, chain.R_success, counts.exits_success),
                             (FAILURE, chain.R_failure, counts.exits_failure)):
            exits: Counter[int] = Counter()
            for a, n in cnt.items():
                i = at(a)
                if i is not None:
                    exits[i] += n
            for i, n in sorted(exits.items()):
                if n > 0:
                    edges.append({"from": names[i], "to": to, "p": float(vec[i]), "count": int(n)})
        edges += self._unlabelled_edges(counts, {(str(e["from"]), str(e["to"])) for e in edges}, at, names)
        return {**labels, "n_traces": counts.n_total, "outcomes": dict(counts.n_traces),
                "pass_rate": counts.n_traces["success"] / max(1, counts.n_fitted),
                "r_inf": {"point": _finite(r_inf.point), "lower": _finite(r_inf.lower), "upper": _finite(r_inf.upper)},
                "mean_steps": _finite(chain.mean_steps()),
                "quantities": _quantities(ens),
                "reliability": {"point": _floats(rel.point), "lower": _floats(rel.lower), "upper": _floats(rel.upper)},
                "states": states, "edges": edges,
                "initial": {a: float(chain.pi0[i]) for i, a in enumerate(names)},
                "chain": chain.to_dict()}


def _quantities(ens: Any) -> list[dict[str, Any]]:
    """Every reported scalar of the quantity registry with its posterior interval (the dashboard's table and the
    ``tracetochain_quantity`` gauges of /metrics); live counts are not audited."""
    out = []
    for q in reported_scalars():
        s = ens.stats(q.key)
        out.append({"key": q.key, "label": q.title, "unit": q.unit, "digits": q.digits, "point": _finite(s.point),
                    "lower": _finite(s.lower), "upper": _finite(s.upper), "status": "not audited",
                    "alertable": q.alertable})
    return out


def _finite(x: Any) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _floats(values: Any) -> list[float | None] | None:
    return None if values is None else [_finite(v) for v in np.asarray(values, dtype=float).ravel()]


def _entry(stats: Any, i: int) -> dict[str, float | None]:
    """Entry ``i`` of a per-state quantity's statistics (None where undefined, never NaN)."""
    def pick(v: Any) -> float | None:
        return None if v is None else _finite(np.asarray(v, dtype=float)[i])

    return {"point": pick(stats.point), "lower": pick(stats.lower), "upper": pick(stats.upper)}


def transition_probabilities(counts: RunningCounts) -> dict[tuple[str, str], float]:
    """Empirical row frequencies c_ij / c_i (the moves shown on the graph; the prior is left out on purpose so a
    row's change reads as the data's)."""
    totals: Counter[str] = Counter()
    for (a, _), n in counts.transitions.items():
        totals[a] += n
    for s, n in counts.exits_success.items():
        totals[s] += n
    for s, n in counts.exits_failure.items():
        totals[s] += n
    out: dict[tuple[str, str], float] = {}
    for (a, b), n in counts.transitions.items():
        out[(a, b)] = n / totals[a]
    for s, n in counts.exits_success.items():
        out[(s, SUCCESS)] = n / totals[s]
    for s, n in counts.exits_failure.items():
        out[(s, FAILURE)] = n / totals[s]
    return out


def moved_transitions(base: RunningCounts | None, now: RunningCounts | None, states: Iterable[str] | None,
                      *, min_change: float = 0.05, limit: int = 8) -> list[dict[str, Any]]:
    """Transitions whose empirical probability changed most between ``base`` and ``now`` (only rows of ``states``
    when given), largest change first; each with example episodes of ``now`` that took it."""
    if base is None or now is None:
        return []
    pb, pn = transition_probabilities(base), transition_probabilities(now)
    only = set(states) if states is not None else None
    out: list[dict[str, Any]] = []
    for key in set(pb) | set(pn):
        if only is not None and key[0] not in only:
            continue
        d = pn.get(key, 0.0) - pb.get(key, 0.0)
        if abs(d) >= min_change:
            out.append({"from": key[0], "to": key[1], "before": pb.get(key, 0.0), "after": pn.get(key, 0.0),
                        "change": d, "examples": now.examples_for(*key)})
    out.sort(key=lambda r: (-abs(r["change"]), r["from"], r["to"]))
    return out[:limit]


@dataclass(frozen=True)
class _Point:
    point: Any
    lower: Any = None
    upper: Any = None


class _PointOnly:
    """The point estimates of ``chain`` where no posterior ensemble fits the budget (no interval is invented)."""

    def __init__(self, chain: AbsorbingChain) -> None:
        self.chain = chain

    def stats(self, quantity: str, horizon: int | None = None) -> _Point:
        c = self.chain
        if quantity == "reliability":
            return _Point(c.reliability(int(horizon or 0)))
        if quantity == "failure_attribution" and c.r_inf >= 1.0:
            return _Point(np.zeros(c.n_states))
        if quantity in QUANTITIES and QUANTITIES[quantity].kind == "scalar":
            return _Point(QUANTITIES[quantity].point(c)[0])
        value = getattr(c, quantity)
        return _Point(value() if callable(value) else value)
