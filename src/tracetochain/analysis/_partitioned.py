"""Entry points for corpora larger than memory: :func:`tracetochain.analysis.analyze` and
:func:`~tracetochain.compare.compare` with an engine. Users import them from :mod:`tracetochain.partitioned`, which
re-exports them on first use (its ingest sits below the analysis core, these sit above it).

Every statistic is computed by the one analysis core (``tracetochain.analysis``), whose in-memory path is this one
with a single partition. The held-out splits and the bootstrap weights are functions of each trace's id
(``traces._hashing``), so every engine and every partitioning give the same chain, certificate and intervals, bit for
bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from tracetochain._compat import renamed_parameters
from tracetochain.analysis._analyze import AnalysisResult, analyze, ingest_report_of, summarize_input
from tracetochain.analysis._compare import Comparison, compare
from tracetochain.analysis._summary import SummarySpec
from tracetochain.chain import AbsorbingChain
from tracetochain.partitioned import PartitionedCounts
from tracetochain.uncertainty import ChainEnsemble

#: What :func:`audit_partitioned` returns (the analysis result).
PartitionedAudit = AnalysisResult


def _partition_options(by: str, rows_per_partition: int | None, bytes_per_partition: int | None) -> dict[str, Any]:
    popts: dict[str, Any] = {"by": by}
    if rows_per_partition is not None:
        popts["rows_per_partition"] = rows_per_partition
    if bytes_per_partition is not None:
        popts["bytes_per_partition"] = bytes_per_partition
    return popts


@renamed_parameters(n_resamples="samples")
def audit_partitioned(source: str | Path | Sequence[str | Path], *, engine: Any = None,
                      intervals: Literal["bootstrap", "posterior", "none"] = "bootstrap", samples: int = 200,
                      format: str | None = None, by: str = "range", rows_per_partition: int | None = None,
                      bytes_per_partition: int | None = None, **options: Any) -> AnalysisResult:
    """Fit, audit and bound a corpus too large for memory, in one pass over its partitions on ``engine`` (default:
    the local engine); ``options`` as :func:`~tracetochain.analysis.analyze`."""
    return analyze(source, engine=engine or "local", reader=format,
                   intervals=None if intervals == "none" else intervals, samples=samples,
                   partition_options=_partition_options(by, rows_per_partition, bytes_per_partition), **options)


@renamed_parameters(n_resamples="samples")
def bootstrap_partitioned(source: str | Path | Sequence[str | Path], *, engine: Any = None, samples: int = 200,
                          **options: Any) -> tuple[AbsorbingChain, ChainEnsemble]:
    """The chain of a partitioned corpus and its bootstrap ensemble, without the audit."""
    res = audit_partitioned(source, engine=engine, intervals="bootstrap", samples=samples, audit=False,
                            **options)
    assert res.ensemble is not None
    return res.chain, res.ensemble


def count_partitioned(source: str | Path | Sequence[str | Path], *, engine: Any = None, states: Any = None,
                      on_error: str = "raise", format: str | None = None, by: str = "range",
                      rows_per_partition: int | None = None, bytes_per_partition: int | None = None,
                      check_traces: bool = True, **state_options: Any) -> PartitionedCounts:
    """The transition counts of a corpus, partition by partition on ``engine``, with the merged ingest report."""
    # The pass over the data that analyze() makes, without fitting a chain: a corpus with no usable trace is counted
    # (every trace invalid), not refused.
    corpus = summarize_input(source, SummarySpec(), reader=format, on_error=on_error, engine=engine or "local",
                             states=states, state_options=state_options, check_traces=check_traces,
                             partition_options=_partition_options(by, rows_per_partition, bytes_per_partition))
    summary = corpus.summary
    costs = summary.base.costs
    return PartitionedCounts(summary.counts, ingest_report_of(summary, corpus.source, corpus.reader),
                             len(corpus.parts), corpus.engine, corpus.state_model,
                             costs.reindexed(summary.counts.state_names) if costs is not None else None)


def fit_partitioned(source: str | Path | Sequence[str | Path], *, engine: Any = None,
                    pseudocount: float | None = None, unvisited: str = "auto", initial: str = "empirical",
                    states: Any = None, on_error: str = "raise", format: str | None = None, by: str = "range",
                    rows_per_partition: int | None = None, bytes_per_partition: int | None = None,
                    check_traces: bool = True, **state_options: Any) -> AbsorbingChain:
    """Fit an :class:`AbsorbingChain` to a corpus that need not fit in memory: the chain ``analyze`` fits, equal bit
    for bit to the in-memory fit of the same traces.

    Example (a Dask cluster needs the ``if __name__ == "__main__":`` guard in scripts)::

        from tracetochain.engines import DaskEngine
        with DaskEngine(n_workers=2) as engine:                            # doctest: +SKIP
            chain = fit_partitioned("s3://bucket/traces/", engine=engine)
    """
    return analyze(source, engine=engine or "local", reader=format, states=states, state_options=state_options,
                   pseudocount=pseudocount, unvisited=unvisited, initial=initial, on_error=on_error, audit=False,
                   intervals=None, check_traces=check_traces,
                   partition_options=_partition_options(by, rows_per_partition, bytes_per_partition)).chain


def compare_partitioned(a: str | Path | Sequence[str | Path], b: str | Path | Sequence[str | Path], *,
                        engine: Any = None, format: str | None = None, by: str = "range",
                        rows_per_partition: int | None = None, bytes_per_partition: int | None = None,
                        **options: Any) -> Comparison:
    """:func:`tracetochain.compare.compare` for two corpora of any size, partition by partition on ``engine``."""
    return compare(a, b, engine=engine or "local", reader=format,
                   partition_options=_partition_options(by, rows_per_partition, bytes_per_partition), **options)


__all__ = ["PartitionedAudit", "audit_partitioned", "bootstrap_partitioned", "compare_partitioned",
           "count_partitioned", "fit_partitioned"]
