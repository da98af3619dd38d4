"""tracetochain: LLM-agent traces → an audited absorbing Markov chain and its reliability metrics.

>>> import tracetochain as tt
>>> traces = tt.read_traces("runs.jsonl")                          # doctest: +SKIP
>>> chain = tt.ChainEstimator(pseudocount=1.0).fit(traces).fetch_model()   # doctest: +SKIP
>>> chain.r_inf, chain.reliability(horizon=20)                     # doctest: +SKIP
"""

from tracetochain import datasets, exceptions, featurize, states
from tracetochain._version import __version__
from tracetochain.chain import AbsorbingChain, ChainEstimator, TransitionCounts, count_transitions, estimate_chain
from tracetochain.metrics import ReliabilitySummary, summarize
from tracetochain.readers import read_traces, register_reader
from tracetochain.traces import IngestReport, Outcome, StepKind, TraceTable

__all__ = [
    "AbsorbingChain",
    "ChainEstimator",
    "IngestReport",
    "Outcome",
    "ReliabilitySummary",
    "StepKind",
    "TraceTable",
    "TransitionCounts",
    "__version__",
    "count_transitions",
    "datasets",
    "estimate_chain",
    "exceptions",
    "featurize",
    "read_traces",
    "register_reader",
    "states",
    "summarize",
]
