"""Rule-based step features (Tran-Truong & Le 2026, rule-based featurization): one-hot step kind, tool (or action
category), step error, retry flag and optional depth — each switchable. Fit learns the vocabularies (step kinds, the
top-N tools, the step buckets) so that new traces are mapped the same way by the frozen :class:`RuleFeatures` model.

Depth comes in two kinds, and only one of them can label a running trace:

* ``"step"`` — causal: the bucket of the step's 0-based index j in its trace (edges = quantiles of j over the fit
  steps). It is known the moment the step happens, so states built on it give an R(d) that forecasts.
* ``"hindsight-fraction"`` / ``"hindsight-bucket"`` — the relative depth j/(L − 1), which needs the trace's *final*
  length L (the paper's "cat+depth"). Useful to describe finished traces; a chain on such states cannot label a
  running trace, so its R(d) is not a forecast. The fitted features say so (``causal`` is False). The old spellings
  ``"fraction"`` / ``"bucket"`` still work and warn.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain._display import EstimatorDisplay
from tracetochain.exceptions import NotFittedError
from tracetochain.featurize._base import Features, mixed_radix
from tracetochain.featurize.vocab import ActionVocabulary, get_vocabulary
from tracetochain.traces import TraceTable

Depth = Literal["none", "step", "hindsight-fraction", "hindsight-bucket", "fraction", "bucket"]
#: Old spellings of the hindsight features, kept working with a warning.
HINDSIGHT_ALIASES = {"fraction": "hindsight-fraction", "bucket": "hindsight-bucket"}
OTHER_TOOL = "other"
_DEPTH_BASE = 1 << 20  # traces up to a million steps


def _column(traces: TraceTable, name: str, type_: pa.DataType) -> pa.Array:
    table = traces.to_arrow()
    if name in table.column_names:
        return table.column(name).combine_chunks()
    return pa.nulls(traces.n_steps, type_)


def _position(traces: TraceTable) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(j, L): each step's 0-based position in its trace and its trace's length."""
    offsets = traces.offsets
    lengths = np.diff(offsets)
    L = np.repeat(lengths, lengths)
    j = np.arange(traces.n_steps) - np.repeat(offsets[:-1], lengths)
    return j.astype(np.int64), L.astype(np.int64)


