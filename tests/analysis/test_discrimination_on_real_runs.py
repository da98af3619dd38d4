"""On the shared real corpora (SWE-bench mini-swe-agent, the artifact's SWE-bench runs, τ-bench, τ²-bench): the
held-out discrimination is reported with an interval, and no report's first sentence names a state whose failure
share only restates the failure rate (every SWE-bench run ends in `submit`, the verdict applied after it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_analysis_on_real_runs import CORPORA, FAST

import tracetochain as tt
from tracetochain.analysis import analyze
from tracetochain.analysis._headline import MIN_GAP, MIN_REACH, reach_probabilities
from tracetochain.report import build_report
from tracetochain.report._markdown import render_markdown


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CORPORA))
def test_discrimination_and_headline_on_real_runs(shared_data: Path, name: str) -> None:
    path, options = CORPORA[name]
    if not (shared_data / path).exists():
        pytest.skip(f"{path} is not in the shared data")
    res = analyze(tt.read_traces(shared_data / path), **options, **FAST)
    d = res.discrimination
    assert d.available, d.reason
    for q in (d.auc, d.log_loss_gain):
        assert q["lower"] is not None and q["lower"] <= q["point"] <= q["upper"]
    assert [p.fraction for p in d.by_prefix] == [0.25, 0.5, 0.75]
    doc = build_report(res)
    lead = doc["headline"]
    first = [line for line in render_markdown(doc).splitlines() if line.strip()][1]
    assert not first.startswith("Most failures leave from")
    assert "Most failures leave from" not in lead["sentence"]
    state = lead["evidence"].get("state")
    if state is not None:  # a named state separates: reached often, and its runs' success differs from R∞
        i = res.chain.state_names.index(state)
        assert reach_probabilities(res.chain)[i] >= MIN_REACH
        assert abs(res.chain.success_probabilities[i] - res.chain.r_inf) >= MIN_GAP
    if name == "mini-swe-agent":  # every run ends in SUBMIT: nothing in the path separates the outcomes
        assert d.informative is False and lead["kind"] == "no_separation"
        assert res.certificate.status("attribution") == "uninformative"
        assert np.isclose(d.auc["point"], 0.5)
