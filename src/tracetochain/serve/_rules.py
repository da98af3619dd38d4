"""Threshold rules on named transitions and metrics, read from a TOML file, evaluated on the live counts.

A rules file::

    min_traces = 30                      # optional default: rules stay silent on fewer usable traces

    [[rule]]
    name = "SQL errors"                  # optional (default: the expression)
    when = "P(sql_exec -> failure) > 0.1 over 1h"
    severity = "critical"                # optional: info, warning (default), critical

    [[rule]]
    when = "R∞ < 0.8 over 3 windows"

Expressions: ``METRIC OP NUMBER [over SPAN]``. Metrics: ``R∞`` (also ``R_inf``, ``r_inf``), ``R(d)`` (success within
d steps), ``P(a -> b)`` (one-step probability from state ``a`` to state ``b``, ``success`` or ``failure``; quote
names with spaces: ``P("final answer" -> failure)``), ``attribution(a)`` (share of failures leaving from ``a``),
``pass_rate`` (observed share of successes), ``traces`` (episodes counted; e.g. ``traces < 10 over 1h`` for "the agent
went quiet"), and every alertable scalar of the quantity registry by key or alias (:mod:`tracetochain.quantities`:
``mean_steps``, ``failure_probability``, ``steps_std``, …). OP is ``<``, ``<=``, ``>``, ``>=``. SPAN is a duration
that is a whole number of time windows (``1h``), a number of traces that is a whole number of count windows
(``1000 traces``), ``N windows``, or ``all`` (everything since the store began); without it, the current window.

Chain metrics are point estimates of the chain fitted to the span's counts (library default prior). A rule fires
when its condition holds on at least ``min_traces`` usable traces, and resolves when it stops holding; both edges
are alerts. Every error names the file, the line and how to fix it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracetochain._config_files import file_error, load_document, locate_line
from tracetochain._limits import max_horizon
from tracetochain.exceptions import TraceToChainError
from tracetochain.quantities import QUANTITIES, iter_quantities, lookup
from tracetochain.serve._live import FAILURE, SUCCESS, LiveAnalysis, RunningCounts, WindowSpec, parse_duration

log = logging.getLogger("tracetochain.serve")

_TOP_LEVEL = ("rule", "rules", "min_traces")
_RULE_KEYS = ("name", "when", "severity", "min_traces")
_SEVERITIES = ("info", "warning", "critical")
_OPS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
_EXPR_RE = re.compile(r"^\s*(?P<metric>.+?)\s*(?P<op><=|>=|<|>)\s*(?P<value>[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|"
                      r"[-+]?\.\d+)\s*(?:over\s+(?P<over>.+?))?\s*$", re.IGNORECASE)


_MAX_EXPRESSION = 1_000


def _shown(v: Any) -> str:
    """A user value for a message: scalars as written (cut at 80 characters), anything else by its type only — a
    YAML alias tree expands without bound when printed."""
    if isinstance(v, (str, int, float, bool)) or v is None:
        text = repr(v) if not isinstance(v, int) or v.bit_length() < 200 else "a very large number"
        return text if len(text) <= 80 else text[:77] + "…"
    return f"a {type(v).__name__}"


class RulesFileError(TraceToChainError, ValueError):
    """A rules file is malformed; the message names the file, the line and the fix."""


@dataclass(frozen=True)
class Rule:
    """One parsed rule; :meth:`evaluate` computes its metric on the live counts."""

    name: str
    expression: str
    metric: str  # reliability | transition | attribution | pass_rate | traces | an alertable registry key (r_inf, …)
    args: tuple[Any, ...]
    op: str
    threshold: float
    n_windows: int | None  # None: everything ("all")
    over: str
    severity: str
    min_traces: int

    def value(self, live: LiveAnalysis, counts: RunningCounts) -> float | None:
        """The metric on ``counts`` (None when undefined: too few traces, or a state never seen)."""
        if self.metric == "traces":
            return float(counts.n_total)
        if counts.n_fitted < self.min_traces:
            return None
        if self.metric == "pass_rate":
            return counts.n_traces["success"] / max(1, counts.n_fitted)
        chain = live.chain_of(counts)
        if chain is None:
            return None
        if self.metric == "reliability":
            return float(chain.reliability(int(self.args[0]))[-1])
        if self.metric in QUANTITIES:  # a scalar of the quantity registry (None where undefined)
            return QUANTITIES[self.metric].point(chain)[0]
        names = chain.state_names
        a = self.args[0]
        if a not in names:
            return None
        i = names.index(a)
        if self.metric == "attribution":
            if chain.r_inf >= 1.0:
                return 0.0
            return float(chain.failure_attribution()[i])
        b = self.args[1]
        if b == SUCCESS:
            return float(chain.R_success[i])
        if b == FAILURE:
            return float(chain.R_failure[i])
        if b not in names:
            return 0.0
        return float(chain.Q[i, names.index(b)])

    def holds(self, value: float | None) -> bool:
        return value is not None and math.isfinite(value) and _OPS[self.op](value, self.threshold)

    def examples(self, live: LiveAnalysis, counts: RunningCounts) -> list[str]:
        """Root-cause pointers: recent failing episodes that took the rule's transition (or, for a whole-chain
        metric, the exit to failure from the state with the largest failure attribution)."""
        if self.metric == "transition":
            return counts.examples_for(self.args[0], self.args[1])
        if self.metric == "attribution":
            return counts.examples_for(self.args[0], FAILURE)
        worst = max(counts.exits_failure.items(), key=lambda kv: (kv[1], kv[0]), default=None)
        return counts.examples_for(worst[0], FAILURE) if worst else []


def _unquote(s: str) -> str:
    s = s.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        return s[1:-1]
    return s


def parse_metric(text: str) -> tuple[str, tuple[Any, ...]]:
    """The metric part of an expression → (kind, arguments); ``ValueError`` says what is accepted.

    >>> parse_metric("P(sql_exec -> failure)"), parse_metric("R(10)"), parse_metric("R∞")
    (('transition', ('sql_exec', 'failure')), ('reliability', (10,)), ('r_inf', ()))
    """
    t = text.strip()
    low = t.lower()
    if t == "R_∞":
        return "r_inf", ()
    spec = lookup(t)
    if spec is not None and spec.alertable and spec.kind == "scalar":  # R∞, mean_steps, … (the registry)
        return spec.key, ()
    if low in ("pass_rate", "traces"):
        return low, ()
    m = re.fullmatch(r"R\(\s*(\d+)\s*\)", t)
    if m:
        digits = m.group(1)
        d = int(digits) if len(digits) <= 12 else max_horizon() + 1
        if d > max_horizon():
            raise ValueError(f"R({digits[:20]}{'…' if len(digits) > 20 else ''}): the step budget must be at most "
                             f"{max_horizon():,} (TRACETOCHAIN_MAX_HORIZON); beyond a few thousand steps R(d) equals "
                             "R∞ — use R∞")
        return "reliability", (d,)
    m = re.fullmatch(r"(?i:attribution)\(\s*(.+?)\s*\)", t)
    if m:
        return "attribution", (_unquote(m.group(1)),)
    m = re.fullmatch(r"P\(\s*(.+?)\s*\)", t)
    if m:
        inner = m.group(1)
        parts = re.split(r"\s*(?:->|→)\s*", inner, maxsplit=1) if not inner.startswith(("'", '"')) else None
        if parts is None:
            q = re.fullmatch(r"(\"[^\"]+\"|'[^']+')\s*(?:->|→)\s*(.+)", inner)
            parts = [q.group(1), q.group(2)] if q else [inner]
        if len(parts) == 2 and parts[0].strip() and parts[1].strip():
            return "transition", (_unquote(parts[0]), _unquote(parts[1]))
        raise ValueError(f"cannot read the transition {t!r}: write P(from -> to), e.g. P(sql_exec -> failure)")
    scalars = ", ".join(q.key for q in iter_quantities(alertable=True) if q.kind == "scalar" and q.key != "r_inf")
    raise ValueError(f"unknown metric {t!r}: use R∞, R(d), P(a -> b), attribution(a), pass_rate, traces or one of "
                     f"{scalars}")


def parse_span(text: str | None, window: WindowSpec) -> tuple[int | None, str]:
    """``over ...`` → number of windows (None = all) and its description, for windows of ``window``."""
    if text is None:
        return 1, "the current window"
    t = text.strip().lower()
    if t in ("all", "everything"):
        return None, "all traces"
    m = re.fullmatch(r"(\d+)\s*windows?", t)
    if m:
        n = int(m.group(1)) if len(m.group(1)) <= 9 else 10**9
        if n < 1:
            raise ValueError("over N windows needs N >= 1")
        if n > 100_000:
            raise ValueError(f"over {m.group(1)[:20]} windows: at most 100,000 windows (or write 'over all')")
        return n, f"{n} window{'s' if n > 1 else ''}"
    m = re.fullmatch(r"(\d+)\s*(?:traces?|episodes?)", t)
    if m:
        if window.by != "count":
            raise ValueError(f"'over {text}' counts traces but the windows are {window.describe()} of time; write a "
                             "duration such as 1h, or N windows")
        if len(m.group(1)) > 12:
            raise ValueError(f"over {m.group(1)[:20]}… traces is too many; write 'over all'")
        n_traces = int(m.group(1))
        ratio = n_traces / window.size
        if ratio < 1 or abs(ratio - round(ratio)) > 1e-9:
            raise ValueError(f"'over {text}' is not a whole number of windows of {window.describe()}")
        return round(ratio), f"{n_traces} traces"
    seconds = parse_duration(t)
    if window.by != "time":
        raise ValueError(f"'over {text}' is a duration but the windows count traces ({window.describe()}); write "
                         "N traces or N windows")
    ratio = seconds / window.size
    if ratio < 1 - 1e-9 or abs(ratio - round(ratio)) > 1e-6:
        raise ValueError(f"'over {text}' is not a whole number of windows of {window.describe()} (start serve with "
                         "a --window that divides it)")
    return round(ratio), t


def parse_rule_expression(expression: str, window: WindowSpec) -> tuple[str, tuple[Any, ...], str, float,
                                                                        int | None, str]:
    """``"P(a -> failure) > 0.1 over 1h"`` → (metric, args, op, threshold, n_windows, span description)."""
    if len(expression) > _MAX_EXPRESSION:  # also keeps the expression pattern's backtracking short
        raise ValueError(f"the expression is {len(expression):,} characters long; a rule's 'when' is at most "
                         f"{_MAX_EXPRESSION:,} (state names can be shortened with tracetochain.state)")
    m = _EXPR_RE.match(expression)
    if not m:
        raise ValueError(f"cannot read {expression!r}: write METRIC OP NUMBER [over SPAN], e.g. "
                         "'P(sql_exec -> failure) > 0.1 over 1h' or 'R∞ < 0.8'")
    metric, args = parse_metric(m.group("metric"))
    n_windows, over = parse_span(m.group("over"), window)
    threshold = float(m.group("value"))
    probability = metric != "traces" and (metric not in QUANTITIES or QUANTITIES[metric].unit == "probability")
    if probability and not 0 <= threshold <= 1:
        raise ValueError(f"{m.group('metric').strip()} is a probability; the threshold {threshold:g} is outside [0, 1]")
    return metric, args, m.group("op"), threshold, n_windows, over


def load_rules(path: str | Path, window: WindowSpec) -> list[Rule]:
    """Read and check a rules file (TOML, or YAML with PyYAML)."""
    src = str(path)
    doc, text = load_document(path, RulesFileError)
    if not isinstance(doc, dict):
        raise _fail("a rules file must be a table with [[rule]] entries", src, None)
    for key in doc:
        if key not in _TOP_LEVEL:
            raise _fail(f"unknown setting {key!r}", src, locate_line(text, None, key, "rule"),
                        f"valid top-level settings are {', '.join(_TOP_LEVEL)}")
    default_min = _int_setting(doc.get("min_traces", 30), "min_traces", src, locate_line(text, None, "min_traces",
                                                                                          "rule"))
    entries = doc.get("rule", doc.get("rules"))
    if entries is None:
        raise _fail("no rules declared", src, None, "add [[rule]] entries with a 'when' expression")
    if not isinstance(entries, list):
        raise _fail("'rule' must be a list of tables: write [[rule]] (two brackets)", src,
                    locate_line(text, None, "rule", "rule"))
    rules: list[Rule] = []
    names: set[str] = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise _fail(f"rule {i + 1} is not a table", src, locate_line(text, i, "when", "rule"))
        for key in entry:
            if key not in _RULE_KEYS:
                raise _fail(f"unknown field {key!r} in rule {i + 1}", src, locate_line(text, i, key, "rule"),
                            f"a rule has {', '.join(_RULE_KEYS)}")
        when = entry.get("when")
        if not isinstance(when, str) or not when.strip():
            raise _fail(f"rule {i + 1} has no 'when' expression", src, locate_line(text, i, "when", "rule"),
                        "write e.g. when = \"P(sql_exec -> failure) > 0.1 over 1h\"")
        try:
            metric, args, op, threshold, n_windows, over = parse_rule_expression(when, window)
        except ValueError as exc:
            raise _fail(str(exc), src, locate_line(text, i, "when", "rule")) from None
        name = entry.get("name", when.strip())
        if not isinstance(name, str) or not name.strip():
            raise _fail(f"rule {i + 1}: name must be text", src, locate_line(text, i, "name", "rule"))
        if name in names:
            raise _fail(f"two rules are named {_shown(name)}", src, locate_line(text, i, "name", "rule"),
                        "give every rule its own name")
        names.add(name)
        severity = entry.get("severity", "warning")
        if not isinstance(severity, str) or severity not in _SEVERITIES:
            raise _fail(f"rule {i + 1}: severity {_shown(severity)} is not one of {', '.join(_SEVERITIES)}", src,
                        locate_line(text, i, "severity", "rule"))
        min_traces = _int_setting(entry.get("min_traces", default_min), "min_traces", src,
                                  locate_line(text, i, "min_traces", "rule"))
        rule = Rule(name.strip(), when.strip(), metric, args, op, threshold, n_windows, over, severity, min_traces)
        try:
            _try_once(rule, window)
        except Exception as exc:
            raise _fail(f"rule {i + 1} ({_shown(rule.name)}) cannot be evaluated: {type(exc).__name__}: "
                        f"{str(exc)[:200]}", src, locate_line(text, i, "when", "rule")) from None
        rules.append(rule)
    return rules


def _try_once(rule: Rule, window: WindowSpec) -> None:
    """Evaluate ``rule`` once on a small chain (a few states, both outcomes), so a rule that would fail on every
    refresh is refused when the file is read, not discovered in the server log (N12)."""
    live = LiveAnalysis(window, min_traces=0)
    counts = RunningCounts()
    names = [a for a in rule.args if isinstance(a, str) and a not in (SUCCESS, FAILURE)] or ["a"]
    for k, outcome in enumerate((SUCCESS, FAILURE, SUCCESS)):
        counts.add(tuple([*names, "b"][k % 2:]), outcome, f"e{k}")
    for s in counts.states():
        live.vocabulary.append(s)
    probe = dataclasses.replace(rule, min_traces=0)
    probe.holds(probe.value(live, counts))


def _int_setting(v: Any, name: str, src: str, line: int | None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _fail(f"{name} must be a whole number >= 0, got {_shown(v)}", src, line)
    return int(v)


def _fail(message: str, path: str | None, line: int | None, hint: str | None = None) -> RulesFileError:
    err = file_error(RulesFileError, message, path, line, hint)
    assert isinstance(err, RulesFileError)
    return err


class RuleEngine:
    """Evaluates the rules on each snapshot and turns state changes into alerts (firing, then resolved)."""

    def __init__(self, rules: list[Rule], group: str | None = None) -> None:
        self.rules = rules
        self.group = group  # the agent whose chain these rules watch (alerts carry it)
        self.firing: dict[str, bool] = {r.name: False for r in rules}
        self.last: dict[str, dict[str, Any]] = {}

    def resume(self, states: dict[str, bool]) -> None:
        """Start from the firing state the store recorded (``{rule name: firing}``), so a restart neither
        re-raises a rule that was already firing nor misses its resolution."""
        for name, firing in states.items():
            if name in self.firing:
                self.firing[name] = firing

    def evaluate(self, live: LiveAnalysis) -> list[dict[str, Any]]:
        """Evaluate every rule; return the alerts for rules that started or stopped firing.

        Windows that completed since the last call are evaluated first, each once and in order (so a window that
        filled up between two refreshes is never skipped), then the latest window as it stands.
        """
        events: list[dict[str, Any]] = []
        for key in live.pop_completed():
            for rule in self.rules:
                if rule.n_windows is not None:
                    self._check(rule, live, live.counts_over(rule.n_windows, ending=key), key, events)
        latest = live.latest_key()
        for rule in self.rules:
            status = self._check(rule, live, live.counts_over(rule.n_windows), latest, events)
            self.last[rule.name] = status
        return events

    def _check(self, rule: Rule, live: LiveAnalysis, counts: RunningCounts, window: int | None,
               events: list[dict[str, Any]]) -> dict[str, Any]:
        try:
            value = rule.value(live, counts)
        except Exception as exc:  # one rule that cannot be computed must not stop the others or the live view
            log.warning("rule %r could not be evaluated: %s", rule.name, exc)
            value = None
        fires = rule.holds(value)
        if fires != self.firing[rule.name]:
            self.firing[rule.name] = fires
            shown = "no data" if value is None else f"{value:.4g}"
            events.append({"kind": "rule", "group": self.group, "status": "firing" if fires else "resolved",
                           "rule": rule.name,
                           "expression": rule.expression, "severity": rule.severity, "value": value,
                           "threshold": rule.threshold, "over": rule.over, "n_traces": counts.n_total,
                           "window": window,
                           "message": (f"{rule.name}: {rule.expression} — value {shown} over {rule.over}"
                                       if fires else f"{rule.name}: resolved (value {shown})"),
                           "examples": rule.examples(live, counts) if fires else []})
        return {"rule": rule.name, "group": self.group, "expression": rule.expression, "value": value,
                "threshold": rule.threshold,
                "op": rule.op, "over": rule.over, "n_traces": counts.n_total, "firing": fires,
                "severity": rule.severity, "state": "firing" if fires else ("no data" if value is None else "ok")}
