"""``analyze()``: traces → states → chain → certificate → intervals, in one call, in memory or partition by partition.

This is what every command runs (``fit``, ``report``, ``audit``, ``compare``), whatever the engine: the in-memory
corpus is a single partition of the same pipeline, so a file gives the same chain, certificate and intervals with and
without ``--engine`` (tested on every reader format).

1. **Input.** A :class:`~tracetochain.TraceTable`, or a path read by any reader (``reader=``/reader options). With an
   engine, canonical Parquet/JSONL corpora are cut into partitions that workers read themselves; every other format is
   read on the driver and shipped as one partition.
2. **States** are learned on the fit half of the first held-out split (a seeded sample of it at scale:
   ``state_sample`` traces), never on held-out traces, then applied to every trace; a step a learned model cannot place
   (a category it never saw) goes to the state ``(unseen)``, counted. The traces' own labels need no learning: their
   vocabulary is the union over all traces.
3. **Summary.** Each partition is reduced to its sufficient statistics (``analysis._summary``); they add up.
4. **Chain** from all usable traces' counts, under the prior (``chain._prior``).
5. **Certificate** from the summary (``analysis._audit``).
6. **Intervals** from the summary (``analysis._intervals``).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from tracetochain._compat import renamed_parameters
from tracetochain._display import Display, ResultDisplay, Table
from tracetochain._limits import check_ensemble_size
from tracetochain._outcome import INVALID as _INVALID
from tracetochain._progress import phase_reporter
from tracetochain.analysis._audit import AuditSettings, audit_summary
from tracetochain.analysis._intervals import design_effect, summary_ensemble
from tracetochain.analysis._models import DEFAULT_MODEL_REFITS
from tracetochain.analysis._summary import (
    CorpusSummary,
    SummarySpec,
    merge_summaries,
    reindex_summary,
    summarize_traces,
)
from tracetochain.audit import Certificate
from tracetochain.chain import AbsorbingChain, ChainPrior, estimate_chain
from tracetochain.chain.shared import check_known_states
from tracetochain.exceptions import ChainValidationError, EmptyTraceSetError
from tracetochain.traces import IngestReport, TraceTable

if TYPE_CHECKING:
    from tracetochain.analysis._models import ModelSelection
    from tracetochain.metrics import ReliabilitySummary
from tracetochain.traces.shared import fnv1a_hashes, holdout_mask, unit_hashes

UNSEEN_STATE = "(unseen)"
#: Largest fit-half sample the states are learned on in a partitioned corpus.
DEFAULT_STATE_SAMPLE = 50_000

Intervals = Literal["posterior", "bootstrap"]


# ---------------------------------------------------------------------------------------------------- input
@dataclass(frozen=True, eq=False)
class MemoryPartition:
    """A corpus already in memory, as one partition (what an engine ships like a file range)."""

    index: int
    traces: TraceTable
    source: str
    format: str = "memory"

    def describe(self) -> str:
        return f"{self.source} (in memory)"

    def read(self, *, on_error: str = "raise", defer_step_gaps: bool = False) -> TraceTable:
        return self.traces


def _is_canonical_corpus(source: Any, reader: str | None) -> bool:
    """Whether an engine can cut ``source`` into canonical Parquet/JSONL partitions itself (else the traces are read
    on the driver by their reader and travel as one partition)."""
    if reader not in (None, "canonical", "parquet", "jsonl"):
        return False
    paths = source if isinstance(source, (list, tuple)) else [source]
    for p in paths:
        s = str(p)
        if "://" in s:
            continue
        path = Path(s)
        if reader is None and _claimed_by_another_reader(path):
            return False
        if path.is_dir():
            continue
        if path.suffix.lower() not in (".parquet", ".pq", ".jsonl", ".ndjson"):
            return False
    return True


def _claimed_by_another_reader(path: Path) -> bool:
    """True when the reader detection picks for ``path`` is not the canonical one (an OTLP or chat-log ``.jsonl``
    file, a mini-swe-agent or Langfuse folder …): with and without an engine the same reader must read it, or the
    engine would read another format's records as canonical rows (and refuse them)."""
    if not path.exists():
        return False
    from tracetochain.readers import sniff_all

    answers = sniff_all(path, stop_at_first=True)
    return bool(answers) and answers[-1].accepted and answers[-1].reader != "canonical"


def plan_input(source: Any, *, engine: Any, reader: str | None, on_error: str, reader_options: dict[str, Any],
               partition_options: dict[str, Any]) -> tuple[list[Any], str, str]:
    """(partitions, source name, reader name) for any input."""
    if isinstance(source, TraceTable):
        return [MemoryPartition(0, source, source.report.source)], source.report.source, source.report.format
    if engine is not None and _is_canonical_corpus(source, reader) and not reader_options:
        from tracetochain.partitioned import plan_partitions
        from tracetochain.partitioned.shared import source_name

        fmt = reader if reader in ("parquet", "jsonl") else None
        parts = plan_partitions(source, format=fmt, **partition_options)
        return parts, source_name(source), "canonical"
    if isinstance(source, (list, tuple)):
        raise ValueError("several inputs are read together only partition by partition (--engine) and only for the "
                         "canonical Parquet/JSONL table; read other formats one at a time")
    from tracetochain.readers import read_traces

    table = read_traces(source, reader, on_error=on_error, **reader_options)
    if partition_options:
        import warnings

        warnings.warn(f"partition_options {sorted(partition_options)} do not apply here: the {table.report.format} "
                      "reader reads the input whole and it is analysed as one partition (an engine cuts only "
                      "canonical Parquet/JSONL files; `tracetochain convert` writes them)", UserWarning, stacklevel=3)
    return [MemoryPartition(0, table, table.report.source, table.report.format)], table.report.source, \
        table.report.format


