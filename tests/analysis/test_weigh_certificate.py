"""`auto` weighs the certificate (issue 30, item 7): a candidate as good on held-out likelihood as the choice (within
one standard error) that certifies more outputs replaces it; one that would certify an output but fits worse is
named with why it was not chosen."""

from __future__ import annotations

import numpy as np

from tracetochain.analysis._models import CandidateResult
from tracetochain.analysis._weigh import certified_outputs, weigh_certificate, would_certify
from tracetochain.audit._certificate import LayerResult


def _row(name: str, ll: float, timing: str, *, trials: str = "not_applicable") -> CandidateResult:
    layers = {"r_inf": LayerResult("r_inf", "pass", 0.5, "consistent", ""),
              "timing": LayerResult("timing", timing, 0.3 if timing == "pass" else 0.001, "x", ""),
              "trials": LayerResult("trials", trials, None, "x", ""),
              "order": LayerResult("order", "not_applicable", None, "x", "")}
    return CandidateResult(name, name.split("(")[0], None, 10, ll, 0.1, None, None, None, False, "", layers)


def _units(seed: int, shift: float, noise: float) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(-60.0 + shift + noise * rng.standard_normal(250))


def test_certified_outputs_follow_the_layers_they_rest_on() -> None:
    ok = certified_outputs(_row("duration", -60.0, "pass").layers)
    assert "R(d)" in ok and "R_inf" in ok and "pass^k" not in ok and "whatif" not in ok
    bad = certified_outputs(_row("lifted(k=3)", -59.0, "reject").layers)
    assert "R_inf" in bad and "R(d)" not in bad
    assert certified_outputs({}) == ()


def test_a_candidate_within_one_standard_error_that_certifies_more_replaces_the_choice() -> None:
    base = _units(0, 0.0, 1.0)
    raw = np.random.default_rng(1).standard_normal(250) * 0.5
    noise = list(raw - raw.mean())  # a paired deficit of 0.01 nat a unit, 2.5 nats in all, against an SE of ~8
    ll = {"markov": _units(2, -3.0, 1.0), "lifted(k=3)": base,
          "duration": [b - 0.01 + n for b, n in zip(base, noise, strict=True)]}  # a deficit far inside one SE
    rows = [_row("markov", -63.0, "reject"), _row("lifted(k=3)", -60.0, "reject"), _row("duration", -60.0, "pass")]
    assert weigh_certificate(rows, "lifted(k=3)", ll, better=["lifted(k=3)", "duration"]) == "duration"
    # Not better than the baseline: the likelihood rule does not allow it, whatever its certificate.
    assert weigh_certificate(rows, "lifted(k=3)", ll, better=["lifted(k=3)"]) is None
    # Clearly worse on held-out likelihood: kept out, and named with the reason.
    ll["duration"] = [b - 1.4 for b in base]
    ll["duration"][0] -= 1.0  # a non-zero spread of the paired differences
    assert weigh_certificate(rows, "lifted(k=3)", ll, better=["lifted(k=3)", "duration"]) is None
    named = {w["output"]: w for w in would_certify(rows, "lifted(k=3)", ll, better=["lifted(k=3)", "duration"])}
    assert named["R(d)"]["candidate"] == "duration"
    assert "nats below" in named["R(d)"]["why_not_chosen"] and named["R(d)"]["gain_vs_chosen"] < -300
    assert "R_inf" not in named  # the choice certifies it already


def test_ties_keep_the_likelihood_choice() -> None:
    base = _units(0, 0.0, 1.0)
    ll = {"markov": _units(2, -3.0, 1.0), "lifted(k=3)": base, "duration": list(base)}
    rows = [_row("markov", -63.0, "reject"), _row("lifted(k=3)", -60.0, "pass"), _row("duration", -60.0, "pass")]
    assert weigh_certificate(rows, "lifted(k=3)", ll, better=["lifted(k=3)", "duration"]) is None
    assert would_certify(rows, "lifted(k=3)", ll, better=["lifted(k=3)", "duration"]) == []
