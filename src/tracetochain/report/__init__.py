"""Reports: the versioned report document (the truth) and its renderings — HTML, Markdown, graph exports.

Nothing here computes: :func:`build_report` assembles the document from an :class:`~tracetochain.analysis.
AnalysisResult`, and the renderers only format it.
"""

from tracetochain.report._document import REPORT_SCHEMA_VERSION, Report, build_report
from tracetochain.report._graph import chain_svg, to_dot, to_mermaid, to_prism
from tracetochain.report._html import render_html

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "Report",
    "build_report",
    "chain_svg",
    "render_html",
    "to_dot",
    "to_mermaid",
    "to_prism",
]