# ---------------------------------------------------------------------------------------------------- states
def _usable(traces: TraceTable) -> TraceTable:
    return traces.select_traces(traces.outcomes() != _INVALID)


def fit_half(traces: TraceTable, spec: SummarySpec) -> TraceTable:
    """The usable traces of the fit half of the first split (all usable traces when there is no split and the spec
    does not ask for the half anyway, ``states_on_fit_half``)."""
    usable = _usable(traces)
    if (spec.n_splits == 0 and not spec.states_on_fit_half) or usable.n_traces == 0:
        return usable
    ids = usable.trace_id_array
    task = usable.trace_column("task_id") if spec.split_by == "task" and "task_id" in usable.columns else None
    h = unit_hashes(ids, task) if spec.split_by == "task" else fnv1a_hashes(ids)
    return usable.select_traces(~holdout_mask(h, spec.test_fraction, spec.seed, 0))


def _concat(tables: list[TraceTable]) -> TraceTable:
    if len(tables) == 1:
        return tables[0]
    arrows = [t.to_arrow() for t in tables]
    n_ids = sum(t.n_traces for t in tables)
    if len(set().union(*(t.trace_id_array.to_pylist() for t in tables))) < n_ids:
        # The tables share trace ids (compare learns one state model on both of its corpora, which may hold the
        # same ids — a set compared with itself): the learner needs the steps, not the ids, so each table's ids
        # get its position as a prefix.
        arrows = [a.set_column(a.column_names.index("trace_id"), "trace_id",
                               pa.array([f"{k}/{x}" for x in a.column("trace_id").to_pylist()], pa.string()))
                  for k, a in enumerate(arrows)]
    arrow = pa.concat_tables(arrows, promote_options="default")
    return TraceTable.from_arrow(arrow, source=tables[0].report.source)


def resolve_states(states: Any, state_options: dict[str, Any], parts: list[Any], spec: SummarySpec, on_error: str,
                   state_sample: int) -> tuple[Any, tuple[str, ...] | None]:
    """(state model to predict with, or None for the traces' labels; fixed vocabulary, or None)."""
    from tracetochain.states import StateModel, states_from_spec

    if states is None or (isinstance(states, str) and states == "label" and not state_options):
        return None, None
    if isinstance(states, StateModel):
        return states, None
    if isinstance(states, (list, tuple)) and all(isinstance(s, str) for s in states):
        return None, tuple(states)
    if isinstance(states, str):
        estimator = states_from_spec(states, **state_options)
    elif hasattr(states, "fit") and hasattr(states, "fetch_model"):
        estimator = states
    elif hasattr(states, "predict") and hasattr(states, "state_names"):
        return states, None
    else:
        raise TypeError(f"states must be None, 'label', a list of state names, a StateModel, a state estimator or a "
                        f"spec string, got {type(states).__name__}")
    # Learn on the fit half of split 0: partitions drawn in a seeded order until the sample is large enough, then
    # put back in corpus order, so that a corpus read whole and read in pieces learn on the same table.
    order = np.random.default_rng(spec.seed).permutation(len(parts)) if len(parts) > 1 else np.zeros(1, np.int64)
    chosen: dict[int, TraceTable] = {}
    n = 0
    for i in order:
        half = fit_half(parts[int(i)].read(on_error=on_error), spec)
        if half.n_traces:
            chosen[int(i)] = half
            n += half.n_traces
        if n >= state_sample:
            break
    sample = [chosen[i] for i in sorted(chosen)]
    return estimator.fit(_concat(sample)).fetch_model(), None


def label_steps(traces: TraceTable, model: Any) -> tuple[NDArray[np.int64], tuple[str, ...]]:
    """State code of every step and the state names: the traces' own labels, or the model's prediction with steps it
    cannot place in :data:`UNSEEN_STATE`."""
    if model is None:
        raw_codes, labels = traces.state_labels()
        return np.asarray(raw_codes, dtype=np.int64), tuple(labels)
    names: tuple[str, ...] = tuple(model.state_names)
    try:
        codes = np.asarray(model.predict(traces), dtype=np.int64)
    except ValueError:
        # Label-based categorical states refuse unseen labels: place what is known, the rest is unseen.
        raw, raw_names = traces.state_labels()
        raw = np.asarray(raw, dtype=np.int64)
        lookup = {s: i for i, s in enumerate(names)}
        codes = np.array([lookup.get(x, -1) for x in raw_names], np.int64)[raw] if raw.size else raw
    bad = (codes < 0) | (codes >= len(names))
    if bad.any():
        codes = codes.copy()
        codes[bad] = len(names)
        names = (*names, UNSEEN_STATE)
    return codes, names


