"""The built-in SVG charts that stand in for matplotlib when the ``plots`` extra is not installed."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest

import tracetochain as tt
import tracetochain.report._plots as plots
from tracetochain._optional import require
from tracetochain.analysis import analyze
from tracetochain.exceptions import TraceToChainError
from tracetochain.report import build_report, render_html
from tracetochain.report._svgplot import Chart, nice_ticks

EVIL = "<script>alert('x')</script>"


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plots, "have_matplotlib", lambda: False)


def test_nice_ticks() -> None:
    assert [round(t, 9) for t in nice_ticks(0, 1)] == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(0, 200, 5) == [0, 50, 100, 150, 200]
    assert nice_ticks(3, 3) == [3]
    assert nice_ticks(math.nan, 1) == [0.0]


def test_chart_escapes_text_skips_non_finite_values_and_is_valid_svg() -> None:
    chart = Chart(xlabel=EVIL, ylabel="y & z", title=EVIL, ylim=(0, 1))
    chart.band([0, 1, 2], [0, 0.1, math.nan], [0.2, 0.3, 0.4], color="#0969da", label=EVIL)
    chart.line([0, 1, 2], [0.1, math.inf, 0.3], color="#0969da", label="model")
    chart.step([0, 1, 2], [0, 0.5, 1.0], color="#1a7f37", label="observed")
    chart.bars([0, 1], [3, 0], color="#1a7f37")
    chart.hline(math.nan, color="#000")
    svg = chart.svg()
    assert "<script" not in svg and "&lt;script&gt;" in svg and "y &amp; z" in svg
    assert not re.search(r"\b(nan|inf)\b", svg, re.IGNORECASE)
    root = ET.fromstring(svg)  # well-formed XML
    assert root.tag.endswith("svg")
    assert chart.svg() == svg  # deterministic


def test_report_without_matplotlib_has_every_figure(no_matplotlib: None) -> None:
    traces = tt.read_traces(tt.datasets.example_path("tau_airline"))
    html = render_html(build_report(analyze(traces, audit=False, intervals=None), horizon=30))
    assert 'id="rd-plot"><svg' in html and 'id="fpt-plot"><svg' in html
    assert "matplotlib" not in html.lower()


def test_monitor_svg_without_matplotlib(no_matplotlib: None) -> None:
    windows = [{"index": i, "r_inf": 0.5, "r_inf_lower": 0.4, "r_inf_upper": 0.6, "pass_rate": 0.5,
                "alert": i == 1} for i in range(3)]
    svg = plots.monitor_svg(windows)
    ET.fromstring(svg)
    assert "drift alert" in svg and svg.count("<circle") >= 4


def test_missing_optional_dependency_names_the_extra() -> None:
    with pytest.raises(TraceToChainError, match=r"pip install 'tracetochain\[sklearn\]'"):
        require("sklearn.no_such_module_here", "the text featurizer")
