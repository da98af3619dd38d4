"""The ingest thread: durable group commits, trace assembly with the OTLP reader's rules, outcome decisions.

One thread owns the store's write connection. Request handlers hand it decoded spans (or posted verdicts) and wait
on a future; the thread takes everything queued, writes it in **one transaction**, commits (durable per the store's
``synchronous`` setting) and only then resolves the futures, so a 200 is never sent for a span that is not on
disk (group commit: one fsync serves every request that arrived meanwhile).

Assembling due traces happens after the acknowledgement, in a second transaction, so it never delays a 200.

When is a trace complete? OTLP has no end-of-trace message. A trace is assembled once its root span (no parent)
has arrived and ``settle`` seconds passed without a new span (exporters send the root last, children may straggle
in a later batch), or ``trace_timeout`` seconds after its last span when the root never comes. Assembly is
:func:`tracetochain.readers.otlp.emit_trace` — the file reader's rules, span for span — followed by the reader's
validation (:class:`~tracetochain.readers._common.TraceBuilder`), so ``serve`` and ``fit`` see the same episodes.

Outcomes, by the reader's one rule per episode (:func:`tracetochain.readers.otlp._outcomes._outcome`): a verdict
file (the ``verdicts`` reader option), else the outcome attribute, else ``gen_ai.evaluation.result`` events / evaluation
attributes, else a verdict posted to ``/v1/verdicts`` (by trace id, episode id or root span id); each decided
episode's source is counted (``outcome_<source>``). A trace none of them labels is held for ``verdict_timeout``
seconds waiting for a posted verdict, then stored as an **unlabelled** episode (outcome ``unlabelled``; canonical
steps ``censored`` with ``termination_reason="unlabelled"``) — kept and counted, never guessed, never dropped.

Groups: each trace belongs to the agent named by its ``group_by`` attribute (``service.name`` by default, read on
the root span, then the resource, then any span), stored with its episodes; the live analysis keeps one chain per
group.

Crash safety: spans, open traces and decided episodes change in the same transactions, so after a kill the store
holds every acknowledged span, no episode twice, and the open traces to resume.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracetochain.readers.otlp import (
    UNLABELLED,
    ColumnarTraceBuilder,
    OtlpOptions,
    SpanFacts,
    SpanTrace,
    emit_trace,
    norm_id,
)
from tracetochain.readers.shared import TraceBuilder
from tracetochain.serve._store import (
    EpisodeRow,
    Store,
    WriteBatch,
    apply_batch,
    closed_among,
    expire_unclaimed_verdicts,
    facts_to_json,
)
from tracetochain.traces import TraceTable

log = logging.getLogger("tracetochain.serve")

_CLOSED_CACHE = 100_000


@dataclass(frozen=True)
class IngestSettings:
    """When traces are assembled (seconds)."""

    settle: float = 2.0
    trace_timeout: float = 120.0
    verdict_timeout: float = 300.0
    tick: float = 0.1
    #: Traces held in memory while they are assembled or wait for a verdict; beyond, the oldest is assembled now
    #: (as if it had timed out) and counted as ``open_traces_evicted`` (N6).
    max_open_traces: int = 50_000
    #: Posted verdicts kept for traces that have not arrived; beyond, the oldest is forgotten and counted as
    #: ``verdicts_evicted`` (it stays in the store's verdicts table).
    max_verdicts: int = 100_000
    #: Seconds the raw spans of an assembled trace are kept (None: for ever). Episodes keep their steps; only the
    #: spans go, so a span re-sent after that is counted as late rather than as a duplicate (N6).
    span_retention: float | None = None
    #: Seconds a posted verdict whose trace never arrived is kept (memory and store; None: for ever). Checked once a
    #: minute; expired ones are deleted and counted ``verdicts_expired``.
    verdict_retention: float | None = 86_400.0
    #: The resource (or span) attribute that names the agent: one chain per value (``--group-by``).
    group_by: str = "service.name"
    #: Distinct groups at most; episodes of further ones go to :data:`OTHER_GROUP` (a sender cannot grow memory).
    max_groups: int = 50

    def __post_init__(self) -> None:
        for name in ("settle", "trace_timeout", "verdict_timeout", "tick"):
            v = getattr(self, name)
            if not v >= 0:
                raise ValueError(f"{name} must be a number of seconds >= 0, got {v!r}")
        for name in ("span_retention", "verdict_retention"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {v!r}")
        for name in ("max_open_traces", "max_verdicts"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {v!r}")
        if not isinstance(self.group_by, str) or not self.group_by.strip():
            raise ValueError("group_by must name an attribute, e.g. service.name")
        if self.max_groups < 1:
            raise ValueError(f"max_groups must be at least 1, got {self.max_groups}")


#: The group of episodes whose spans do not carry the group attribute.
NO_GROUP = ""
#: The group of episodes beyond ``max_groups`` distinct values.
OTHER_GROUP = "(other)"
_GROUP_CHARS = 100


@dataclass(frozen=True)
class SpanAck:
    """What one export request added: new spans of open traces, re-sent ones, and spans of traces already assembled
    (late or re-sent; kept, never counted)."""

    accepted: int
    duplicates: int
    late: int


@dataclass
class _OpenTrace:
    first: float
    last: float
    spans: dict[str, SpanFacts] = field(default_factory=dict)
    has_root: bool = False
    pending_since: float | None = None  # held for a posted verdict since then
    pending_reason: str | None = None
    verdict_arrived: bool = False


class _Collector(TraceBuilder):
    """Step records and skip reasons of one trace (the reader's builder interface, never raising)."""

    def __init__(self) -> None:
        super().__init__(source="live", format="otlp", on_error="skip", location_kind="line")
        self.skips: list[tuple[str, str | None]] = []

    def skip_trace(self, message: str, *, location: int | None = None, field: str | None = None,
                   hint: str | None = None, source: str | Path | None = None) -> None:
        self.skips.append((message, field))


def normalise_id(raw: str) -> str:
    """A trace id, episode id (``trace:span``) or span id as stored: lower-case hex, no ``0x``."""
    parts = []
    for p in str(raw).strip().split(":"):
        try:
            n = norm_id(p)
        except ValueError:
            n = None
        parts.append((n or p.strip()).lower())
    return ":".join(parts)


class Ingestor:
    """The ingest thread and the in-memory view of open traces (see the module docstring)."""

    def __init__(self, store: Store, options: OtlpOptions, settings: IngestSettings | None = None,
                 on_episodes: Callable[[list[EpisodeRow]], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.options = options
        self.settings = settings or IngestSettings()
        self.on_episodes = on_episodes
        self.clock = clock
        self._queue: queue.Queue[tuple[str, Any, Future[Any] | None]] = queue.Queue()
        self._open: dict[str, _OpenTrace] = {}
        self._closed: OrderedDict[str, None] = OrderedDict()
        # Posted verdicts not used yet, by the id's first part (a trace id, or a root span id): a trace's are
        # found with a few dict lookups and dropped once it is assembled (the store keeps them all).
        self._verdicts: dict[str, dict[str, Any]] = {}
        self._verdict_received: dict[str, float] = {}  # by the same first part: when its last verdict came
        self._last_verdict_expiry = -1e18
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._last_scan = 0.0
        self._outcome_fields = {"outcome", "gen_ai.evaluation.name", "gen_ai.evaluation.score.label",
                                "gen_ai.evaluation.score.value"}
        if options.outcome_attribute:
            self._outcome_fields.add(options.outcome_attribute)
        self.failed: BaseException | None = None
        self._next_seq = 1
        # Refused requests are counted in memory and written with the next commit (or once a minute), with at most
        # one problem row per reason a minute: a flood of unauthenticated requests never writes to the store (N7).
        self._rejections: dict[str, int] = {}
        self._rejection_messages: dict[str, str] = {}
        self._rejection_lock = threading.Lock()
        self._rejections_written = clock()
        self._problem_written: dict[str, float] = {}
        #: Consecutive failed commits and the last error (N18: /healthz says "failing" after a few).
        self.commit_failures = 0
        self.commit_error: str | None = None
        self._evicted = {"open_traces_evicted": 0, "verdicts_evicted": 0}
        self._pending_evictions: dict[str, int] = {}
        self._last_expiry = -1e18
        self._groups: set[str] = set()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Resume open traces and posted verdicts from the store, then start the thread."""
        for tid, (first, last, spans) in self.store.open_trace_spans().items():
            ot = _OpenTrace(first, last)
            for s in spans:
                ot.spans[s.sid] = s
                ot.has_root = ot.has_root or s.parent is None
            self._open[tid] = ot
        for key, (verdict, received) in self.store.verdicts_received(unused_only=True,
                                                                     limit=self.settings.max_verdicts).items():
            self._remember_verdict(key, verdict, received)
        self._next_seq = self.store.last_seq() + 1  # this thread is the only writer: seq is assigned here
        self._groups = set(self.store.groups())
        self._thread = threading.Thread(target=self._run, name="tracetochain-ingest", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Commit everything queued, then stop (open traces stay in the store and resume on restart)."""
        if self._thread is None:
            return
        self._stopping.set()
        self._queue.put(("stop", None, None))
        self._thread.join(timeout)
        self._thread = None

    @property
    def open_traces(self) -> int:
        return len(self._open)

    @property
    def pending_verdicts(self) -> int:
        return sum(1 for ot in self._open.values() if ot.pending_since is not None)

    # ------------------------------------------------------------------ requests (any thread)
    def submit_spans(self, spans: list[tuple[str, SpanFacts]]) -> Future[SpanAck]:
        fut: Future[SpanAck] = Future()
        self._put("spans", spans, fut)
        return fut

    def submit_verdicts(self, verdicts: list[tuple[str, Any]]) -> Future[int]:
        fut: Future[int] = Future()
        self._put("verdicts", verdicts, fut)
        return fut

    def record_rejection(self, reason: str, message: str) -> None:
        """Count a refused request in memory (persisted with the next commit, or within a minute; nobody waits for
        it, and a refused request never causes a commit of its own)."""
        with self._rejection_lock:
            self._rejections[reason] = self._rejections.get(reason, 0) + 1
            self._rejection_messages[reason] = message

    def pending_counters(self) -> dict[str, int]:
        """Counters not in the store yet (refusals since the last commit)."""
        with self._rejection_lock:
            return {f"rejected_{k}": v for k, v in self._rejections.items()}

    def degraded(self) -> list[str]:
        """Why ingest is limited right now, for /healthz (empty when all is well)."""
        out = []
        if self.commit_failures:
            out.append(f"{self.commit_failures} consecutive commit(s) failed: {self.commit_error}")
        for name, n in self._evicted.items():
            if n:
                out.append(f"{n:,} {name.replace('_', ' ')} since start (limits: --max-open-traces "
                           f"{self.settings.max_open_traces:,}, --max-verdicts {self.settings.max_verdicts:,})")
        return out

    def _drain_rejections(self, batch: WriteBatch, now: float, force: bool) -> None:
        with self._rejection_lock:
            if not self._rejections or not (batch or force or now - self._rejections_written >= 60.0):
                return
            counts, messages = self._rejections, self._rejection_messages
            self._rejections, self._rejection_messages = {}, {}
        self._rejections_written = now
        for reason, n in counts.items():
            batch.count(f"rejected_{reason}", n)
            if now - self._problem_written.get(reason, -1e18) >= 60.0:
                self._problem_written[reason] = now
                suffix = f" ({n:,} such requests since the last record)" if n > 1 else ""
                batch.problems.append((now, f"request:{reason}", None, messages[reason] + suffix))

    def record_alert(self, payload: dict[str, Any]) -> Future[None]:
        """Store an alert (its ``key`` is unique: a second alert with the same key is ignored); the future is done
        once it is committed, so the alert hub sends only what is on disk (never twice after a crash)."""
        fut: Future[None] = Future()
        self._put("alert", payload, fut)
        return fut

    def record_delivery(self, key: str, attempt: int, ok: int, detail: str | None) -> None:
        """One webhook delivery attempt (``ok``: 1 delivered, 0 failed and retried, −1 given up)."""
        self._put("delivery", (key, attempt, ok, detail), None)

    def _put(self, kind: str, payload: Any, fut: Future[Any] | None) -> None:
        if self._stopping.is_set() or self._thread is None:
            if fut is not None:
                fut.set_exception(RuntimeError("the server is shutting down"))
            return
        self._queue.put((kind, payload, fut))

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        con = self.store.writer()
        try:
            while True:
                try:
                    first = self._queue.get(timeout=self.settings.tick)
                    items = [first]
                except queue.Empty:
                    items = []
                n_spans = 0
                while len(items) < 1000 and n_spans < 100_000:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    items.append(item)
                    if item[0] == "spans":
                        n_spans += len(item[1])
                stop = any(kind == "stop" for kind, _, _ in items)
                self._process(con, items, final=stop)
                if stop:
                    return
        except BaseException as exc:  # never silently: the health endpoint reports it and requests get 503
            self.failed = exc
            log.exception("the ingest thread stopped")
            while True:
                try:
                    _, _, fut = self._queue.get_nowait()
                except queue.Empty:
                    break
                if fut is not None and not fut.done():
                    fut.set_exception(RuntimeError(f"the ingest thread stopped: {exc}"))
        finally:
            con.close()

    def _process(self, con: Any, items: list[tuple[str, Any, Future[Any] | None]], *, final: bool) -> None:
        now = self.clock()
        batch = WriteBatch()
        results: list[tuple[Future[Any], Any]] = []
        new_tids = {tid for kind, payload, _ in items if kind == "spans" for tid, _ in payload
                    if tid not in self._open and tid not in self._closed}
        already_closed = closed_among(con, new_tids) if new_tids else set()
        for kind, payload, fut in items:
            if kind == "spans":
                ack = self._take_spans(payload, now, already_closed, batch)
                if fut is not None:
                    results.append((fut, ack))
            elif kind == "verdicts":
                closed = closed_among(con, {key.split(":", 1)[0] for key, _ in payload})
                for key, verdict in payload:
                    batch.verdicts.append((key, json.dumps(verdict), now))
                    tid = key.split(":", 1)[0]
                    if tid in closed:  # its episodes were decided already: stored, counted, not applied
                        batch.count("late_verdicts")
                        continue
                    self._remember_verdict(key, verdict, now)
                    ot = self._open.get(tid)
                    if ot is not None:
                        ot.verdict_arrived = True
                batch.count("verdicts", len(payload))
                if fut is not None:
                    results.append((fut, len(payload)))
            elif kind == "alert":
                batch.alerts.append((now, json.dumps(payload, allow_nan=False), payload["key"], payload["kind"],
                                     payload.get("group") or "", payload.get("status") or ""))
                if fut is not None:
                    results.append((fut, None))
            elif kind == "delivery":
                key, attempt, ok, detail = payload
                batch.deliveries.append((key, attempt, now, ok, detail))
        self._drain_rejections(batch, now, final)
        # 1. What was sent is committed, then acknowledged: assembly never delays a 200.
        if batch:
            try:
                apply_batch(con, batch)
            except Exception as exc:
                self.commit_failures += 1
                self.commit_error = str(exc)
                log.exception("commit failed; reloading the open traces from the store")
                for fut, _ in results:
                    fut.set_exception(exc)
                self._reload()
                return
            self.commit_failures, self.commit_error = 0, None
        for fut, value in results:
            fut.set_result(value)
        # 2. Traces that are due become episodes, in their own transaction (episodes, closed traces and the open
        # traces' removal together, so a crash leaves each trace either open or assembled, never both).
        if final or not (now - self._last_scan >= self.settings.tick or len(self._open) < 64):
            return
        self._last_scan = now
        self._expire_spans(con, now)
        self._expire_verdicts(con, now)
        done = WriteBatch()
        decided = self._assemble_due(now, done)
        if not done:
            return
        try:
            apply_batch(con, done)
        except Exception:
            log.exception("commit of assembled episodes failed; reloading the open traces from the store")
            self._reload()
            return
        if decided and self.on_episodes is not None:
            rows = [EpisodeRow(seq, episode_id, trace_id, closed, t_start, outcome, tuple(json.loads(states)), *rest)
                    for seq, episode_id, trace_id, closed, t_start, outcome, states, _, *rest in done.episodes]
            try:
                self.on_episodes(rows)
            except Exception:  # the analysis must never stop ingest
                log.exception("live analysis failed on new episodes")

    def _expire_spans(self, con: Any, now: float) -> None:
        """Delete the spans of traces assembled more than ``span_retention`` seconds ago (once a minute)."""
        keep = self.settings.span_retention
        if keep is None or now - self._last_expiry < 60.0:
            return
        self._last_expiry = now
        try:
            con.execute("BEGIN IMMEDIATE")
            gone = con.execute("DELETE FROM spans WHERE trace_id IN (SELECT trace_id FROM closed_traces WHERE "
                               "closed < ?)", (now - keep,)).rowcount
            if gone:
                con.execute("INSERT INTO counters VALUES ('spans_expired', ?) ON CONFLICT (name) DO UPDATE SET "
                            "value = value + excluded.value", (gone,))
            con.execute("COMMIT")
        except Exception:
            if con.in_transaction:
                con.execute("ROLLBACK")
            log.exception("expiring old spans failed (they stay; retried in a minute)")

    def _expire_verdicts(self, con: Any, now: float) -> None:
        """Forget posted verdicts whose trace has not arrived ``verdict_retention`` seconds after they came (memory
        and store, once a minute; a verdict of a trace that is open now is kept: it is about to be used)."""
        keep = self.settings.verdict_retention
        if keep is None or now - self._last_verdict_expiry < 60.0:
            return
        self._last_verdict_expiry = now
        cutoff = now - keep
        for first, received in list(self._verdict_received.items()):
            if received < cutoff and first not in self._open:
                del self._verdict_received[first]
                self._verdicts.pop(first, None)
        try:
            expire_unclaimed_verdicts(con, cutoff)
        except Exception:
            log.exception("expiring unclaimed verdicts failed (they stay; retried in a minute)")

    def _reload(self) -> None:
        self._open.clear()
        self._closed.clear()  # it may hold traces of the failed commit; the store answers for the rest
        self._next_seq = self.store.last_seq() + 1
        for tid, (first, last, spans) in self.store.open_trace_spans().items():
            ot = _OpenTrace(first, last)
            for s in spans:
                ot.spans[s.sid] = s
                ot.has_root = ot.has_root or s.parent is None
            self._open[tid] = ot

    def _take_spans(self, spans: list[tuple[str, SpanFacts]], now: float, already_closed: set[str],
                    batch: WriteBatch) -> SpanAck:
        accepted = duplicates = late = 0
        for tid, span in spans:
            ot = self._open.get(tid)
            if ot is None:
                if tid in self._closed or tid in already_closed:
                    late += 1
                    batch.late_spans.append((tid, span.sid, span.parent, now, facts_to_json(span)))
                    continue
                ot = self._open[tid] = _OpenTrace(now, now)
            if span.sid in ot.spans:
                duplicates += 1
                continue
            ot.spans[span.sid] = span
            ot.last = now
            ot.has_root = ot.has_root or span.parent is None
            batch.spans.append((tid, span.sid, span.parent, now, facts_to_json(span)))
            prev = batch.open_upserts.get(tid)
            batch.open_upserts[tid] = (prev[0] if prev else ot.first, now)
            accepted += 1
        batch.count("spans_received", accepted)
        batch.count("spans_duplicate", duplicates)  # late ones are told apart from re-sent ones at the commit
        return SpanAck(accepted, duplicates, late)

    def _remember_verdict(self, key: str, verdict: Any, received: float) -> None:
        if isinstance(verdict, list) and len(verdict) == 3 and verdict[0] == "pair":
            verdict = tuple(verdict)  # the reader's (outcome, reward) pair, stored as a JSON list
        first = key.split(":", 1)[0]
        self._verdicts.setdefault(first, {})[key] = verdict
        self._verdict_received[first] = received
        if len(self._verdicts) > self.settings.max_verdicts:  # the oldest first (dicts keep insertion order)
            oldest = next(iter(self._verdicts))
            del self._verdicts[oldest]
            self._verdict_received.pop(oldest, None)
            self._evicted["verdicts_evicted"] += 1
            self._pending_evictions["verdicts_evicted"] = self._pending_evictions.get("verdicts_evicted", 0) + 1

    # ------------------------------------------------------------------ assembly
    def _assemble_due(self, now: float, batch: WriteBatch) -> list[tuple[str, list[dict[str, Any]]]]:
        s = self.settings
        builder = ColumnarTraceBuilder(source="live", format="otlp", on_error="skip", location_kind="line")
        finished: list[str] = []
        groups: dict[str, str] = {}
        zero_step: list[dict[str, Any]] = []
        for name, n in self._pending_evictions.items():
            batch.count(name, n)
        self._pending_evictions = {}
        excess = len(self._open) - s.max_open_traces
        evict = set(itertools.islice(self._open, excess)) if excess > 0 else set()
        if evict:
            self._evicted["open_traces_evicted"] += len(evict)
            batch.count("open_traces_evicted", len(evict))
        for tid, ot in list(self._open.items()):
            quiet = now - ot.last
            if tid in evict:  # over the limit: assembled now, as if it had timed out
                timed_out = True
            elif ot.pending_since is not None:
                timed_out = now - ot.pending_since >= s.verdict_timeout
                if not (ot.verdict_arrived or timed_out):
                    continue
            else:
                timed_out = False
                if not ((ot.has_root and quiet >= s.settle) or quiet >= s.trace_timeout):
                    continue
            collector = self._attempt(tid, ot)
            waiting = [m for m, f in collector.skips if f in self._outcome_fields]
            if waiting:
                if not timed_out:
                    if ot.pending_since is None:
                        ot.pending_since = now
                    ot.pending_reason = waiting[0]
                    ot.verdict_arrived = False
                    continue
                # No verdict came: the episode is kept as an unlabelled run, never dropped.
                collector = self._attempt(tid, ot, keep_unlabelled=True)
            for source, n in collector.outcome_sources.items():
                batch.count(f"outcome_{source}", n)
            for message, fieldname in collector.skips:
                batch.problems.append((now, "episode", tid, f"{message}" + (f" [{fieldname}]" if fieldname else "")))
            for p in collector.problems:
                batch.problems.append((now, "episode", tid, p.message))
            batch.count("episodes_dropped", len(collector.skips) + len(collector.problems))
            for rec in collector.records:
                if "step_idx" not in rec:  # an episode that ended before any step: kept as it is (no table row)
                    zero_step.append(rec)
                    continue
                # The reader's own builder and validation, as `fit` reads a file; the location is the trace's
                # place in `finished`, so a problem found when the table is built names its trace.
                builder.add_step(rec, len(finished))
            finished.append(tid)
        if not finished:
            return []
        for tid in finished:
            groups[tid] = self._group_of(self._open[tid])
            del self._open[tid]
            self._closed[tid] = None
            batch.closed.append((tid, now))
            if self._verdicts:
                self._verdicts.pop(tid, None)
                self._verdict_received.pop(tid, None)
        while len(self._closed) > _CLOSED_CACHE:
            self._closed.popitem(last=False)
        out = self._zero_step_episodes(zero_step, now, batch, groups)
        if not builder.n_steps:
            return out
        try:
            table = builder.build()
        except Exception as exc:  # a table the reader's validation refuses whole: counted, never stops ingest
            log.warning("live: %d traces could not be built into episodes (%s)", len(finished), exc)
            batch.count("episodes_dropped", len(finished))
            batch.problems.append((now, "episode", None, f"the traces could not be built into episodes: {exc}"[:2000]))
            return out
        report = table.report
        if report.n_traces_skipped:
            batch.count("episodes_dropped", report.n_traces_skipped)
            for p in report.problems:
                at = p.location
                tid_of = finished[at] if isinstance(at, int) and 0 <= at < len(finished) else None
                batch.problems.append((now, "episode", tid_of, p.message))
        return out + self._episodes_of(table, now, batch, groups)

    def _zero_step_episodes(self, records: list[dict[str, Any]], now: float, batch: WriteBatch,
                            groups: dict[str, str]) -> list[tuple[str, list[dict[str, Any]]]]:
        """Episodes that ended before any agent step (a root span with an outcome, or an unlabelled root): stored
        with no state and no step row (the step table — report, Parquet export — has none for them), counted like
        every other episode in the live view."""
        out: list[tuple[str, list[dict[str, Any]]]] = []
        unlabelled = 0
        for rec in records:
            record = {k: v for k, v in rec.items() if v is not None}
            eid = str(record.get("trace_id"))
            tid = eid.split(":", 1)[0]
            outcome = str(record.get("outcome"))
            if outcome == "censored" and record.get("termination_reason") == UNLABELLED:
                outcome = UNLABELLED
                unlabelled += 1
            batch.episodes.append((self._next_seq, eid, tid, now, None, outcome, "[]", "[]",
                                   groups.get(tid, NO_GROUP), 0, None, None, None))
            self._next_seq += 1
            out.append((eid, []))
        batch.count("episodes", len(out))
        batch.count("episodes_unlabelled", unlabelled)
        return out

    def _group_of(self, ot: _OpenTrace) -> str:
        """The trace's group: the ``group_by`` attribute on its root span (or its resource), else on any span;
        :data:`NO_GROUP` without it; :data:`OTHER_GROUP` beyond ``max_groups`` distinct values."""
        key = self.settings.group_by
        value: Any = None
        for span in sorted(ot.spans.values(), key=lambda sp: sp.parent is not None):
            for attrs in (span.user, span.resource):
                if attrs and attrs.get(key) not in (None, ""):
                    value = attrs[key]
                    break
            if value is not None:
                break
        if value is None:
            return NO_GROUP
        group = str(value).strip()[:_GROUP_CHARS]
        if group not in self._groups:
            if len(self._groups) >= self.settings.max_groups:
                return OTHER_GROUP
            self._groups.add(group)
        return group

    def _attempt(self, tid: str, ot: _OpenTrace, *, keep_unlabelled: bool = False) -> _Collector:
        trace = SpanTrace(tid, 0)
        trace.spans = dict(ot.spans)
        opts = self.options
        if self._verdicts:
            mine = dict(self._verdicts.get(tid, {}))
            for sid in ot.spans:  # verdicts posted by root span id
                mine.update(self._verdicts.get(sid, {}))
            if mine:  # the reader's last outcome source (one rule offline and live: readers.otlp._outcomes._outcome)
                opts = dataclasses.replace(opts, posted=mine)
        if keep_unlabelled:
            opts = dataclasses.replace(opts, keep_unlabelled=True)
        collector = _Collector()
        emit_trace(trace, opts, collector)
        return collector

    def _episodes_of(self, table: TraceTable, now: float, batch: WriteBatch,
                     groups: dict[str, str]) -> list[tuple[str, list[dict[str, Any]]]]:
        codes, names = table.state_labels()
        offsets = table.offsets.tolist()
        rows = table.to_arrow().to_pylist()
        out: list[tuple[str, list[dict[str, Any]]]] = []
        outcome_names = ("success", "failure", "censored", "invalid")
        outcomes = table.outcomes().tolist()
        code_list = codes.tolist()
        unlabelled = 0
        for i, eid in enumerate(table.trace_ids):
            lo, hi = offsets[i], offsets[i + 1]
            steps = [{k: v for k, v in r.items() if v is not None} for r in rows[lo:hi]]
            t_values = [r["t_start"] for r in steps if "t_start" in r]
            t_ends = [r["t_end"] for r in steps if "t_end" in r]
            costs = [r["cost_usd"] for r in steps if "cost_usd" in r]
            tokens = [r.get("tokens_in", 0) + r.get("tokens_out", 0) for r in steps
                      if "tokens_in" in r or "tokens_out" in r]
            states = [names[c] for c in code_list[lo:hi]]
            tid = eid.split(":", 1)[0]
            outcome = outcome_names[outcomes[i]]
            if outcome == "censored" and steps and steps[0].get("termination_reason") == UNLABELLED:
                outcome = UNLABELLED
                unlabelled += 1
            t0 = min(t_values) if t_values else None
            batch.episodes.append((self._next_seq, eid, tid, now, t0, outcome, json.dumps(states, ensure_ascii=False),
                                   json.dumps(steps, ensure_ascii=False, allow_nan=False), groups.get(tid, NO_GROUP),
                                   hi - lo, float(sum(costs)) if costs else None, int(sum(tokens)) if tokens else None,
                                   max(t_ends) - t0 if t_ends and t0 is not None else None))
            self._next_seq += 1
            out.append((eid, steps))
        batch.count("episodes", len(out))
        batch.count("episodes_unlabelled", unlabelled)
        return out
