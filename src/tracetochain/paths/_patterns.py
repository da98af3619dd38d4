"""Which path patterns go with success or failure: :func:`find_patterns`, :func:`compare_patterns`, :func:`top_finding`.

The candidates (:mod:`tracetochain.paths._candidates`) are tested together; every number comes from
:mod:`tracetochain.paths._inference` (Newcombe interval on the difference of success rates — on effective sample
sizes when tasks repeat —, Fisher exact or Rao–Scott p-value, Benjamini–Yekutieli q-value over the family).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table, fmt_number
from tracetochain.paths._candidates import KINDS, Candidates, CandidateSettings, Pattern, enumerate_candidates
from tracetochain.paths._inference import (
    ClusterSums,
    by_qvalues,
    cluster_sums,
    design_effect,
    fisher_two_sided,
    newcombe,
    rao_scott_p,
    z_of,
)
from tracetochain.paths._sequences import PathSequences, merge_sequences

PATHS_KIND = "tracetochain.paths"
PATHS_SCHEMA_VERSION = 1
COMPARE_KIND = "tracetochain.paths.compare"
#: Example traces listed per outcome on each row.
N_EXAMPLES = 3
FDR_METHOD = "Benjamini-Yekutieli"


def task_codes(seq: PathSequences) -> tuple[NDArray[np.int64], int, bool]:
    """(cluster of every trace, number of clusters, whether any task has two traces): a trace without a task is its
    own cluster."""
    index: dict[str, int] = {}
    codes = np.empty(seq.n_traces, np.int64)
    nxt = 0
    for i, t in enumerate(seq.tasks):
        if t is None:
            codes[i] = nxt
            nxt += 1
            continue
        key = "task:" + str(t)
        got = index.get(key)
        if got is None:
            index[key] = got = nxt
            nxt += 1
        codes[i] = got
    return codes, nxt, nxt < seq.n_traces


@dataclass(frozen=True, eq=False, repr=False)
class PathsResult(ResultDisplay):
    """The patterns tested on one corpus, best supported first (``rows``: JSON-ready dicts; :meth:`to_dict`)."""

    rows: tuple[dict[str, Any], ...]
    n_traces: int
    n_success: int
    n_candidates: int
    n_enumerated: int
    min_support: int
    clustered: bool
    n_tasks: int
    confidence: float
    settings: dict[str, Any]
    left_out: dict[str, int]
    state_names: tuple[str, ...]
    notes: tuple[str, ...] = ()
    source: dict[str, Any] = field(default_factory=dict)

    def supported(self, level: float = 0.05) -> list[dict[str, Any]]:
        """Rows with q-value below ``level`` (the family's discoveries at FDR ``level``)."""
        return [r for r in self.rows if r["q_value"] < level]

    def to_dict(self) -> dict[str, Any]:
        top = top_finding(self)
        return {"kind": PATHS_KIND, "schema_version": PATHS_SCHEMA_VERSION, "source": dict(self.source),
                "n_traces": self.n_traces, "n_success": self.n_success,
                "success_rate": self.n_success / max(1, self.n_traces), "left_out": dict(self.left_out),
                "n_states": len(self.state_names), "n_candidates": self.n_candidates,
                "n_enumerated": self.n_enumerated, "min_support": self.min_support,
                "clustered_by_task": self.clustered, "n_tasks": self.n_tasks, "confidence": self.confidence,
                "method": method_doc(self.clustered), "settings": dict(self.settings), "notes": list(self.notes),
                "n_supported": len(self.supported()), "top_finding": top, "patterns": list(self.rows)}

    def _display(self) -> Display:
        sup = self.supported()
        lines = (f"{self.n_candidates} patterns tested on {self.n_traces} traces (each in ≥ {self.min_support}); "
                 f"{len(sup)} with q < 0.05 ({FDR_METHOD} FDR)",)
        table = Table("patterns", ("pattern", "kind", "n_traces", "share", "success_with", "success_without",
                                   "difference", "lower", "upper", "q_value"),
                      tuple((r["pattern"], r["kind"], r["n_traces"], r["share"], r["success_with"],
                             r["success_without"], r["difference"]["point"], r["difference"]["lower"],
                             r["difference"]["upper"], r["q_value"]) for r in self.rows))
        return Display(f"{self.n_traces} traces, {self.n_candidates} patterns", kind="Paths", lines=lines,
                       tables=(table,))


def method_doc(clustered: bool) -> dict[str, str]:
    """How the row numbers were computed (in every JSON document)."""
    return {"difference": "Newcombe hybrid score interval (Wilson per group)"
                          + (" on effective sample sizes n/deff, deff from the task-clustered variance"
                             if clustered else ""),
            "p_value": ("Pearson chi-square / design effect (Rao-Scott), 1 df" if clustered
                        else "Fisher exact, two-sided"),
            "q_value": f"{FDR_METHOD} step-up over all candidates tested (valid under any dependence)"}


def _examples(presence: sp.csc_matrix, success: NDArray[np.bool_], ids: tuple[str, ...], j: int) -> dict[str, Any]:
    rows = presence.indices[presence.indptr[j]:presence.indptr[j + 1]]
    ok = success[rows]
    return {"success": [ids[i] for i in rows[ok][:N_EXAMPLES]], "failure": [ids[i] for i in rows[~ok][:N_EXAMPLES]]}


def _group_stats(presence: sp.csc_matrix, success: NDArray[np.bool_], tcodes: NDArray[np.int64], n_tasks: int,
                 clustered: bool, z: float) -> dict[str, NDArray[np.float64]]:
    """Per candidate: counts, rates, difference with interval, p-value (module docstring)."""
    N = presence.shape[0]
    K = int(success.sum())
    n1 = np.asarray(presence.sum(axis=0)).ravel().astype(float)
    s1 = np.asarray(presence.T @ success.astype(float)).ravel()
    n0 = N - n1
    s0 = K - s1
    if clustered:
        with_sums, without_sums = cluster_sums(presence, success, tcodes, n_tasks)
        deff1 = design_effect(s1, n1, with_sums)
        deff0 = design_effect(s0, n0, without_sums)
        p = rao_scott_p(s1, n1, s0, n0, np.maximum(deff1, deff0))
    else:
        deff1 = np.ones_like(n1)
        deff0 = np.ones_like(n0)
        p = fisher_two_sided(N, K, n1.astype(np.int64), s1.astype(np.int64))
    e1, e0 = n1 / deff1, n0 / deff0
    safe1, safe0 = np.where(n1 > 0, n1, 1), np.where(n0 > 0, n0, 1)
    d, lo, hi = newcombe(s1 / safe1 * e1, e1, s0 / safe0 * e0, e0, z)
    return {"n1": n1, "s1": s1, "n0": n0, "s0": s0, "d": d, "lo": lo, "hi": hi, "p": p, "deff1": deff1,
            "deff0": deff0}


def find_patterns(seq: PathSequences, settings: CandidateSettings | None = None, *, confidence: float = 0.95,
                  source: dict[str, Any] | None = None) -> PathsResult:
    """Test every candidate pattern of ``seq`` (traces in canonical order: :meth:`PathSequences.canonical`).

    Rows are ordered by q-value, then p-value, then the size of the difference; each has ``pattern`` (text),
    ``kind``, ``states``, ``n_traces`` (containing it), ``share``, ``success_with``, ``success_without``,
    ``difference`` ``{point, lower, upper}``, ``p_value``, ``q_value``, ``design_effect`` (with, without),
    ``aliases`` and ``examples`` (up to three success and three failure trace ids, by id).
    """
    if not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence}")
    cfg = settings or CandidateSettings()
    seq = seq.canonical()
    if seq.n_traces == 0:
        from tracetochain.exceptions import EmptyTraceSetError

        left = seq.left_out
        raise EmptyTraceSetError(f"no trace with outcome success or failure to compare ({left.get('censored', 0)} "
                                 f"censored, {left.get('invalid', 0)} invalid)")
    cand = enumerate_candidates(seq, cfg)
    tcodes, n_tasks, clustered = task_codes(seq)
    z = z_of(confidence)
    stats = _group_stats(cand.presence, seq.success, tcodes, n_tasks, clustered, z)
    q = by_qvalues(stats["p"])
    rows = _rows(cand, seq, stats, q)
    return PathsResult(rows=tuple(rows), n_traces=seq.n_traces, n_success=int(seq.success.sum()),
                       n_candidates=cand.n_candidates, n_enumerated=cand.n_enumerated, min_support=cand.min_support,
                       clustered=clustered, n_tasks=n_tasks, confidence=confidence, settings=cfg.to_dict(),
                       left_out=dict(seq.left_out), state_names=seq.state_names, notes=cand.notes,
                       source=dict(source or {}))


