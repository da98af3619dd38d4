"""Features → discrete transient states: Ward clustering, categories, history-refined (informative) states, or
user-declared milestones."""

from tracetochain.states._categorical import CategoricalStates
from tracetochain.states._informative import InformativeStates
from tracetochain.states._milestones import MilestoneFileError, MilestoneStates, load_milestones
from tracetochain.states._model import StateInfo, StateModel
from tracetochain.states._spec import states_from_spec
from tracetochain.states._ward import WardStates, cut_tree, ward_merges, weighted_silhouette

__all__ = ["CategoricalStates", "InformativeStates", "MilestoneFileError", "MilestoneStates", "StateInfo",
           "StateModel", "WardStates", "cut_tree", "load_milestones", "states_from_spec", "ward_merges",
           "weighted_silhouette"]
