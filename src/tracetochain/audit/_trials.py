"""The i.i.d.-trials check (``paper-spec.md`` §3.4, Thm 4 / Cor. 5; ``formats.md`` §4).

When each task was attempted several times, the harness estimators are, per task with n trials and c successes,

    pass^k_t = C(c, k) / C(n, k) = Π_{i<k} (c − i)/(n − i)       (Yao et al. 2024, unbiased)
    pass@k_t = 1 − C(n − c, k) / C(n, k) = 1 − Π_{i<k} (n − c − i)/(n − i)   (Chen et al. 2021, unbiased)

averaged over the tasks with n ≥ k (tasks with fewer trials are excluded for that k and counted). A single chain
predicts pass^k = R∞^k and pass@k = 1 − (1 − R∞)^k under i.i.d. trials (Thm 3). If trials share a latent
difficulty, pass^k ≥ R∞^k and pass@k ≤ 1 − (1 − R∞)^k, with equality for k ≥ 2 iff the success probability is the
same for every task (Jensen; Thm 4). The gap pass^k − R∞^k gets a bootstrap interval over tasks: tasks are
resampled with replacement, and — when the traces carry the chain's states — R∞ is refitted on the resampled tasks'
counts with the chain's estimator settings. The check is **flagged** when, for some k ≥ 2, the interval of the
pass^k gap excludes 0: the trials are then not exchangeable draws from one chain, and the chain's pass^k/pass@k
(which assume they are) should not be reported as predictions.

Counting: every non-invalid trace is a trial; only ``success`` counts as a pass (failure and censored do not).
Default k = 1..K with K the smallest number of trials among tasks that have at least two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain.audit._common import (
    FAILURE,
    INVALID,
    SUCCESS,
    Seed,
    as_seed_sequence,
    chain_codes,
    estimator_settings,
    fmt,
    html_table,
    json_dict,
    seed_record,
)
from tracetochain.chain import AbsorbingChain
from tracetochain.exceptions import TraceValidationError
from tracetochain.traces import TraceTable


# ------------------------------------------------------------------------------------------------ formulas
def per_task_pass_hat_k(successes: NDArray[np.int64], trials: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    """Unbiased per-task pass^k = C(c, k)/C(n, k) = Π_{i<k} (c − i)/(n − i) (``formats.md`` §4); NaN where n < k.

    >>> per_task_pass_hat_k(np.array([3, 1]), np.array([4, 4]), 2).tolist()
    [0.5, 0.0]
    """
    c = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    ok = n >= k
    out = np.ones_like(c)
    for i in range(k):
        out *= np.where(ok, np.maximum(c - i, 0.0) / np.where(n - i > 0, n - i, 1.0), 1.0)
    result: NDArray[np.float64] = np.where(ok, out, np.nan)
    return result


def per_task_pass_at_k(successes: NDArray[np.int64], trials: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    """Unbiased per-task pass@k = 1 − C(n − c, k)/C(n, k) (Chen et al. 2021); NaN where n < k.

    >>> per_task_pass_at_k(np.array([1, 0]), np.array([4, 4]), 2).tolist()
    [0.5, 0.0]
    """
    c = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    ok = n >= k
    out = np.ones_like(c)
    for i in range(k):
        out *= np.where(ok, np.maximum(n - c - i, 0.0) / np.where(n - i > 0, n - i, 1.0), 1.0)
    result: NDArray[np.float64] = np.where(ok, 1.0 - out, np.nan)
    return result


def batched_r_inf(transitions: NDArray[np.float64], exits_success: NDArray[np.float64],
                  exits_failure: NDArray[np.float64], initial: NDArray[np.float64], pseudocount: float,
                  unvisited: str, initial_policy: str) -> NDArray[np.float64]:
    """R∞ = π0 (I − Q)⁻¹ R⊕ of the Laplace MLE (``paper-spec.md`` §2.1 step 5) for a batch of count sets.

    The same estimator as :func:`~tracetochain.estimate_chain` (shared denominator c_i + α(m + 2), the unvisited-row
    policy, empirical or modal π0), vectorised over the leading axis. Count sets whose I − Q is singular (a closed
    loop, possible only with pseudocount 0) give NaN.
    """
    C = np.asarray(transitions, dtype=np.float64)
    cs = np.asarray(exits_success, dtype=np.float64)
    cf = np.asarray(exits_failure, dtype=np.float64)
    init = np.asarray(initial, dtype=np.float64)
    m = C.shape[-1]
    a = float(pseudocount)
    totals = C.sum(axis=-1) + cs + cf
    policy = ("prior" if a > 0 else "failure") if unvisited == "auto" else unvisited
    denom = totals + a * (m + 2)
    safe = np.where(denom > 0, denom, 1.0)
    Q = (C + a) / safe[..., None]
    rs = (cs + a) / safe
    if policy == "failure":
        empty = totals == 0
        Q = np.where(empty[..., None], 0.0, Q)
        rs = np.where(empty, 0.0, rs)
    if initial_policy == "modal":
        pi0 = np.zeros_like(init)
        np.put_along_axis(pi0, np.argmax(init, axis=-1)[..., None], 1.0, axis=-1)
    else:
        tot = init.sum(axis=-1, keepdims=True)
        pi0 = init / np.where(tot > 0, tot, 1.0)
    A = np.eye(m) - Q
    out = np.full(C.shape[:-2], np.nan)
    try:
        h = np.linalg.solve(A, rs[..., None])[..., 0]
        out = np.einsum("...i,...i->...", pi0, h)
    except np.linalg.LinAlgError:
        flatA, flatr, flatp = A.reshape(-1, m, m), rs.reshape(-1, m), pi0.reshape(-1, m)
        res = np.full(flatA.shape[0], np.nan)
        for b in range(flatA.shape[0]):
            try:
                res[b] = flatp[b] @ np.linalg.solve(flatA[b], flatr[b])
            except np.linalg.LinAlgError:
                continue
        out = res.reshape(C.shape[:-2])
    result: NDArray[np.float64] = np.clip(out, 0.0, 1.0)
    return result


# ------------------------------------------------------------------------------------------------ result
@dataclass(frozen=True)
class TrialsResult:
    """Per-task pass^k / pass@k against the chain's R∞^k / 1 − (1 − R∞)^k, with bootstrap intervals of the gaps.

    ``flagged`` is None when the check does not apply (no task with two or more trials).
    """

    applicable: bool
    flagged: bool | None
    ks: tuple[int, ...]
    n_tasks: int
    trials_histogram: dict[int, int]
    n_tasks_used: tuple[int, ...]
    n_tasks_excluded: tuple[int, ...]
    pass_hat_k: tuple[float, ...]
    pass_at_k: tuple[float, ...]
    r_inf: float
    chain_pass_hat_k: tuple[float, ...]
    chain_pass_at_k: tuple[float, ...]
    gap_pass_hat_k: tuple[float, ...]
    gap_pass_hat_k_interval: tuple[tuple[float | None, float | None], ...]
    gap_pass_at_k: tuple[float, ...]
    gap_pass_at_k_interval: tuple[tuple[float | None, float | None], ...]
    flagged_ks: tuple[int, ...]
    r_inf_refit: bool
    n_bootstrap: int
    confidence: float
    seed: int | str | None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["trials_histogram"] = {str(k): v for k, v in self.trials_histogram.items()}
        d["definitions"] = {
            "pass^k": "mean over tasks with n >= k of C(c,k)/C(n,k) (all k trials succeed)",
            "pass@k": "mean over tasks with n >= k of 1 - C(n-c,k)/C(n,k) (at least one of k succeeds)",
            "chain_pass^k": "R_inf^k (i.i.d. trials)", "chain_pass@k": "1 - (1 - R_inf)^k (i.i.d. trials)",
            "gap": "empirical minus chain",
        }
        return json_dict(d)

    def describe(self) -> str:
        if not self.applicable:
            return "i.i.d.-trials check: not applicable (" + "; ".join(self.notes) + ")"
        lines = [f"i.i.d.-trials check over {self.n_tasks} tasks (R∞ = {fmt(self.r_inf)}; {self.confidence:.0%} "
                 f"bootstrap over tasks, B = {self.n_bootstrap}):"]
        for i, k in enumerate(self.ks):
            lo, hi = self.gap_pass_hat_k_interval[i]
            lines.append(f"  k={k}: pass^k {fmt(self.pass_hat_k[i])} vs R∞^k {fmt(self.chain_pass_hat_k[i])} "
                         f"(gap {fmt(self.gap_pass_hat_k[i])} [{fmt(lo)}, {fmt(hi)}]); pass@k {fmt(self.pass_at_k[i])}"
                         f" vs {fmt(self.chain_pass_at_k[i])}"
                         + (f"; {self.n_tasks_excluded[i]} task(s) with fewer than {k} trials excluded"
                            if self.n_tasks_excluded[i] else ""))
        lines.append("  FLAG: trials are not exchangeable draws from one chain (gap interval above 0 at k = "
                     + ", ".join(map(str, self.flagged_ks)) + ")" if self.flagged else
                     "  no evidence against exchangeable trials")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def _repr_html_(self) -> str:
        rows = [(f"k = {k}", f"pass^k {fmt(self.pass_hat_k[i])} vs R∞^k {fmt(self.chain_pass_hat_k[i])}, "
                 f"gap {fmt(self.gap_pass_hat_k[i])}") for i, k in enumerate(self.ks)]
        rows.append(("flagged", str(self.flagged)))
        return html_table(rows, "i.i.d.-trials check")


# ------------------------------------------------------------------------------------------------ check
def _group_counts(codes: NDArray[np.int64], traces: TraceTable, group: NDArray[np.int64], use: NDArray[np.bool_],
                  n_groups: int, m: int) -> tuple[NDArray[np.float64], ...]:
    """Transition/exit/initial counts per group of traces (only traces with ``use``), vectorised."""
    oc = traces.outcomes().astype(np.int64)
    ti = traces.trace_index
    offsets = traces.offsets
    same = (ti[1:] == ti[:-1]) & use[ti[:-1]]
    g_pair = group[ti[:-1][same]]
    trans = np.bincount((g_pair * m + codes[:-1][same]) * m + codes[1:][same],
                        minlength=n_groups * m * m).reshape(n_groups, m, m)
    nonempty = np.diff(offsets) > 0
    last = codes[offsets[1:][nonempty] - 1]
    first = codes[offsets[:-1][nonempty]]
    g, u, o = group[nonempty], use[nonempty], oc[nonempty]
    s_mask, f_mask = u & (o == SUCCESS), u & (o == FAILURE)
    es = np.bincount(g[s_mask] * m + last[s_mask], minlength=n_groups * m).reshape(n_groups, m)
    ef = np.bincount(g[f_mask] * m + last[f_mask], minlength=n_groups * m).reshape(n_groups, m)
    init = np.bincount(g[u] * m + first[u], minlength=n_groups * m).reshape(n_groups, m)
    return (trans.astype(np.float64), es.astype(np.float64), ef.astype(np.float64), init.astype(np.float64))


def trials_check(traces: TraceTable, chain: AbsorbingChain | None = None, *, r_inf: float | None = None,
                 ks: tuple[int, ...] | list[int] | None = None, fit_mask: NDArray[np.bool_] | None = None,
                 n_bootstrap: int = 2000, confidence: float = 0.95, seed: Seed = 0) -> TrialsResult:
    """Per-task pass^k and pass@k vs the chain's R∞^k and 1 − (1 − R∞)^k, with a bootstrap over tasks.

    Parameters
    ----------
    traces : TraceTable
        Traces with ``task_id`` (repeated trials of the same task share it).
    chain : AbsorbingChain, optional
        The fitted chain. When the traces are labelled with its states, R∞ is refitted in every bootstrap replicate
        from the resampled tasks' counts (estimator settings from ``chain.metadata``); otherwise ``chain.r_inf`` is
        held fixed.
    r_inf : float, optional
        A fixed R∞ instead of a chain.
    ks : sequence of int, optional
        The k values; default 1..K, K = fewest trials among tasks with at least two.
    fit_mask : bool array over traces, optional
        Which traces the chain was fitted on (held-out audits fit on one half): the refit uses only those, so the
        point estimate equals the chain's R∞. Default: all traces.
    n_bootstrap, confidence, seed
        The bootstrap over tasks (seeded, percentile interval).
    """
    if (chain is None) == (r_inf is None):
        raise ValueError("give either a chain or r_inf")
    if n_bootstrap < 1:
        raise ValueError(f"n_bootstrap must be >= 1, got {n_bootstrap}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    oc = traces.outcomes()
    valid = oc != INVALID
    task = traces.trace_column("task_id")
    fixed_r = float(chain.r_inf if chain is not None else r_inf)  # type: ignore[arg-type]
    empty = TrialsResult(False, None, (), 0, {}, (), (), (), (), fixed_r, (), (), (), (), (), (), (), False,
                         n_bootstrap, confidence, seed_record(seed))
    if traces.n_traces == 0 or task.null_count == traces.n_traces:
        return _note(empty, "the traces carry no task_id")
    has_task = np.asarray(task.is_valid(), dtype=bool) & valid
    enc = pc.dictionary_encode(task)
    tcode = np.asarray(enc.indices.fill_null(-1), dtype=np.int64)
    used_tasks, group = np.unique(tcode[has_task], return_inverse=True)
    T = used_tasks.size
    n_t = np.bincount(group, minlength=T)
    c_t = np.bincount(group, weights=(oc[has_task] == SUCCESS).astype(np.float64), minlength=T).astype(np.int64)
    hist = {int(k): int(v) for k, v in zip(*np.unique(n_t, return_counts=True), strict=True)}
    multi = n_t[n_t >= 2]
    notes: list[str] = []
    if task.null_count:
        notes.append(f"{task.null_count} trace(s) without a task_id left out")
    if ks is None:
        K = int(multi.min()) if multi.size else 1
        k_list = list(range(1, K + 1))
    else:
        k_list = sorted({int(k) for k in ks})
        if not k_list or k_list[0] < 1:
            raise ValueError(f"ks must be positive integers, got {ks!r}")
    applicable = bool(multi.size)
    if not applicable:
        notes.append("every task has a single trial, so pass^k for k >= 2 cannot be estimated")

    # R∞ per bootstrap replicate: refit from per-task counts when the traces carry the chain's states.
    refit = False
    group_of_trace = np.full(traces.n_traces, 0, np.int64)
    group_of_trace[has_task] = group
    counts: tuple[NDArray[np.float64], ...] | None = None
    settings: tuple[float, str, str] | None = None
    if chain is not None:
        try:
            codes = chain_codes(traces, chain.state_names)
        except TraceValidationError:
            notes.append("traces are not labelled with the chain's states: R∞ held fixed in the bootstrap")
        else:
            use = has_task & (np.ones(traces.n_traces, bool) if fit_mask is None else np.asarray(fit_mask, bool))
            counts = _group_counts(codes, traces, group_of_trace, use, T, chain.n_states)
            settings = estimator_settings(chain, None, None, None)
            refit = True
    rng = np.random.default_rng(as_seed_sequence(seed))
    draw = rng.integers(0, T, size=(n_bootstrap, T))
    W = np.bincount((np.arange(n_bootstrap)[:, None] * T + draw).ravel(),
                    minlength=n_bootstrap * T).reshape(n_bootstrap, T).astype(np.float64)
    if refit and counts is not None and settings is not None:
        C, cs, cf, ci = counts
        a, u, i = settings
        point_r = float(batched_r_inf(C.sum(axis=0), cs.sum(axis=0), cf.sum(axis=0), ci.sum(axis=0), a, u, i))
        boot_r = batched_r_inf(np.einsum("bt,tij->bij", W, C), W @ cs, W @ cf, W @ ci, a, u, i)
    else:
        point_r = fixed_r
        boot_r = np.full(n_bootstrap, fixed_r)
    alpha = (1.0 - confidence) / 2.0
    out: dict[str, list[Any]] = {key: [] for key in ("used", "excl", "ph", "pa", "cph", "cpa", "gph", "gpa",
                                                    "iph", "ipa")}
    flagged_ks: list[int] = []
    below: list[int] = []
    for k in k_list:
        elig = n_t >= k
        out["used"].append(int(elig.sum()))
        out["excl"].append(int((~elig).sum()))
        cph, cpa = point_r ** k, 1.0 - (1.0 - point_r) ** k
        out["cph"].append(cph)
        out["cpa"].append(cpa)
        if not elig.any():
            for key in ("ph", "pa", "gph", "gpa"):
                out[key].append(float("nan"))
            out["iph"].append((None, None))
            out["ipa"].append((None, None))
            continue
        vh = per_task_pass_hat_k(c_t[elig], n_t[elig], k)
        va = per_task_pass_at_k(c_t[elig], n_t[elig], k)
        ph, pa = float(vh.mean()), float(va.mean())
        out["ph"].append(ph)
        out["pa"].append(pa)
        out["gph"].append(ph - cph)
        out["gpa"].append(pa - cpa)
        We = W[:, elig]
        tot = We.sum(axis=1)
        okb = (tot > 0) & np.isfinite(boot_r)
        bh = (We[okb] @ vh) / tot[okb] - boot_r[okb] ** k
        ba = (We[okb] @ va) / tot[okb] - (1.0 - (1.0 - boot_r[okb]) ** k)
        iph = (float(np.quantile(bh, alpha)), float(np.quantile(bh, 1 - alpha))) if bh.size else (None, None)
        ipa = (float(np.quantile(ba, alpha)), float(np.quantile(ba, 1 - alpha))) if ba.size else (None, None)
        out["iph"].append(iph)
        out["ipa"].append(ipa)
        if k >= 2 and iph[0] is not None and iph[0] > 0:
            flagged_ks.append(k)
        elif k >= 2 and iph[1] is not None and iph[1] < 0:
            below.append(k)
    if below:
        notes.append("pass^k is below R∞^k beyond sampling error at k = " + ", ".join(map(str, below))
                     + " (under-dispersed trials, or a rare event not observed); not flagged")
    return TrialsResult(
        applicable, (bool(flagged_ks) if applicable else None), tuple(k_list), int(T), hist, tuple(out["used"]),
        tuple(out["excl"]), tuple(out["ph"]), tuple(out["pa"]), point_r, tuple(out["cph"]), tuple(out["cpa"]),
        tuple(out["gph"]), tuple(out["iph"]), tuple(out["gpa"]), tuple(out["ipa"]), tuple(flagged_ks), refit,
        n_bootstrap, confidence, seed_record(seed), tuple(notes))


def _note(res: TrialsResult, note: str) -> TrialsResult:
    from dataclasses import replace

    return replace(res, notes=(*res.notes, note))
