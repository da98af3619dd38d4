"""The live service without HTTP: store, ingest thread, live analysis, rules, alerts and the analyzer thread.

:class:`LiveService` is what ``tracetochain serve`` runs behind its routes, and what tests drive directly. The
analyzer thread refreshes the live document every ``refresh`` seconds (when something changed, or at least every
ten periods so that time windows close and "no traffic" rules fire), evaluates the rules, collects the drift
alerts and hands every alert to the :class:`~tracetochain.serve._alerts.AlertHub`.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracetochain._compat import renamed_attribute, renamed_parameters
from tracetochain._limits import max_states
from tracetochain.readers.otlp import OtlpOptions, parse_otlp_options
from tracetochain.serve._alerts import AlertHub, StdoutSink, WebhookSink
from tracetochain.serve._ingest import Ingestor, IngestSettings
from tracetochain.serve._live import DEFAULT_LIVE_MAX_STATES, LiveAnalysis, WindowSpec
from tracetochain.serve._rules import Rule, RuleEngine, load_rules
from tracetochain.serve._store import Durability, Store

log = logging.getLogger("tracetochain.serve")

DEFAULT_PORT = 4318  # the OTLP/HTTP port


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class ServeConfig:
    """Everything ``tracetochain serve`` is told (see the CLI's help for each option)."""

    store: Path = Path("tracetochain-live.db")
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    ingest_token: str | None = None
    read_token: str | None = None
    max_request_bytes: int = 16 * 1024 * 1024
    max_decompressed_bytes: int = 64 * 1024 * 1024
    #: Memory the request decodes running at once may take together (estimated before parsing; N5).
    decode_memory_bytes: int = 1024 * 1024 * 1024
    window: WindowSpec = field(default_factory=lambda: WindowSpec("time", 300.0))
    #: False-alarm rate of drift alerts over the stream (``alpha=`` is its deprecated spelling, one release).
    level: float = 0.05
    min_traces: int = 100
    horizon: int = 30
    confidence: float = 0.95
    samples: int = 1000
    rules: Path | None = None
    webhook: str | None = None
    alerts_to_stdout: bool = True
    reader_options: dict[str, Any] = field(default_factory=dict)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    durability: Durability = "full"
    refresh: float = 1.0
    seed: int = 0
    #: Host names the server answers for besides loopback ones (DNS-rebinding guard, N4; --allow-host).
    allowed_hosts: tuple[str, ...] = ()
    #: Open connections uvicorn serves at once (beyond: 503), so idle or slow clients cannot hold every file
    #: descriptor (N25).
    max_connections: int = 1000
    #: Seconds a client has to send a request's line and headers (from the connection, or the end of the previous
    #: response), and its whole request, before the connection is closed (slow-loris, N25; serve._protocol).
    header_timeout: float = 10.0
    body_timeout: float = 120.0
    #: Distinct states the live chain shows; beyond, the least visited are merged into one (N2).
    max_states: int = DEFAULT_LIVE_MAX_STATES

    def check(self) -> None:
        """Refuse unsafe or impossible settings with a message that says how to fix them."""
        if not is_loopback(self.host) and (not self.ingest_token or not self.read_token):
            raise ValueError(f"serving on {self.host} (beyond this machine) needs both an ingest token and a read "
                             "token: set TRACETOCHAIN_INGEST_TOKEN and TRACETOCHAIN_READ_TOKEN (or --ingest-token / "
                             "--read-token), or bind to 127.0.0.1")
        for name in ("ingest_token", "read_token"):
            tok = getattr(self, name)
            if tok is not None and len(tok) < 16:
                raise ValueError(f"the {name.replace('_', ' ')} is too short ({len(tok)} characters); use at least "
                                 "16 random characters, e.g. from "
                                 "`python -c 'import secrets; print(secrets.token_urlsafe())'`")
        if self.ingest_token and self.read_token and self.ingest_token == self.read_token:
            raise ValueError("the ingest token and the read token must differ (senders should not read the data)")
        if self.durability not in ("full", "normal"):
            raise ValueError(f"durability must be 'full' or 'normal', got {self.durability!r}")
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be in 1..65535, got {self.port}")
        if self.max_request_bytes < 1024:
            raise ValueError("max_request_bytes must be at least 1024")
        if self.max_decompressed_bytes < self.max_request_bytes:
            raise ValueError("max_decompressed_bytes must be at least max_request_bytes")
        if not 0 < self.level < 1:
            raise ValueError(f"level must be in (0, 1), got {self.level}")
        if not 2 <= self.max_states <= max_states():
            raise ValueError(f"max_states must be between 2 and {max_states():,} (TRACETOCHAIN_MAX_STATES), got "
                             f"{self.max_states}")
        if not (math.isfinite(self.refresh) and self.refresh > 0):
            raise ValueError("refresh must be a positive number of seconds")
        if not (math.isfinite(self.header_timeout) and self.header_timeout > 0):
            raise ValueError(f"header_timeout must be a positive number of seconds, got {self.header_timeout}")
        if not (math.isfinite(self.body_timeout) and self.body_timeout >= self.header_timeout):
            raise ValueError(f"body_timeout must be at least header_timeout ({self.header_timeout} s), got "
                             f"{self.body_timeout}")


# ``ServeConfig(alpha=...)`` and ``config.alpha``: the old spelling of ``level``, for one release.
ServeConfig.__init__ = renamed_parameters(alpha="level")(ServeConfig.__init__)  # type: ignore[method-assign]
ServeConfig.alpha = renamed_attribute("alpha", "level")  # type: ignore[attr-defined]


class LiveService:
    """Store + ingest + analysis + alerts; :meth:`start` / :meth:`stop` (graceful: queued spans are committed).

    One chain per agent: episodes are grouped by the ``group_by`` attribute (``service.name``); each group has its
    own :class:`LiveAnalysis` (windows, drift) and :class:`RuleEngine`, and ``self.live`` is the all-groups view
    (counts of every group together, no drift test and no rules: a chain of several agents is no agent's chain).
    """

    def __init__(self, config: ServeConfig) -> None:
        config.check()
        self.config = config
        options: OtlpOptions = parse_otlp_options(**config.reader_options)
        gb = config.ingest.group_by
        # The group attribute is kept on spans and resources like a user-named attribute.
        self.options = dataclasses.replace(options, user_keys=options.user_keys | {gb}, wanted=options.wanted | {gb})
        self.rules: list[Rule] = load_rules(config.rules, config.window) if config.rules else []
        self.store = Store(config.store, durability=config.durability)
        self.live = self._new_live(None)
        self.groups: dict[str, LiveAnalysis] = {}
        self.engines: dict[str, RuleEngine] = {}
        self._rule_states: dict[tuple[str, str], bool] = {}
        self._groups_lock = threading.Lock()
        self.ingestor = Ingestor(self.store, self.options, config.ingest, on_episodes=self._on_episodes)
        sinks: list[Any] = []
        if config.alerts_to_stdout:
            sinks.append(StdoutSink())
        if config.webhook:
            sinks.append(WebhookSink(config.webhook, on_attempt=self.ingestor.record_delivery))
        self.hub = AlertHub(sinks, record=self.ingestor.record_alert)
        self.started = time.time()
        self._snapshot: dict[str, Any] | None = None
        self._group_docs: dict[str, dict[str, Any]] = {}
        self._group_versions: dict[str, int] = {}
        self._snapshot_lock = threading.Lock()
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._analyzer: threading.Thread | None = None
        self.rejected: dict[str, int] = {}
        self.analysis_error: str | None = None  # the last refresh's failure (shown on /healthz and the dashboard)
        self.analysis_failures = 0
        self.store.lock()  # last: a constructor that fails above leaves no lock behind

    def _new_live(self, group: str | None) -> LiveAnalysis:
        c = self.config
        return LiveAnalysis(c.window, level=c.level, min_traces=c.min_traces, horizon=c.horizon,
                            confidence=c.confidence, samples=c.samples, complete_after=c.ingest.settle + 1.0,
                            seed=c.seed, max_states=c.max_states, group=group, drift=group is not None)

    def group_live(self, group: str) -> LiveAnalysis:
        """The analysis of one group (created with its rule engine on its first episode)."""
        with self._groups_lock:
            la = self.groups.get(group)
            if la is None:
                la = self.groups[group] = self._new_live(group)
                engine = self.engines[group] = RuleEngine(self.rules, group=group)
                engine.resume({rule: firing for (rule, g), firing in self._rule_states.items() if g == group})
            return la

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        # Import the analysis' heavy modules now, not in the middle of the first burst of spans: importing the drift
        # test's modules inside the first drift test cost ~1 s of CPU while the live lock was held (ingest waited).
        import scipy.special  # noqa: F401

        import tracetochain.uncertainty  # noqa: F401
        from tracetochain.audit.shared import homogeneity_from_counts  # noqa: F401

        self._rule_states = self.store.rule_states()
        for rows in self.store.iter_episodes():  # rebuild the running counts once, at start
            self._add(rows)
        self._resume_rules()
        self.hub.load(self.store)  # alerts already raised are never raised again
        self.ingestor.start()
        self._analyzer = threading.Thread(target=self._analyze_loop, name="tracetochain-analyzer", daemon=True)
        self._analyzer.start()
        self._refresh_guarded()  # a store the analysis cannot digest must not stop the server from starting

    def _refresh_guarded(self, *, force: bool = True) -> None:
        try:
            self.refresh(force=force)
        except Exception as exc:  # the dashboard shows the last good document and the failure; ingest goes on
            self.analysis_failures += 1
            self.analysis_error = f"{type(exc).__name__}: {exc}"[:500]
            log.exception("live analysis failed")

    def _resume_rules(self) -> None:
        """Bring every rule engine to where the last run left it, without alerting.

        The windows completed before the restart are evaluated silently (they were evaluated and alerted on
        then), and each rule's firing state is then the one its last stored alert recorded (not firing when it
        never alerted). The first refresh after start then alerts only on what changed since: a rule that fires now
        but never alerted, or one whose state differs from its last alert."""
        with self._groups_lock:
            pairs = [(self.groups[g], self.engines[g], g) for g in self.groups]
        for la, engine, group in pairs:
            engine.evaluate(la)
            engine.firing = dict.fromkeys(engine.firing, False)
            engine.resume({rule: firing for (rule, g), firing in self._rule_states.items() if g == group})

    def stop(self) -> None:
        self._stop.set()
        if self._analyzer is not None:
            self._analyzer.join(30)
        self.ingestor.stop()
        self.hub.close()
        self.store.unlock()

    # ------------------------------------------------------------------ analysis
    def _add(self, rows: list[Any]) -> None:
        self.live.add_episodes(rows)
        by_group: dict[str, list[Any]] = {}
        for row in rows:
            by_group.setdefault(row.group, []).append(row)
        for group, part in by_group.items():
            self.group_live(group).add_episodes(part)

    def _on_episodes(self, rows: list[Any]) -> None:
        self._add(rows)
        self._changed.set()

    def _analyze_loop(self) -> None:
        quiet = 0
        while not self._stop.is_set():
            # At most one refresh per period: the analysis shares the interpreter with ingest, and a burst of
            # episodes is one refresh, not one per commit.
            self._stop.wait(self.config.refresh)
            if self._stop.is_set():
                return
            changed = self._changed.is_set()
            self._changed.clear()
            quiet = 0 if changed else quiet + 1
            if changed or quiet >= 10 or self._totals_stale():
                force = quiet >= 10
                quiet = 0
                self._refresh_guarded(force=force)

    def _totals_stale(self) -> bool:
        with self._groups_lock:
            groups = list(self.groups.values())
        return self.live.total_is_stale() or any(la.total_is_stale() for la in groups)

    def refresh(self, *, force: bool = True) -> dict[str, Any]:
        """Recompute the live documents (every group whose counts changed, or all with ``force``), evaluate each
        group's rules and emit the alerts (called by the analyzer)."""
        with self._groups_lock:
            groups = dict(self.groups)
            engines = dict(self.engines)
        events: list[dict[str, Any]] = []
        docs = dict(self._group_docs)
        for group, la in sorted(groups.items()):
            version = la.total.version
            if not force and self._group_versions.get(group) == version and group in docs \
                    and not la.total_is_stale():
                continue
            gdoc = la.snapshot()
            events += la.pop_drift_events()
            engine = engines[group]
            events += engine.evaluate(la)
            gdoc["rules"] = list(engine.last.values())
            docs[group] = gdoc
            self._group_versions[group] = version
        if len(groups) == 1:  # one agent: the all-groups view is its view (not computed twice)
            (only,) = groups
            doc = {**docs[only], "group": None}
        else:
            doc = self.live.snapshot()
            doc["rules"] = [r for g in sorted(docs) for r in docs[g].get("rules", [])]
        for event in events:
            self.hub.emit(event)
        doc["groups"] = {g: _group_brief(d) for g, d in sorted(docs.items())}
        doc["group_by"] = self.config.ingest.group_by
        doc["alerts"] = self.hub.recent[:50]
        for g, d in docs.items():
            d["alerts"] = [a for a in self.hub.recent if a.get("group") == g][:50]
            d["groups"] = doc["groups"]
            d["group_by"] = doc["group_by"]
        with self._snapshot_lock:
            self._snapshot = doc
            self._group_docs = docs
        self.analysis_error = None
        return doc

    def snapshot(self, group: str | None = None) -> dict[str, Any]:
        """The live document of every group together (``group=None``) or of one group (KeyError if unknown)."""
        with self._snapshot_lock:
            doc = self._snapshot if group is None else self._group_docs.get(group)
        if doc is None:
            if group is not None and group not in self.groups:
                raise KeyError(group)
            self._refresh_guarded()
            with self._snapshot_lock:
                doc = self._snapshot if group is None else self._group_docs.get(group)
        if doc is None:
            doc = {"kind": "tracetochain.live", "schema_version": 1, "n_episodes": self.live.n_episodes,
                   "states": [], "total": None, "current": None, "current_key": None, "series": [], "moved": [],
                   "rules": [], "alerts": [], "group": group, "groups": {},
                   "group_by": self.config.ingest.group_by,
                   "window": {"by": self.config.window.by, "size": self.config.window.size,
                              "describe": self.config.window.describe()}}
        return {**doc, "health": self.health()}

    def health(self) -> dict[str, Any]:
        """``ok``, ``degraded`` (serving, but some of the analysis is limited or failing: the reasons say what) or
        ``failing`` (the store cannot be written: exports get 503)."""
        reasons = list(self.live.degraded)
        with self._groups_lock:
            groups = sorted(self.groups.items())
        for name, la in groups:
            reasons += [f"{name or '(no group)'}: {r}" for r in la.degraded if r not in reasons]
        if self.analysis_error is not None:
            reasons.append(f"the live analysis failed {self.analysis_failures} time(s); last: {self.analysis_error}")
        reasons += self.ingestor.degraded()
        if self.ingestor.commit_failures >= 3:  # disk full, store gone: every export gets 503 now
            return {"status": "failing", "reasons": reasons}
        if self.ingestor.failed is not None:
            return {"status": "failing", "reasons": [f"the store cannot be written: {self.ingestor.failed}", *reasons]}
        return {"status": "degraded" if reasons else "ok", "reasons": reasons}

    def status(self) -> dict[str, Any]:
        """Ingest health: counters (persisted), open traces, traces waiting for a verdict, uptime."""
        counters = self.store.counters()
        for name, n in self.ingestor.pending_counters().items():
            counters[name] = counters.get(name, 0) + n
        return {"ok": self.ingestor.failed is None, "error": str(self.ingestor.failed) if self.ingestor.failed
                else None, "uptime_s": time.time() - self.started, "open_traces": self.ingestor.open_traces,
                "pending_verdicts": self.ingestor.pending_verdicts, "episodes": self.live.n_episodes,
                "unlabelled": self.live.total.n_unlabelled, "groups": len(self.groups),
                "alerts_suppressed": self.hub.suppressed, "counters": counters}


def _group_brief(doc: dict[str, Any]) -> dict[str, Any]:
    """One line of the groups table: episodes, labelled / unlabelled, R∞ with its interval, firing rules."""
    total = doc.get("total") or {}
    return {"n_episodes": doc.get("n_episodes", 0), "n_labelled": total.get("n_labelled"),
            "n_unlabelled": total.get("n_unlabelled"), "r_inf": total.get("r_inf"),
            "firing": [r["rule"] for r in doc.get("rules", []) if r.get("firing")]}
