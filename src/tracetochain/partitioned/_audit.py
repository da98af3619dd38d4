"""The audit and intervals of a partitioned corpus: :func:`tracetochain.analysis.analyze` with an engine.

Kept as named entry points for corpora larger than memory; every statistic is computed by the one analysis core
(``tracetochain.analysis``), whose in-memory path is this one with a single partition. The held-out splits and the
bootstrap weights are functions of each trace's id (``traces._hashing``), so every engine and every partitioning give
the same chain, certificate and intervals, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from tracetochain.analysis import AnalysisResult, analyze
from tracetochain.chain import AbsorbingChain
from tracetochain.traces._hashing import holdout_mask, replicate_weights
from tracetochain.uncertainty import ChainEnsemble

#: What :func:`audit_partitioned` returns (the analysis result).
PartitionedAudit = AnalysisResult


def poisson_weights(hashes: Any, seed: int, replicates: range) -> Any:
    """Poisson(1) bootstrap weights by trace-id hash (``traces._hashing.replicate_weights``)."""
    return replicate_weights(hashes, seed, replicates, "poisson")


def audit_partitioned(source: str | Path | Sequence[str | Path], *, engine: Any = None,
                      intervals: Literal["bootstrap", "posterior", "none"] = "bootstrap", n_resamples: int = 200,
                      format: str | None = None, by: str = "range", rows_per_partition: int | None = None,
                      bytes_per_partition: int | None = None, **options: Any) -> AnalysisResult:
    """Fit, audit and bound a corpus too large for memory, in one pass over its partitions on ``engine``
    (``options`` as :func:`~tracetochain.analysis.analyze`)."""
    popts: dict[str, Any] = {"by": by}
    if rows_per_partition is not None:
        popts["rows_per_partition"] = rows_per_partition
    if bytes_per_partition is not None:
        popts["bytes_per_partition"] = bytes_per_partition
    return analyze(source, engine=engine or "local", reader=format,
                   intervals=None if intervals == "none" else intervals, n_samples=n_resamples,
                   partition_options=popts, **options)


def bootstrap_partitioned(source: str | Path | Sequence[str | Path], *, engine: Any = None, n_resamples: int = 200,
                          **options: Any) -> tuple[AbsorbingChain, ChainEnsemble]:
    """The chain of a partitioned corpus and its bootstrap ensemble, without the audit."""
    res = audit_partitioned(source, engine=engine, intervals="bootstrap", n_resamples=n_resamples, audit=False,
                            **options)
    assert res.ensemble is not None
    return res.chain, res.ensemble


__all__ = ["PartitionedAudit", "audit_partitioned", "bootstrap_partitioned", "holdout_mask", "poisson_weights"]