def _rows(cand: Candidates, seq: PathSequences, stats: dict[str, NDArray[np.float64]], q: NDArray[np.float64]
          ) -> list[dict[str, Any]]:
    N = seq.n_traces
    kind_rank = {k: i for i, k in enumerate(KINDS)}
    order = sorted(range(cand.n_candidates), key=lambda j: (
        q[j], stats["p"][j], -abs(stats["d"][j]), kind_rank[cand.patterns[j].kind], cand.patterns[j].text))
    rows = []
    for j in order:
        pat = cand.patterns[j]
        n1, n0 = stats["n1"][j], stats["n0"][j]
        rows.append({
            "pattern": pat.text, "kind": pat.kind, "states": list(pat.states), "threshold": pat.k or None,
            "n_traces": int(n1), "share": float(n1 / N),
            "n_success_with": int(stats["s1"][j]), "n_without": int(n0), "n_success_without": int(stats["s0"][j]),
            "success_with": float(stats["s1"][j] / n1), "success_without": float(stats["s0"][j] / n0),
            "difference": {"point": float(stats["d"][j]), "lower": float(stats["lo"][j]),
                           "upper": float(stats["hi"][j])},
            "p_value": float(stats["p"][j]), "q_value": float(q[j]),
            "design_effect": {"with": float(stats["deff1"][j]), "without": float(stats["deff0"][j])},
            "aliases": [a.text for a in cand.aliases[j]],
            "examples": _examples(cand.presence, seq.success, seq.trace_ids, j)})
    return rows


