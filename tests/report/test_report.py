"""Report document, HTML/Markdown rendering, escaping of untrusted trace text, exports and CI gates."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

import tracetochain as tt
from tracetochain._outcome import OutcomeCode
from tracetochain.analysis import AnalysisResult, analyze
from tracetochain.audit import LayerResult
from tracetochain.audit._certificate import build_certificate
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


FAST = {"n_bootstrap": 19, "n_permutations": 19, "trials_permutations": 99}


def fitted(traces: tt.TraceTable, **options: object) -> AnalysisResult:
    """The chain alone (no audit, no intervals), as a report of it would show."""
    return analyze(traces, audit=False, intervals=None, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def evil_html() -> str:
    # The full analysis: the certificate's layer messages and state names carry trace text too.
    return render_html(build_report(analyze(evil_traces(), samples=50, **FAST), horizon=20))


def test_untrusted_text_is_escaped_in_html(evil_html: str) -> None:
    assert "<script" not in evil_html.lower()
    assert "<img" not in evil_html.lower()
    assert "onerror=alert(1)>" not in evil_html  # only ever as escaped text
    assert "&lt;script&gt;alert(" in evil_html or "&lt;script&gt;" in evil_html
    assert "Content-Security-Policy" in evil_html


def test_untrusted_text_is_inert_in_markdown() -> None:
    """Names are code spans (their ``<script>`` is shown, not run): what matters is the rendered comment."""
    from markdown_it import MarkdownIt

    md = render_markdown(build_report(analyze(evil_traces(), samples=50, **FAST), horizon=20))
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;" in html
    assert "\r" not in md


def test_report_document_is_json_and_complete() -> None:
    traces = tt.datasets.load_example()
    res = fitted(traces)
    doc = build_report(res, horizon=30)
    text = json.dumps(doc, allow_nan=False)  # never NaN
    back = json.loads(text)
    assert back["kind"] == "tracetochain.report" and back["schema_version"] == 2
    assert back["metrics"]["r_inf"] == pytest.approx(res.chain.r_inf)
    assert len(back["empirical"]["rdc"]) == 31 and back["empirical"]["pass_rate"] == pytest.approx(84 / 200)
    assert back["certificate"] is None and back["withheld"] == [] and back["timing_status"] == "not audited"
    # The histogram of success lengths, from the traces themselves.
    lengths = np.diff(traces.offsets)[traces.outcomes() == OutcomeCode.SUCCESS]
    counts = back["empirical"]["success_length_counts"]
    assert counts == np.bincount(lengths).tolist() and sum(counts) == 84
    # The empirical RDC: successes within d steps over all usable traces.
    assert back["empirical"]["rdc"][10] == pytest.approx(np.count_nonzero(lengths <= 10) / 200)
    assert back["settings"]["prior"] == {"kind": "episode", "strength": 1.0}


def _certificate_with(timing: str) -> tt.Certificate:
    layers = {"r_inf": LayerResult("r_inf", "pass", 0.6, "consistent", "R∞ agrees with the held-out pass rate"),
              "timing": LayerResult("timing", timing, 0.0005 if timing == "reject" else 0.5, "x",  # type: ignore[arg-type]
                                    "The success-time law is rejected (KS on success lengths, p < 0.001)."
                                    if timing == "reject" else "the success-time law fits"),
              "order": LayerResult("order", "pass", 0.5, "consistent", "first order"),
              "trials": LayerResult("trials", "pass", 0.3, "consistent", "independent trials")}
    return build_certificate(layers, level=0.05)


def test_withheld_timing_is_shown_not_drawn() -> None:
    res = fitted(tt.datasets.load_example())
    doc = build_report(dataclasses.replace(res, certificate=_certificate_with("reject")), horizon=30)
    assert doc["output_status"]["R(d)"] == "withheld" and doc["output_status"]["R_inf"] == "certified"
    html = render_html(doc)
    assert "PARTIAL" in html and "withheld" in html and "KS on success lengths, p &lt; 0.001" in html
    m = doc["metrics"]
    shown = [f"{m['reliability'][10]:.3f}", f"{m['reliability'][20]:.3f}", f"{m['mean_steps']:.1f}"]
    assert not any(x in html for x in shown)  # no model R(d) or mean-steps number printed
    certified = render_html(build_report(dataclasses.replace(res, certificate=_certificate_with("pass")),
                                         horizon=30))
    assert all(x in certified for x in shown)  # … which a certified timing layer shows
    md = render_markdown(doc)
    assert "| R(10) | withheld |" in md
    gate = evaluate_gate("R(10)>=0.1", doc)
    assert not gate.passed and "withheld" in gate.message and "KS on success lengths" in gate.message
    assert evaluate_gate("r_inf>=0.4", doc).passed  # R∞ rests on the R∞ check alone


def test_gates() -> None:
    doc = build_report(fitted(tt.datasets.load_example()), horizon=30)
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
    chain = fitted(evil_traces()).chain.to_dict()
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
    doc = build_report(analyze(traces, states="ward", state_options={"vocabulary": "chat"}, samples=200, **FAST),
                       horizon=40)
    html = render_html(doc)
    assert html.count("<svg") >= 3 and "pass@k and pass^k" in html and 'id="state-table"' in html


def test_notebook_reprs() -> None:
    fit = fitted(evil_traces())
    doc = build_report(fit, horizon=10)
    frame = doc._repr_html_()
    assert frame.startswith("<iframe sandbox srcdoc=") and "<script>" not in frame
    assert json.loads(json.dumps(doc))["kind"] == "tracetochain.report"  # still a plain JSON document
    assert doc.to_markdown().startswith("### Agent reliability")
    assert "<table>" in fit.chain._repr_html_() and "&lt;script&gt;" in fit.chain._repr_html_()
