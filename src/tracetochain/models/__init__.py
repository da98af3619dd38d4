"""Model families beyond the plain first-order chain (placeholder; filled in below)."""

from tracetochain.models._base import CompiledModel, TraceModel, sample_compiled
from tracetochain.models._encoded import EncodedTraces, encode_traces
from tracetochain.models.duration import DurationModel
from tracetochain.models.lifted import LiftedModel
from tracetochain.models.markov import MarkovModel

__all__ = ["CompiledModel", "DurationModel", "EncodedTraces", "LiftedModel", "MarkovModel", "TraceModel",
           "encode_traces", "sample_compiled"]