def _known_state_count(model: Any, vocab: Any, parts: list[Any]) -> int | None:
    """The number of states before the corpus is summarised, when it is known: the learned or given vocabulary, or
    the labels of a corpus in memory (a partitioned corpus without a state model learns its labels as it goes)."""
    if vocab is not None:
        return len(vocab)
    if model is not None:
        return len(model.state_names)
    if len(parts) == 1 and isinstance(parts[0], MemoryPartition):
        return len(parts[0].traces.state_labels()[1])
    return None


def _summarize_part(part: Any, *, on_error: str, model: Any, spec: SummarySpec, check_traces: bool) -> CorpusSummary:
    traces = part.read(on_error=on_error, defer_step_gaps=True)
    codes, names = label_steps(traces, model)
    return summarize_traces(traces, codes, names, spec, partition=part.index, check_traces=check_traces)


def summarize_parts(parts: list[Any], engine: Any, *, on_error: str, model: Any, spec: SummarySpec,
                    check_traces: bool = True) -> CorpusSummary:
    """The merged summary of ``parts``, on ``engine`` (None: here, in order), with every trace checked to lie in one
    partition."""
    fn = functools.partial(_summarize_part, on_error=on_error, model=model, spec=spec, check_traces=check_traces)
    if engine is None:
        acc = fn(parts[0])
        for p in parts[1:]:
            acc = merge_summaries(acc, fn(p))
    else:
        acc = engine.map_reduce(fn, parts, merge_summaries)
    # A trace with missing steps is reported only now: its other steps may lie in another partition (a split trace).
    from tracetochain.partitioned.shared import _check_unique_traces

    _check_unique_traces(acc.base, parts, on_error, check_split=check_traces and len(parts) > 1)  # type: ignore[arg-type]
    return acc


# ---------------------------------------------------------------------------------------------------- result
#: Fewer repeated tasks than this and the intervals carry a warning (the design effect is estimated from them).
FEW_TASKS = 20


