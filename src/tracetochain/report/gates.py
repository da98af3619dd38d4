"""CI gates: ``--fail-under "pass^3>=0.6"`` conditions evaluated on the report document.

Grammar: ``METRIC OP VALUE`` with METRIC one of ``r_inf`` (or ``R∞``/``Rinf``) or any other gateable scalar of the
quantity registry (:mod:`tracetochain.quantities`: ``mean_steps``, ``steps_std``, ``failure_probability``, …, by key
or alias), ``R(d)``, ``pass^k``, ``pass@k``, ``pass_rate``, ``cost_per_success`` or ``cost_per_success(METRIC)`` (the
report's first cost metric, or the one named: ``cost_usd``, ``tokens``, ``seconds``, …); OP one of ``>=``, ``>``,
``<=``, ``<``; VALUE a number. With ``use="lower"`` the conservative end of the interval is compared instead of the
point estimate (when intervals exist): the lower bound of a probability or of what should be high, the upper bound of
a cost or of what should be low (mean steps). A gate on a metric the certificate withholds, or could not test for lack
of data, fails and says why: a CI gate never passes on evidence that is not there. Exit
codes (CLI): 0 all gates pass, 3 a gate failed.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any, Literal

from tracetochain.exceptions import TraceToChainError
from tracetochain.quantities import iter_quantities, lookup

GATE_FAILED_EXIT_CODE = 3
_OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}
# Step budgets and k are at most 9 digits (a 5,000-digit number is not a budget, and int() would refuse it).
#: Every gateable scalar of the quantity registry, by key and alias (longest first, so that no name shadows a longer
#: one): a new quantity is gateable with no edit here.
_SCALARS = sorted({name for q in iter_quantities(gateable=True) if q.kind == "scalar" for name in (q.key, *q.aliases)},
                  key=lambda n: (-len(n), n))
_GATE = re.compile(r"^\s*(?P<metric>pass_rate|R\((?P<d>\d{1,9})\)|pass\^(?P<hk>\d{1,9})"
                   r"|pass@(?P<ak>\d{1,9})|(?P<cost>cost_per_success)(?:\((?P<cm>[a-z_]+)\))?"
                   r"|(?P<scalar>" + "|".join(re.escape(n) for n in _SCALARS) + r"))\s*"
                   r"(?P<op>>=|<=|>|<)\s*(?P<value>[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?)\s*$")


class GateError(TraceToChainError, ValueError):
    """A --fail-under expression cannot be parsed or refers to a metric the report does not have."""


@dataclass(frozen=True)
class GateResult:
    expression: str
    passed: bool
    value: float | None
    message: str


def check_gate(expression: str) -> re.Match[str]:
    """The parsed gate, or a :class:`GateError` saying how to write one (commands check gates before any work)."""
    match = _GATE.match(expression) if len(expression) <= 200 else None
    if not match:
        shown = repr(expression) if len(expression) <= 80 else repr(expression[:77]) + "…"
        raise GateError(f"cannot read the gate {shown}; write e.g. 'pass^3>=0.6', 'R(20)>=0.5', 'r_inf>0.7'")
    return match


def evaluate_gate(expression: str, doc: dict[str, Any], *, use: Literal["point", "lower"] = "point") -> GateResult:
    match = check_gate(expression)
    m = doc["metrics"]
    intervals = (doc.get("intervals") or {}).get("metrics", {})
    threshold = float(match["value"])
    op = _OPS[match["op"]]
    withheld = doc.get("withheld") or []
    status = doc.get("output_status") or {}
    cert = doc.get("certificate") or {}
    layers = cert.get("layers") or {}

    def blocked(output: str) -> str | None:
        """Why a gate on ``output`` cannot pass: withheld, or untested for lack of data (not for lack of repeated
        tasks, which only means pass^k assumes independent trials)."""
        st = status.get(output)
        if st == "withheld":
            return "withheld by the audit"
        if st == "untested":
            short = [n for n, layer in layers.items() if layer.get("status") == "insufficient"
                     and n in (cert.get("outputs") or {}).get(output, {}).get("rests_on", [])]
            if short:
                need = [layers[n].get("traces_needed") for n in short if layers[n].get("traces_needed")]
                return ("not testable on this little data" + (f" (the audit needs about {max(need)} usable traces)"
                                                              if need else ""))
        return None

    value: float | None
    lower: float | None = None
    if match["cost"] is not None:
        return _cost_gate(expression, doc, match["cm"], op, threshold, use)
    if match["d"] is not None:
        d = int(match["d"])
        why = blocked("R(d)") or ("withheld by the audit" if "R(d)" in withheld else None)
        if why:
            reason = doc.get("timing_withheld_reason")
            return GateResult(expression, False, None, f"{expression}: R({d}) is {why}"
                                                       + (f" ({reason})" if reason else ""))
        if d > m["horizon"]:
            raise GateError(f"R({d}) is beyond the report's horizon {m['horizon']}; raise --horizon")
        value = m["reliability"][d]
        band = intervals.get("reliability") if isinstance(intervals, dict) else None
        if isinstance(band, dict) and band.get("lower") is not None:
            lower = band["lower"][d]
    elif match["hk"] is not None or match["ak"] is not None:
        key, k = ("pass_hat_k", match["hk"]) if match["hk"] is not None else ("pass_at_k", match["ak"])
        why = blocked("pass^k") if int(k) > 1 else blocked("R_inf")
        by_k = (cert.get("pass_k") or {}).get("status_by_k") or {}
        if why is None and int(k) > 1 and by_k.get(str(k)) == "untested" and status.get("pass^k") == "certified":
            why = f"untested for k = {k} (no two tasks were tried {k} times)"
        if why:
            return GateResult(expression, False, None, f"{expression}: the chain's pass@k/pass^k are {why} "
                                                       "(see the per-task estimates)")
        if k not in m[key]:
            raise GateError(f"{expression}: k = {k} is not in the report; add it with --k")
        value = m[key][k]
        q = intervals.get(key, {}).get(k) if isinstance(intervals.get(key), dict) else None
        lower = q.get("lower") if isinstance(q, dict) else None
    elif match["metric"] == "pass_rate":
        value = doc["empirical"]["pass_rate"]
    else:  # a scalar of the quantity registry
        spec = lookup(match["scalar"])
        assert spec is not None
        name = spec.aliases[0] if spec.aliases else spec.key
        why = blocked(spec.output or "R_inf")
        if why:
            return GateResult(expression, False, None, f"{expression}: {name} is {why}")
        value = m.get(spec.key)
        if value is None:
            if spec.key not in m:
                raise GateError(f"{expression}: the report has no {spec.key} (written by an older version)")
            reason = (m.get("undefined") or {}).get(spec.key, "undefined on this chain")
            return GateResult(expression, False, None, f"{expression}: {name} is undefined ({reason})")
        q = intervals.get(spec.key) if isinstance(intervals, dict) else None
        # The conservative end: the lower bound of what should be high, the upper bound of what should be low.
        end = "upper" if spec.better == "lower" else "lower"
        lower = q.get(end) if isinstance(q, dict) and spec.better is not None else None
    compared = lower if use == "lower" and lower is not None else value
    assert compared is not None
    passed = bool(op(compared, threshold))
    high_is_bad = match["scalar"] is not None and getattr(lookup(match["scalar"]), "better", None) == "lower"
    conservative = "upper bound" if high_is_bad else "lower bound"
    what = conservative if use == "lower" and lower is not None else "value"
    return GateResult(expression, passed, compared,
                      f"{expression}: {what} {compared:.4f} → {'pass' if passed else 'FAIL'}")


def _cost_gate(expression: str, doc: dict[str, Any], metric: str | None, op: Any, threshold: float,
               use: str) -> GateResult:
    """A gate on the cost per success (E[C]/R∞) of the report's cost section."""
    costs = doc.get("costs") or {}
    if not costs.get("available"):
        raise GateError(f"{expression}: the report has no cost figures ({costs.get('reason') or 'no cost stage'})")
    name = metric or costs["primary"]
    if name not in costs["metrics"]:
        raise GateError(f"{expression}: no {name} in the report's costs (it has {', '.join(costs['metrics'])})")
    cert = costs.get("certification") or {}
    if cert.get("status") == "withheld":
        return GateResult(expression, False, None, f"{expression}: the cost figures are withheld by the audit "
                                                   f"({cert.get('reason')})")
    entry = costs["metrics"][name]
    value = entry["summary"]["per_success"]
    if value is None:
        return GateResult(expression, False, None, f"{expression}: undefined (success is unreachable)")
    upper = ((entry.get("intervals") or {}).get("per_success") or {}).get("upper")
    compared = upper if use == "lower" and upper is not None else value
    passed = bool(op(compared, threshold))
    what = "upper bound" if use == "lower" and upper is not None else "value"
    return GateResult(expression, passed, compared,
                      f"{expression}: {what} {compared:.4g} → {'pass' if passed else 'FAIL'}")
