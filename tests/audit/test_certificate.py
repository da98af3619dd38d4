"""The certificate: per-output statuses, the family rule over the layers that apply, monotonicity, insufficient
evidence, display."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.analysis import analyze
from tracetochain.audit import LAYERS, OUTPUTS, LayerResult, audit
from tracetochain.audit._certificate import build_certificate
from tracetochain.datasets import simulate_memory_traces, ss7_chain

STATUS = {"certified": 2, "untested": 1, "withheld": 0}


def _layers(spec: dict[str, tuple[str, float | None]]) -> dict[str, LayerResult]:
    return {name: LayerResult(name, status, p, "x", "because") for name, (status, p) in spec.items()}  # type: ignore[arg-type]


def _certify(spec: dict[str, tuple[str, float | None]]) -> tt.Certificate:
    return build_certificate(_layers(spec), level=0.05)


ALL_PASS = {"r_inf": ("pass", 0.5), "timing": ("pass", 0.4), "order": ("pass", 0.3), "trials": ("pass", 0.6)}


def test_every_output_certified_when_every_layer_passes() -> None:
    cert = _certify(ALL_PASS)
    assert cert.decision == "accept"
    assert set(cert.certified) == set(OUTPUTS) and not cert.withheld and not cert.untested


def test_timing_rejection_withholds_only_what_rests_on_timing() -> None:
    cert = _certify({**ALL_PASS, "timing": ("reject", 0.001)})
    assert cert.decision == "partial"
    assert cert.status("R_inf") == "certified" and cert.status("pass^k") == "certified"
    assert cert.status("whatif") == "certified"
    assert {o for o in OUTPUTS if cert.status(o) == "withheld"} == {o for o, ls in OUTPUTS.items() if "timing" in ls}
    assert cert.outputs["R(d)"].because == ("timing",)


def test_order_rejection_alone_keeps_r_inf_and_timing() -> None:
    """The old rule withheld R∞ when timing passed and the order layer rejected: a non-monotone certificate."""
    cert = _certify({**ALL_PASS, "order": ("reject", 0.001)})
    assert cert.decision == "partial"
    assert cert.status("R_inf") == "certified" and cert.status("R(d)") == "certified"
    assert cert.status("whatif") == "withheld" and cert.status("sensitivity") == "withheld"


def test_r_inf_rejection_withholds_everything() -> None:
    cert = _certify({**ALL_PASS, "r_inf": ("reject", 1e-6)})
    assert cert.decision == "reject"
    assert set(cert.withheld) == set(OUTPUTS)


def test_untestable_trials_leave_pass_k_untested_but_accept() -> None:
    cert = _certify({**ALL_PASS, "trials": ("not_applicable", None)})
    assert cert.decision == "accept"
    assert cert.status("pass^k") == "untested" and cert.status("pass@k") == "untested"
    assert cert.status("pass^1") == "certified"


def test_insufficient_layer_gives_insufficient_evidence() -> None:
    cert = _certify({**ALL_PASS, "timing": ("insufficient", None)})
    assert cert.decision == "insufficient"
    assert cert.status("R(d)") == "untested" and cert.status("R_inf") == "certified"


def test_each_testing_layer_at_level_over_the_family_size() -> None:
    # Alone at its nominal level 0.03 would reject; tested with three other layers it needs ≤ 0.0125.
    cert = _certify({**ALL_PASS, "timing": ("reject", 0.03)})
    assert cert.layers["timing"].status == "pass"
    assert cert.layers["timing"].p_adjusted == pytest.approx(0.12)
    cert = _certify({**ALL_PASS, "timing": ("reject", 0.01)})
    assert cert.layers["timing"].status == "reject"


def test_evidence_against_order_does_not_withhold_r_inf() -> None:
    """Holm's step-down gave a rejected layer's share of the level to the others: with order at 0.001, R∞ at 0.03
    was withheld (it needs ≤ 0.0125 alone); with order at 0.5 it was certified. R∞ does not rest on order."""
    calm = _certify({**ALL_PASS, "r_inf": ("pass", 0.014), "order": ("pass", 0.5)})
    loud = _certify({**ALL_PASS, "r_inf": ("pass", 0.014), "order": ("reject", 0.001), "timing": ("reject", 0.001)})
    assert calm.status("R_inf") == loud.status("R_inf") == "certified"
    assert loud.status("whatif") == "withheld" and loud.status("R(d)") == "withheld"


def test_a_layer_that_does_not_apply_leaves_the_family() -> None:
    """Counted as p = 1 before: with trials not applicable, timing at 0.015 needed ≤ 0.0125 of a family of four."""
    cert = _certify({**ALL_PASS, "trials": ("not_applicable", None), "timing": ("pass", 0.015)})
    assert cert.layers["timing"].status == "reject" and cert.layers["timing"].p_adjusted == pytest.approx(0.045)
    assert cert.layers["trials"].p_adjusted is None
    cert = _certify({**ALL_PASS, "trials": ("not_applicable", None), "order": ("not_run", None),
                     "timing": ("pass", 0.024)})
    assert cert.layers["timing"].status == "reject" and cert.status("R(d)") == "withheld"
    # A layer that applies but lacked the data stays in the family (it could test with more traces).
    cert = _certify({**ALL_PASS, "trials": ("insufficient", None), "timing": ("pass", 0.015)})
    assert cert.layers["timing"].status == "pass" and cert.status("pass^k") == "untested"


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(LAYERS), st.tuples(st.sampled_from(["pass", "insufficient", "not_applicable"]),
                                                         st.floats(0.0, 1.0)), min_size=4, max_size=4),
       st.sampled_from(LAYERS), st.floats(0.0, 1.0))
def test_lowering_a_p_value_only_moves_outputs_that_rest_on_it(spec: dict[str, tuple[str, float]], layer: str,
                                                              lower: float) -> None:
    """The documented property: evidence against one assumption never changes the status of an output that does not
    rest on it (and, monotone, never improves one that does)."""
    base = {k: ((s, p) if s == "pass" else (s, None)) for k, (s, p) in spec.items()}
    s, p = base[layer]
    if s != "pass":
        return
    before = _certify(base)
    after = _certify({**base, layer: ("pass", min(p, lower))})  # type: ignore[type-var]
    for o, rests in OUTPUTS.items():
        if layer not in rests:
            assert after.status(o) == before.status(o), (o, layer, before.status(o), after.status(o))
        else:
            assert STATUS[after.status(o)] <= STATUS[before.status(o)]


_statuses = st.sampled_from(["pass", "insufficient", "not_applicable", "not_run"])
_p = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(LAYERS), st.tuples(_statuses, _p), min_size=4, max_size=4),
       st.sampled_from(LAYERS), _p)
def test_more_evidence_against_the_model_never_certifies_more(spec: dict[str, tuple[str, float]], layer: str,
                                                              lower: float) -> None:
    """Monotonicity: lower one layer's p-value, or add a failing layer where there was none (a layer that lacked the
    data now tests and rejects at the family's strictest threshold); no output's status may improve (withheld <
    untested < certified)."""
    base = {k: ((s, p) if s == "pass" else (s, None)) for k, (s, p) in spec.items()}
    before = _certify(base)
    s, p = base[layer]
    worse = dict(base)
    if s == "pass":
        worse[layer] = ("pass", min(p if p is not None else 1.0, lower))
    elif s == "insufficient":
        worse[layer] = ("reject", lower * 0.05 / len(LAYERS))
    else:
        return  # whether a layer applies is a matter of the corpus's design, not evidence
    after = _certify(worse)
    for o in OUTPUTS:
        assert STATUS[after.status(o)] <= STATUS[before.status(o)], (o, before.status(o), after.status(o))


@pytest.mark.slow
def test_audit_accepts_first_order_data_and_says_where_memory_is() -> None:
    traces = tt.datasets.simulate_traces(ss7_chain(), 400, seed=3)
    cert = audit(traces, n_bootstrap=99, n_permutations=99)
    assert cert.decision == "accept", str(cert)
    memory = simulate_memory_traces(ss7_chain(), 800, memory=0.5, seed=4)
    cert = audit(memory, n_bootstrap=49, n_permutations=99)
    assert cert.layers["order"].status == "reject"
    assert cert.status("whatif") == "withheld" and cert.status("R_inf") == "certified"


def test_four_traces_are_insufficient_evidence_not_accept() -> None:
    traces = tt.datasets.simulate_traces(ss7_chain(), 4, seed=1)
    cert = audit(traces, n_bootstrap=19, n_permutations=19)
    assert cert.decision == "insufficient"
    needs = {k: v.traces_needed for k, v in cert.layers.items() if v.status == "insufficient"}
    assert needs["r_inf"] == 40 and needs["order"] is not None and needs["order"] > 4
    assert "needs about 40 usable traces" in cert.verdict()


def test_no_held_out_trace_is_dropped_for_an_unseen_label() -> None:
    """A label seen only in held-out traces must not drop them: the held-out checks use all of them."""
    traces = tt.datasets.simulate_traces(ss7_chain(), 300, seed=5)
    records = [{"trace_id": f"rare{i}", "step_idx": 0, "state": f"only-here-{i}", "outcome": "failure"}
               for i in range(10)]
    rare = tt.TraceTable.from_records(records)
    both = tt.TraceTable.from_arrow(pa.concat_tables([traces.to_arrow(), rare.to_arrow()], promote_options="default"))
    res = analyze(both, intervals=None, n_bootstrap=19, n_permutations=19)
    n_test = res.certificate.splits["n_test"]
    n_usable = res.summary.n_usable
    assert n_usable == 310
    expected = [int(x) for x in res.summary.lengths[:, 1].sum(axis=(1, 2))]
    assert n_test == expected and all(abs(x - 155) < 40 for x in n_test)
    checks = res.certificate.layers["r_inf"].detail
    assert [c.n for c in checks] == n_test


def test_certificate_document_is_structured(tmp_path: Path) -> None:
    traces = tt.datasets.simulate_traces(ss7_chain(), 200, seed=2)
    cert = audit(traces, n_bootstrap=19, n_permutations=19)
    doc = json.loads(cert.to_json())
    assert doc["kind"] == "tracetochain.certificate" and doc["schema_version"] == 3
    assert set(doc["layers"]) == set(LAYERS)
    for layer in doc["layers"].values():
        assert layer["status"] in ("pass", "reject", "insufficient", "not_applicable", "not_run")
        assert isinstance(layer["reason"], str) and isinstance(layer["message"], str)
    assert doc["outputs"]["R(d)"]["rests_on"] == ["r_inf", "timing"]
    assert len(doc["layers"]["r_inf"]["split_p_values"]) == 5
    text = str(cert)
    assert "family-wise level 0.05" in text and "held-out splits: 5" in text


def test_html_escapes_state_names() -> None:
    records = [{"trace_id": f"t{i}", "step_idx": j, "state": "<script>x</script>" if j else "a",
                "outcome": "success" if i % 2 else "failure"} for i in range(30) for j in range(2)]
    cert = audit(tt.TraceTable.from_records(records), n_bootstrap=19, n_permutations=19)
    assert "<script>" not in cert._repr_html_()


@pytest.mark.slow
def test_seeds_give_a_stable_or_flagged_verdict() -> None:
    """Across seeds the verdict is the same, or the runs whose verdict differs flag a split-dependent layer."""
    traces = tt.datasets.simulate_traces(ss7_chain(), 300, seed=11)
    certs = [audit(traces, seed=s, n_bootstrap=49, n_permutations=49) for s in range(4)]
    decisions = [c.decision for c in certs]
    if len(set(decisions)) > 1:
        majority = max(set(decisions), key=decisions.count)
        for c in certs:
            if c.decision != majority:
                assert any(layer.split_dependent for layer in c.layers.values())


@pytest.mark.slow
def test_null_size_and_memory_power_small() -> None:
    """A small version of the study: first-order truth rarely loses an output; memory is found."""
    chain = ss7_chain()
    lost = 0
    for r in range(30):
        cert = audit(tt.datasets.simulate_traces(chain, 300, seed=100 + r), seed=r, n_bootstrap=99,
                     n_permutations=99)
        lost += bool(cert.withheld)
    assert lost <= 5  # 5 % family-wise; P(> 5 of 30 | 5 %) < 0.3 %
    found = 0
    for r in range(10):
        cert = audit(simulate_memory_traces(chain, 1000, memory=0.3, seed=200 + r), seed=r, n_bootstrap=49,
                     n_permutations=199)
        found += cert.layers["order"].status == "reject"
    assert found >= 9
    assert np.isfinite(lost)


def test_pass_k_certified_only_for_the_k_that_were_tested() -> None:
    """pass^3 … pass^8 were certified by extrapolation from a trials layer that tested k = 2 only."""
    layers = _layers(ALL_PASS)
    layers["trials"] = LayerResult("trials", "pass", 0.6, "x", "because", statistics={"ks_tested": [2, 3]})
    cert = build_certificate(layers, level=0.05)
    assert cert.status("pass^k") == "certified" and cert.pass_k_tested == (2, 3)
    assert [cert.pass_k_status(k) for k in (1, 2, 3, 4, 8)] == ["certified", "certified", "certified", "untested",
                                                                 "untested"]
    doc = json.loads(cert.to_json())
    assert doc["pass_k"]["tested_k"] == [2, 3] and doc["pass_k"]["status_by_k"]["4"] == "untested"
    assert "certified for k = 2–3 only" in cert.verdict()
    withheld = build_certificate({**layers, "timing": layers["timing"], "trials": LayerResult(
        "trials", "reject", 0.0001, "x", "because", statistics={"ks_tested": [2, 3]})}, level=0.05)
    assert withheld.pass_k_status(2) == withheld.pass_k_status(5) == "withheld"


def test_audit_tests_every_k_the_tasks_can_show() -> None:
    rng = np.random.default_rng(7)
    traces = tt.datasets.simulate_traces(ss7_chain(), 240, seed=8)
    table = traces.to_arrow()
    ids = list(dict.fromkeys(table.column("trace_id").to_pylist()))
    # 40 tasks of 3 trials and 24 tasks of 5: pass^2 … pass^5 can be tested, pass^6 cannot.
    task_of = {t: (f"a{i // 3}" if i < 120 else f"b{(i - 120) // 5}") for i, t in enumerate(ids)}
    rng.shuffle(ids)
    table = table.append_column("task_id", pa.array([task_of[t] for t in table.column("trace_id").to_pylist()]))
    cert = audit(tt.TraceTable.from_arrow(table), n_bootstrap=19, n_permutations=19)
    assert cert.layers["trials"].status in ("pass", "reject")
    assert cert.pass_k_tested == (2, 3, 4, 5)
    if cert.status("pass^k") == "certified":
        assert cert.pass_k_status(5) == "certified" and cert.pass_k_status(6) == "untested"