@dataclass(frozen=True, eq=False, repr=False)
class AnalysisResult(ResultDisplay):
    """Everything one analysis produced: the chain, its certificate and intervals, and what they came from.

    ``chain`` is fitted on all usable traces; ``certificate`` (None without an audit) says which outputs the traces
    support; ``ensemble`` (None without intervals) holds the draws behind every interval; ``summary`` the sufficient
    statistics; ``state_model`` the learned states (None for the traces' own labels); ``source`` where the traces came
    from and what was read or skipped; ``timings`` wall seconds per stage.
    """

    chain: AbsorbingChain
    certificate: Certificate | None
    ensemble: Any
    summary: CorpusSummary
    state_model: Any
    source: dict[str, Any]
    settings: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)
    #: The traces themselves when they were analysed in memory (None for a partitioned corpus).
    traces: TraceTable | None = field(default=None, repr=False)
    #: How the model was chosen (``analyze(model="auto" | family)``): the candidates side by side, the reason, and —
    #: unless the first-order chain stayed — the compiled model behind ``chain`` (None with ``model="markov"``).
    model_choice: ModelSelection | None = field(default=None, repr=False)
    #: How well the model's P(success | path so far) separates failing from succeeding held-out runs
    #: (:mod:`tracetochain.audit._discrimination`); None without held-out splits.
    discrimination: Any = field(default=None, repr=False)

    @property
    def model_name(self) -> str:
        """The model behind ``chain``: ``"markov"`` or the chosen candidate (e.g. ``"lifted(k=3)+tasks(C=2)"``)."""
        return "markov" if self.model_choice is None else self.model_choice.chosen

    @property
    def compiled(self) -> Any:
        """The chosen model compiled to ``chain`` with its map back to the observed states (None for the first-order
        chain, whose states are the observed ones)."""
        return None if self.model_choice is None else self.model_choice.compiled

    def metrics(self, *, horizon: int = 50, ks: Sequence[int] = (1, 2, 3, 4, 5), delta: float = 0.01
                ) -> ReliabilitySummary:
        """:func:`~tracetochain.summarize` of ``chain``, with the chosen model's own pass^k / pass@k when its trials of
        one task share a class (Σ_c w_c R_c^k instead of R∞^k)."""
        from dataclasses import replace

        from tracetochain.metrics import summarize

        out = summarize(self.chain, horizon=horizon, ks=tuple(ks), delta=delta)
        own = None if self.model_choice is None else self.model_choice.pass_k(list(out.ks))
        if own is not None:
            out = replace(out, pass_hat_k=own[0], pass_at_k=own[1])
        return out

    @property
    def pass_rate(self) -> float:
        """Successful traces over usable traces (the observed pass rate)."""
        return self.summary.n_success / max(1, self.summary.n_usable)

    @property
    def design_effect(self) -> float:
        return design_effect(self.summary)

    @property
    def ingest(self) -> IngestReport:
        rep: IngestReport = self.source["report"]
        return rep

    def states_document(self) -> dict[str, Any]:
        """The taxonomy: the learned model's, or the traces' labels with their step counts."""
        names = self.summary.state_names  # the observed states (the chain's unless a model expanded them)
        if self.state_model is not None and hasattr(self.state_model, "to_dict"):
            doc: dict[str, Any] = self.state_model.to_dict()
            if UNSEEN_STATE in names:
                doc["unseen_steps"] = int(self.summary.visits[names.index(UNSEEN_STATE)])
            return doc
        visits = self.summary.visits
        total = int(visits.sum())
        return {"method": "label", "state_names": list(names),
                "taxonomy": [{"name": n, "n_steps": int(v), "share_of_steps": int(v) / max(1, total),
                              "composition": {n: 1.0}} for n, v in zip(names, visits, strict=True)],
                "settings": {"n_steps": total}, "silhouette_by_k": {}}

    def intervals(self, *, horizon: int = 50, ks: Sequence[int] = (1, 2, 3, 4, 5), delta: float = 0.01,
                  progress: Callable[..., Any] | None = None, budget_bound: bool = True) -> dict[str, Any] | None:
        """An interval for every reported metric (:func:`~tracetochain.uncertainty.interval_summary`; for a chosen
        model other than the first-order chain, from its refits over units, without per-state intervals — summarised
        once per setting, with ``progress`` told of every refit, as ``analyze``'s ``progress``). ``budget_bound``: as
        :func:`~tracetochain.uncertainty.interval_summary`."""
        if self.model_choice is not None and not self.model_choice.first_order:
            doc = self.model_choice.intervals(horizon=horizon, ks=ks, delta=delta, progress=progress)
        elif self.ensemble is None:
            return None
        else:
            from tracetochain.uncertainty import interval_summary

            doc = interval_summary(self.ensemble, horizon=horizon, ks=ks, delta=delta, budget_bound=budget_bound)
        tasks = self.summary.tasks
        if doc is not None and tasks is not None and tasks.repeated and tasks.n_tasks < FEW_TASKS:
            # The design effect is itself estimated from the tasks; with few of them it is noisy and the intervals
            # under-cover (6 tasks × 5 trials: R∞ 88.5 %, pass^3 85 %).
            doc.setdefault("warnings", []).append(
                f"only {tasks.n_tasks} tasks repeat: the task-clustered design effect is estimated from them and the "
                f"intervals may be too narrow; about {FEW_TASKS} repeated tasks or more are needed")
        return doc

    def to_dict(self) -> dict[str, Any]:
        rep = self.ingest
        return {"kind": "tracetochain.analysis", "source": {k: v for k, v in self.source.items() if k != "report"}
                | {"ingest": rep.to_dict()}, "settings": self.settings, "chain": self.chain.to_dict(),
                "certificate": None if self.certificate is None else self.certificate.to_dict(),
                "pass_rate": self.pass_rate, "design_effect": self.design_effect, "timings": self.timings,
                "model_choice": None if self.model_choice is None else self.model_choice.to_dict(),
                "discrimination": None if self.discrimination is None else self.discrimination.to_dict()}

    def __str__(self) -> str:
        n = self.summary.counts.n_traces
        lines = [f"{self.summary.n_usable} usable traces ({n['success']} success, {n['failure']} failure, "
                 f"{n['censored']} censored; {n['invalid']} invalid excluded), {self.chain.n_states} states",
                 f"R∞ = {self.chain.r_inf:.4f} (pass rate {self.pass_rate:.4f})"]
        if self.ensemble is not None:
            s = self.ensemble.stats("r_inf")
            lines[-1] += f", {s.confidence:.0%} interval [{s.lower:.4f}, {s.upper:.4f}] ({self.ensemble.method})"
        if self.model_choice is not None:
            iv = self.intervals()
            if iv is not None and iv["metrics"]["r_inf"]["lower"] is not None:
                q = iv["metrics"]["r_inf"]
                lines[-1] += f", {iv['confidence']:.0%} interval [{q['lower']:.4f}, {q['upper']:.4f}] ({iv['method']})"
            lines.insert(1, f"model: {self.model_choice.chosen} — {self.model_choice.reason}")
        if self.certificate is not None:
            lines += ["", str(self.certificate)]
        return "\n".join(lines)

    def _display(self) -> Display:
        text = str(self).splitlines()
        head = text[:3] if self.model_choice is not None else text[:2]
        c = self.chain
        # Steps are counted on the observed states; a chosen model's expanded states have none of their own.
        steps: list[int | None] = ([int(n) for n in self.summary.visits] if self.summary.state_names == c.state_names
                                   else [None] * c.n_states)
        states = Table("states", ("state", "n_steps", "expected_visits", "r_success", "r_failure"),
                       tuple((name, n, float(z), float(rs), float(rf)) for name, n, z, rs, rf in zip(
                           c.state_names, steps, c.expected_visits(), c.R_success, c.R_failure, strict=True)))
        cert = self.certificate._display() if self.certificate is not None else None
        choice = self.model_choice._display().tables if self.model_choice is not None else ()
        lines = (*head[1:], *((cert.heading, *cert.lines) if cert is not None else ()))
        return Display(head[0], kind="Analysis", lines=lines,
                       tables=(states, *choice, *(cert.tables if cert is not None else ())))


# ---------------------------------------------------------------------------------------------------- summary
class SummarizedInput(NamedTuple):
    """What the pass over the data gives: the corpus summary under the resolved states, and where it came from."""

    summary: CorpusSummary
    parts: list[Any]
    source: str
    reader: str
    state_model: Any
    #: perf_counter() when the states were resolved (reading and state discovery before it, summarising after).
    t_states: float = 0.0
    #: Where the partitions were summarised ("memory" without an engine).
    engine: str = "memory"


