"""Prometheus text exposition of the live document (``GET /metrics``), built with ``prometheus_client``.

Gauges are read from the latest live document at scrape time (a custom collector on a private registry, so nothing
else in the process leaks into the page):

* ``tracetochain_r_inf{scope}`` with ``_lower`` / ``_upper`` (scope ``total`` or ``window``: the current window);
* ``tracetochain_state_failure_probability{scope,state}`` (R⊖_i, the vulnerability) and
  ``tracetochain_state_failure_attribution{scope,state}``;
* ``tracetochain_alert_firing{rule,severity}`` (1 while a rule fires), ``tracetochain_drift_alerts``;
* ``tracetochain_episodes{outcome}``, ``tracetochain_spans_received_total`` and the other ingest counters
  (``duplicate``, ``late``, ``rejected_*``), ``tracetochain_open_traces``, ``tracetochain_pending_verdicts``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _LiveCollector:
    def __init__(self, service: Any) -> None:
        self.service = service

    def describe(self) -> list[Metric]:
        return []  # collected at scrape time only

    def collect(self) -> Iterator[Metric]:
        doc = self.service.snapshot()
        status = self.service.status()
        r = GaugeMetricFamily("tracetochain_r_inf", "R∞: probability that an episode ends in success",
                              labels=["scope"])
        lo = GaugeMetricFamily("tracetochain_r_inf_lower", "Lower end of the R∞ interval", labels=["scope"])
        hi = GaugeMetricFamily("tracetochain_r_inf_upper", "Upper end of the R∞ interval", labels=["scope"])
        vul = GaugeMetricFamily("tracetochain_state_failure_probability",
                                "One-step probability of failing from each state (R⊖_i)", labels=["scope", "state"])
        att = GaugeMetricFamily("tracetochain_state_failure_attribution",
                                "Share of all failures that leave from each state", labels=["scope", "state"])
        for scope, part in (("total", doc.get("total")), ("window", doc.get("current"))):
            if not part:
                continue
            ri = part["r_inf"]
            for fam, key in ((r, "point"), (lo, "lower"), (hi, "upper")):
                if ri.get(key) is not None:
                    fam.add_metric([scope], ri[key])
            for st in part["states"]:
                if st["vulnerability"]["point"] is not None:
                    vul.add_metric([scope, st["name"]], st["vulnerability"]["point"])
                if st["attribution"]["point"] is not None:
                    att.add_metric([scope, st["name"]], st["attribution"]["point"])
        yield from (r, lo, hi, vul, att)
        firing = GaugeMetricFamily("tracetochain_alert_firing", "1 while the threshold rule fires",
                                   labels=["rule", "severity"])
        for rule in doc.get("rules", []):
            firing.add_metric([rule["rule"], rule["severity"]], 1.0 if rule["firing"] else 0.0)
        yield firing
        drift = CounterMetricFamily("tracetochain_drift_alerts", "Windows that departed from the baseline")
        drift.add_metric([], sum(1 for w in doc.get("series", []) if (w.get("drift") or {}).get("alert")))
        yield drift
        eps = GaugeMetricFamily("tracetochain_episodes", "Episodes counted, by outcome", labels=["outcome"])
        total = doc.get("total") or {}
        for outcome, n in (total.get("outcomes") or {}).items():
            eps.add_metric([outcome], n)
        yield eps
        counters = status["counters"]
        for name, help_text in (("spans_received", "Spans stored (acknowledged with 200)"),
                                ("spans_duplicate", "Re-sent spans already stored"),
                                ("spans_late", "Spans of traces already assembled"),
                                ("episodes_dropped", "Episodes that could not be used (no outcome, no step, …)"),
                                ("verdicts", "Verdicts posted"),
                                ("open_traces_evicted", "Open traces assembled early: over --max-open-traces"),
                                ("verdicts_evicted", "Unclaimed verdicts forgotten: over --max-verdicts")):
            c = CounterMetricFamily(f"tracetochain_{name}", help_text)
            c.add_metric([], counters.get(name, 0))
            yield c
        rej = CounterMetricFamily("tracetochain_requests_rejected", "Requests refused, by reason", labels=["reason"])
        for name, value in counters.items():
            if name.startswith("rejected_"):
                rej.add_metric([name.removeprefix("rejected_")], value)
        yield rej
        yield GaugeMetricFamily("tracetochain_open_traces", "Traces still being assembled",
                                value=status["open_traces"])
        yield GaugeMetricFamily("tracetochain_pending_verdicts", "Traces waiting for a posted verdict",
                                value=status["pending_verdicts"])
        health = self.service.health()
        yield GaugeMetricFamily("tracetochain_degraded", "1 while a limit is in force or the analysis is failing "
                                                         "(reasons on /healthz)", value=int(health["status"] != "ok"))


def exposition(service: Any) -> bytes:
    """The Prometheus text page for ``service`` (a :class:`~tracetochain.serve._service.LiveService`)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_LiveCollector(service))  # type: ignore[arg-type]
    return generate_latest(registry)
