"""One recoding of step labels to a fixed vocabulary (``chain._counts.state_codes``): the counts, the cost model, the
audit, the trace bootstrap, the cost intervals and the encoded traces of the model families all call it (six copies
until issue 16). Checked against a plain per-step oracle on random labelled traces and vocabularies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.chain._costs import CostModel
from tracetochain.chain._counts import state_codes
from tracetochain.exceptions import TraceValidationError
from tracetochain.models._encoded import encode_traces
from tracetochain.uncertainty._bootstrap import TraceBootstrap


def _traces(seqs: list[list[str]]) -> tt.TraceTable:
    return tt.TraceTable.from_records([{"trace_id": f"t{i}", "step_idx": j, "state": s, "outcome": "success"}
                                       for i, states in enumerate(seqs) for j, s in enumerate(states)])


corpora = st.lists(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=6), min_size=1, max_size=12)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(corpora, st.randoms(use_true_random=False), st.integers(0, 3))
def test_state_codes_index_every_step_into_the_vocabulary(seqs: list[list[str]], rnd: object,
                                                          extra: int) -> None:
    traces = _traces(seqs)
    seen = sorted({s for seq in seqs for s in seq})
    vocab = seen + [f"unused{k}" for k in range(extra)]
    rnd.shuffle(vocab)  # type: ignore[attr-defined]
    codes = state_codes(traces, vocab)
    assert codes.dtype == np.int64
    assert codes.tolist() == [vocab.index(s) for seq in seqs for s in seq]
    counts = tt.count_transitions(traces, states=vocab)
    assert counts.state_names == tuple(vocab)
    # The same counts as those over the traces' own labels, moved to the vocabulary's order.
    own = tt.count_transitions(traces)
    order = [own.state_names.index(s) if s in own.state_names else -1 for s in vocab]
    for i, oi in enumerate(order):
        assert counts.exits_success[i] == (own.exits_success[oi] if oi >= 0 else 0)
        for j, oj in enumerate(order):
            assert counts.transitions[i, j] == (own.transitions[oi, oj] if oi >= 0 and oj >= 0 else 0)


def test_a_label_outside_the_vocabulary_is_named_with_the_callers_wording() -> None:
    traces = _traces([["a", "b"], ["c"]])
    with pytest.raises(TraceValidationError, match=r"'b' occurs in the traces but is not in the given states "
                                                   r"\(2 unknown label\(s\)\)") as err:
        state_codes(traces, ["a"])
    assert err.value.field == "state"
    with pytest.raises(TraceValidationError, match="not in the given states"):
        tt.count_transitions(traces, states=["a"])
    with pytest.raises(TraceValidationError, match="not in the given states"):
        CostModel.from_traces(traces, states=["a", "b"])
    with pytest.raises(TraceValidationError, match="not in the model's alphabet"):
        encode_traces(traces, ["a", "c"])
    with pytest.raises(TraceValidationError, match="not in state_names"):
        TraceBootstrap(samples=3, state_names=["a"]).fit(traces)


def test_empty_traces_give_no_codes() -> None:
    assert state_codes(tt.TraceTable.from_records([]), ["a"]).tolist() == []