@contextlib.contextmanager
def opened_engine(engine: Any) -> Iterator[Any]:
    """The engine a call runs on: ``engine`` itself when it is an :class:`~tracetochain.engines.Engine` (its caller
    owns and closes it), else the one :func:`~tracetochain.engines.get_engine` opens from the name for this call and
    closes after it; None runs in memory."""
    from tracetochain.engines import Engine, get_engine

    owns = engine is not None and not isinstance(engine, Engine)
    eng = get_engine(engine) if owns else engine
    try:
        yield eng
    finally:
        if owns and eng is not None:
            eng.close()


def summarize_input(source: Any, spec: SummarySpec, *, reader: str | None = None,
                    reader_options: dict[str, Any] | None = None, on_error: str = "raise", engine: Any = None,
                    states: Any = "label", state_options: dict[str, Any] | None = None,
                    state_sample: int = DEFAULT_STATE_SAMPLE, check_traces: bool = True,
                    partition_options: dict[str, Any] | None = None, progress: Callable[..., Any] | None = None,
                    n_draws: int | None = None, in_memory_only: str | None = None) -> SummarizedInput:
    """Read ``source`` (in memory or partition by partition on ``engine``), resolve the states on the fit half and
    summarise every partition under them: the one pass over the data behind :func:`analyze` and the partitioned
    counts. ``n_draws``: refuse an ensemble that cannot fit before its replicates are accumulated;
    ``in_memory_only``: what needs the traces in memory (refused for a partitioned corpus)."""
    step = phase_reporter(progress)
    step("reading")
    with opened_engine(engine) as eng:
        parts, src, reader_name = plan_input(source, engine=eng, reader=reader, on_error=on_error,
                                             reader_options=dict(reader_options or {}),
                                             partition_options=dict(partition_options or {}))
        if in_memory_only is not None and not (len(parts) == 1 and isinstance(parts[0], MemoryPartition)):
            raise ValueError(f"{in_memory_only} fits the model families on the traces in memory, and {src} is read "
                             "partition by partition (--engine). Run without --engine (the corpus is then read into "
                             "memory), or keep model='markov' for a corpus that does not fit in memory")
        step("states")
        state_model, vocab = resolve_states(states, dict(state_options or {}), parts, spec, on_error, state_sample)
        if n_draws is not None:  # refuse draws that cannot fit before the replicates are accumulated
            known = _known_state_count(state_model, vocab, parts)
            if known is not None:
                check_ensemble_size(n_draws, known)
        t_states = time.perf_counter()
        step("counting")
        acc = summarize_parts(parts, eng, on_error=on_error, model=state_model, spec=spec, check_traces=check_traces)
    if vocab is not None:
        check_known_states(acc.state_names, set(vocab), src)
        acc = reindex_summary(acc, tuple(vocab))
    elif state_model is not None:
        names = tuple(state_model.state_names) + ((UNSEEN_STATE,) if UNSEEN_STATE in acc.state_names else ())
        acc = reindex_summary(acc, names)
    return SummarizedInput(acc, parts, src, reader_name, state_model, t_states,
                           getattr(eng, "name", "memory") if eng is not None else "memory")


