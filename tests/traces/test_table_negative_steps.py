"""A trace with a negative step_idx is dropped whole, wherever its rows are in the file (regression: the packed sort key
(trace << 31) | step set the high bits for a negative step and split the trace into two groups, so a skipped trace
was also kept)."""

from __future__ import annotations

import tracetochain as tt


def test_negative_step_drops_the_whole_trace_in_skip_mode() -> None:
    recs = [{"trace_id": "t0", "step_idx": i, "state": "plan", "outcome": "success"} for i in range(3)]
    recs += [{"trace_id": "t1", "step_idx": 0, "state": "plan", "outcome": "success"},
             {"trace_id": "t1", "step_idx": -5, "state": "plan", "outcome": "success"},
             {"trace_id": "t2", "step_idx": 0, "state": "plan", "outcome": "failure"}]
    t = tt.TraceTable.from_records(recs, on_error="skip")
    assert t.trace_ids == ["t0", "t2"]
    r = t.report
    assert (r.n_traces, r.n_traces_skipped, r.n_records_skipped) == (2, 1, 2)
    assert r.skipped_by_reason == {"step_idx is negative": 2}
    # the same trace alone gives the same verdict
    alone = tt.TraceTable.from_records(recs[3:5], on_error="skip")
    assert alone.n_traces == 0 and alone.report.n_records_skipped == 2
