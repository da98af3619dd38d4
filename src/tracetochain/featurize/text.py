"""Text features with no model download: hashing or TF-IDF vectors of each step's text, reduced by truncated SVD.

Texts are deduplicated before vectorising (agent steps repeat a lot), so the cost grows with distinct texts.
The resulting rows are continuous, so :class:`~tracetochain.states.WardStates` usually takes its scalable path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracetochain._display import EstimatorDisplay
from tracetochain.exceptions import NotFittedError
from tracetochain.featurize._base import Features
from tracetochain.featurize.rules import RuleFeatures, RuleFeaturizer
from tracetochain.traces import TraceTable

Method = Literal["hashing", "tfidf"]


def _texts(traces: TraceTable) -> tuple[list[str], np.ndarray]:
    table = traces.to_arrow()
    col = table.column("text").combine_chunks() if "text" in table.column_names else pa.nulls(traces.n_steps,
                                                                                               pa.string())
    enc = pc.dictionary_encode(col.fill_null(""))
    return [str(x) for x in enc.dictionary.to_pylist()], np.asarray(enc.indices, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class TextFeatures:
    vectorizer: Any
    svd: Any
    rules: RuleFeatures
    method: str
    n_components: int

    def transform(self, traces: TraceTable) -> Features:
        distinct, index = _texts(traces)
        Z = self.svd.transform(self.vectorizer.transform(distinct)) if distinct else np.zeros((0, self.n_components))
        X = np.ascontiguousarray(Z[index], dtype=np.float64) if index.size else np.zeros((0, Z.shape[1]))
        action, names = self.rules.action_codes(traces)
        return Features(X, tuple(f"svd{i}" for i in range(X.shape[1])), action, names, None)

    def to_dict(self) -> dict[str, Any]:
        return {"featurizer": "text", "method": self.method, "n_components": self.n_components}


class TextFeaturizer(EstimatorDisplay):
    """Hashing (default) or TF-IDF vectors of step text, reduced to ``n_components`` with truncated SVD.

    States found from text are still *named* by the steps' actions (``kind:tool`` or a vocabulary category).
    """

    def __init__(self, *, method: Method = "hashing", n_components: int = 32, n_features: int = 2**18,
                 max_features: int = 50_000, vocabulary: str | None = None, seed: int = 0) -> None:
        self.method = method
        self.n_components = n_components
        self.n_features = n_features
        self.max_features = max_features
        self.vocabulary = vocabulary
        self.seed = seed
        self._model: TextFeatures | None = None

    def fit(self, traces: TraceTable) -> TextFeaturizer:
        from tracetochain._optional import require

        purpose = "the text featurizer (--features text/tfidf)"
        TruncatedSVD = require("sklearn.decomposition", purpose).TruncatedSVD
        text = require("sklearn.feature_extraction.text", purpose)
        HashingVectorizer, TfidfVectorizer = text.HashingVectorizer, text.TfidfVectorizer

        if self.method not in ("hashing", "tfidf"):
            raise ValueError(f"method must be 'hashing' or 'tfidf', got {self.method!r}")
        distinct, _ = _texts(traces)
        vectorizer: Any
        if self.method == "hashing":
            vectorizer = HashingVectorizer(n_features=self.n_features, alternate_sign=False, norm="l2")
        else:
            vectorizer = TfidfVectorizer(max_features=self.max_features, sublinear_tf=True)
        M = vectorizer.fit_transform(distinct)
        k = max(1, min(self.n_components, M.shape[1] - 1, max(len(distinct) - 1, 1)))
        svd = TruncatedSVD(n_components=k, random_state=self.seed).fit(M)
        rules = RuleFeaturizer(vocabulary=self.vocabulary).fit(traces).fetch_model()
        self._model = TextFeatures(vectorizer, svd, rules, self.method, k)
        return self

    def fetch_model(self) -> TextFeatures:
        if self._model is None:
            raise NotFittedError("call fit(traces) before fetch_model()")
        return self._model
