"""One analysis for every command and every engine: traces → states → chain → certificate → intervals.

* :func:`analyze` → :class:`AnalysisResult` — the whole pipeline, in memory or partition by partition;
* :func:`fit_chain` — ``analyze`` without the audit, as a :class:`~tracetochain.pipeline.FitResult` (the same states);
* :class:`AuditSettings` — how the certificate is computed; :func:`audit` — the certificate alone;
* :func:`homogeneity_test` — do two labelled trace sets share one chain (``tracetochain.audit`` re-exports both);
* :class:`CorpusSummary` / :func:`summarize_traces` / :func:`merge_summaries` — the sufficient statistics every
  statistic is computed from (the in-memory corpus is one partition);
* :func:`analyze_paths` / :func:`compare_paths` — which path patterns go with success or failure, and which changed
  between two corpora (:mod:`tracetochain.paths`).
"""

from tracetochain.analysis._analyze import AnalysisResult, MemoryPartition, analyze
from tracetochain.analysis._audit import AuditSettings, audit_summary
from tracetochain.analysis._entry_points import audit, homogeneity_test
from tracetochain.analysis._fit import fit_chain
from tracetochain.analysis._intervals import design_effect, summary_ensemble
from tracetochain.analysis._paths import analyze_paths, compare_paths
from tracetochain.analysis._summary import CorpusSummary, SummarySpec, merge_summaries, summarize_traces

__all__ = ["AnalysisResult", "AuditSettings", "CorpusSummary", "MemoryPartition", "SummarySpec", "analyze",
           "analyze_paths", "audit", "audit_summary", "compare_paths", "design_effect", "fit_chain", "homogeneity_test",
           "merge_summaries", "summarize_traces", "summary_ensemble"]