# ---------------------------------------------------------------------------------------------------- driver
@renamed_parameters(n_samples="samples")
def analyze(source: Any, *, reader: str | None = None, reader_options: dict[str, Any] | None = None,
            on_error: str = "raise", engine: Any = None, states: Any = "label",
            state_options: dict[str, Any] | None = None, pseudocount: float | None = None, prior: str | None = None,
            unvisited: str = "auto", initial: str = "empirical", audit: bool | AuditSettings = True,
            n_splits: int = 5, test_fraction: float = 0.5, split_by: Literal["trace", "task"] = "trace",
            intervals: Intervals | None = "posterior", samples: int | None = None, confidence: float = 0.95,
            horizon: int | None = None, seed: int = 0, state_sample: int = DEFAULT_STATE_SAMPLE,
            check_traces: bool = True, progress: Callable[..., Any] | None = None,
            partition_options: dict[str, Any] | None = None, model: str = "markov",
            model_options: dict[str, Any] | None = None, discrimination: bool = True, n_jobs: int | None = None,
            **audit_options: Any) -> AnalysisResult:
    """Fit, audit and bound a corpus in one pass (module docstring).

    Parameters
    ----------
    source : TraceTable, path, or list of paths
        The traces (any reader's format; a list only for canonical Parquet/JSONL with an engine).
    reader, reader_options, on_error
        How to read a path (``read_traces``); ``on_error="skip"`` drops a bad trace whole and counts it.
    engine : None, "local", "dask" or an Engine
        Where the partitions are summarised (None: this process, in memory).
    states, state_options
        How steps become states: ``"label"`` (the traces' labels), a spec (``"categorical"``, ``"ward"``,
        ``"milestones:FILE"`` …), a state estimator, a fitted state model, or a list of state names.
    pseudocount, prior, unvisited, initial
        The chain's prior and estimator settings (:class:`~tracetochain.ChainEstimator`).
    audit : bool or AuditSettings, default True
        Run the certificate; ``audit_options`` are :class:`AuditSettings` fields (``level``, ``n_bootstrap``,
        ``n_permutations``, ``order_criterion``, ``max_steps``, ``holdout`` …).
    n_splits, test_fraction, split_by
        The repeated held-out splits (random halves by trace id, or by task id).
    intervals : {"posterior", "bootstrap"} or None, default "posterior"
        The ensemble behind the intervals; ``samples`` draws (default 2000 posterior, 200 bootstrap). For a chosen
        model other than the first-order chain: refits of the model over units resampled by their id hash
        (``samples`` of them with ``"bootstrap"``, at most 200 with ``"posterior"``, which the families lack).
        ``n_samples=`` is the deprecated spelling of ``samples=`` (one release).
    confidence : float, default 0.95
    horizon : int, optional
        D of the descriptive model-vs-empirical RDC comparison in the certificate (default: the longest trace).
    seed : int, default 0
        Seeds the splits, the bootstrap weights and every test.
    state_sample : int
        Largest fit-half sample learned states are fitted on (partitioned corpora).
    progress : callable, optional
        Told each phase as it starts (reading, states, counting, chain, audit layers, intervals, model choice):
        ``progress(phase)``, or ``progress(phase, done, total)`` when it accepts three arguments (``done`` of
        ``total`` for counted phases, else None) — :mod:`tracetochain._progress`.
    model : "markov", "auto" or a registered family (mixture, lifted, hmm, duration, …), default "markov"
        The model of the traces. ``"markov"``: the first-order chain on the states. ``"auto"``: the model family
        (and size) with the best held-out log-likelihood over the analysis's own splits, kept only when it beats the
        first-order chain by enough standard errors; a family name: that family at its best size. The certificate,
        the intervals (refits over units) and every metric are then the chosen model's; ``result.model_choice``
        holds the candidates side by side and why one was chosen (:mod:`tracetochain.analysis._models`). Needs the
        traces in memory (not a partitioned corpus). ``model_options``: ``sizes`` per family, ``candidates`` (with
        ``"auto"``), ``z_threshold``, ``with_task_classes`` (:func:`~tracetochain.models.choose_model`).
    discrimination : bool, default True
        Measure how well the model's P(success | path so far) separates failing from succeeding held-out runs
        (``result.discrimination``, :mod:`tracetochain.audit._discrimination`) on the held-out splits, which are
        drawn for it even without an audit; with an audit, it decides whether the advice about states is
        ``uninformative``. Not measured with an in-sample audit (no held-out runs).
    n_jobs : int, optional
        Processes for the model path's independent jobs: the candidates' scores, their held-out checks (candidate ×
        split) and the chosen model's refits and their metrics (:mod:`tracetochain._parallel`). Default 1 (or an
        enclosing ``tracetochain.using_jobs``); -1 is every CPU. Every job has its own seed, so the result is the
        same for any ``n_jobs``; small jobs stay in this process whatever it is.

    Examples
    --------
    >>> import tracetochain as tt
    >>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=2)
    >>> res = analyze(traces, n_bootstrap=49, n_permutations=49, samples=200)
    >>> res.certificate.status("R_inf"), round(res.chain.r_inf, 2) == round(res.pass_rate, 2)
    ('certified', True)
    """
    step = phase_reporter(progress)
    from tracetochain.families import is_first_order, model_choices

    if model not in model_choices():
        raise ValueError(f"model must be one of {', '.join(model_choices())}, got {model!r}")
    if is_first_order(model) and model_options:
        raise TypeError("model_options apply to a model other than 'markov' (auto or a family)")
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if intervals not in ("posterior", "bootstrap", None):
        raise ValueError(f"intervals must be 'posterior', 'bootstrap' or None, got {intervals!r}")
    settings_audit = audit if isinstance(audit, AuditSettings) else AuditSettings(**audit_options)
    if isinstance(audit, AuditSettings) and audit_options:
        raise TypeError(f"pass audit options either as AuditSettings or as keywords, not both: {list(audit_options)}")
    run_audit = audit is not False
    prior_obj = ChainPrior.from_settings(pseudocount, prior)
    policy = prior_obj.resolve_unvisited(unvisited)
    n_draws = samples if samples is not None else (2000 if intervals == "posterior" else 200)
    if intervals is not None and n_draws < 1:
        raise ValueError(f"samples must be >= 1, got {n_draws}")
    t0 = time.perf_counter()
    held_out = (run_audit and settings_audit.holdout) or (not run_audit and discrimination)
    spec = SummarySpec(seed=seed, n_splits=n_splits if held_out else 0,
                       test_fraction=test_fraction, split_by=split_by,
                       n_replicates=n_draws if intervals == "bootstrap" else 0,
                       resample_by="task",
                       include_outcomes=settings_audit.include_outcomes,
                       # the same states with or without the audit (only an in-sample audit learns on every trace)
                       states_on_fit_half=settings_audit.holdout)
    corpus = summarize_input(source, spec, reader=reader, reader_options=reader_options, on_error=on_error,
                             engine=engine, states=states, state_options=state_options, state_sample=state_sample,
                             check_traces=check_traces, partition_options=partition_options, progress=step,
                             n_draws=n_draws if intervals is not None else None,
                             in_memory_only=None if is_first_order(model) else f"model={model!r}")
    acc, parts, src, reader_name, state_model = (corpus.summary, corpus.parts, corpus.source, corpus.reader,
                                                 corpus.state_model)
    in_memory = parts[0].traces if len(parts) == 1 and isinstance(parts[0], MemoryPartition) else None
    t1 = corpus.t_states
    if acc.counts.n_fitted_traces == 0 or acc.n_states == 0:
        n = acc.counts.n_traces
        raise EmptyTraceSetError(f"no traces to fit in {src}: {n['invalid']} invalid trace(s) excluded, "
                                 f"{sum(n.values()) - n['invalid']} usable. Check the input (and the skipped-record "
                                 "report).")
    t2 = time.perf_counter()
    step("chain")
    chain = estimate_chain(acc.counts, prior=prior_obj, unvisited=policy, initial=initial)
    if state_model is not None and hasattr(state_model, "to_dict"):
        chain = chain.with_metadata(states=state_model.to_dict())
    if acc.base.costs is not None:  # the per-state usage of the same steps (tokens, dollars, seconds)
        chain = chain.with_metadata(costs=acc.base.costs.reindexed(chain.state_names).to_dict())
    # The chain carries the design effect of its corpus and the settings of its intervals, so that a saved chain
    # gives the analysis's intervals (one interval per number: `metrics` on a saved chain = `fit`).
    # (Only what differs from a chain fitted alone: a design effect above 1, interval settings when drawn.)
    deff = design_effect(acc)
    if deff > 1.0:
        chain = chain.with_metadata(design_effect=deff)
    if intervals is not None:
        chain = chain.with_metadata(intervals={"method": intervals, "n_samples": n_draws, "confidence": confidence,
                                               "seed": seed})
    certificate = None
    if run_audit:
        step("audit")
        certificate = audit_summary(acc, chain, prior=prior_obj, unvisited=policy, initial=initial,
                                    settings=settings_audit, seed=seed, horizon=horizon, state_model=state_model,
                                    extra_settings={"states": _describe_states(states), "n_splits": spec.n_splits,
                                                    "split_by": split_by, "test_fraction": test_fraction},
                                    progress=step)
    t3 = time.perf_counter()
    ensemble = None
    if intervals is not None:
        step(f"intervals ({intervals})")
        check_ensemble_size(n_draws, chain.n_states)
        ensemble = summary_ensemble(acc, chain, method=intervals, prior=prior_obj, unvisited=policy, initial=initial,
                                    n_samples=n_draws, seed=seed, confidence=confidence)
        if ensemble.design is not None:  # a saved chain redraws the same per-quantity intervals
            chain = chain.with_metadata(design_effect_per_quantity=ensemble.design.stored())
    t4 = time.perf_counter()
    selection = None
    if not is_first_order(model):
        assert in_memory is not None
        chain, certificate, ensemble, selection = _model_path(
            in_memory, model, acc=acc, chain=chain, certificate=certificate, ensemble=ensemble, state_model=state_model,
            split_by=split_by, test_fraction=test_fraction, n_splits=n_splits, seed=seed,
            audit=settings_audit if run_audit else None, holdout=settings_audit.holdout, horizon=horizon,
            prior=prior_obj, unvisited=policy, initial=initial,
            n_refits=_model_refits(intervals, n_draws), confidence=confidence, states=states, progress=step,
            options=model_options, n_jobs=n_jobs)
    t_model = time.perf_counter()
    disc = None
    if discrimination and spec.n_splits:
        step("discrimination")
        disc = _discrimination(acc, in_memory, selection, state_model, prior=prior_obj, unvisited=policy,
                                         initial=initial, confidence=confidence, seed=seed, split_by=split_by,
                                         test_fraction=test_fraction)
        if certificate is not None:
            from tracetochain.audit.shared import with_discrimination

            certificate = with_discrimination(certificate, disc)
    t5 = time.perf_counter()
    report = ingest_report_of(acc, src, reader_name)
    for part in parts:  # what a reader keeps beside the step table travels with the traces it read
        if isinstance(part, MemoryPartition):
            report.run_metadata.update(part.traces.report.run_metadata)
            report.verdict_field = report.verdict_field or part.traces.report.verdict_field
            report.filters = report.filters or list(part.traces.report.filters)  # --where: what was kept
    # (the zero-step episodes are in the summary's ingest bookkeeping, whoever read them: ingest_report_of lists them)
    source_doc = {"path": src, "format": reader_name, "report": report, "n_partitions": len(parts),
                  "engine": corpus.engine,
                  "outcomes": dict(acc.counts.n_traces), "n_traces": sum(acc.counts.n_traces.values()),
                  "n_steps": int(acc.visits.sum())}
    settings = {"states": _describe_states(states), "state_options": dict(state_options or {}),
                "prior": prior_obj.to_dict(), "unvisited": policy, "initial": initial, "seed": seed,
                "audit": settings_audit.to_dict() if run_audit else None, "n_splits": spec.n_splits,
                "split_by": split_by, "test_fraction": test_fraction, "intervals": intervals,
                "n_samples": n_draws if intervals else None, "confidence": confidence,
                "resample_by": spec.resample_by}
    timings = {"read_and_states": t1 - t0, "summaries": t2 - t1, "audit": t3 - t2, "intervals": t4 - t3}
    if selection is not None:
        settings["model"] = model
        settings["model_options"] = dict(model_options or {})
        timings["model"] = t_model - t4
    if disc is not None:
        timings["discrimination"] = t5 - t_model
    return AnalysisResult(chain, certificate, ensemble, acc, state_model, source_doc, settings, timings, in_memory,
                          selection, disc)


