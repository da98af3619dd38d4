"""Reports: the versioned report document (the truth) and its renderings — HTML, Markdown, graph exports."""

from tracetochain.report._document import REPORT_SCHEMA_VERSION, Report, assemble_report, build_report
from tracetochain.report._graph import chain_svg, to_dot, to_mermaid, to_prism
from tracetochain.report._html import render_html
from tracetochain.report._pipeline import make_partitioned_report, make_report

__all__ = [
           "REPORT_SCHEMA_VERSION",
           "Report",
           "assemble_report",
           "build_report",
           "chain_svg",
           "make_partitioned_report",
           "make_report",
           "render_html",
           "to_dot",
           "to_mermaid",
           "to_prism",
]
