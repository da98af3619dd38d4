"""One analysis for every command and every engine: traces → states → chain → certificate → intervals.

* :func:`analyze` → :class:`AnalysisResult` — the whole pipeline, in memory or partition by partition;
* :class:`AuditSettings` — how the certificate is computed;
* :class:`CorpusSummary` / :func:`summarize_traces` / :func:`merge_summaries` — the sufficient statistics every
  statistic is computed from (the in-memory corpus is one partition).
"""

from tracetochain.analysis._analyze import AnalysisResult, MemoryPartition, analyze
from tracetochain.analysis._audit import AuditSettings, audit_summary
from tracetochain.analysis._intervals import design_effect, summary_ensemble
from tracetochain.analysis._summary import CorpusSummary, SummarySpec, merge_summaries, summarize_traces

__all__ = ["AnalysisResult", "AuditSettings", "CorpusSummary", "MemoryPartition", "SummarySpec", "analyze",
           "audit_summary", "design_effect", "merge_summaries", "summarize_traces", "summary_ensemble"]