def _discrimination(acc: CorpusSummary, traces: TraceTable | None, selection: Any, state_model: Any, *,
                    prior: ChainPrior, unvisited: str, initial: str, confidence: float, seed: int, split_by: str,
                    test_fraction: float) -> Any:
    """The held-out discrimination of the analysis's model: the first-order chain's from the summary, a chosen
    expanded model's from its refits on the fit halves (:mod:`tracetochain.analysis._discrimination`)."""
    from tracetochain.analysis._discrimination import model_discrimination, summary_discrimination

    if selection is None or selection.first_order:
        # States learned with outcomes (informative states) saw split 1's fit half, which later splits hold out.
        supervised = bool(getattr(state_model, "settings", {}).get("uses_outcomes", False))
        return summary_discrimination(acc, prior=prior, unvisited=unvisited, initial=initial, confidence=confidence,
                                      seed=seed, first_split_only=supervised)
    assert traces is not None
    codes, names = label_steps(traces, state_model)
    return model_discrimination(traces, codes, names, selection, split_by=split_by, test_fraction=test_fraction,
                                n_splits=acc.spec.n_splits, seed=seed, confidence=confidence)


def _model_refits(intervals: str | None, n_draws: int) -> int:
    """Refits behind a chosen model's intervals: the draws asked for with ``intervals="bootstrap"``; posterior draws
    do not exist for the families, so ``"posterior"`` becomes a bootstrap of at most ``DEFAULT_MODEL_REFITS``."""
    if intervals is None:
        return 0
    return n_draws if intervals == "bootstrap" else min(n_draws, DEFAULT_MODEL_REFITS)


