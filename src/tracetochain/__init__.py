"""tracetochain: LLM-agent traces → an audited absorbing Markov chain and its reliability metrics.

>>> import tracetochain as tt
>>> traces = tt.read_traces("runs.jsonl")                          # doctest: +SKIP
>>> chain = tt.ChainEstimator().fit(traces).fetch_model()          # doctest: +SKIP
>>> chain.r_inf, chain.reliability(horizon=20)                     # doctest: +SKIP

The public names below are imported on first use (PEP 562), so ``import tracetochain`` and the command line's
``--help`` do not pay for scipy, pyarrow and friends until a name that needs them is touched. Type checkers and
IDEs see the eager imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tracetochain._version import __version__

if TYPE_CHECKING:
    from tracetochain import (
        costs,
        datasets,
        engines,
        exceptions,
        featurize,
        models,
        report,
        states,
        uncertainty,
        whatif,
    )
    from tracetochain.analysis import AnalysisResult, analyze, audit, fit_chain
    from tracetochain.analysis.shared import audit_partitioned, fit_partitioned
    from tracetochain.audit import Certificate
    from tracetochain.chain import (
        AbsorbingChain,
        ChainEstimator,
        ChainPrior,
        TransitionCounts,
        count_transitions,
        estimate_chain,
    )
    from tracetochain.featurize import RuleFeaturizer, TextFeaturizer
    from tracetochain.metrics import ReliabilitySummary, summarize
    from tracetochain.pipeline import FitResult
    from tracetochain.readers import read_traces, register_reader
    from tracetochain.states import CategoricalStates, InformativeStates, MilestoneStates, WardStates
    from tracetochain.traces import IngestReport, Outcome, OutcomeCode, StepKind, TraceTable
    from tracetochain.uncertainty import (
        ChainEnsemble,
        DirichletPosterior,
        QuantityStats,
        TraceBootstrap,
        interval_summary,
    )
    from tracetochain.whatif import bottlenecks, what_if

# public name → the module that defines it (the name itself is looked up there).
_ATTRIBUTES: dict[str, str] = {
    "AbsorbingChain": "tracetochain.chain",
    "AnalysisResult": "tracetochain.analysis",
    "ChainPrior": "tracetochain.chain",
    "CategoricalStates": "tracetochain.states",
    "Certificate": "tracetochain.audit",
    "ChainEnsemble": "tracetochain.uncertainty",
    "ChainEstimator": "tracetochain.chain",
    "DirichletPosterior": "tracetochain.uncertainty",
    "FitResult": "tracetochain.pipeline",
    "InformativeStates": "tracetochain.states",
    "IngestReport": "tracetochain.traces",
    "MilestoneStates": "tracetochain.states",
    "Outcome": "tracetochain.traces",
    "OutcomeCode": "tracetochain.traces",
    "QuantityStats": "tracetochain.uncertainty",
    "ReliabilitySummary": "tracetochain.metrics",
    "RuleFeaturizer": "tracetochain.featurize",
    "StepKind": "tracetochain.traces",
    "TextFeaturizer": "tracetochain.featurize",
    "TraceBootstrap": "tracetochain.uncertainty",
    "TraceTable": "tracetochain.traces",
    "TransitionCounts": "tracetochain.chain",
    "WardStates": "tracetochain.states",
    "analyze": "tracetochain.analysis",
    "audit_partitioned": "tracetochain.partitioned",
    "bottlenecks": "tracetochain.whatif",
    "count_transitions": "tracetochain.chain",
    "estimate_chain": "tracetochain.chain",
    "fit_chain": "tracetochain.analysis",
    "fit_partitioned": "tracetochain.partitioned",
    "interval_summary": "tracetochain.uncertainty",
    "read_traces": "tracetochain.readers",
    "register_reader": "tracetochain.readers",
    "summarize": "tracetochain.metrics",
    "using_jobs": "tracetochain._parallel",
    "what_if": "tracetochain.whatif",
}
# public subpackages, imported on first attribute access.
# ``audit`` is a package that runs the audit when called (tracetochain.audit).
_SUBMODULES = frozenset({"audit", "costs", "datasets", "engines", "exceptions", "featurize", "models", "report",
                         "states", "uncertainty", "whatif"})

__all__ = [
    "AbsorbingChain",
    "AnalysisResult",
    "CategoricalStates",
    "Certificate",
    "ChainEnsemble",
    "ChainEstimator",
    "ChainPrior",
    "DirichletPosterior",
    "FitResult",
    "InformativeStates",
    "IngestReport",
    "MilestoneStates",
    "Outcome",
    "OutcomeCode",
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
    "analyze",
    "audit",
    "audit_partitioned",
    "bottlenecks",
    "costs",
    "count_transitions",
    "datasets",
    "engines",
    "estimate_chain",
    "exceptions",
    "featurize",
    "fit_chain",
    "fit_partitioned",
    "interval_summary",
    "models",
    "read_traces",
    "register_reader",
    "report",
    "states",
    "summarize",
    "uncertainty",
    "using_jobs",
    "what_if",
    "whatif",
]


def __getattr__(name: str) -> Any:
    if name in _ATTRIBUTES:
        value = getattr(importlib.import_module(_ATTRIBUTES[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