def top_finding(result: PathsResult | dict[str, Any], level: float = 0.05) -> dict[str, Any] | None:
    """The best-supported pattern: the row with the smallest q-value below ``level`` (ties: the larger difference),
    with a ``sentence`` a headline can use; None when no pattern is supported at FDR ``level``.

    Accepts a :class:`PathsResult` or its JSON document (``paths --json``)."""
    rows = result.rows if isinstance(result, PathsResult) else result.get("patterns", [])
    confidence = result.confidence if isinstance(result, PathsResult) else result.get("confidence", 0.95)
    best = None
    for r in rows:
        if r["q_value"] < level and (best is None or (r["q_value"], -abs(r["difference"]["point"]))
                                     < (best["q_value"], -abs(best["difference"]["point"]))):
            best = r
    if best is None:
        return None
    return {**best, "sentence": finding_sentence(best, confidence)}


def finding_sentence(row: dict[str, Any], confidence: float = 0.95) -> str:
    """One sentence for a pattern row, e.g. "Runs with ≥ 2 consecutive errors in test (31 % of runs) succeed 22 % of the
    time vs 81 % without: −59 points [−66, −51] (95 % interval), q = 2e-20"."""
    d = row["difference"]
    pts = f"{100 * d['point']:+.0f} points [{100 * d['lower']:+.0f}, {100 * d['upper']:+.0f}]"
    return (f"Runs with {row['pattern']} ({100 * row['share']:.0f} % of runs) succeed "
            f"{100 * row['success_with']:.0f} % of the time vs {100 * row['success_without']:.0f} % without: "
            f"{pts} ({100 * confidence:.0f} % interval), q = {fmt_number(row['q_value'], 3)}")