def _model_path(traces: TraceTable, model: str, *, acc: CorpusSummary, chain: AbsorbingChain,
                certificate: Certificate | None, ensemble: Any, state_model: Any, split_by: str, test_fraction: float,
                n_splits: int, seed: int, audit: AuditSettings | None, holdout: bool, horizon: int | None,
                prior: ChainPrior, unvisited: str, initial: str, n_refits: int, confidence: float, states: Any,
                progress: Callable[..., Any], options: dict[str, Any] | None, n_jobs: int | None = None
                ) -> tuple[AbsorbingChain, Certificate | None, Any, Any]:
    """Choose the model (``analysis._models``) and, unless the first-order chain stays, put the chosen model's compiled
    chain, certificate and intervals in place of the first-order ones."""
    from tracetochain.analysis._models import model_certificate, select_model

    if not holdout:
        raise ValueError(f"model={model!r} chooses and certifies on held-out splits; drop the in-sample audit "
                         "(--in-sample / holdout=False)")
    codes, names = label_steps(traces, state_model)
    longest = int(np.flatnonzero(acc.all_lengths.sum(axis=0))[-1]) if acc.n_usable else 0
    D = longest if horizon is None else int(horizon)

    def split_chain(s: int) -> AbsorbingChain | None:
        if s >= acc.spec.n_splits:
            return None
        counts = acc.split_fit_counts(s)
        if counts.n_fitted_traces == 0:
            return None
        try:
            return estimate_chain(counts, prior=prior, unvisited=unvisited, initial=initial)
        except ChainValidationError:
            return None

    selection, layers = select_model(traces, codes, names, acc.state_names, requested=model, split_by=split_by,
                                     test_fraction=test_fraction, n_splits=n_splits, seed=seed, audit=audit,
                                     first_order=certificate, first_order_split_chain=split_chain, horizon=D,
                                     n_refits=n_refits, confidence=confidence, progress=progress,
                                     options=options, n_jobs=n_jobs)
    if selection.first_order:
        return chain, certificate, ensemble, selection
    compiled = selection.compiled
    E = compiled.emission
    observable = bool(np.all((E == 0) | (E == 1)))
    shows: dict[str, Any] = ({"shows": [compiled.observed_names[int(j)] for j in np.argmax(E, axis=1)]} if observable
                             else {"emission": [[float(x) for x in row] for row in E]})
    model_chain = compiled.chain.with_metadata(model={
        "name": selection.chosen, "family": selection.family, "observed_states": list(compiled.observed_names),
        "trials": compiled.trials, "class_weights": [float(w) for w in compiled.component_weights],
        "class_of_state": [int(c) for c in compiled.component], **shows,
        "note": "pass^k of this model is Σ_c w_c R_c^k when trials of a task share a class (trials 'task'), not "
                "R∞^k"})
    cert = None
    if audit is not None and layers is not None:
        cert = model_certificate(selection, layers, audit, horizon=D, settings={
            "states": _describe_states(states), "n_splits": n_splits, "split_by": split_by,
            "test_fraction": test_fraction, "seed": seed})
    return model_chain, cert, None, selection


def ingest_report_of(acc: CorpusSummary, source: str, fmt: str) -> IngestReport:
    from tracetochain.partitioned.shared import ingest_report

    return ingest_report(acc.base, acc.counts, source, fmt)


def _describe_states(states: Any) -> str:
    if states is None or isinstance(states, str):
        return states or "label"
    if isinstance(states, (list, tuple)):
        return "fixed list"
    return type(states).__name__


__all__ = ["AnalysisResult", "AuditSettings", "MemoryPartition", "analyze"]

