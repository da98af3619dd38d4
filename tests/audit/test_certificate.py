"""The certificate: decision rule, outputs certified/withheld, JSON, display; SS7 replication; SWE-bench."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.audit import (
    ALL_OUTPUTS,
    ASYMPTOTIC_OUTPUTS,
    TIMING_OUTPUTS,
    OrderResult,
    OrderSettings,
    RInfCheck,
    TimingResult,
    TimingSettings,
    audit,
    certify,
    ks_paper,
    order_test,
    simulate_memory_traces,
    ss7_chain,
    trials_check,
)


def _timing(p: float | None) -> TimingResult:
    return TimingResult("calibrated", None if p is None else 0.1, p, "success", 50, 100, {},
                        undefined={} if p is not None else {"p_value": "no successful trace"})


def _order(keep: bool) -> OrderResult:
    return OrderResult("per-trace", "aic", 0.05, keep, 3, 100, 400, "obs", True, "observed", -10.0, -5.0, 4, 8,
                       28.0, 26.0, -2.0 if keep else 2.0)


def _rinf(holds: bool) -> RInfCheck:
    return RInfCheck(0.5 if holds else 0.9, 0.5, 50, 100, 0.4, 0.6, "wilson", 0.95, False)


@pytest.mark.parametrize(("p", "keep", "holds", "decision"), [
    (0.3, True, True, "accept"),
    (0.3, True, False, "accept"),
    (0.01, True, True, "partial"),
    (0.01, False, True, "partial"),
    (None, True, True, "partial"),
    (0.01, True, False, "reject"),
    (0.3, False, True, "reject"),
    (0.05, True, True, "partial"),  # p must exceed ks_level
])
def test_decision_rule(p: float | None, keep: bool, holds: bool, decision: str) -> None:
    cert = certify(_timing(p), _order(keep), _rinf(holds), l_inf=None, horizon=None, holdout=None, settings={})
    assert cert.decision == decision
    if decision == "accept":
        assert cert.certified == ALL_OUTPUTS and cert.withheld == ()
    elif decision == "partial":
        assert cert.certified == ASYMPTOTIC_OUTPUTS and cert.withheld == TIMING_OUTPUTS
    else:
        assert cert.certified == () and cert.withheld == ALL_OUTPUTS
    assert set(cert.certified) | set(cert.withheld) == set(ALL_OUTPUTS)


def test_partial_when_any_covers_an_order_rejection() -> None:
    cert = certify(_timing(0.3), _order(False), _rinf(True), partial_when="any", l_inf=None, horizon=None,
                   holdout=None, settings={})
    assert cert.decision == "partial" and "R(d)" in cert.withheld
    with pytest.raises(ValueError):
        certify(_timing(0.3), _order(True), _rinf(True), partial_when="never",  # type: ignore[arg-type]
                l_inf=None, horizon=None, holdout=None, settings={})


def test_flagged_trials_withhold_the_iid_metrics() -> None:
    recs = []
    for t in range(30):
        for k in range(4):
            out = "success" if t < 15 else "failure"
            recs.append({"trace_id": f"{t}/{k}", "task_id": f"t{t}", "trial": k, "step_idx": 0, "state": "a",
                         "outcome": out})
    traces = tt.TraceTable.from_records(recs)
    chain = tt.ChainEstimator().fit(traces).fetch_model()
    trials = trials_check(traces, chain, seed=0)
    assert trials.flagged
    cert = certify(_timing(0.3), _order(True), _rinf(True), trials=trials, l_inf=None, horizon=None, holdout=None,
                   settings={})
    assert cert.decision == "accept"
    assert "pass^k" in cert.withheld and "pass@k" in cert.withheld and "R_inf" in cert.certified
    assert "not exchangeable" in cert.verdict()


def test_certificate_document_display_and_statistics() -> None:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=1)
    cert = audit(traces, n_bootstrap=49, n_permutations=49)
    doc = cert.to_dict()
    text = json.dumps(doc, allow_nan=False)
    assert doc["kind"] == "tracetochain.certificate" and doc["schema_version"] == 1
    assert doc["decision"] == cert.decision == "accept"
    for key in ("p_ks", "D", "delta_aic", "delta_bic", "g2", "p_order_permutation", "l_inf", "r_inf", "pass_rate"):
        assert key in doc["statistics"]
    assert doc["statistics"]["p_ks"] == cert.p_ks and cert.D is not None and cert.g2 is not None
    assert doc["settings"]["timing"]["n_bootstrap"] == 49 and doc["settings"]["seed"] == 0
    assert doc["holdout"]["n_train"] == 150 and "fit_indices" not in doc["holdout"]
    assert len(doc["rdc"]["model"]) == doc["rdc"]["horizon"] + 1
    assert "Q" not in doc["chain"] and "Q" in cert.to_dict(include_chain=True)["chain"]
    assert "NaN" not in text
    s = str(cert)
    assert s.startswith("Audit certificate: ACCEPT") and "Certified:" in s
    assert "ACCEPT" in repr(cert) or "accept" in repr(cert)
    assert cert.chain is not None and cert.chain.n_states == 3


def test_html_escapes_state_names() -> None:
    recs = [{"trace_id": f"t{i}", "step_idx": j, "state": "<b>x</b>" if j % 2 else "y&z",
             "outcome": "success" if i % 2 else "failure"} for i in range(60) for j in range(1 + i % 4)]
    cert = audit(tt.TraceTable.from_records(recs), holdout=False, n_bootstrap=19, n_permutations=19)
    out = cert._repr_html_()
    assert "<b>x</b>" not in out and out.startswith("<div>")


def test_audit_rejects_unknown_options() -> None:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 50, seed=1)
    with pytest.raises(TypeError, match="unexpected"):
        audit(traces, n_bootstraps=10)
    with pytest.raises(ValueError):
        TimingSettings(level=1.5)
    with pytest.raises(ValueError):
        OrderSettings(mode="artifact", criterion="bic")


# ------------------------------------------------------------------------------------------------ SS7
def test_ss7_markov_ground_truth_is_accepted() -> None:
    """SS7(A), small: 10 corpora × 300 traces from the order-1 ground truth; the full audit accepts each."""
    chain = ss7_chain()
    for s in range(10):
        traces = simulate_memory_traces(chain, 300, memory=0.0, seed=7000 + s)
        cert = audit(traces, holdout=False, n_bootstrap=99, n_permutations=99, seed=s)
        assert cert.decision == "accept", (s, cert)


def test_ss7_memory_is_rejected_by_the_order_layer_every_time() -> None:
    """SS7(B), small: memory 0.6 (paper-spec §6.7 B). The order layer rejects all 10 corpora (per-trace ΔAIC,
    permutation G² and the artifact's ΔAIC alike); the paper's success-time KS layer alone misses most of them
    (the paper: 0 of 15 rejected; here 1 of 10) and the certificate never accepts."""
    chain = ss7_chain()
    ks_retains = 0
    for s in range(10):
        traces = simulate_memory_traces(chain, 300, memory=0.6, seed=7000 + s)
        cert = audit(traces, holdout=False, n_bootstrap=99, n_permutations=99, seed=s, trials=False)
        assert not cert.order.keeps_order1 and cert.delta_aic > 500  # type: ignore[operator]
        assert cert.order.p_permutation == pytest.approx(0.01)
        assert order_test(traces, cert.chain, mode="artifact").delta_aic > 500  # type: ignore[operator]
        assert cert.decision != "accept"
        ks_retains += ks_paper(cert.chain, traces, seed=s).p_value > 0.05  # type: ignore[arg-type, operator]
    assert ks_retains >= 8


@pytest.mark.slow
def test_ss7_full_size() -> None:
    """SS7 at full size: (A) 30 Markov corpora, (B) 15 memory-0.6 corpora, 300 traces each, B = 199."""
    chain = ss7_chain()
    accepted = sum(audit(simulate_memory_traces(chain, 300, memory=0.0, seed=100 + s), holdout=False,
                         n_bootstrap=199, n_permutations=199, seed=s).decision == "accept" for s in range(30))
    assert accepted >= 27  # a calibrated 5% KS and a permutation-backed order layer: ~ 28.5 expected
    for s in range(15):
        traces = simulate_memory_traces(chain, 300, memory=0.6, seed=200 + s)
        cert = audit(traces, holdout=False, n_bootstrap=199, n_permutations=199, seed=s, trials=False)
        assert not cert.order.keeps_order1 and cert.decision != "accept"


@pytest.mark.slow
def test_calibration_small() -> None:
    """Small version of benchmarks/audit_calibration.py: 80 order-1 corpora (SS7 chain, 300 traces, B = 99):
    the calibrated KS layer and the permutation order test each reject at most 10% at level 5% (expected 4);
    40 memory-0.6 corpora: the permutation order test rejects them all."""
    chain = ss7_chain()
    ks_rej = perm_rej = 0
    for s in range(80):
        traces = simulate_memory_traces(chain, 300, memory=0.0, seed=10_000 + s)
        fit = tt.ChainEstimator().fit(traces).fetch_model()
        from tracetochain.audit import ks_calibrated

        ks_rej += bool(ks_calibrated(fit, traces, n_bootstrap=99, seed=s).rejects(0.05))
        perm_rej += order_test(traces, fit, n_permutations=99, seed=s).p_permutation <= 0.05  # type: ignore[operator]
    assert ks_rej <= 8 and perm_rej <= 8
    assert ks_rej + perm_rej >= 1  # a test that never rejects under H0 would be suspicious too
    power = sum(order_test(simulate_memory_traces(chain, 300, memory=0.6, seed=20_000 + s), chain,
                           n_permutations=99, seed=s).p_permutation <= 0.05 for s in range(40))  # type: ignore[operator]
    assert power == 40


# ------------------------------------------------------------------------------------------------ SWE-bench
def test_swebench_certificate_rejects_timing_and_withholds(shared_data: Path) -> None:
    """The SWE-bench artifact corpus with the shell categories as states: the timing layer rejects (as SS10/SS14
    found), so R(d), the RDC, horizons and step budgets are withheld — and the JSON says so."""
    traces = tt.read_traces(shared_data / "tracetochain-artifact" / "swebench_real" / "corpus.json")
    cert = audit(traces, states="categorical", state_options={"vocabulary": "shell"}, seed=20260606,
                 n_bootstrap=99, n_permutations=99)
    assert cert.timing.rejects(0.05) and cert.p_ks == pytest.approx(0.01)
    assert cert.D > 0.25  # type: ignore[operator]
    assert cert.decision in ("partial", "reject")
    doc = json.loads(cert.to_json())
    for name in ("R(d)", "RDC", "horizons", "step_budgets"):
        assert name in doc["withheld"]
    assert not doc["statistics"]["keeps_order1"]  # real traces also carry history
    assert doc["statistics"]["l_inf"] > 0.15
    if cert.decision == "partial":
        assert doc["certified"] == ["R_inf", "pass@k", "pass^k", "delta_R_inf"]
    assert doc["trials"]["applicable"] is False  # one trial per instance
    # The paper's own KS mode rejects as well.
    paper = audit(traces, states="categorical", state_options={"vocabulary": "shell"}, seed=20260606,
                  timing=TimingSettings(mode="paper", n_model=20_000), n_permutations=0, trials=False)
    assert paper.p_ks < 1e-6 and "R(d)" in paper.withheld  # type: ignore[operator]
    assert np.isfinite(paper.r_inf)