@dataclass(frozen=True)
class RuleFeatures:
    """Fitted rule featurizer (frozen): apply it to any traces with :meth:`transform`."""

    kinds: tuple[str, ...]
    tools: tuple[str, ...]
    vocabulary: str | None
    use_kind: bool
    use_tool: bool
    use_error: bool
    use_retry: bool
    depth: Depth
    n_depth_buckets: int
    depth_weight: float
    #: Edges of the causal step buckets (bucket = number of edges ≤ j), learnt at fit time.
    step_edges: tuple[int, ...] = ()

    @property
    def causal(self) -> bool:
        """Whether every feature is known when its step happens (False with a hindsight depth j/(L − 1))."""
        return not self.depth.startswith("hindsight")

    def _vocab(self) -> ActionVocabulary | None:
        return get_vocabulary(self.vocabulary) if self.vocabulary else None

    def action_codes(self, traces: TraceTable) -> tuple[NDArray[np.int64], tuple[str, ...]]:
        """The primary action label of each step: vocabulary category, or ``kind:tool`` with rare tools as other."""
        kind = _column(traces, "step_kind", pa.string())
        tool = _column(traces, "tool_name", pa.string())
        vocab = self._vocab()
        if vocab is not None:
            text = _column(traces, "text", pa.string()) if vocab.uses_text else None
            return vocab.apply(kind, tool, text), vocab.categories
        kind_idx = _index(kind.fill_null("other"), self.kinds, len(self.kinds) - 1)
        tool_idx = _index(tool, self.tools, len(self.tools))  # len(tools) = "no tool"; tools[-1] = "other"
        names = [f"{k}:{t}" for k in self.kinds for t in self.tools] + list(self.kinds)
        # Steps without a tool are named by their kind alone.
        code = np.where(tool_idx == len(self.tools), len(self.kinds) * len(self.tools) + kind_idx,
                        kind_idx * len(self.tools) + tool_idx)
        return code.astype(np.int64), tuple(names)

    def transform(self, traces: TraceTable) -> Features:
        n = traces.n_steps
        blocks: list[NDArray[np.float64]] = []
        names: list[str] = []
        radix: list[tuple[NDArray[np.int64], int]] = []
        action, action_names = self.action_codes(traces)
        vocab = self._vocab()
        if vocab is not None:
            blocks.append(_one_hot(action, len(vocab.categories)))
            names += [f"category={c}" for c in vocab.categories]
            radix.append((action, len(vocab.categories)))
        else:
            if self.use_kind:
                kind_idx = _index(_column(traces, "step_kind", pa.string()).fill_null("other"), self.kinds,
                                  len(self.kinds) - 1)
                blocks.append(_one_hot(kind_idx, len(self.kinds)))
                names += [f"kind={k}" for k in self.kinds]
                radix.append((kind_idx, len(self.kinds)))
            if self.use_tool:
                tool_idx = _index(_column(traces, "tool_name", pa.string()), self.tools, len(self.tools))
                blocks.append(_one_hot(tool_idx, len(self.tools) + 1)[:, : len(self.tools)])
                names += [f"tool={t}" for t in self.tools]
                radix.append((tool_idx, len(self.tools) + 1))
        if self.use_error:
            err = np.asarray(_column(traces, "error", pa.bool_()).fill_null(False), dtype=np.int64) if n \
                else np.zeros(0, np.int64)
            blocks.append(err[:, None].astype(np.float64))
            names.append("error")
            radix.append((err, 2))
        if self.use_retry:
            same_trace = np.r_[False, np.diff(np.repeat(np.arange(traces.n_traces), np.diff(traces.offsets))) == 0]
            retry = (same_trace & np.r_[False, action[1:] == action[:-1]]).astype(np.int64) if n \
                else np.zeros(0, np.int64)
            blocks.append(retry[:, None].astype(np.float64))
            names.append("retry")
            radix.append((retry, 2))
        if self.depth == "step":
            j, _ = _position(traces)
            bucket = np.searchsorted(np.asarray(self.step_edges, np.int64), j, side="right").astype(np.int64)
            width = len(self.step_edges) + 1
            blocks.append(self.depth_weight * _one_hot(bucket, width))
            names += [f"step_bucket={b}" for b in range(width)]
            radix.append((bucket, width))
        elif self.depth != "none":
            j, L = _position(traces)
            frac = np.where(L > 1, j / np.maximum(L - 1, 1), 0.0)
            if self.depth == "hindsight-fraction":
                blocks.append(self.depth_weight * frac[:, None])
                names.append("depth")
                # j/(L−1) is rational: code it exactly as the reduced fraction, the same on any table (so
                # predict() on new traces finds the rows seen at fit time).
                den = np.maximum(L - 1, 1)
                g = np.maximum(np.gcd(j, den), 1)
                radix.append(((den // g) * _DEPTH_BASE + j // g, _DEPTH_BASE * _DEPTH_BASE))
            else:
                bucket = np.minimum((frac * self.n_depth_buckets).astype(np.int64), self.n_depth_buckets - 1)
                blocks.append(self.depth_weight * _one_hot(bucket, self.n_depth_buckets))
                names += [f"depth_bucket={b}" for b in range(self.n_depth_buckets)]
                radix.append((bucket, self.n_depth_buckets))
        X = np.hstack(blocks) if blocks else np.zeros((n, 0))
        return Features(X, tuple(names), action, action_names, mixed_radix(radix, n))

    def to_dict(self) -> dict[str, Any]:
        return {"featurizer": "rules", **{k: (list(v) if isinstance(v, tuple) else v)
                                         for k, v in self.__dict__.items()}, "causal": self.causal}


class RuleFeaturizer(EstimatorDisplay):
    """Rule-based one-hot features of each step.

    Parameters
    ----------
    kind, tool, error, retry : bool
        Switch the step-kind one-hot, the tool one-hot (top ``top_tools`` names, the rest as "other"), the step-error
        flag and the retry flag (same action as the previous step of the trace).
    depth : {"none", "step", "hindsight-fraction", "hindsight-bucket"}
        ``"step"``: a one-hot of ``n_depth_buckets`` buckets of the step index j (causal). ``"hindsight-fraction"``:
        the relative depth j/(L−1) (the paper's "cat+depth"); ``"hindsight-bucket"``: a one-hot of its
        ``n_depth_buckets`` buckets — both need the final length L, so they describe finished traces only (module
        docstring). ``"fraction"`` / ``"bucket"`` are the old spellings of the hindsight ones (a warning says so).
    vocabulary : str, optional
        Map actions to categories first (``"shell"``, ``"chat"`` or a registered name); the category one-hot then
        replaces the kind and tool one-hots.
    """

    def __init__(self, *, kind: bool = True, tool: bool = True, error: bool = True, retry: bool = False,
                 depth: Depth = "none", n_depth_buckets: int = 4, depth_weight: float = 1.0, top_tools: int = 20,
                 vocabulary: str | None = None) -> None:
        self.kind = kind
        self.tool = tool
        self.error = error
        self.retry = retry
        self.depth = depth
        self.n_depth_buckets = n_depth_buckets
        self.depth_weight = depth_weight
        self.top_tools = top_tools
        self.vocabulary = vocabulary
        self._model: RuleFeatures | None = None

    def fit(self, traces: TraceTable) -> RuleFeaturizer:
        depth = _check_depth(self.depth)
        if self.top_tools < 0 or self.n_depth_buckets < 1:
            raise ValueError("top_tools must be >= 0 and n_depth_buckets >= 1")
        if self.vocabulary is not None:
            get_vocabulary(self.vocabulary)
        kinds = _distinct(_column(traces, "step_kind", pa.string()))
        kinds = (*(k for k in kinds if k != "other"), "other")
        tools_col = _column(traces, "tool_name", pa.string())
        counts = pc.value_counts(tools_col.drop_null()).to_pylist() if traces.n_steps else []
        ranked = sorted(((c["counts"], c["values"]) for c in counts if c["values"]), key=lambda t: (-t[0], t[1]))
        tools = (*(t for _, t in ranked[: self.top_tools]), OTHER_TOOL)
        edges: tuple[int, ...] = ()
        if depth == "step" and traces.n_steps:
            j, _ = _position(traces)
            qs = np.quantile(j, np.arange(1, self.n_depth_buckets) / self.n_depth_buckets, method="higher")
            edges = tuple(sorted({int(q) for q in qs if q > 0}))
        self._model = RuleFeatures(kinds, tools, self.vocabulary, self.kind, self.tool, self.error, self.retry,
                                   depth, self.n_depth_buckets, float(self.depth_weight), edges)
        return self

    def fetch_model(self) -> RuleFeatures:
        if self._model is None:
            raise NotFittedError("call fit(traces) before fetch_model()")
        return self._model


# ------------------------------------------------------------------------------------------------- helpers
def _check_depth(depth: str) -> Depth:
    """The depth option with its old hindsight spellings mapped (and warned about)."""
    if depth in HINDSIGHT_ALIASES:
        new = HINDSIGHT_ALIASES[depth]
        warnings.warn(
            f"depth={depth!r} is the hindsight depth j/(L−1): it needs the trace's final length, so states built on "
            f"it cannot label a running trace and their R(d) is not a forecast. Spell it depth={new!r} to keep it as "
            "a description of finished traces, or use depth='step' (the causal step index).",
            FutureWarning, stacklevel=3)
        return new  # type: ignore[return-value]
    if depth not in ("none", "step", "hindsight-fraction", "hindsight-bucket"):
        raise ValueError(f"depth must be 'none', 'step', 'hindsight-fraction' or 'hindsight-bucket', got {depth!r}")
    return depth  # type: ignore[return-value]


def _distinct(arr: pa.Array) -> tuple[str, ...]:
    return tuple(sorted(str(v) for v in pc.unique(arr.drop_null()).to_pylist())) if len(arr) else ()


def _index(arr: pa.Array, values: tuple[str, ...], missing: int) -> NDArray[np.int64]:
    """Index of each value in ``values``; nulls get ``missing``; unknown non-null values get the last entry."""
    if len(arr) == 0:
        return np.zeros(0, np.int64)
    idx = pc.index_in(arr, pa.array(values, pa.string()))
    known = np.asarray(idx.fill_null(-1), dtype=np.int64)
    null = np.asarray(arr.is_null(), dtype=bool)
    out = np.where(known >= 0, known, len(values) - 1)
    out[null] = missing
    return out.astype(np.int64)


def _one_hot(idx: NDArray[np.int64], width: int) -> NDArray[np.float64]:
    out = np.zeros((idx.size, width))
    out[np.arange(idx.size), idx] = 1.0
    return out


