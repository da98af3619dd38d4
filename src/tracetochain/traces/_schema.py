"""The canonical trace record (docs/formats.md): column names, types, levels and allowed values.

On disk a trace set is a *long* table, one row per step. Trace-level columns (outcome, task_id, trial, reward,
termination_reason) repeat on every row of a trace and must agree across them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa

#: Version of the canonical long-table layout; written into Parquet metadata.
TRACE_SCHEMA_VERSION = 1


class Outcome(StrEnum):
    """How an episode ended: the absorbing state, or why there is none."""

    SUCCESS = "success"
    FAILURE = "failure"
    CENSORED = "censored"  # stopped by a budget/timeout: transitions count, no exit (docs/formats.md)
    INVALID = "invalid"  # infrastructure error: excluded from fitting and counted


class StepKind(StrEnum):
    LLM = "llm"
    TOOL = "tool"
    AGENT = "agent"
    RETRIEVAL = "retrieval"
    USER = "user"
    HANDOFF = "handoff"
    OTHER = "other"


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    level: str  # "trace" or "step"
    doc: str


COLUMNS: tuple[Column, ...] = (
    Column("trace_id", pa.string(), "step", "one episode = one attempt at one task"),
    Column("step_idx", pa.int64(), "step", "0-based order of the step within its trace"),
    Column("outcome", pa.string(), "trace", "success | failure | censored | invalid"),
    Column("task_id", pa.string(), "trace", "the task attempted (for per-task pass^k)"),
    Column("trial", pa.int64(), "trace", "repetition index of the task"),
    Column("reward", pa.float64(), "trace", "raw score of the episode"),
    Column("termination_reason", pa.string(), "trace", "why the episode ended, e.g. max_steps"),
    Column("step_kind", pa.string(), "step", "llm | tool | agent | retrieval | user | handoff | other"),
    Column("tool_name", pa.string(), "step", "tool/function called by a tool step"),
    Column("error", pa.bool_(), "step", "the step itself failed (tool error, exception)"),
    Column("error_type", pa.string(), "step", "low-cardinality error class"),
    Column("state", pa.string(), "step", "state label; default step_kind[:tool_name]"),
    Column("text", pa.string(), "step", "free text of the step (untrusted)"),
    Column("t_start", pa.float64(), "step", "start time, seconds since the epoch"),
    Column("t_end", pa.float64(), "step", "end time, seconds since the epoch"),
    Column("tokens_in", pa.int64(), "step", "input tokens"),
    Column("tokens_out", pa.int64(), "step", "output tokens"),
    Column("cost_usd", pa.float64(), "step", "cost of the step in USD"),
    # Episode totals as some sources report them (e.g. SWE-agent ``info.model_stats``). They stand in for the
    # per-step columns when the steps carry none (per-state costs are then estimated from the totals) and check
    # them when they do. Never copy a total onto a step column: that would charge one step for the whole episode.
    Column("total_tokens_in", pa.int64(), "trace", "input tokens of the whole episode, as the source reports them"),
    Column("total_tokens_out", pa.int64(), "trace", "output tokens of the whole episode, as the source reports them"),
    Column("total_cost_usd", pa.float64(), "trace", "cost of the whole episode in USD, as the source reports it"),
    Column("total_api_calls", pa.int64(), "trace", "model API calls of the whole episode, as the source reports them"),
)
#: Usage columns that must be finite and non-negative (steps and episode totals).
USAGE_COLUMNS = ("tokens_in", "tokens_out", "cost_usd", "total_tokens_in", "total_tokens_out", "total_cost_usd",
                 "total_api_calls")
COLUMN_BY_NAME = {c.name: c for c in COLUMNS}
REQUIRED = ("trace_id", "step_idx", "outcome")
TRACE_LEVEL = tuple(c.name for c in COLUMNS if c.level == "trace")
OUTCOME_VALUES = tuple(o.value for o in Outcome)
STEP_KIND_VALUES = tuple(k.value for k in StepKind)
