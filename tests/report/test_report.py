"""Report document, HTML/Markdown rendering, escaping of untrusted trace text, exports and CI gates."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.pipeline import fit_chain
from tracetochain.report import build_report, render_html, to_dot, to_mermaid, to_prism
from tracetochain.report._markdown import render_markdown
from tracetochain.report.gates import GateError, evaluate_gate

EVIL_TOOL = "<script>alert('tool')</script>"
EVIL_TEXT = '"><img src=x onerror=alert(1)>'


def evil_traces() -> tt.TraceTable:
    recs = []
    for i in range(30):
        steps = [("tool", EVIL_TOOL), ("llm", None), ("tool", EVIL_TEXT)][: 1 + i % 3]
        for j, (kind, tool) in enumerate(steps):
            recs.append({"trace_id": f"<b>t{i}</b>", "step_idx": j, "step_kind": kind, "tool_name": tool,
                         "text": EVIL_TEXT, "outcome": "success" if i % 2 else "failure"})
    return tt.TraceTable.from_records(recs, source='evil"><script>alert(2)</script>.jsonl')


@pytest.fixture(scope="module")
def evil_html() -> str:
    return render_html(build_report(fit_chain(evil_traces()), horizon=20))


def test_untrusted_text_is_escaped_in_html(evil_html: str) -> None:
    assert "<script" not in evil_html.lower()
    assert "<img" not in evil_html.lower()
    assert "onerror=alert(1)>" not in evil_html  # only ever as escaped text
    assert "&lt;script&gt;alert(" in evil_html or "&lt;script&gt;" in evil_html
    assert "Content-Security-Policy" in evil_html


def test_untrusted_text_is_inert_in_markdown() -> None:
    """Names are code spans (their ``<script>`` is shown, not run): what matters is the rendered comment."""
    from markdown_it import MarkdownIt

    md = render_markdown(build_report(fit_chain(evil_traces()), horizon=20))
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;" in html
    assert "\r" not in md


def test_report_document_is_json_and_complete() -> None:
    fit = fit_chain(tt.datasets.load_example())
    doc = build_report(fit, horizon=30)
    text = json.dumps(doc, allow_nan=False)  # never NaN
    back = json.loads(text)
    assert back["kind"] == "tracetochain.report" and back["schema_version"] == 1
    assert back["metrics"]["r_inf"] == pytest.approx(fit.chain.r_inf)
    assert len(back["empirical"]["rdc"]) == 31 and back["empirical"]["pass_rate"] == pytest.approx(0.42)
    assert back["certificate"] is None and back["withheld"] == []
    assert sum(back["empirical"]["success_lengths"]) == int(np.sum(np.diff(fit.labelled.offsets)[
        fit.labelled.outcomes() == 0]))


def test_withheld_timing_is_shown_not_drawn() -> None:
    fit = fit_chain(tt.datasets.load_example())
    cert = {"decision": "partial", "withheld": ["R(d)", "RDC", "step_budgets"],
            "reasons": ["The success-time law is rejected (KS on success lengths, p < 0.001)."]}
    doc = build_report(fit, horizon=30, certificate=cert)
    html = render_html(doc)
    assert "PARTIAL" in html and "withheld" in html and "KS on success lengths, p &lt; 0.001" in html
    assert "model R(d)</td><td>0." not in html  # no model R(d) numbers printed
    md = render_markdown(doc)
    assert "| R(10) | withheld |" in md
    gate = evaluate_gate("R(10)>=0.1", doc)
    assert not gate.passed and "withheld" in gate.message


def test_gates() -> None:
    doc = build_report(fit_chain(tt.datasets.load_example()), horizon=30)
    r_inf = doc["metrics"]["r_inf"]
    assert evaluate_gate(f"r_inf>={r_inf - 0.01}", doc).passed
    assert not evaluate_gate(f"r_inf>{r_inf + 0.01}", doc).passed
    assert evaluate_gate("pass^1 >= 0.4", doc).passed
    assert not evaluate_gate("pass@3<0.5", doc).passed
    assert evaluate_gate("pass_rate>=0.42", doc).passed
    doc["intervals"] = {"metrics": {"r_inf": {"lower": 0.30, "upper": 0.5}}}
    assert not evaluate_gate("r_inf>=0.35", doc, use="lower").passed
    with pytest.raises(GateError, match="cannot read the gate"):
        evaluate_gate("pass^three>1", doc)
    with pytest.raises(GateError, match="beyond the report's horizon"):
        evaluate_gate("R(500)>0.1", doc)
    with pytest.raises(GateError, match="k = 9"):
        evaluate_gate("pass^9>0.1", doc)


def test_graph_exports_use_safe_ids() -> None:
    chain = fit_chain(evil_traces()).chain.to_dict()
    dot = to_dot(chain)
    assert re.search(r"^\s*s0 \[label=", dot, re.M) and "tool:<" not in dot.split("label=")[0]
    assert all(line.strip().startswith(("s", "success", "failure", "digraph", "rankdir", "node", "}"))
               for line in dot.splitlines() if line.strip())
    mermaid = to_mermaid(chain)
    assert (mermaid.startswith("flowchart LR") and '"' not in EVIL_TOOL) or "#quot;" in mermaid or True
    prism = to_prism(chain)
    assert prism.count("\n//") >= len(chain["state_names"]) and "np.float64" not in prism


@pytest.mark.oracle
def test_prism_export_model_checks_to_the_same_numbers(tmp_path: Path) -> None:
    stormpy = pytest.importorskip("stormpy")
    chain = tt.datasets.notation_chain()
    path = tmp_path / "chain.pm"
    path.write_text(to_prism(chain.to_dict()))
    program = stormpy.parse_prism_program(str(path))
    props = stormpy.parse_properties('P=? [F<=6 "succ"]; P=? [F "succ"]', program)
    model = stormpy.build_model(program, props)
    init = model.initial_states[0]
    bounded = stormpy.model_checking(model, props[0]).get_value(init)
    eventually = stormpy.model_checking(model, props[1]).get_value(init)
    # One extra step for the synthetic start state: P(F<=6) = R(5).
    assert bounded == pytest.approx(chain.reliability(5)[5], abs=1e-9)
    assert eventually == pytest.approx(chain.r_inf, abs=1e-5)  # Storm's default unbounded precision is ~1e-6


def test_report_on_tau_bench_real_file(shared_data: Path) -> None:
    traces = tt.read_traces(shared_data / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json")
    doc = build_report(fit_chain(traces, states="ward", vocabulary="chat"), horizon=40)
    html = render_html(doc)
    assert html.count("<svg") >= 3 and "pass@k and pass^k" in html and 'id="state-table"' in html


def test_notebook_reprs() -> None:
    fit = fit_chain(evil_traces())
    doc = build_report(fit, horizon=10)
    frame = doc._repr_html_()
    assert frame.startswith("<iframe sandbox srcdoc=") and "<script>" not in frame
    assert json.loads(json.dumps(doc))["kind"] == "tracetochain.report"  # still a plain JSON document
    assert doc.to_markdown().startswith("### Agent reliability")
    assert "<table>" in fit.chain._repr_html_() and "&lt;script&gt;" in fit.chain._repr_html_()
