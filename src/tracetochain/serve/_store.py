"""The embedded store of the live service: one SQLite database file in WAL mode.

Why SQLite (measured in ``benchmarks/bench_serve.py``, argued in the README): the receiver's workload is many small
appends, each of which must be durable before the sender gets its 200, plus concurrent readers (dashboard, report
of a window) while the writer runs. SQLite in write-ahead-log mode gives exactly that: a commit is one append to the
log (``synchronous=FULL``: fsync'd, so it survives power loss; ``NORMAL``: survives a killed process), readers never
block the writer, it ships with Python, and the file is readable by any SQLite tool. Analytical scans go to
Parquet (:meth:`Store.export_parquet`), where the partitioned engines read them.

Tables
------
* ``spans`` — every acknowledged span, keyed by (trace id, span id): a re-sent span is stored once. ``facts`` holds
  what the OTLP mapping needs (``readers.otlp`` span facts) as JSON.
* ``open_traces`` — traces whose episodes are not decided yet (restart resumes them from ``spans``).
* ``closed_traces`` — traces already assembled (a span arriving later is kept and counted as late).
* ``verdicts`` — outcomes posted after the fact (``POST /v1/verdicts``), keyed by trace or episode id.
* ``episodes`` — assembled episodes in the order they were decided (``seq``): outcome, state sequence and the
  canonical step records (what the report and the Parquet export read).
* ``problems`` — episodes that could not be used (no outcome, no step…) and rejected requests, with the reason.
* ``alerts`` — every alert raised, as sent to the sinks, with its identity ``key`` (unique: an alert is an event,
  stored and sent once, never again after a restart) and its ``kind``, ``grp`` and ``status`` for the counters.
* ``deliveries`` — every webhook delivery attempt of an alert (attempt number, time, ``ok``: 1 delivered, 0 failed
  and retried, −1 failed and given up; the reason).
* ``counters`` — running totals that must survive a restart (spans received, duplicates, late spans, …).

Only the ingest thread writes (one connection, group commit); every reader opens its own connection.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tracetochain.exceptions import TraceToChainError
from tracetochain.readers.otlp import SpanFacts

STORE_SCHEMA_VERSION = 1
Durability = Literal["full", "normal"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spans (
    trace_id TEXT NOT NULL, span_id TEXT NOT NULL, parent_id TEXT, received REAL NOT NULL, facts TEXT NOT NULL,
    PRIMARY KEY (trace_id, span_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS open_traces (
    trace_id TEXT PRIMARY KEY, first_received REAL NOT NULL, last_received REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS closed_traces (trace_id TEXT PRIMARY KEY, closed REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS verdicts (id TEXT PRIMARY KEY, verdict TEXT NOT NULL, received REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS episodes (
    seq INTEGER PRIMARY KEY, episode_id TEXT NOT NULL UNIQUE, trace_id TEXT NOT NULL, closed REAL NOT NULL,
    t_start REAL, outcome TEXT NOT NULL, states TEXT NOT NULL, steps TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS episodes_by_start ON episodes (t_start);
CREATE TABLE IF NOT EXISTS problems (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, kind TEXT NOT NULL, trace_id TEXT, message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS alerts (id INTEGER PRIMARY KEY, at REAL NOT NULL, payload TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deliveries (
    id INTEGER PRIMARY KEY, alert_key TEXT NOT NULL, attempt INTEGER NOT NULL, at REAL NOT NULL, ok INTEGER NOT NULL,
    detail TEXT);
CREATE INDEX IF NOT EXISTS deliveries_by_alert ON deliveries (alert_key);
"""

