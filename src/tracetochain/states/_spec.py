"""Build a state-discovery estimator from the short settings used on the command line and in config files."""

from __future__ import annotations

from typing import Any

from tracetochain.states._categorical import CategoricalStates
from tracetochain.states._milestones import MilestoneStates
from tracetochain.states._ward import WardStates

RULE_FEATURES = ("kind", "tool", "error", "retry", "step-bucket", "hindsight-depth", "hindsight-depth-bucket",
                 "depth", "depth-bucket")
#: Old spellings of the hindsight depth features (they warn; see :mod:`tracetochain.featurize.rules`).
DEPTH_ALIASES = {"depth": "hindsight-depth", "depth-bucket": "hindsight-depth-bucket"}
TEXT_FEATURES = ("text", "tfidf")


def states_from_spec(states: str = "label", *, features: str = "kind,tool,error", vocabulary: str | None = None,
                     k_min: int = 2, k_max: int = 10, seed: int = 0) -> Any:
    """``states``: ``label`` (the traces' own labels), ``categorical`` (vocabulary categories), ``ward``
    (clustering of ``features``), ``informative`` (the labels or ``vocabulary`` categories refined by history
    features while that predicts what follows: :class:`~tracetochain.states.InformativeStates`, seeded by ``seed``)
    or ``milestones:FILE``. ``features`` is a comma list of kind, tool, error, retry,
    step-bucket (causal: the step index), hindsight-depth (j/(L−1), needs the final length: descriptive only),
    hindsight-depth-bucket — or ``text`` / ``tfidf`` for text features. ``depth`` and ``depth-bucket`` are the old
    spellings of the hindsight ones and warn."""
    if states == "label":
        # A vocabulary with the traces' own labels means: use its categories as the states.
        return CategoricalStates(vocabulary=vocabulary)
    if states == "categorical":
        if vocabulary is None:
            raise ValueError("--states categorical needs --vocabulary (shell, chat or a registered one)")
        return CategoricalStates(vocabulary=vocabulary)
    if states == "informative":
        from tracetochain.states._informative import InformativeStates

        return InformativeStates(vocabulary=vocabulary, seed=seed)
    if states.startswith("milestones:"):
        path = states.split(":", 1)[1]
        if not path:
            raise ValueError("write --states milestones:FILE with the path of a milestone file")
        return MilestoneStates(path)
    if states != "ward":
        raise ValueError(f"unknown --states {states!r}; use label, categorical, ward, informative or "
                         "milestones:FILE")
    wanted = [f.strip() for f in features.split(",") if f.strip()]
    unknown = [f for f in wanted if f not in RULE_FEATURES + TEXT_FEATURES]
    if unknown or not wanted:
        raise ValueError(f"unknown feature {unknown[0] if unknown else '(none)'}; "
                         f"use a comma list of {', '.join(RULE_FEATURES)} — or text / tfidf alone")
    if any(f in TEXT_FEATURES for f in wanted):
        if len(wanted) > 1:
            raise ValueError("text features (text, tfidf) cannot be combined with rule features yet; use one alone")
        from tracetochain.featurize.text import TextFeaturizer

        featurizer: Any = TextFeaturizer(method="tfidf" if wanted[0] == "tfidf" else "hashing",
                                         vocabulary=vocabulary, seed=seed)
    else:
        from tracetochain.featurize.rules import RuleFeaturizer

        depth: Any = ("step" if "step-bucket" in wanted else
                      "hindsight-fraction" if "hindsight-depth" in wanted else
                      "hindsight-bucket" if "hindsight-depth-bucket" in wanted else
                      "fraction" if "depth" in wanted else "bucket" if "depth-bucket" in wanted else "none")
        featurizer = RuleFeaturizer(kind="kind" in wanted, tool="tool" in wanted, error="error" in wanted,
                                    retry="retry" in wanted, depth=depth, vocabulary=vocabulary)
    return WardStates(featurizer=featurizer, k_min=k_min, k_max=k_max, seed=seed)
