r"""The i.i.d.-trials layer: are repeated trials of one task exchangeable draws from one chain?

A chain predicts pass^k = R∞^k and pass@k = 1 − (1 − R∞)^k only if every trial, of every task, succeeds with the same
probability. When tasks differ in difficulty the per-task success probabilities p_t vary, and by Jensen's inequality
pass^k = E[p_t^k] ≥ (E p_t)^k for k ≥ 2, with equality iff p_t is constant (TraceToChain Thm 4). So pass^k for
k ≥ 2 (and pass@k) rest on this layer; R∞ and pass^1 do not.

The test. With n_t usable trials and c_t successes per task, p̂ = Σc_t / Σn_t, the statistic is the binomial
dispersion X = Σ_t (c_t − n_t p̂)² / n_t over tasks with n_t ≥ 2 (Tarone 1979; large when successes cluster within
tasks). Its null law is exact and needs no model: given the total number of successes, exchangeable trials spread
them over the traces uniformly, so the task counts are multivariate hypergeometric; p = (1 + #{X* ≥ X}) / (B + 1)
over B such draws. One-sided: tasks that differ make X large.

Descriptively the layer reports the harness estimators, per task with n trials and c successes

    pass^k_t = C(c, k) / C(n, k)        (Yao et al. 2024, unbiased)
    pass@k_t = 1 − C(n − c, k) / C(n, k) (Chen et al. 2021, unbiased)

averaged over the tasks with n ≥ k, with percentile intervals by resampling tasks, beside R∞^k and 1 − (1 − R∞)^k.
Every non-invalid trace is a trial; only ``success`` counts as a pass. Everything is computed from the per-task table
(:func:`task_table`), which adds up over partitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table, fmt_interval, fmt_number
from tracetochain._outcome import INVALID, SUCCESS
from tracetochain.audit._common import Seed, as_seed_sequence, json_dict, seed_record
from tracetochain.chain import AbsorbingChain
from tracetochain.exceptions import TraceValidationError
from tracetochain.traces import TraceTable
from tracetochain.traces.shared import fnv1a_hashes

#: Fewer repeated-trial traces than this and the layer reports insufficient evidence.
MIN_REPEATED_TRACES = 20


# ------------------------------------------------------------------------------------------------ formulas
def per_task_pass_hat_k(successes: NDArray[np.int64], trials: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    """Unbiased per-task pass^k = C(c, k)/C(n, k) = Π_{i<k} (c − i)/(n − i); NaN where n < k.

    >>> per_task_pass_hat_k(np.array([3, 1]), np.array([4, 4]), 2).round(4).tolist()
    [0.5, 0.0]
    """
    c = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    out = np.ones_like(c)
    for i in range(k):
        out *= np.divide(np.maximum(c - i, 0.0), n - i, out=np.zeros_like(c), where=n - i > 0)
    out[n < k] = np.nan
    return out


def per_task_pass_at_k(successes: NDArray[np.int64], trials: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    """Unbiased per-task pass@k = 1 − C(n − c, k)/C(n, k); NaN where n < k.

    >>> per_task_pass_at_k(np.array([3, 1]), np.array([4, 4]), 2).round(4).tolist()
    [1.0, 0.5]
    """
    c = np.asarray(successes, dtype=np.int64)
    n = np.asarray(trials, dtype=np.int64)
    return 1.0 - per_task_pass_hat_k(n - c, n, k)


def dispersion_statistic(successes: NDArray[np.int64], trials: NDArray[np.int64]) -> float:
    """X = Σ_t (c_t − n_t p̂)² / n_t over tasks with n_t ≥ 2 (p̂ pooled over those tasks)."""
    c = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    use = n >= 2
    if not use.any():
        return 0.0
    p = c[use].sum() / n[use].sum()
    return float(np.sum((c[use] - n[use] * p) ** 2 / n[use]))


# ------------------------------------------------------------------------------------------------ table
@dataclass(frozen=True)
class TaskTable:
    """Usable trials and successes per task, keyed by the 64-bit hash of the task id (sorted by key)."""

    keys: NDArray[np.uint64]
    trials: NDArray[np.int64]
    successes: NDArray[np.int64]

    @property
    def n_tasks(self) -> int:
        return int(self.keys.size)

    @property
    def repeated(self) -> bool:
        """Some task has two or more usable trials."""
        return bool(np.any(self.trials >= 2))

    def merge(self, other: TaskTable) -> TaskTable:
        keys = np.concatenate([self.keys, other.keys])
        uniq, inv = np.unique(keys, return_inverse=True)
        n = np.bincount(inv, np.concatenate([self.trials, other.trials]), minlength=uniq.size).astype(np.int64)
        c = np.bincount(inv, np.concatenate([self.successes, other.successes]), minlength=uniq.size).astype(np.int64)
        return TaskTable(uniq, n, c)

    @classmethod
    def empty(cls) -> TaskTable:
        return cls(np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64))

    def design_effect(self) -> float:
        """Kish's design effect of the pass rate, 1 + (n̄ − 1)·ρ, with n̄ = Σn²/Σn (unequal cluster sizes) and ρ the
        intra-task correlation of success by the one-way ANOVA estimator (Fleiss 1981), clipped to ρ ≥ 0; 1 when no
        task repeats."""
        n = self.trials.astype(np.float64)
        keep = n > 0
        icc = anova_icc(self.successes[keep], self.trials[keep])
        if icc is None:
            return 1.0
        n = n[keep]
        nbar = float(np.sum(n * n)) / float(n.sum())
        return 1.0 + (nbar - 1.0) * max(0.0, icc)


def anova_icc(successes: NDArray[np.int64], trials: NDArray[np.int64]) -> float | None:
    """The one-way ANOVA estimator of the intraclass correlation of binary outcomes across trials of a task
    (Fleiss 1981): ρ̂ = (MSB − MSW)/(MSB + (m₀ − 1)·MSW), with MSB = Σ n_t (p_t − p̄)²/(T − 1),
    MSW = Σ (c_t − c_t²/n_t)/(N − T) and m₀ = (N − Σn_t²/N)/(T − 1). Unclipped (it can be negative by chance);
    None when no task repeats, there is one task, or every outcome is the same.

    >>> round(anova_icc(np.array([4, 0, 2]), np.array([4, 4, 4])), 4)
    0.6667
    """
    n = np.asarray(trials, dtype=np.float64)
    c = np.asarray(successes, dtype=np.float64)
    keep = n > 0
    n, c = n[keep], c[keep]
    N, T = float(n.sum()), int(n.size)
    if T < 2 or N <= T or not np.any(n >= 2):
        return None
    p = c.sum() / N
    if p <= 0 or p >= 1:
        return None
    msb = float(np.sum(n * (c / n - p) ** 2)) / (T - 1)
    msw = float(np.sum(c - c * c / n)) / (N - T)
    n0 = (N - float(np.sum(n * n)) / N) / (T - 1)
    denom = msb + (n0 - 1.0) * msw
    return (msb - msw) / denom if denom > 0 else 0.0


def task_table(traces: TraceTable) -> TaskTable | None:
    """The per-task table of ``traces`` (None when no trace has a task id). Invalid traces are not trials."""
    if "task_id" not in traces.columns or traces.n_traces == 0:
        return None
    task = traces.trace_column("task_id")
    if task.null_count == len(task):
        return None
    oc = traces.outcomes()
    use = np.asarray(task.is_valid().to_numpy(zero_copy_only=False), dtype=bool) & (oc != INVALID)
    keys = fnv1a_hashes(task.filter(pa.array(use)))
    succ = (oc[use] == SUCCESS).astype(np.int64)
    uniq, inv = np.unique(keys, return_inverse=True)
    return TaskTable(uniq, np.bincount(inv, minlength=uniq.size).astype(np.int64),
                     np.bincount(inv, succ, minlength=uniq.size).astype(np.int64))


# ------------------------------------------------------------------------------------------------ result
@dataclass(frozen=True, repr=False)
class TrialsResult(ResultDisplay):
    """The i.i.d.-trials layer: the dispersion test and the per-task pass^k / pass@k beside the chain's.

    ``applicable`` is False when no task has two trials; ``p_value`` is None then or when the evidence is
    insufficient (``notes`` says why); ``flagged`` is True when p ≤ ``level``.
    """

    applicable: bool
    p_value: float | None
    statistic: float | None
    level: float
    ks: tuple[int, ...]
    n_tasks: int
    n_repeated_traces: int
    trials_histogram: dict[int, int]
    n_tasks_used: tuple[int, ...]
    pass_hat_k: tuple[float | None, ...]
    pass_hat_k_interval: tuple[tuple[float | None, float | None], ...]
    pass_at_k: tuple[float | None, ...]
    pass_at_k_interval: tuple[tuple[float | None, float | None], ...]
    r_inf: float
    chain_pass_hat_k: tuple[float, ...]
    chain_pass_at_k: tuple[float, ...]
    design_effect: float
    n_permutations: int
    n_bootstrap: int
    confidence: float
    seed: int | str | None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def flagged(self) -> bool | None:
        return None if self.p_value is None else self.p_value <= self.level

    @property
    def flagged_ks(self) -> tuple[int, ...]:
        """The k ≥ 2 whose empirical pass^k lies above the chain's R∞^k (where the gap shows)."""
        if not self.flagged:
            return ()
        return tuple(k for k, e, c in zip(self.ks, self.pass_hat_k, self.chain_pass_hat_k, strict=True)
                     if k >= 2 and e is not None and e > c)

    @property
    def insufficient(self) -> bool:
        return self.applicable and self.p_value is None

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["trials_histogram"] = {str(k): v for k, v in self.trials_histogram.items()}
        d["flagged"] = self.flagged
        d["definitions"] = {
            "statistic": "sum over tasks with n >= 2 of (c - n p)^2 / n; null law: successes spread uniformly over "
                         "the traces (multivariate hypergeometric), one-sided",
            "pass^k": "mean over tasks with n >= k of C(c,k)/C(n,k) (all k trials succeed)",
            "pass@k": "mean over tasks with n >= k of 1 - C(n-c,k)/C(n,k) (at least one of k succeeds)",
            "chain_pass^k": "R_inf^k (i.i.d. trials)", "chain_pass@k": "1 - (1 - R_inf)^k (i.i.d. trials)",
            "design_effect": "1 + (n_bar - 1) rho: variance inflation of the pass rate by repeated trials of a task",
        }
        return json_dict(d)

    def describe(self) -> str:
        if not self.applicable:
            return "i.i.d.-trials check: not applicable (" + "; ".join(self.notes) + ")"
        head = (f"i.i.d.-trials check over {self.n_tasks} tasks ({self.n_repeated_traces} traces in tasks with ≥ 2 "
                f"trials; design effect {self.design_effect:.2f}): ")
        if self.p_value is None:
            head += "insufficient evidence (" + "; ".join(self.notes) + ")"
        else:
            head += (f"dispersion X = {fmt_number(self.statistic)}, p = {fmt_number(self.p_value, 4)} ("
                     + ("tasks differ: trials are not exchangeable" if self.flagged else "no evidence that tasks "
                        "differ") + ")")
        lines = [head]
        for i, k in enumerate(self.ks):
            lo, hi = self.pass_hat_k_interval[i]
            lines.append(f"  k={k}: pass^k {fmt_number(self.pass_hat_k[i])} {fmt_interval(lo, hi)} vs R∞^k "
                         f"{fmt_number(self.chain_pass_hat_k[i])}; pass@k {fmt_number(self.pass_at_k[i])} vs "
                         f"{fmt_number(self.chain_pass_at_k[i])} ({self.n_tasks_used[i]} tasks)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def _display(self) -> Display:
        fields: tuple[tuple[str, Any], ...] = (
            ("p-value", self.p_value), ("dispersion statistic", self.statistic), ("tasks", self.n_tasks),
            ("traces in repeated tasks", self.n_repeated_traces), ("design effect", self.design_effect))
        rows = tuple((k, self.pass_hat_k[i], *self.pass_hat_k_interval[i], self.chain_pass_hat_k[i],
                      self.pass_at_k[i], *self.pass_at_k_interval[i], self.chain_pass_at_k[i], self.n_tasks_used[i])
                     for i, k in enumerate(self.ks))
        table = Table("pass_k", ("k", "pass_hat_k", "pass_hat_k_lower", "pass_hat_k_upper", "chain_pass_hat_k",
                                 "pass_at_k", "pass_at_k_lower", "pass_at_k_upper", "chain_pass_at_k", "n_tasks"),
                      rows, digits={"k": 0, "n_tasks": 0})
        verdict = ("not applicable" if not self.applicable else "insufficient evidence" if self.p_value is None
                   else "tasks differ: trials are not exchangeable" if self.flagged
                   else "no evidence that tasks differ")
        return Display(verdict, kind="i.i.d.-trials check", lines=self.notes, fields=fields, tables=(table,))


# ------------------------------------------------------------------------------------------------ check
def _quantiles(x: NDArray[np.float64], confidence: float) -> tuple[float | None, float | None]:
    x = x[np.isfinite(x)]
    if not x.size:
        return None, None
    a = (1.0 - confidence) / 2.0
    return float(np.quantile(x, a)), float(np.quantile(x, 1.0 - a))


def trials_check_table(table: TaskTable | None, r_inf: float, *, ks: list[int] | tuple[int, ...] | None = None,
                       level: float = 0.05, n_permutations: int = 999, n_bootstrap: int = 1000,
                       confidence: float = 0.95, seed: Seed = 0) -> TrialsResult:
    """The i.i.d.-trials layer from the per-task table (module docstring) against the chain's ``r_inf``.

    ``ks`` default: 1..K with K the largest number of trials that at least two tasks have (at least 2).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    tab = table if table is not None else TaskTable.empty()
    n, c = tab.trials, tab.successes
    hist = {int(v): int(k) for v, k in zip(*np.unique(n, return_counts=True), strict=True)} if n.size else {}
    rep = n >= 2
    n_rep = int(n[rep].sum())
    if ks is None:
        top = 2
        for v in sorted(hist, reverse=True):
            if sum(k for w, k in hist.items() if w >= v) >= 2:
                top = max(2, v)
                break
        ks = tuple(range(1, top + 1))
    ks = tuple(int(k) for k in ks)
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be positive integers, got {ks!r}")
    seed_seq = as_seed_sequence(seed)
    perm_seed, boot_seed = seed_seq.spawn(2)
    notes: list[str] = []
    chain_hat = tuple(float(r_inf) ** k for k in ks)
    chain_at = tuple(1.0 - (1.0 - float(r_inf)) ** k for k in ks)
    applicable = bool(rep.any())
    if not applicable:
        notes.append("no task has two or more trials" if n.size else "the traces carry no task_id")
        empty: tuple[Any, ...] = tuple(None for _ in ks)
        return TrialsResult(False, None, None, level, ks, tab.n_tasks, 0, hist, tuple(0 for _ in ks), empty,
                            tuple((None, None) for _ in ks), empty, tuple((None, None) for _ in ks), float(r_inf),
                            chain_hat, chain_at, 1.0, n_permutations, n_bootstrap, confidence, seed_record(seed),
                            tuple(notes))
    # Descriptive: per-task estimators with task-bootstrap intervals.
    used = tuple(int(np.count_nonzero(n >= k)) for k in ks)
    rng_b = np.random.default_rng(boot_seed)
    idx = rng_b.integers(0, n.size, (n_bootstrap, n.size))
    hat: list[float | None] = []
    at: list[float | None] = []
    hat_iv: list[tuple[float | None, float | None]] = []
    at_iv: list[tuple[float | None, float | None]] = []
    for k in ks:
        ph = per_task_pass_hat_k(c, n, k)
        pa_ = per_task_pass_at_k(c, n, k)
        ok = n >= k
        if not ok.any():
            hat.append(None)
            at.append(None)
            hat_iv.append((None, None))
            at_iv.append((None, None))
            continue
        hat.append(float(np.mean(ph[ok])))
        at.append(float(np.mean(pa_[ok])))
        w = ok[idx].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            hb = np.nansum(np.where(ok, ph, 0.0)[idx], axis=1) / w.sum(axis=1)
            ab = np.nansum(np.where(ok, pa_, 0.0)[idx], axis=1) / w.sum(axis=1)
        hat_iv.append(_quantiles(hb, confidence))
        at_iv.append(_quantiles(ab, confidence))
    deff = tab.design_effect()
    # The test.
    total_succ = int(c[rep].sum())
    p_value: float | None = None
    stat: float | None = None
    if n_rep < MIN_REPEATED_TRACES:
        notes.append(f"only {n_rep} traces in tasks with two or more trials; the test needs at least "
                     f"{MIN_REPEATED_TRACES}")
    elif total_succ == 0 or total_succ == n_rep:
        notes.append("every repeated trial " + ("failed" if total_succ == 0 else "succeeded") +
                     ": there is no spread to test")
    else:
        stat = dispersion_statistic(c[rep], n[rep])
        rng_p = np.random.default_rng(perm_seed)
        draws = rng_p.multivariate_hypergeometric(n[rep], total_succ, size=n_permutations)
        nn = n[rep].astype(np.float64)
        p = total_succ / nn.sum()
        x_star = np.sum((draws - nn * p) ** 2 / nn, axis=1)
        tol = 1e-9 * max(1.0, stat)
        p_value = (1 + int(np.count_nonzero(x_star >= stat - tol))) / (n_permutations + 1)
    return TrialsResult(True, p_value, stat, level, ks, tab.n_tasks, n_rep, hist, used, tuple(hat), tuple(hat_iv),
                        tuple(at), tuple(at_iv), float(r_inf), chain_hat, chain_at, deff, n_permutations,
                        n_bootstrap, confidence, seed_record(seed), tuple(notes))


def trials_check(traces: TraceTable, chain: AbsorbingChain | None = None, *, r_inf: float | None = None,
                 ks: list[int] | tuple[int, ...] | None = None, level: float = 0.05, n_permutations: int = 999,
                 n_bootstrap: int = 1000, confidence: float = 0.95, seed: Seed = 0) -> TrialsResult:
    """:func:`trials_check_table` on the traces' per-task table, against ``chain.r_inf`` (or ``r_inf``).

    >>> import tracetochain as tt
    >>> rows = [{"trace_id": f"t{t}-{j}", "step_idx": 0, "state": "a", "task_id": str(t),
    ...          "outcome": "success" if t < 10 else "failure"} for t in range(20) for j in range(3)]
    >>> res = trials_check(tt.TraceTable.from_records(rows), r_inf=0.5)
    >>> res.flagged, res.pass_hat_k[2], res.chain_pass_hat_k[2]   # tasks either always or never succeed
    (True, 0.5, 0.125)
    """
    if chain is None and r_inf is None:
        raise ValueError("give the chain (or its r_inf) to compare the per-task estimates with")
    if "task_id" not in traces.columns:
        raise TraceValidationError("the traces carry no task_id, so repeated trials cannot be grouped",
                                   source=traces.report.source, field="task_id",
                                   hint="add a task_id (the same value on every trial of a task)")
    value = float(chain.r_inf if chain is not None else r_inf)  # type: ignore[arg-type]
    return trials_check_table(task_table(traces), value, ks=ks, level=level, n_permutations=n_permutations,
                              n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
