"""The plain first-order chain as a model family: the baseline every other family must beat on held-out data.

Rows are the first-order rows of :mod:`~tracetochain.models._context`: counts shrunk toward the pooled row of all
states by one empirical-Bayes concentration (no pseudo-failure is invented in a row that never failed beyond the
pooled exit rate the data show). Trials are i.i.d. under this model, so pass^k = R∞^k.

>>> import tracetochain as tt
>>> from tracetochain.models import MarkovModel
>>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 2000, seed=1)
>>> model = MarkovModel().fit(traces)
>>> abs(model.to_chain().chain.r_inf - 0.625) < 0.03
True
"""

from __future__ import annotations

from tracetochain.models._context import ContextChainModel, ContextScheme, FirstOrderScheme


class MarkovModel(ContextChainModel):
    """First-order absorbing chain on the observed states (shrunk rows; see the module docstring)."""

    family = "markov"

    def _make_scheme(self) -> ContextScheme:
        return FirstOrderScheme()

    def like(self) -> MarkovModel:
        return MarkovModel(group=self.group)