# ---------------------------------------------------------------------------------------------------- compare
def compare_patterns(a: PathSequences, b: PathSequences, settings: CandidateSettings | None = None, *,
                     confidence: float = 0.95, labels: tuple[str, str] = ("A", "B")) -> dict[str, Any]:
    """Which patterns changed between corpus A and corpus B.

    The candidates are enumerated on A and B together (same support rule on the union). Per pattern: its prevalence
    (share of traces containing it) in A and B with the difference B − A, and its success-with rate in A and B with
    the difference B − A — each with a Newcombe interval (effective sizes when tasks repeat within a corpus) and a
    p-value (Fisher exact; Rao–Scott when tasks repeat). The q-values are Benjamini–Yekutieli over both families of
    tests together (2 per pattern). Rows ordered by the smaller of the two q-values."""
    cfg = settings or CandidateSettings()
    a_c = a.canonical()
    b_c = b.canonical()

    def tag(s: PathSequences, k: int) -> PathSequences:  # ids prefixed: a corpus compared with itself stays distinct
        return PathSequences(s.codes, s.errors, s.offsets, s.success,
                             tuple(None if t is None else f"{k}/{t}" for t in s.tasks),
                             tuple(f"{k}/{i}" for i in s.trace_ids), s.state_names, s.left_out)

    both = merge_sequences(tag(a_c, 0), tag(b_c, 1))
    cand = enumerate_candidates(both, cfg)
    na, nb = a_c.n_traces, b_c.n_traces
    X = cand.presence
    Xa, Xb = sp.csc_matrix(X[:na]), sp.csc_matrix(X[na:])
    z = z_of(confidence)
    ta, nta, rep_a = task_codes(a_c)
    tb, ntb, rep_b = task_codes(b_c)
    clustered = rep_a or rep_b
    # Prevalence: response = contains the pattern; groups = the corpora (every trace).
    prev_a = np.asarray(Xa.sum(axis=0)).ravel().astype(float)
    prev_b = np.asarray(Xb.sum(axis=0)).ravel().astype(float)
    deff_pa = _presence_deff(Xa, ta, nta, prev_a) if rep_a else np.ones_like(prev_a)
    deff_pb = _presence_deff(Xb, tb, ntb, prev_b) if rep_b else np.ones_like(prev_b)
    # Success with the pattern: response = success; groups = traces with the pattern in A, in B.
    ya, yb = a_c.success.astype(float), b_c.success.astype(float)
    swa = np.asarray(Xa.T @ ya).ravel()
    swb = np.asarray(Xb.T @ yb).ravel()
    deff_sa = design_effect(swa, prev_a, cluster_sums(Xa, a_c.success, ta, nta)[0]) if rep_a else np.ones_like(swa)
    deff_sb = design_effect(swb, prev_b, cluster_sums(Xb, b_c.success, tb, ntb)[0]) if rep_b else np.ones_like(swb)
    nA = np.full(prev_a.size, float(na))
    nB = np.full(prev_b.size, float(nb))
    dp, dp_lo, dp_hi = newcombe(prev_b / deff_pb, nB / deff_pb, prev_a / deff_pa, nA / deff_pa, z)
    eb, ea = prev_b / deff_sb, prev_a / deff_sa
    ds, ds_lo, ds_hi = newcombe(swb / np.maximum(prev_b, 1) * eb, eb, swa / np.maximum(prev_a, 1) * ea, ea, z)
    if clustered:
        p_prev = rao_scott_p(prev_b, nB, prev_a, nA, np.maximum(deff_pa, deff_pb))
        p_succ = rao_scott_p(swb, prev_b, swa, prev_a, np.maximum(deff_sa, deff_sb))
    else:
        p_prev = _fisher_groups(prev_b, nB, prev_a, nA)
        p_succ = _fisher_groups(swb, prev_b, swa, prev_a)
    # Success-with is undefined where a corpus has no trace with the pattern: that test is not made.
    defined = (prev_a > 0) & (prev_b > 0)
    p_succ = np.where(defined, p_succ, np.nan)
    allp = np.concatenate([p_prev, p_succ[defined]])
    allq = by_qvalues(allp)
    q_prev = allq[: p_prev.size]
    q_succ = np.full(p_succ.size, np.nan)
    q_succ[defined] = allq[p_prev.size:]

    def num(x: float) -> float | None:
        return None if not np.isfinite(x) else float(x)

    rows: list[dict[str, Any]] = []
    for j, pat in enumerate(cand.patterns):
        rows.append({
            "pattern": pat.text, "kind": pat.kind, "states": list(pat.states),
            "share": {labels[0]: float(prev_a[j] / max(1, na)), labels[1]: float(prev_b[j] / max(1, nb))},
            "prevalence_change": {"point": float(dp[j]), "lower": float(dp_lo[j]), "upper": float(dp_hi[j]),
                                  "p_value": float(p_prev[j]), "q_value": float(q_prev[j])},
            "success_with": {labels[0]: num(swa[j] / prev_a[j]) if prev_a[j] else None,
                             labels[1]: num(swb[j] / prev_b[j]) if prev_b[j] else None},
            "success_with_change": ({"point": float(ds[j]), "lower": float(ds_lo[j]), "upper": float(ds_hi[j]),
                                     "p_value": float(p_succ[j]), "q_value": float(q_succ[j])} if defined[j]
                                    else None),
            "aliases": [x.text for x in cand.aliases[j]]})
    rows.sort(key=_change_key)
    return {"kind": COMPARE_KIND, "schema_version": PATHS_SCHEMA_VERSION, "labels": list(labels),
            "n_traces": {labels[0]: na, labels[1]: nb}, "n_candidates": cand.n_candidates,
            "min_support": cand.min_support, "clustered_by_task": clustered, "confidence": confidence,
            "method": method_doc(clustered) | {"q_value": f"{FDR_METHOD} over the prevalence and success-with tests "
                                                          "of all candidates together"},
            "settings": cfg.to_dict(),
            "n_changed": sum(1 for r in rows if _change_key(r)[0] < 0.05),
            "patterns": rows}


