"""One path: ``tt.fit_chain`` is ``analyze`` without the audit — the same states (learned on the fit half of split 0),
the same chain, bit for bit — and its labelled traces carry those states."""

from __future__ import annotations

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.analysis import analyze


@pytest.mark.parametrize(("states", "options"), [("label", {}), ("ward", {"vocabulary": "chat"}),
                                                 ("categorical", {"vocabulary": "chat"})])
def test_fit_chain_is_analyze_without_the_audit(states: str, options: dict) -> None:
    traces = tt.datasets.load_example()
    fit = tt.fit_chain(traces, states=states, **options)
    full = analyze(traces, states=states, state_options=options or None, n_bootstrap=19, n_permutations=19,
                   trials_permutations=99, intervals=None)
    assert fit.chain.state_names == full.chain.state_names
    for name in ("Q", "R_success", "R_failure", "pi0", "start_exits"):
        assert np.array_equal(getattr(fit.chain, name), getattr(full.chain, name)), name
    assert fit.chain.metadata["design_effect"] == full.design_effect
    labels = set(fit.labelled.state_labels()[1])
    assert labels <= set(fit.chain.state_names)


def test_fit_chain_refuses_a_path_with_a_pointer_to_analyze() -> None:
    with pytest.raises(TypeError, match="analyze"):
        tt.fit_chain(str(tt.datasets.example_path()))  # type: ignore[arg-type]
