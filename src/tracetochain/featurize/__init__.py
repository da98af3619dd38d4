"""Steps → feature vectors (rule one-hots, action vocabularies, text) for state discovery."""

from tracetochain.featurize._base import Features, unique_rows
from tracetochain.featurize.embed import EmbeddingFeaturizer
from tracetochain.featurize.rules import RuleFeatures, RuleFeaturizer
from tracetochain.featurize.text import TextFeaturizer
from tracetochain.featurize.vocab import VOCABULARIES, ActionVocabulary, get_vocabulary, register_vocabulary

__all__ = [
           "VOCABULARIES",
           "ActionVocabulary",
           "EmbeddingFeaturizer",
           "Features",
           "RuleFeatures",
           "RuleFeaturizer",
           "TextFeaturizer",
           "get_vocabulary",
           "register_vocabulary",
           "unique_rows",
]