def _change_key(row: dict[str, Any]) -> tuple[float, str]:
    """Rows of a comparison, most credible change first: the smaller of the two q-values, then the pattern."""
    success = row["success_with_change"]
    return min(row["prevalence_change"]["q_value"], 1.0 if success is None else success["q_value"]), row["pattern"]


def _presence_deff(X: sp.csc_matrix, tcodes: NDArray[np.int64], n_tasks: int, prev: NDArray[np.float64]
                   ) -> NDArray[np.float64]:
    """Design effect of a corpus's share of traces containing each pattern, clustered by task."""
    n = X.shape[0]
    G = sp.csr_matrix((np.ones(n), (tcodes, np.arange(n))), shape=(n_tasks, n))
    b = (G @ X.astype(float)).tocsc()
    nt = np.asarray(G.sum(axis=1)).ravel()
    sums = ClusterSums(aa=np.full(prev.size, float(nt @ nt)), ab=np.asarray(nt @ b).ravel(),
                       bb=np.asarray(b.multiply(b).sum(axis=0)).ravel(), tasks=np.full(prev.size, float(n_tasks)))
    return design_effect(prev, np.full(prev.size, float(n)), sums)


def _fisher_groups(s1: NDArray[np.float64], n1: NDArray[np.float64], s0: NDArray[np.float64],
                   n0: NDArray[np.float64]) -> NDArray[np.float64]:
    """Fisher exact p of group 1 vs group 0 tables whose margins differ by candidate (grouped by margins)."""
    out = np.ones(s1.size)
    N = (n1 + n0).astype(np.int64)
    K = (s1 + s0).astype(np.int64)
    keys = np.stack([N, K], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    for g, (NN, KK) in enumerate(uniq):  # one vectorised call per distinct margin pair
        idx = np.flatnonzero(inv == g)
        out[idx] = fisher_two_sided(int(NN), int(KK), n1[idx].astype(np.int64), s1[idx].astype(np.int64))
    return out


__all__ = ["PathsResult", "Pattern", "compare_patterns", "find_patterns", "finding_sentence", "top_finding"]
