"""``analyze_paths()`` and ``compare_paths()``: traces → states → path patterns with inference, in memory or on an
engine.

The input and the states are resolved exactly as :func:`~tracetochain.analysis.analyze` resolves them for ``fit``
(any reader, ``states=`` spec, learned on the usable traces), then every partition is reduced to its flat state paths
(:class:`~tracetochain.paths.PathSequences`); the paths are concatenated in partition order and put in canonical order
(traces by id, states by name) before anything is computed, so ``engine="local"`` or ``"dask"`` gives the same numbers
as the corpus in memory.
"""

from __future__ import annotations

import functools
from typing import Any

from tracetochain.analysis._analyze import (
    DEFAULT_STATE_SAMPLE,
    UNSEEN_STATE,
    label_steps,
    opened_engine,
    plan_input,
    resolve_states,
)
from tracetochain.analysis._headline import Finding
from tracetochain.analysis._summary import SummarySpec
from tracetochain.paths import (
    CandidateSettings,
    PathSequences,
    PathsResult,
    compare_patterns,
    find_patterns,
    merge_sequences,
    top_finding,
)


def _part_sequences(part: Any, *, on_error: str, model: Any) -> PathSequences:
    traces = part.read(on_error=on_error)
    codes, names = label_steps(traces, model)
    return PathSequences.from_table(traces, codes, names)


def path_sequences(source: Any, *, reader: str | None = None, reader_options: dict[str, Any] | None = None,
                   on_error: str = "raise", engine: Any = None, states: Any = "label",
                   state_options: dict[str, Any] | None = None, seed: int = 0,
                   partition_options: dict[str, Any] | None = None, state_model: Any = None
                   ) -> tuple[PathSequences, dict[str, Any]]:
    """(the corpus's state paths in canonical order, where they came from). ``state_model``: a fitted state model to
    label with (e.g. ``AnalysisResult.state_model``), instead of resolving ``states`` again."""
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    with opened_engine(engine) as eng:
        parts, src, reader_name = plan_input(source, engine=eng, reader=reader, on_error=on_error,
                                             reader_options=dict(reader_options or {}),
                                             partition_options=dict(partition_options or {}))
        model = state_model
        if model is None:
            # The states of `fit` (no held-out split there): learned on all usable traces.
            model, vocab = resolve_states(states, dict(state_options or {}), parts, SummarySpec(seed=seed, n_splits=0),
                                          on_error, DEFAULT_STATE_SAMPLE)
            if vocab is not None:
                raise ValueError("paths reads the states from the traces or a state model, not from a fixed list")
        fn = functools.partial(_part_sequences, on_error=on_error, model=model)
        if eng is None:
            acc = fn(parts[0])
            for p in parts[1:]:
                acc = merge_sequences(acc, fn(p))
        else:
            acc = eng.map_reduce(fn, parts, merge_sequences)
    method = "label" if model is None else getattr(model, "method", type(model).__name__)
    unseen = UNSEEN_STATE in acc.state_names
    return acc.canonical(), {"path": src, "format": reader_name, "n_partitions": len(parts),
                             "engine": getattr(eng, "name", "memory") if eng is not None else "memory",
                             "states": str(method), "unseen_state": unseen}


def analyze_paths(source: Any, *, reader: str | None = None, reader_options: dict[str, Any] | None = None,
                  on_error: str = "raise", engine: Any = None, states: Any = "label",
                  state_options: dict[str, Any] | None = None, seed: int = 0, confidence: float = 0.95,
                  settings: CandidateSettings | None = None, partition_options: dict[str, Any] | None = None,
                  state_model: Any = None, **candidate_options: Any) -> PathsResult:
    """Which path patterns go with success or failure in ``source`` (:func:`tracetochain.paths.find_patterns` on the
    traces read and labelled as ``analyze`` does).

    ``candidate_options`` are :class:`~tracetochain.paths.CandidateSettings` fields (``min_traces``, ``min_share``,
    ``max_length``, ``revisits``, ``error_runs``, ``kinds``).

    >>> import tracetochain as tt
    >>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=2)
    >>> res = analyze_paths(traces)
    >>> res.n_traces == 300 - traces.outcome_counts()["censored"], res.to_dict()["schema_version"]
    (True, 1)
    """
    if settings is not None and candidate_options:
        raise TypeError("pass the candidate settings either as CandidateSettings or as keywords, not both")
    cfg = settings or CandidateSettings(**candidate_options)
    seq, src = path_sequences(source, reader=reader, reader_options=reader_options, on_error=on_error, engine=engine,
                              states=states, state_options=state_options, seed=seed,
                              partition_options=partition_options, state_model=state_model)
    return find_patterns(seq, cfg, confidence=confidence, source=src)


def path_finding(paths: PathsResult | dict[str, Any], level: float = 0.05) -> Finding | None:
    """The headline candidate (:mod:`tracetochain.analysis._headline`, kind ``"path"``, priority 3) of a paths
    result or its JSON document: the best-supported pattern with q < ``level``
    (:func:`tracetochain.paths.top_finding`), or None when no pattern is supported."""
    top = top_finding(paths, level)
    if top is None:
        return None
    evidence = {k: top[k] for k in ("pattern", "kind", "n_traces", "share", "success_with", "success_without",
                                    "difference", "p_value", "q_value", "examples")}
    return Finding("path", top["sentence"] + ".", True, 3, evidence)


def compare_paths(a: Any, b: Any, *, labels: tuple[str, str] = ("A", "B"), confidence: float = 0.95,
                  settings: CandidateSettings | None = None, states: Any = "label",
                  state_options: dict[str, Any] | None = None, seed: int = 0, state_model: Any = None,
                  on_error: str = "raise", reader: str | None = None, reader_options: dict[str, Any] | None = None,
                  **options: Any) -> dict[str, Any]:
    """Which path patterns changed between corpora ``a`` and ``b`` (:func:`tracetochain.paths.compare_patterns`).

    Both get one state model, as in :func:`~tracetochain.compare`: learned on both together (or the traces' own
    labels); ``options`` are those of :func:`path_sequences` and apply to both."""
    if state_model is None and not (states is None or (states == "label" and not state_options)):
        parts: list[Any] = []
        for src in (a, b):
            found, _, _ = plan_input(src, engine=None, reader=reader, on_error=on_error,
                                     reader_options=dict(reader_options or {}), partition_options={})
            parts += found
        state_model, _ = resolve_states(states, dict(state_options or {}), parts, SummarySpec(seed=seed, n_splits=0),
                                        on_error, DEFAULT_STATE_SAMPLE)
    common = {"state_model": state_model, "seed": seed, "on_error": on_error, "reader": reader,
              "reader_options": reader_options, **options}
    sa, _ = path_sequences(a, **common)
    sb, _ = path_sequences(b, **common)
    return compare_patterns(sa, sb, settings, confidence=confidence, labels=labels)


__all__ = ["analyze_paths", "compare_paths", "path_finding", "path_sequences"]
