"""Prometheus text exposition of the live document (``GET /metrics``), built with ``prometheus_client``.

Gauges are read from the latest live documents at scrape time (a custom collector on a private registry, so nothing
else in the process leaks into the page). Every chain figure has a ``group`` label: the agent (``service.name`` or
the ``--group-by`` attribute), or ``(all)`` for every group together.

* ``tracetochain_r_inf{group,scope}`` with ``_lower`` / ``_upper`` (scope ``total`` or ``window``: the current
  window), fitted on the labelled episodes;
* ``tracetochain_quantity{group,scope,quantity,end}``: every reported scalar of the quantity registry
  (:mod:`tracetochain.quantities`), ``end`` one of ``point``, ``lower``, ``upper``;
* ``tracetochain_state_failure_probability{group,scope,state}`` (R⊖_i) and
  ``tracetochain_state_failure_attribution{group,scope,state}``;
* ``tracetochain_episodes{group,outcome}`` (``unlabelled`` included), ``tracetochain_label_test_p_value{group}``,
  ``tracetochain_mean_steps_observed{group,labelled}``;
* ``tracetochain_alert_firing{group,rule,severity}`` (1 while a rule fires); ``tracetochain_alerts_total{kind,group,
  status}`` and ``tracetochain_drift_alerts_total{group}``, counted from the store's alert list (each alert once, so
  the counters equal the list, across restarts);
* ingest counters: ``tracetochain_spans_received_total`` (``duplicate``, ``late``),
  ``tracetochain_episodes_decided_total``, ``tracetochain_episodes_unlabelled_total``,
  ``tracetochain_outcome_sources_total{source}``, ``tracetochain_requests_rejected_total{reason}``;
  ``tracetochain_open_traces``, ``tracetochain_pending_verdicts``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


#: The ``group`` label of the all-groups view (parentheses: no ``service.name`` is likely to be spelled so).
ALL_GROUPS = "(all)"


class _LiveCollector:
    def __init__(self, service: Any) -> None:
        self.service = service

    def describe(self) -> list[Metric]:
        return []  # collected at scrape time only

    def collect(self) -> Iterator[Metric]:
        svc = self.service
        everything = svc.snapshot()
        views: list[tuple[str, dict[str, Any]]] = [(ALL_GROUPS, everything)]
        for group in sorted(everything.get("groups", {})):
            try:
                views.append((group, svc.snapshot(group)))
            except KeyError:  # appeared meanwhile: next scrape
                continue
        status = svc.status()
        r = GaugeMetricFamily("tracetochain_r_inf", "R∞: probability that an episode ends in success (labelled "
                              "episodes)", labels=["group", "scope"])
        lo = GaugeMetricFamily("tracetochain_r_inf_lower", "Lower end of the R∞ interval", labels=["group", "scope"])
        hi = GaugeMetricFamily("tracetochain_r_inf_upper", "Upper end of the R∞ interval", labels=["group", "scope"])
        vul = GaugeMetricFamily("tracetochain_state_failure_probability",
                                "One-step probability of failing from each state (R⊖_i)",
                                labels=["group", "scope", "state"])
        att = GaugeMetricFamily("tracetochain_state_failure_attribution",
                                "Share of all failures that leave from each state", labels=["group", "scope", "state"])
        eps = GaugeMetricFamily("tracetochain_episodes", "Episodes counted, by outcome (unlabelled: no verdict by "
                                "--verdict-timeout)", labels=["group", "outcome"])
        lab = GaugeMetricFamily("tracetochain_label_test_p_value", "p-value of the test that labelled and unlabelled "
                                "episodes take the same paths (small: R∞ may not describe the unlabelled runs)",
                                labels=["group"])
        steps = GaugeMetricFamily("tracetochain_mean_steps_observed", "Mean steps per episode, labelled or not",
                                  labels=["group", "labelled"])
        # Every reported scalar of the quantity registry (the live document's ``quantities``): a new quantity is
        # exported with no edit here.
        quantity = GaugeMetricFamily("tracetochain_quantity", "Every reported number of the chain with its interval "
                                     "(end: point, lower, upper), fitted on the labelled episodes",
                                     labels=["group", "scope", "quantity", "end"])
        firing = GaugeMetricFamily("tracetochain_alert_firing", "1 while the threshold rule fires",
                                   labels=["group", "rule", "severity"])
        for group, doc in views:
            for scope, part in (("total", doc.get("total")), ("window", doc.get("current"))):
                if not part:
                    continue
                ri = part.get("r_inf") or {}
                for fam, key in ((r, "point"), (lo, "lower"), (hi, "upper")):
                    if ri.get(key) is not None:
                        fam.add_metric([group, scope], ri[key])
                for q in part.get("quantities") or []:
                    for end in ("point", "lower", "upper"):
                        if q.get(end) is not None:
                            quantity.add_metric([group, scope, q["key"], end], q[end])
                for st in part.get("states", []):
                    if st["vulnerability"]["point"] is not None:
                        vul.add_metric([group, scope, st["name"]], st["vulnerability"]["point"])
                    if st["attribution"]["point"] is not None:
                        att.add_metric([group, scope, st["name"]], st["attribution"]["point"])
            total = doc.get("total") or {}
            for outcome, n in (total.get("outcomes") or {}).items():
                eps.add_metric([group, outcome], n)
            test = total.get("label_test") or {}
            if test.get("p_value") is not None:
                lab.add_metric([group], test["p_value"])
            for kind, u in (total.get("usage") or {}).items():
                if u.get("mean_steps") is not None:
                    steps.add_metric([group, "yes" if kind == "labelled" else "no"], u["mean_steps"])
            if group != ALL_GROUPS:
                for rule in doc.get("rules", []):
                    firing.add_metric([group, rule["rule"], rule["severity"]], 1.0 if rule["firing"] else 0.0)
        yield from (r, lo, hi, quantity, vul, att, eps, lab, steps, firing)
        # Alerts are counted from the store, where each is listed once: the counters equal the list, across
        # restarts.
        alerts = CounterMetricFamily("tracetochain_alerts", "Alerts raised (each once), by kind, group and status",
                                     labels=["kind", "group", "status"])
        drift = CounterMetricFamily("tracetochain_drift_alerts", "Windows that departed from the baseline",
                                    labels=["group"])
        for kind, group, st, n in svc.store.alert_counts():
            alerts.add_metric([kind, group, st], n)
            if kind == "drift":
                drift.add_metric([group], n)
        yield alerts
        yield drift
        counters = status["counters"]
        for name, key, help_text in (
                ("spans_received", "spans_received", "Spans stored (acknowledged with 200)"),
                ("spans_duplicate", "spans_duplicate", "Re-sent spans already stored"),
                ("spans_late", "spans_late", "Spans of traces already assembled"),
                ("episodes_decided", "episodes", "Episodes decided (labelled or not)"),
                ("episodes_unlabelled", "episodes_unlabelled", "Episodes kept without a verdict after "
                                                               "--verdict-timeout"),
                ("episodes_dropped", "episodes_dropped", "Episodes that could not be used (no step, bad span, …)"),
                ("verdicts", "verdicts", "Verdicts posted"),
                ("open_traces_evicted", "open_traces_evicted", "Open traces assembled early: over --max-open-traces"),
                ("verdicts_evicted", "verdicts_evicted", "Unclaimed verdicts forgotten: over --max-verdicts"),
                ("verdicts_expired", "verdicts_expired", "Unclaimed verdicts deleted: their trace did not arrive "
                                                         "within --keep-unclaimed-verdicts"),
                ("spans_expired", "spans_expired", "Raw spans deleted: older than --keep-spans")):
            c = CounterMetricFamily(f"tracetochain_{name}", help_text)
            c.add_metric([], counters.get(key, 0))
            yield c
        src = CounterMetricFamily("tracetochain_outcome_sources", "Episodes by the source of their outcome (verdict "
                                  "file, attribute, evaluation, posted, finish_reason, unlabelled)", labels=["source"])
        for name, value in counters.items():
            if name.startswith("outcome_"):
                src.add_metric([name.removeprefix("outcome_")], value)
        yield src
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
