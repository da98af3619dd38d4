"""CategoricalStates: the categories are the states, no clustering (the paper's SS14/SS15 set-up)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tracetochain._display import EstimatorDisplay
from tracetochain.exceptions import EmptyTraceSetError, NotFittedError
from tracetochain.featurize.vocab import get_vocabulary
from tracetochain.states._model import StateModel, build_taxonomy, taxonomy_infos
from tracetochain.traces import TraceTable


class CategoricalStates(EstimatorDisplay):
    """Use a categorical label directly as the state.

    Parameters
    ----------
    vocabulary : str, optional
        Map each step through an action vocabulary (``"shell"``, ``"chat"`` or a registered one) and use its
        categories as states. Without one, the state is the trace's own label (``state`` column, else
        ``step_kind:tool_name``).
    keep_unobserved : bool, default False
        With a vocabulary, keep every category as a state even when no step falls in it (the paper's SS15 keeps
        all six τ-bench categories; such states have no outgoing data — see ``ChainEstimator(unvisited=...)``).
    """

    def __init__(self, *, vocabulary: str | None = None, keep_unobserved: bool = False) -> None:
        self.vocabulary = vocabulary
        self.keep_unobserved = keep_unobserved
        self._model: StateModel | None = None

    def fit(self, traces: TraceTable) -> CategoricalStates:
        if traces.n_steps == 0:
            raise EmptyTraceSetError("no steps to label")
        if self.vocabulary is not None:
            vocab = get_vocabulary(self.vocabulary)
            codes = _vocab_codes(vocab, traces)
            observed = np.unique(codes)
            keep = np.arange(len(vocab.categories)) if self.keep_unobserved else observed
            names = tuple(vocab.categories[i] for i in keep)
            position = np.full(len(vocab.categories), -1, np.int64)
            position[keep] = np.arange(keep.size)

            def assign(t: TraceTable) -> np.ndarray:
                out: np.ndarray = position[_vocab_codes(vocab, t)]
                return out

            labels = position[codes]
            descriptor, descriptor_names = labels, names
        else:
            labels_raw, label_names = traces.state_labels()
            names = tuple(label_names)
            lookup = {n: i for i, n in enumerate(names)}

            def assign(t: TraceTable) -> np.ndarray:
                c, nm = t.state_labels()
                unknown = [x for x in nm if x not in lookup]
                if unknown:
                    raise ValueError(f"state {unknown[0]!r} was not seen when the states were fitted")
                return np.array([lookup[x] for x in nm], np.int64)[c]

            labels = labels_raw
            descriptor, descriptor_names = labels, names
        rows = build_taxonomy(labels, len(names), descriptor, descriptor_names)
        settings = {"vocabulary": self.vocabulary, "keep_unobserved": self.keep_unobserved, "k": len(names),
                    "n_steps": traces.n_steps}
        self._model = StateModel("categorical", names, taxonomy_infos(names, rows, traces.n_steps), settings,
                                 assign, labels)
        return self

    def fetch_model(self) -> StateModel:
        if self._model is None:
            raise NotFittedError("call fit(traces) before fetch_model()")
        return self._model


def _vocab_codes(vocab: object, traces: TraceTable) -> np.ndarray:
    table = traces.to_arrow()

    def col(name: str) -> pa.Array:
        return table.column(name).combine_chunks() if name in table.column_names else pa.nulls(traces.n_steps,
                                                                                                  pa.string())

    text = col("text") if getattr(vocab, "uses_text", False) else None
    return vocab.apply(col("step_kind"), col("tool_name"), text)  # type: ignore[attr-defined,no-any-return]
