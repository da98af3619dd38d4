"""tracetochain: LLM-agent traces → an audited absorbing Markov chain and its reliability metrics.

>>> import tracetochain as tt
>>> traces = tt.read_traces("runs.jsonl")                          # doctest: +SKIP
>>> chain = tt.ChainEstimator(pseudocount=1.0).fit(traces).fetch_model()   # doctest: +SKIP
>>> chain.r_inf, chain.reliability(horizon=20)                     # doctest: +SKIP
"""

from tracetochain import datasets, engines, exceptions, featurize, report, states, uncertainty, whatif
from tracetochain._version import __version__
from tracetochain.audit import Certificate, audit
from tracetochain.chain import AbsorbingChain, ChainEstimator, TransitionCounts, count_transitions, estimate_chain
from tracetochain.featurize import RuleFeaturizer, TextFeaturizer
from tracetochain.metrics import ReliabilitySummary, summarize
from tracetochain.partitioned import audit_partitioned, fit_partitioned
from tracetochain.pipeline import FitResult, fit_chain
from tracetochain.readers import read_traces, register_reader
from tracetochain.states import CategoricalStates, MilestoneStates, WardStates
from tracetochain.traces import IngestReport, Outcome, StepKind, TraceTable
from tracetochain.uncertainty import ChainEnsemble, DirichletPosterior, QuantityStats, TraceBootstrap, interval_summary
from tracetochain.whatif import bottlenecks, what_if

__all__ = [
    "AbsorbingChain",
    "CategoricalStates",
    "Certificate",
    "ChainEnsemble",
    "ChainEstimator",
    "DirichletPosterior",
    "FitResult",
    "IngestReport",
    "MilestoneStates",
    "Outcome",
    "QuantityStats",
    "ReliabilitySummary",
    "RuleFeaturizer",
    "StepKind",
    "TextFeaturizer",
    "TraceBootstrap",
    "TraceTable",
    "TransitionCounts",
    "WardStates",
    "__version__",
    "audit",
    "audit_partitioned",
    "bottlenecks",
    "count_transitions",
    "datasets",
    "engines",
    "estimate_chain",
    "exceptions",
    "featurize",
    "fit_chain",
    "fit_partitioned",
    "interval_summary",
    "read_traces",
    "register_reader",
    "report",
    "states",
    "summarize",
    "uncertainty",
    "what_if",
    "whatif",
]
