"""One counting rule: ``count_transitions`` (a TraceTable) is ``count_transitions_from_codes`` (raw arrays, what the
partitioned and in-memory summaries count with) on the table's codes; both checked against a plain per-episode
oracle of the counting rules on random corpora (censored, invalid and zero-step episodes included)."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.traces._build import build_table, records_to_arrow

OUTCOMES = ["success", "failure", "censored", "invalid"]
episodes = st.lists(st.tuples(st.lists(st.sampled_from("abcd"), min_size=0, max_size=6), st.sampled_from(OUTCOMES)),
                    min_size=1, max_size=25)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(episodes)
def test_count_transitions_follows_the_counting_rules(seqs: list[tuple[list[str], str]]) -> None:
    records: list[dict[str, object]] = []
    for i, (states, out) in enumerate(seqs):
        if states:
            records += [{"trace_id": f"t{i}", "step_idx": j, "state": s, "outcome": out} for j, s in enumerate(states)]
        else:  # an episode that ended before any step: one record without step fields (the readers' door)
            records.append({"trace_id": f"t{i}", "outcome": out})
    traces = build_table(records_to_arrow(records), on_error="raise", source="test", format="records", problems=[],
                         locations=None, location_kind="row", zero_step=True)
    counts = tt.count_transitions(traces)
    names = counts.state_names
    pos = {s: k for k, s in enumerate(names)}
    assert set(names) == {s for states, out in seqs for s in states}
    trans, exit_s, exit_f, first = Counter(), Counter(), Counter(), Counter()
    start = Counter()
    for states, out in seqs:
        if out == "invalid":
            continue
        if not states:
            start[out] += 1
            continue
        first[states[0]] += 1
        trans.update(itertools.pairwise(states))
        if out == "success":
            exit_s[states[-1]] += 1
        elif out == "failure":
            exit_f[states[-1]] += 1
    m = len(names)
    expected = np.zeros((m, m), np.int64)
    for (a, b), n in trans.items():
        expected[pos[a], pos[b]] = n
    assert counts.transitions.tolist() == expected.tolist()
    assert counts.exits_success.tolist() == [exit_s[s] for s in names]
    assert counts.exits_failure.tolist() == [exit_f[s] for s in names]
    assert counts.initial.tolist() == [first[s] for s in names]
    assert counts.start_exits.tolist() == [start["success"], start["failure"]]
    assert counts.n_traces == {o: sum(out == o for _, out in seqs) for o in OUTCOMES}
