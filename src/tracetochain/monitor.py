"""Drift monitoring: fit the chain over consecutive windows of traces and alert when a window departs from the
baseline.

Windows are consecutive blocks of ``window`` traces in table (file) order, or of ``window`` seconds by each trace's
first ``t_start`` when ``by="time"``. States are fitted once, on the baseline (the first window unless given), so
every window is counted on the same states. For each window: R∞ with a Dirichlet-posterior interval, the chosen
transition probabilities, and the homogeneity test against the baseline (per-state G² with the Rao–Scott design-effect
correction from bootstrap replicates of whole traces, χ² p-value; ``audit._homogeneity``).

Alert rule: a window alerts when its homogeneity p-value is ≤ ``level / (number of windows compared)``
(Bonferroni), so a stationary stream raises any alert with probability ≤ ``level`` (default 0.05) — and the
reason names the states whose rows changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from tracetochain._compat import renamed_attribute, renamed_parameters
from tracetochain._display import Display, ResultDisplay, Table, fmt_number
from tracetochain._outcome import OutcomeCode
from tracetochain.analysis import homogeneity_test
from tracetochain.chain import ChainEstimator
from tracetochain.states import states_from_spec
from tracetochain.traces import TraceTable


@dataclass(frozen=True)
class WindowStat:
    index: int
    start: str
    n_traces: int
    r_inf: float
    r_inf_lower: float
    r_inf_upper: float
    pass_rate: float
    p_homogeneity: float | None
    alert: bool
    differing_states: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "differing_states": list(self.differing_states)}


@dataclass(frozen=True, repr=False)
class MonitorResult(ResultDisplay):
    windows: tuple[WindowStat, ...]
    level: float
    threshold: float
    by: str
    window: float
    baseline: str

    alpha = renamed_attribute("alpha", "level")

    @property
    def alerts(self) -> tuple[WindowStat, ...]:
        return tuple(w for w in self.windows if w.alert)

    def to_dict(self) -> dict[str, Any]:
        # "alpha" is the published key of schema 1 (kept); "level" is the library's name for it (added).
        return {"kind": "tracetochain.monitor", "schema_version": 1, "level": self.level, "alpha": self.level,
                "per_window_threshold": self.threshold, "by": self.by, "window": self.window,
                "baseline": self.baseline, "alerts": [w.index for w in self.alerts],
                "windows": [w.to_dict() for w in self.windows]}

    def json_lines(self) -> str:
        import json

        return "".join(json.dumps({"kind": "tracetochain.monitor.window", **w.to_dict()}, allow_nan=False) + "\n"
                       for w in self.windows)

    def __str__(self) -> str:
        lines = [f"{len(self.windows)} windows ({self.by}, {self.window:g} per window); alert when p ≤ "
                 f"{self.threshold:.2g} (level {self.level:g}, Bonferroni)"]
        for w in self.windows:
            flag = "ALERT" if w.alert else "     "
            p = "baseline" if w.p_homogeneity is None else f"p = {fmt_number(w.p_homogeneity, 4)}"
            extra = f"  states: {', '.join(w.differing_states)}" if w.differing_states else ""
            lines.append(f"  {flag} #{w.index:<3} {w.start:<22} n = {w.n_traces:<5} R∞ = {w.r_inf:.3f} "
                         f"[{w.r_inf_lower:.3f}, {w.r_inf_upper:.3f}]  {p}{extra}")
        return "\n".join(lines)

    def _display(self) -> Display:
        cols = ("index", "start", "n_traces", "r_inf", "r_inf_lower", "r_inf_upper", "pass_rate", "p_homogeneity",
                "alert", "differing_states")
        rows = tuple(tuple(getattr(w, c) for c in cols) for w in self.windows)
        lines = str(self).splitlines()
        return Display(lines[0], kind="Monitor", tables=(Table("windows", cols, rows, digits={"p_homogeneity": 4}),))


def _windows(traces: TraceTable, by: str, window: float) -> list[tuple[str, np.ndarray]]:
    n = traces.n_traces
    if isinstance(window, bool) or not isinstance(window, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(window)) or window <= 0:
        raise ValueError(f"window must be a finite number > 0 (traces per window, or seconds with by='time'), "
                         f"got {window!r}")
    if by == "order":
        size = int(window)
        if size < 1:
            raise ValueError("window must be at least 1 trace")
        return [(f"traces {s}–{min(n, s + size) - 1}", np.arange(s, min(n, s + size))) for s in range(0, n, size)]
    if by != "time":
        raise ValueError(f"by must be 'order' or 'time', got {by!r}")
    table = traces.to_arrow()
    if "t_start" not in table.column_names:
        raise ValueError("windows by time need t_start on the steps; use by='order' (file order) instead")
    t = np.asarray(table.column("t_start").to_numpy(zero_copy_only=False), dtype=float)
    starts = np.minimum.reduceat(np.where(np.isnan(t), np.inf, t), traces.offsets[:-1]) if n else np.zeros(0)
    if not np.isfinite(starts).all():
        raise ValueError("some traces have no t_start; use by='order' or fill the timestamps")
    edges = np.floor((starts - starts.min()) / window).astype(np.int64)
    import datetime as _dt

    out = []
    for w in np.unique(edges):
        idx = np.flatnonzero(edges == w)
        label = _dt.datetime.fromtimestamp(starts.min() + w * window, _dt.UTC).isoformat(timespec="seconds")
        out.append((label, idx))
    return out


@renamed_parameters(alpha="level")
def monitor(traces: TraceTable, *, window: float = 100, by: Literal["order", "time"] = "order",
            baseline: TraceTable | None = None, states: Any = "label", state_options: dict[str, Any] | None = None,
            pseudocount: float | None = None, level: float = 0.05, confidence: float = 0.95,
            seed: int = 0) -> MonitorResult:
    """Fit per window and alert on departures from the baseline (see the module docstring for the rule): ``level``
    is the family-wise false-alarm rate over the windows (``alpha=`` is its deprecated spelling, one release)."""
    from tracetochain.uncertainty import DirichletPosterior

    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    wins = _windows(traces, by, window)
    if not wins:
        raise ValueError("no traces to monitor")
    base = baseline if baseline is not None else traces.select_traces(wins[0][1])
    compared = len(wins) - (0 if baseline is not None else 1)
    threshold = level / max(compared, 1)
    estimator = states_from_spec(states, **(state_options or {})) if isinstance(states, str) else states
    model = estimator.fit(base.select_traces(base.outcomes() != OutcomeCode.INVALID)).fetch_model()
    vocab = model.state_names
    base_labelled = model.label(base)
    seeds = np.random.SeedSequence(seed).spawn(len(wins))
    out = []
    for i, (label, idx) in enumerate(wins):
        part = traces.select_traces(idx)
        labelled = model.label(part)
        chain = ChainEstimator(pseudocount=pseudocount, states=vocab).fit(labelled).fetch_model()
        post = DirichletPosterior(confidence=confidence, samples=500,
                                  seed=int(seeds[i].generate_state(1)[0])).fit(chain).fetch_model()
        r = post.ensemble.stats("r_inf")
        oc = part.outcome_counts()
        usable = max(1, part.n_traces - oc["invalid"])
        p: float | None = None
        differing: tuple[str, ...] = ()
        is_baseline = baseline is None and i == 0
        if not is_baseline:
            h = homogeneity_test(base_labelled, labelled, states=vocab, level=threshold,
                                 seed=int(seeds[i].generate_state(2)[1]))
            p, differing = h.p_value, h.differing
        alert = p is not None and p <= threshold
        lower, upper = float(r.lower), float(r.upper)  # type: ignore[arg-type]  # scalar quantity
        out.append(WindowStat(i, label, part.n_traces, chain.r_inf, lower, upper,
                              oc["success"] / usable, p, alert, differing if alert else ()))
    return MonitorResult(tuple(out), level, threshold, by, float(window),
                         "first window" if baseline is None else baseline.report.source)