# Columns added after the first release of the store: (table, column, declaration). A store written before gets
# them on open (SQLite's ALTER TABLE ADD COLUMN is cheap: existing rows read the default), so no version bump.
_ADDED_COLUMNS = (
    ("alerts", "key", "TEXT"),
    ("alerts", "kind", "TEXT"),
    ("alerts", "grp", "TEXT"),
    ("alerts", "status", "TEXT"),
    ("episodes", "grp", "TEXT NOT NULL DEFAULT ''"),
    ("episodes", "n_steps", "INTEGER"),
    ("episodes", "cost", "REAL"),
    ("episodes", "tokens", "INTEGER"),
    ("episodes", "duration", "REAL"),
)
_ADDED_INDEXES = (
    "CREATE UNIQUE INDEX IF NOT EXISTS alerts_by_key ON alerts (key)",
    "CREATE INDEX IF NOT EXISTS episodes_by_group ON episodes (grp, seq)",
)


def _add_columns(con: sqlite3.Connection) -> None:
    for table, column, decl in _ADDED_COLUMNS:
        have = {str(r[1]) for r in con.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            con.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
    for stmt in _ADDED_INDEXES:
        con.execute(stmt)

# The order of a span's facts in its JSON array (ids, parent and times have their own columns).
_FACT_FIELDS = ("name", "kind", "agent_root", "start", "end", "error", "error_type", "tool", "tokens_in",
                "tokens_out", "cost", "text", "user", "evals", "finish", "resource", "state")


class StoreError(TraceToChainError, RuntimeError):
    """The store file cannot be opened or written (the message names the file and the reason)."""


def facts_to_json(span: SpanFacts) -> str:
    """A span's facts as compact JSON (NaN/∞ usage values were already dropped by the mapping)."""
    return json.dumps([getattr(span, f) for f in _FACT_FIELDS], ensure_ascii=False, separators=(",", ":"))


def facts_from_row(span_id: str, parent_id: str | None, facts: str) -> SpanFacts:
    """The span facts of a stored row (the inverse of :func:`facts_to_json`)."""
    span = SpanFacts()
    span.sid, span.parent = span_id, parent_id
    for name, value in zip(_FACT_FIELDS, json.loads(facts), strict=True):
        setattr(span, name, value)
    if span.evals is not None:
        span.evals = [tuple(e) for e in span.evals]  # type: ignore[misc]
    return span


@dataclass(frozen=True)
class EpisodeRow:
    """One decided episode, as the live analysis consumes it."""

    seq: int
    episode_id: str
    trace_id: str
    closed: float
    t_start: float | None
    outcome: str
    states: tuple[str, ...]
    group: str = ""  # the agent (``service.name`` or the ``--group-by`` attribute); "" when absent
    n_steps: int | None = None
    cost: float | None = None  # USD, summed over the steps that report it
    tokens: int | None = None  # input + output tokens
    duration: float | None = None  # seconds from the first step's start to the last step's end


class Store:
    """The SQLite store. Create once per process; :meth:`writer` is the ingest thread's connection."""

    def __init__(self, path: str | Path, *, durability: Durability = "full") -> None:
        self.path = Path(path)
        if durability not in ("full", "normal"):
            raise ValueError(f"durability must be 'full' or 'normal', got {durability!r}")
        self.durability = durability
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as con:
                con.executescript(_SCHEMA)
                _add_columns(con)
                row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                if row is None:
                    con.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(STORE_SCHEMA_VERSION),))
                elif int(row[0]) != STORE_SCHEMA_VERSION:
                    raise StoreError(f"{self.path}: store schema version {row[0]}, this version of tracetochain "
                                     f"reads version {STORE_SCHEMA_VERSION}; export it with the version that "
                                     "wrote it, or start a new store")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot open the store ({exc}); is it a tracetochain store file?") from None
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot create the store ({exc.strerror or exc})") from None
        self._local = threading.local()
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Hold the store for this process (an exclusive ``flock`` on ``STORE.lock``): a second server on the same
        store is refused, instead of both assigning episode numbers from their own start (N19). Released by
        :meth:`unlock` or when the process ends (the kernel drops the lock with the file descriptor)."""
        if self._lock_fd is not None:
            return
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock (documented)
            return
        path = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StoreError(f"{path}: cannot create the store's lock file ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreError(f"{self.path}: another tracetochain serve is using this store; stop it first, or give "
                             "this one its own --store") from None
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    # ------------------------------------------------------------------ connections
    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute(f"PRAGMA synchronous={self.durability.upper()}")
        con.execute("PRAGMA busy_timeout=30000")
        return con

    def writer(self) -> sqlite3.Connection:
        """A new connection for the single writing thread (autocommit off via explicit BEGIN)."""
        return self._connect()

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A read connection for the calling thread (kept per thread; WAL readers never block the writer)."""
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._connect()
            con.execute("PRAGMA query_only=ON")
            self._local.con = con
        yield con

    # ------------------------------------------------------------------ reads
    def last_seq(self) -> int:
        """The ``seq`` of the last decided episode (0 when there is none)."""
        with self.reading() as con:
            row = con.execute("SELECT MAX(seq) FROM episodes").fetchone()
        return int(row[0] or 0)

    def counters(self) -> dict[str, int]:
        with self.reading() as con:
            return {str(k): int(v) for k, v in con.execute("SELECT name, value FROM counters")}

    def span_ids(self) -> list[tuple[str, str]]:
        """Every stored (trace id, span id), for checks and tests."""
        with self.reading() as con:
            return [(str(t), str(s)) for t, s in con.execute("SELECT trace_id, span_id FROM spans")]

    def episodes(self, *, after_seq: int = 0, limit: int | None = None) -> list[EpisodeRow]:
        """Decided episodes in the order they were decided (``seq`` > ``after_seq``)."""
        q = ("SELECT seq, episode_id, trace_id, closed, t_start, outcome, states, grp, n_steps, cost, tokens, "
             "duration FROM episodes WHERE seq > ? ORDER BY seq")
        args: tuple[Any, ...] = (after_seq,)
        if limit is not None:
            q += " LIMIT ?"
            args = (after_seq, limit)
        with self.reading() as con:
            return [EpisodeRow(int(s), str(e), str(t), float(c), ts, str(o), tuple(json.loads(st)), str(g or ""),
                               *usage) for s, e, t, c, ts, o, st, g, *usage in con.execute(q, args)]

    def iter_episodes(self, batch: int = 10_000) -> Iterator[list[EpisodeRow]]:
        """All decided episodes in ``seq`` order, a batch at a time (restart recounts from these)."""
        after = 0
        while True:
            rows = self.episodes(after_seq=after, limit=batch)
            if not rows:
                return
            yield rows
            after = rows[-1].seq

    def steps_of(self, *, seqs: Sequence[int] | None = None, seq_range: tuple[int, int] | None = None,
                 time_range: tuple[float, float] | None = None, episode_ids: Sequence[str] | None = None,
                 group: str | None = None) -> list[dict[str, Any]]:
        """Canonical step records of the selected episodes (in ``seq`` order); ``group``: of that agent only
        (``seq_range`` then counts the group's own episodes, as its count windows do)."""
        args: tuple[Any, ...]
        if group is not None:
            return self._group_steps(group, seq_range=seq_range, time_range=time_range)
        if seqs is not None:
            q, args = f"SELECT steps FROM episodes WHERE seq IN ({','.join('?' * len(seqs))}) ORDER BY seq", \
                tuple(seqs)
        elif seq_range is not None:
            q, args = "SELECT steps FROM episodes WHERE seq >= ? AND seq < ? ORDER BY seq", seq_range
        elif time_range is not None:
            q, args = ("SELECT steps FROM episodes WHERE COALESCE(t_start, closed) >= ? "
                       "AND COALESCE(t_start, closed) < ? ORDER BY seq"), time_range
        elif episode_ids is not None:
            q, args = (f"SELECT steps FROM episodes WHERE episode_id IN ({','.join('?' * len(episode_ids))}) "
                       "ORDER BY seq"), tuple(episode_ids)
        else:
            q, args = "SELECT steps FROM episodes ORDER BY seq", ()
        out: list[dict[str, Any]] = []
        with self.reading() as con:
            for (steps,) in con.execute(q, args):
                out.extend(json.loads(steps))
        return out

    def _group_steps(self, group: str, *, seq_range: tuple[int, int] | None,
                     time_range: tuple[float, float] | None) -> list[dict[str, Any]]:
        q = "SELECT steps FROM episodes WHERE grp = ?"
        args: list[Any] = [group]
        if time_range is not None:
            q += " AND COALESCE(t_start, closed) >= ? AND COALESCE(t_start, closed) < ?"
            args += list(time_range)
        q += " ORDER BY seq"
        if seq_range is not None:  # the group's k-th episode, not the store's
            q += " LIMIT ? OFFSET ?"
            args += [max(0, seq_range[1] - seq_range[0]), max(0, seq_range[0] - 1)]
        out: list[dict[str, Any]] = []
        with self.reading() as con:
            for (steps,) in con.execute(q, args):
                out.extend(json.loads(steps))
        return out

    def groups(self) -> dict[str, int]:
        """Episodes stored per group."""
        with self.reading() as con:
            return {str(g or ""): int(n) for g, n in con.execute("SELECT grp, COUNT(*) FROM episodes GROUP BY grp")}

    def episode(self, episode_id: str) -> dict[str, Any] | None:
        """One episode with its steps, or None."""
        with self.reading() as con:
            row = con.execute("SELECT seq, episode_id, trace_id, closed, t_start, outcome, states, steps, grp "
                              "FROM episodes WHERE episode_id = ?", (episode_id,)).fetchone()
        if row is None:
            return None
        seq, eid, tid, closed, t_start, outcome, states, steps, grp = row
        return {"seq": seq, "episode_id": eid, "trace_id": tid, "closed": closed, "t_start": t_start,
                "outcome": outcome, "states": json.loads(states), "steps": json.loads(steps), "group": grp or ""}

    def open_trace_spans(self) -> dict[str, tuple[float, float, list[SpanFacts]]]:
        """Spans of every open trace with its first/last receive times (restart resumes them)."""
        out: dict[str, tuple[float, float, list[SpanFacts]]] = {}
        with self.reading() as con:
            for tid, first, last in con.execute("SELECT trace_id, first_received, last_received FROM open_traces"):
                out[str(tid)] = (float(first), float(last), [])
            for tid, sid, parent, facts in con.execute(
                    "SELECT s.trace_id, s.span_id, s.parent_id, s.facts FROM spans s JOIN open_traces o "
                    "ON s.trace_id = o.trace_id"):
                out[str(tid)][2].append(facts_from_row(sid, parent, facts))
        return out

    def verdicts(self, *, unused_only: bool = False, limit: int | None = None) -> dict[str, Any]:
        """Posted verdicts by id; ``unused_only``: only those whose trace is not assembled yet; ``limit``: only the
        most recently received ones (returned oldest first)."""
        return {k: v for k, (v, _) in self.verdicts_received(unused_only=unused_only, limit=limit).items()}

    def verdicts_received(self, *, unused_only: bool = False, limit: int | None = None) -> dict[str, tuple[Any, float]]:
        """As :meth:`verdicts`, with each verdict's receive time: ``{id: (verdict, received)}``."""
        q = "SELECT id, verdict, received FROM verdicts v"
        if unused_only:
            q += f" WHERE {_UNCLAIMED}"
        args: tuple[Any, ...] = ()
        if limit is not None:
            q = f"SELECT id, verdict, received FROM ({q} ORDER BY v.received DESC LIMIT ?) ORDER BY received"
            args = (limit,)
        with self.reading() as con:
            return {str(k): (json.loads(v), float(t)) for k, v, t in con.execute(q, args)}

    def problems(self, limit: int = 50) -> list[dict[str, Any]]:
        with self.reading() as con:
            return [{"at": at, "kind": kind, "trace_id": tid, "message": msg} for at, kind, tid, msg in con.execute(
                "SELECT at, kind, trace_id, message FROM problems ORDER BY id DESC LIMIT ?", (limit,))]

    def alerts(self, limit: int = 100, *, group: str | None = None) -> list[dict[str, Any]]:
        """The latest alerts, newest first, each with its ``key`` and its webhook ``delivery`` record
        (``{"attempts", "status": "delivered" | "failed" | "pending", "last_error"}``; None without a webhook)."""
        q = "SELECT payload, key FROM alerts"
        args: tuple[Any, ...] = (limit,)
        if group is not None:
            q += " WHERE grp = ?"
            args = (group, limit)
        with self.reading() as con:
            rows = con.execute(q + " ORDER BY id DESC LIMIT ?", args).fetchall()
            keys = [str(k) for _, k in rows if k is not None]
            tried: dict[str, tuple[int, int, int, str | None]] = {}
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                for key, n, best, worst, detail in con.execute(
                        "SELECT alert_key, COUNT(*), MAX(ok), MIN(ok), (SELECT d2.detail FROM deliveries d2 WHERE "
                        "d2.alert_key = d.alert_key ORDER BY d2.id DESC LIMIT 1) FROM deliveries d WHERE alert_key IN "
                        f"({','.join('?' * len(chunk))}) GROUP BY alert_key", chunk):
                    tried[str(key)] = (int(n), int(best), int(worst), detail)
        out = []
        for payload, key in rows:
            alert = json.loads(payload)
            if key is not None:
                alert["key"] = key
                if key in tried:
                    n, best, worst, detail = tried[key]
                    status = "delivered" if best == 1 else "failed" if worst == -1 else "pending"
                    alert["delivery"] = {"attempts": n, "status": status,
                                         "last_error": None if best == 1 else detail}
            out.append(alert)
        return out

    def alert_keys(self) -> set[str]:
        """The identity of every alert ever raised (an alert with one of these keys is never sent again)."""
        with self.reading() as con:
            return {str(k) for (k,) in con.execute("SELECT key FROM alerts WHERE key IS NOT NULL")}

    def alert_counts(self) -> list[tuple[str, str, str, int]]:
        """(kind, group, status, number) of the stored alerts: what ``/metrics`` counts, so it equals the list."""
        with self.reading() as con:
            return [(str(k or ""), str(g or ""), str(s or ""), int(n)) for k, g, s, n in con.execute(
                "SELECT kind, grp, status, COUNT(*) FROM alerts GROUP BY kind, grp, status")]

    def rule_states(self) -> dict[tuple[str, str], bool]:
        """The last status (firing or not) of every (rule, group) that ever alerted, so a restart resumes it."""
        out: dict[tuple[str, str], bool] = {}
        with self.reading() as con:
            for payload, grp, status in con.execute(
                    "SELECT payload, grp, status FROM alerts WHERE kind = 'rule' ORDER BY id"):
                rule = json.loads(payload).get("rule")
                if isinstance(rule, str):
                    out[(rule, str(grp or ""))] = status == "firing"
        return out

    def undelivered(self, max_attempts: int) -> list[dict[str, Any]]:
        """Alerts whose webhook delivery neither succeeded nor used its ``max_attempts`` (a restart finishes them;
        it never re-sends a delivered one), oldest first, each with its ``key`` and attempts so far."""
        with self.reading() as con:
            rows = con.execute(
                "SELECT a.payload, a.key, COUNT(d.id), COALESCE(MAX(d.ok), 0), COALESCE(MIN(d.ok), 0) FROM alerts a "
                "LEFT JOIN deliveries d ON d.alert_key = a.key WHERE a.key IS NOT NULL GROUP BY a.id "
                "ORDER BY a.id").fetchall()
        out = []
        for payload, key, n, best, worst in rows:
            if best != 1 and worst != -1 and int(n) < max_attempts:
                alert = json.loads(payload)
                alert["key"] = key
                out.append((alert, int(n)))
        return [{**a, "_attempts_done": n} for a, n in out]

    def export_parquet(self, path: str | Path, *, batch: int = 20_000) -> int:
        """Write every decided episode's canonical steps as one Parquet file at ``path`` (a temporary file the
        caller owns; user-named outputs go through :func:`export_store`); returns the number of episodes."""
        with open(path, "wb") as fh:
            return self.write_parquet(fh, batch=batch)

    def write_parquet(self, sink: Any, *, batch: int = 20_000) -> int:
        """Write every decided episode's canonical steps as Parquet into the binary file ``sink`` (the engines'
        input); returns the number of episodes written. Streams in batches of episodes, so memory stays bounded."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from tracetochain.traces import COLUMNS, TRACE_SCHEMA_VERSION

        schema = pa.schema([(c.name, c.type) for c in COLUMNS]).with_metadata(
            {b"tracetochain.trace_schema_version": str(TRACE_SCHEMA_VERSION).encode()})
        n = 0
        with pq.ParquetWriter(sink, schema) as fh, self.reading() as con:
            after = 0
            while True:
                rows = con.execute("SELECT seq, steps FROM episodes WHERE seq > ? ORDER BY seq LIMIT ?",
                                   (after, batch)).fetchall()
                if not rows:
                    break
                records = [r for _, steps in rows for r in json.loads(steps)]
                fh.write_table(pa.Table.from_pylist(records, schema=schema))
                n += len(rows)
                after = rows[-1][0]
        return n


def export_store(store: str | Path, out: str | Path, *, overwrite: bool = False) -> int:
    """``serve --export-parquet``: the decided episodes of an existing store as canonical Parquet at ``out``,
    through the one safe writer (N10): no existing file replaced without ``overwrite``, no symbolic link followed,
    never the store itself or its ``-wal``/``-shm`` files, published atomically. A store that does not exist is an
    error (a mistyped path must not export "0 episodes" from a new empty store)."""
    from tracetochain._files import check_output_path, write_output

    path = Path(store)
    if not path.is_file():
        raise StoreError(f"{path}: no such store file; name the --store the server wrote")
    inputs = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"),
              path.with_name(path.name + ".lock")]
    check_output_path(out, overwrite=overwrite, inputs=inputs, what="Parquet export")
    source = Store(path)
    written: list[int] = []
    write_output(out, lambda fh: written.append(source.write_parquet(fh)), overwrite=overwrite, inputs=inputs,
                 what="Parquet export")
    return written[0]


class WriteBatch:
    """What one group commit writes; filled by the ingest thread, applied by :func:`apply_batch`."""

    __slots__ = ("alerts", "closed", "counters", "deliveries", "episodes", "late_spans", "open_upserts", "problems",
                 "spans", "verdicts")

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str | None, float, str]] = []
        self.late_spans: list[tuple[str, str, str | None, float, str]] = []  # of traces already assembled
        self.open_upserts: dict[str, tuple[float, float]] = {}
        self.closed: list[tuple[str, float]] = []
        # seq, episode id, trace id, closed, t_start, outcome, states, steps, group, n_steps, cost, tokens, duration
        self.episodes: list[tuple[Any, ...]] = []
        self.verdicts: list[tuple[str, str, float]] = []
        self.problems: list[tuple[float, str, str | None, str]] = []
        self.alerts: list[tuple[float, str, str, str, str, str]] = []  # at, payload, key, kind, group, status
        self.deliveries: list[tuple[str, int, float, int, str | None]] = []  # key, attempt, at, ok, detail
        self.counters: dict[str, int] = {}

    def count(self, name: str, n: int = 1) -> None:
        if n:
            self.counters[name] = self.counters.get(name, 0) + n

    def __bool__(self) -> bool:
        return bool(self.spans or self.late_spans or self.open_upserts or self.closed or self.episodes or self.verdicts
                    or self.problems or self.alerts or self.deliveries or self.counters)


#: A posted verdict whose trace has not been assembled (SQL condition on ``verdicts v``).
_UNCLAIMED = ("NOT EXISTS (SELECT 1 FROM closed_traces c WHERE c.trace_id = CASE WHEN instr(v.id, ':') > 0 THEN "
              "substr(v.id, 1, instr(v.id, ':') - 1) ELSE v.id END)")


def expire_unclaimed_verdicts(con: Any, before: float) -> int:
    """Delete the posted verdicts received before ``before`` whose trace never arrived (counted
    ``verdicts_expired``), in one transaction on the writer connection; the number deleted. Verdicts of assembled
    traces are records of what decided an episode and stay."""
    con.execute("BEGIN IMMEDIATE")
    try:
        gone = con.execute(f"DELETE FROM verdicts AS v WHERE v.received < ? AND {_UNCLAIMED}", (before,)).rowcount
        if gone:
            con.execute("INSERT INTO counters VALUES ('verdicts_expired', ?) ON CONFLICT (name) DO UPDATE SET "
                        "value = value + excluded.value", (gone,))
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    return int(gone)


def apply_batch(con: sqlite3.Connection, batch: WriteBatch) -> None:
    """Write ``batch`` in one transaction and commit (durable on return)."""
    con.execute("BEGIN IMMEDIATE")
    try:
        if batch.spans:
            con.executemany("INSERT OR IGNORE INTO spans VALUES (?, ?, ?, ?, ?)", batch.spans)
        if batch.late_spans:
            # A span of an assembled trace is either new (late: kept, not counted) or a re-sent copy.
            new = con.executemany("INSERT OR IGNORE INTO spans VALUES (?, ?, ?, ?, ?)", batch.late_spans).rowcount
            batch.count("spans_late", new)
            batch.count("spans_duplicate", len(batch.late_spans) - new)
        if batch.open_upserts:
            con.executemany("INSERT INTO open_traces VALUES (?, ?, ?) ON CONFLICT (trace_id) DO UPDATE SET "
                            "last_received = excluded.last_received",
                            [(t, a, b) for t, (a, b) in batch.open_upserts.items()])
        if batch.verdicts:
            con.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?)", batch.verdicts)
        if batch.episodes:
            con.executemany("INSERT INTO episodes (seq, episode_id, trace_id, closed, t_start, outcome, states, steps, "
                            "grp, n_steps, cost, tokens, duration) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            batch.episodes)
        if batch.closed:
            con.executemany("INSERT OR IGNORE INTO closed_traces VALUES (?, ?)", batch.closed)
            con.executemany("DELETE FROM open_traces WHERE trace_id = ?", [(t,) for t, _ in batch.closed])
        if batch.problems:
            con.executemany("INSERT INTO problems (at, kind, trace_id, message) VALUES (?, ?, ?, ?)", batch.problems)
        if batch.alerts:
            con.executemany("INSERT OR IGNORE INTO alerts (at, payload, key, kind, grp, status) "
                            "VALUES (?, ?, ?, ?, ?, ?)", batch.alerts)
        if batch.deliveries:
            con.executemany("INSERT INTO deliveries (alert_key, attempt, at, ok, detail) VALUES (?, ?, ?, ?, ?)",
                            batch.deliveries)
        if batch.counters:
            con.executemany("INSERT INTO counters VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET "
                            "value = value + excluded.value", list(batch.counters.items()))
        con.execute("COMMIT")
    except BaseException:
        # A failed COMMIT (disk full) has already rolled back: a second ROLLBACK would raise "no transaction is
        # active" and hide the real error (N18).
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise


def closed_among(con: sqlite3.Connection, trace_ids: Iterable[str]) -> set[str]:
    """The trace ids of ``trace_ids`` that were already assembled."""
    ids = list(trace_ids)
    out: set[str] = set()
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        out.update(str(t) for (t,) in con.execute(
            f"SELECT trace_id FROM closed_traces WHERE trace_id IN ({','.join('?' * len(chunk))})", chunk))
    return out


def now() -> float:
    return time.time()
