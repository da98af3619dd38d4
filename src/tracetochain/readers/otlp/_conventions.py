"""The attribute vocabularies the OTLP reader maps: GenAI semantic conventions, OpenInference, Traceloop (operation →
step kind, censoring reasons, evaluation attributes), and the columnar builder of the canonical table.
"""

from __future__ import annotations

import re

import pyarrow as pa

from tracetochain.traces import COLUMNS

#: The error every episode without an outcome source gets (refuse to guess; docs/formats.md).
NO_OUTCOME_MESSAGE = (
    "OTLP spans carry no task outcome; span status is not success — pass outcome_attribute= or verdicts="
)


_NO_OUTCOME_HINT = "or record a gen_ai.evaluation.result event (score.label/score.value) on the episode's spans"


_EXTENSIONS = (".jsonl", ".ndjson", ".json", ".log", ".txt")


_STEP_KINDS = frozenset({"llm", "tool", "retrieval"})


_OP_KIND = {
    "chat": "llm", "text_completion": "llm", "generate_content": "llm",
    # `plan` (an agent's planning / task-decomposition phase): a model step; a plan span whose model calls are
    # child spans is a wrapper, like a chat span with tool calls below it (the leaf rule decides).
    "plan": "llm",
    "execute_tool": "tool",
    "invoke_agent": "agent", "create_agent": "agent", "invoke_workflow": "agent",
    "embeddings": "retrieval", "retrieval": "retrieval",
    # Memory operations: a search reads like a retrieval; the writes are actions on a store, tool steps named by
    # the operation (so `update_memory` is one state however the store is called).
    "search_memory": "retrieval",
    "create_memory": "tool", "update_memory": "tool", "upsert_memory": "tool", "delete_memory": "tool",
    "create_memory_store": "tool", "delete_memory_store": "tool",
}


_MEMORY_OPS = frozenset({"create_memory", "update_memory", "upsert_memory", "delete_memory", "create_memory_store",
                         "delete_memory_store"})


#: Operations whose outermost span is an episode with ``episode="agent"`` (unless marked internal).
_AGENT_ROOT_OPS = frozenset({"invoke_agent", "invoke_workflow"})


#: The agent invocation's end status, as some agent frameworks record it (not in the published registry: read as a
#: termination reason only, never as an outcome).
_INVOCATION_STATUS = "gen_ai.agent.invocation.status"


_OI_KIND = {
    "LLM": "llm", "TOOL": "tool", "AGENT": "agent", "RETRIEVER": "retrieval", "EMBEDDING": "retrieval",
    "RERANKER": "retrieval", "CHAIN": "other", "GUARDRAIL": "other", "EVALUATOR": "other", "PROMPT": "other",
}


_TRACELOOP_KIND = {"tool": "tool", "agent": "agent", "workflow": "other", "task": "other"}


_LLM_REQUEST_KIND = {"chat": "llm", "completion": "llm", "embedding": "retrieval", "rerank": "retrieval"}


_CENSOR_REASONS = frozenset({"max_iterations", "max_turns", "max_steps", "max_tokens", "time_budget", "timeout",
                             # budget cut-offs as agent invocation statuses spell them
                             "max_iterations_exceeded", "max_turns_exceeded", "max_steps_exceeded",
                             "max_tokens_exceeded", "budget_exceeded", "token_limit", "turn_limit", "timed_out",
                             "time_limit"})


_ERROR_CODES = frozenset({2, "2", "STATUS_CODE_ERROR", "ERROR", "StatusCode.ERROR", "error"})


_EVAL_EVENT = "gen_ai.evaluation.result"


#: A step span's own state label (``tracetochain.instrument`` sets it); absent, the state is ``kind[:tool]``.
STATE_ATTRIBUTE = "tracetochain.state"


_EVAL_PREFIXES = ("trace.evaluations.", "trace.annotations.")


_EVAL_ATTR_GROUPS = (
    ("gen_ai.evaluation.name", "gen_ai.evaluation.score.label", "gen_ai.evaluation.score.value"),
    ("evaluation.name", "evaluation.label", "evaluation.score"),
    ("annotation.name", "annotation.label", "annotation.score"),
)


#: Attributes the mapping reads (besides user-named ones); everything else is dropped at once.
_BASE_KEYS = frozenset({
    "gen_ai.operation.name", "openinference.span.kind", "traceloop.span.kind", "llm.request.type",
    "gen_ai.tool.name", "tool.name", "error.type", "exception.type",
    "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens", "llm.token_count.prompt", "llm.token_count.completion", "llm.cost.total",
    "gen_ai.agent.finish_reason", _INVOCATION_STATUS, STATE_ATTRIBUTE,
    *(k for group in _EVAL_ATTR_GROUPS for k in group),
})


_EVAL_KEYS = frozenset(k for group in _EVAL_ATTR_GROUPS for k in group)


_TEXT_KEYS = frozenset({"gen_ai.tool.call.arguments", "input.value", "gen_ai.output.messages", "output.value"})


_VERDICT_ID_KEYS = ("episode_id", "trace_id", "traceId", "id", "span_id")


_VERDICT_OUTCOME_KEYS = ("outcome", "resolved", "success", "passed", "label")


_VERDICT_REWARD_KEYS = ("reward", "score", "value")


# Pass 1: trace ids in raw bytes (OTLP "traceId", snake_case and console "trace_id").
_TRACE_ID_RE = re.compile(rb'"(?:traceId|trace_id)"\s*:\s*"((?:[^"\\]|\\.)*)"')


_HEX_RE = re.compile(r"[0-9a-fA-F]+\Z")


_EVAL_INDEXED_RE = re.compile(
    r"trace\.(evaluations|annotations)\.([0-9]{1,9})\.(?:[A-Za-z_]+\.)*(name|label|score|value)\Z")


# ============================================================================================ columnar builder
_COLS: tuple[tuple[str, pa.DataType], ...] = tuple((c.name, c.type) for c in COLUMNS)
