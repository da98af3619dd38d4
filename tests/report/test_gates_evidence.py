"""CI gates never pass on evidence that is not there: withheld or (for lack of data) untested outputs fail."""

from __future__ import annotations

import tracetochain as tt
from tracetochain.analysis import analyze
from tracetochain.datasets import ss7_chain
from tracetochain.report import build_report
from tracetochain.report.gates import evaluate_gate


def test_gates_on_four_traces_fail_and_say_how_much_data_is_needed() -> None:
    traces = tt.datasets.simulate_traces(ss7_chain(), 4, seed=2)
    doc = build_report(analyze(traces, n_bootstrap=19, n_permutations=19, samples=200), horizon=20)
    assert doc["certificate"]["decision"] == "insufficient"
    for gate in ("r_inf>=0.0", "R(10)>=0.0", "pass^3>=0.0"):
        res = evaluate_gate(gate, doc)
        assert not res.passed and "not testable on this little data" in res.message, res.message
        assert "usable traces" in res.message
    assert evaluate_gate("pass_rate>=0.0", doc).passed  # an observed quantity needs no model


def test_gates_pass_on_enough_first_order_data() -> None:
    traces = tt.datasets.simulate_traces(ss7_chain(), 300, seed=3)
    doc = build_report(analyze(traces, n_bootstrap=49, n_permutations=49, samples=300), horizon=20)
    assert doc["certificate"]["decision"] == "accept"
    assert evaluate_gate("r_inf>=0.5", doc).passed and evaluate_gate("R(10)>=0.3", doc).passed
    # No task was tried twice: pass^k is untested but only assumes independent trials — the gate evaluates.
    assert doc["output_status"]["pass^k"] == "untested"
    assert evaluate_gate("pass^3>=0.1", doc).passed
