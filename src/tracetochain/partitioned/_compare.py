"""Compare two partitioned corpora (last week and this week, at production scale) from counts alone.

One pass over each corpus (:func:`summarize_partitions`, no held-out split) gives its transition counts and B
Poisson-bootstrap replicates of them (weights keyed by trace id, module :mod:`tracetochain.partitioned._audit`).
The two chains share one vocabulary (A's states in order of first appearance, then B's new ones; or the fixed list
or state model given). ΔR∞ and ΔR(d) get percentile intervals from the two corpora's independent replicates, paired
by index, as :func:`tracetochain.compare.compare` does with its trace bootstraps; the per-state homogeneity test
uses the χ² reference on the two count tables (:func:`~tracetochain.audit.homogeneity_from_counts`), since a
permutation of traces between the corpora needs the traces.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain.audit import homogeneity_from_counts
from tracetochain.chain import AbsorbingChain, TransitionCounts, estimate_chain
from tracetochain.compare import Comparison, comparison_from_draws
from tracetochain.engines import Engine, get_engine
from tracetochain.exceptions import EmptyTraceSetError
from tracetochain.partitioned._audit import _AuditPartial, _bootstrap_ensemble, _reindexed, summarize_partitions
from tracetochain.partitioned._counts import _resolve_states, source_name
from tracetochain.partitioned._ingest import (
    DEFAULT_BYTES_PER_PARTITION,
    DEFAULT_ROWS_PER_PARTITION,
    OnError,
    PartitionBy,
    plan_partitions,
)
from tracetochain.uncertainty._dirichlet import resolve_unvisited


def _row_table(c: TransitionCounts) -> NDArray[np.float64]:
    out: NDArray[np.float64] = np.column_stack([c.transitions, c.exits_success, c.exits_failure]).astype(float)
    return out


def _draws(chain: AbsorbingChain, acc: _AuditPartial, pseudocount: float, policy: str, horizon: int, samples: int,
           seed: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """R∞ and R(0..horizon) of every bootstrap replicate (replicates that drew no trace are dropped)."""
    ens = _bootstrap_ensemble(chain, acc, pseudocount, policy, "empirical", samples, seed, 0.95)
    r = ens.stats("r_inf", return_samples=True).samples
    curve = ens.stats("reliability", horizon=horizon, return_samples=True).samples
    assert r is not None and curve is not None
    return np.asarray(r, float), np.asarray(curve, float)


def compare_partitioned(a: str | Path | Sequence[str | Path], b: str | Path | Sequence[str | Path], *,
                        names: tuple[str, str] = ("A", "B"), engine: Engine | str | None = None,
                        states: Any = None, state_options: dict[str, Any] | None = None, pseudocount: float = 1.0,
                        horizon: int = 50, samples: int = 200, confidence: float = 0.95, seed: int = 0,
                        level: float = 0.05, min_row_count: int = 5, top: int = 5, on_error: OnError = "raise",
                        format: str | None = None, by: PartitionBy = "range",
                        rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION,
                        bytes_per_partition: int = DEFAULT_BYTES_PER_PARTITION,
                        check_traces: bool = True) -> Comparison:
    """:func:`tracetochain.compare.compare` for two corpora of any size, partition by partition on ``engine``.

    ``states``: None/"label" (the traces' labels), a list of state names, a fitted StateModel, or a state estimator
    / spec (fitted on the first partition of ``a``). Seeds: corpus A's bootstrap weights use
    ``SeedSequence(seed).spawn(2)[0]``, B's ``[1]``; the same inputs give the same numbers on every engine and
    every partitioning.
    """
    if samples < 2:
        raise ValueError(f"samples must be >= 2, got {samples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    plan = {"format": format, "by": by, "rows_per_partition": rows_per_partition,
            "bytes_per_partition": bytes_per_partition}
    parts_a, parts_b = plan_partitions(a, **plan), plan_partitions(b, **plan)  # type: ignore[arg-type]
    model, vocab = _resolve_states(states, parts_a, on_error, dict(state_options or {}))
    seed_a, seed_b = (int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(2))
    owns = not isinstance(engine, Engine)
    eng: Engine = get_engine(engine) if owns else engine  # type: ignore[assignment]
    common: dict[str, Any] = {"model": model, "vocab": vocab, "on_error": on_error, "holdout": False,
                              "test_fraction": 0.0, "n_resamples": samples, "include_outcomes": True,
                              "check_traces": check_traces}
    try:
        acc_a = summarize_partitions(parts_a, eng, source=source_name(a), seed=seed_a, **common)
        acc_b = summarize_partitions(parts_b, eng, source=source_name(b), seed=seed_b, **common)
    finally:
        if owns:
            eng.close()
    union = acc_a.names + tuple(s for s in acc_b.names if s not in set(acc_a.names))
    acc_a, acc_b = _reindexed(acc_a, union, True), _reindexed(acc_b, union, True)
    for acc, src in ((acc_a, a), (acc_b, b)):
        if acc.base.counts.n_fitted_traces == 0:
            raise EmptyTraceSetError(f"no usable traces in {source_name(src)}: every trace is invalid or there are "
                                     "none")
    alpha = float(pseudocount)
    policy = resolve_unvisited("auto", alpha)
    chain_a = estimate_chain(acc_a.base.counts, alpha, policy, "empirical")  # type: ignore[arg-type]
    chain_b = estimate_chain(acc_b.base.counts, alpha, policy, "empirical")  # type: ignore[arg-type]
    homog = homogeneity_from_counts(_row_table(acc_a.base.counts), _row_table(acc_b.base.counts), list(union),
                                    level=level, n_traces=(acc_a.base.counts.n_fitted_traces,
                                                           acc_b.base.counts.n_fitted_traces))
    return comparison_from_draws(names, chain_a, chain_b, _draws(chain_a, acc_a, alpha, policy, horizon, samples,
                                                                  seed_a),
                                 _draws(chain_b, acc_b, alpha, policy, horizon, samples, seed_b), homog,
                                 horizon=horizon,
                                 confidence=confidence, samples=samples, seed=seed, min_row_count=min_row_count,
                                 top=top)


__all__ = ["compare_partitioned"]
