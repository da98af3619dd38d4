"""The pipeline for corpora larger than memory, partition by partition on any engine: ingest and counting
(:func:`count_partitioned`, :func:`fit_partitioned`), the audit with its intervals (:func:`audit_partitioned`,
:func:`bootstrap_partitioned`) and the comparison of two corpora (:func:`compare_partitioned`). The entry points run
the analysis core and are defined in ``tracetochain.analysis._partitioned``; this package holds what the core builds
on: planning partitions, reading them and merging their counts.

A corpus (a Parquet file, a JSONL file, a directory of them, or a ``scheme://`` Parquet URI that pyarrow can open)
is cut into *partitions*: small descriptors (a file and a range in it) that an engine ships to wherever the data
is read (:mod:`tracetochain.engines`). Each partition is read and validated exactly like a whole file
(:meth:`TraceTable.from_arrow` / :meth:`TraceTable.from_records`), its steps get their states, and its transitions
are counted (:func:`~tracetochain.chain.count_transitions_from_codes`). Only these counts travel; they are
summed in the order of the partitions. The result equals, bit for bit, ``count_transitions`` /
``ChainEstimator`` on the whole table read in one piece.

Where partitions are cut
------------------------
``by="range"`` (default) reads each file in order and assumes that **the steps of a trace are contiguous** (on
consecutive rows or lines, in any step order) and that no trace spans two files.

* Parquet: consecutive row groups are grouped into partitions of at least ``rows_per_partition`` rows (a row group
  is never split). A trace may still cross a row-group boundary: it belongs to the partition holding its first
  row, which reads on into the next row groups until the trace ends; the next partition skips those leading rows.
  This is decided by the workers themselves (they read the ``trace_id`` column around their range), so planning
  needs only the file footers.
* JSONL: the file is cut into byte ranges of about ``bytes_per_partition``, each moved forward to the first line
  whose ``trace_id`` differs from the line before. Planning reads the file once on the driver, to count lines,
  so that every error still names its line.

Every partition returns a 64-bit hash (FNV-1a) of each of its trace ids, and the driver checks that no id is in
two partitions: a trace whose steps are not contiguous is reported by name (never counted twice) with the two
places it was found. Such a corpus can be rewritten with :func:`repartition_by_trace` (a streaming pass that sends
every row to part file ``fnv1a(trace_id) mod n_parts``), then read with ``by="file"``, which reads every file whole
as one partition (so each part must fit in a worker's memory; the steps of a trace may then be anywhere within it).

States
------
``states=None`` (or ``"label"``) uses the traces' own labels. Each partition counts with its own labels; partial
counts merge their vocabularies in order of first appearance, so the states and their order are those of the
whole table (``count_transitions(whole)``). A sequence of names fixes the vocabulary as
``ChainEstimator(states=...)`` does. A fitted :class:`~tracetochain.states.StateModel` assigns states per partition
with ``predict``. A state estimator (``WardStates(...)``, ``CategoricalStates(...)``, …) or any other spec of
:func:`~tracetochain.states.states_from_spec` is learned on a seeded sample of the fit half of the first held-out
split (partitions read in a seeded order until the sample is large enough), never on held-out traces, then used as a
StateModel everywhere.
"""

import importlib
from typing import Any

from tracetochain.partitioned._counts import PartitionedCounts
from tracetochain.partitioned._ingest import (
    DEFAULT_BYTES_PER_PARTITION,
    DEFAULT_ROWS_PER_PARTITION,
    Partition,
    iter_partitions,
    plan_partitions,
    repartition_by_trace,
    trace_id_hashes,
)
from tracetochain.traces.shared import holdout_mask, replicate_weights

#: Entry points that run the analysis core (``tracetochain.analysis._partitioned``), imported on first use: the core
#: builds on this package's ingest and counts, so they sit above it.
_ANALYSIS = ("PartitionedAudit", "audit_partitioned", "bootstrap_partitioned", "compare_partitioned",
             "count_partitioned", "fit_partitioned")


def poisson_weights(hashes: Any, seed: int, replicates: range) -> Any:
    """Poisson(1) bootstrap weights by trace-id hash (``traces._hashing.replicate_weights``)."""
    return replicate_weights(hashes, seed, replicates, "poisson")


def __getattr__(name: str) -> Any:
    if name in _ANALYSIS:
        return getattr(importlib.import_module("tracetochain.analysis._partitioned"), name)
    raise AttributeError(f"module 'tracetochain.partitioned' has no attribute {name!r}")


__all__ = [
    "DEFAULT_BYTES_PER_PARTITION",
    "DEFAULT_ROWS_PER_PARTITION",
    "Partition",
    "PartitionedAudit",
    "PartitionedCounts",
    "audit_partitioned",
    "bootstrap_partitioned",
    "compare_partitioned",
    "count_partitioned",
    "fit_partitioned",
    "holdout_mask",
    "iter_partitions",
    "plan_partitions",
    "poisson_weights",
    "repartition_by_trace",
    "trace_id_hashes",
]
