"""A corpus whose outcome is decided by a history pattern the first-order chain cannot see.

An agent edits, runs the tests (each run fails with probability ``p_fail``), and after a test either edits again or
submits (submit with probability ``p_submit_pass`` after a passing test, ``p_submit_fail`` after a failing one).
The four states are ``edit``, ``test_pass``, ``test_fail`` (``error`` true) and ``submit``; every trace ends with
``submit``. The verdict comes after it and depends on the history (the planted pattern): when the last two test
runs before ``submit`` both failed (≥ 2 failing tests since the last passing one), the trace fails with probability
``fail_with``, otherwise with ``fail_without``. With ``pattern=False`` every trace fails with one probability (the
corpus's overall failure rate under the same dynamics), so the history carries no outcome information.

Every trace ends in ``submit``, so a first-order chain on the four labels gives every trace the same eventual
success at its last step: it cannot tell failing runs from succeeding ones (AUC 0.5), while the pattern is plain
in the history.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tracetochain.traces import TraceTable


def planted_history_traces(n_traces: int, *, pattern: bool = True, p_fail: float = 0.7,
                           p_submit_pass: float = 0.5, p_submit_fail: float = 0.3, fail_with: float = 0.9,
                           fail_without: float = 0.1, max_tests: int = 12, seed: int = 0) -> TraceTable:
    """Traces of the planted-pattern corpus (module docstring); ``trace_id`` ``t0`` … and one task per trace.

    >>> t = planted_history_traces(200, seed=1)
    >>> t.n_traces, sorted(set(t.state_labels()[1]))
    (200, ['edit', 'submit', 'test_fail', 'test_pass'])
    """
    if n_traces < 1:
        raise ValueError("n_traces must be >= 1")
    for name, p in (("p_fail", p_fail), ("p_submit_pass", p_submit_pass), ("p_submit_fail", p_submit_fail),
                    ("fail_with", fail_with), ("fail_without", fail_without)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {p!r}")
    rng = np.random.default_rng(seed)
    ids: list[str] = []
    steps: list[int] = []
    states: list[str] = []
    errors: list[bool] = []
    texts: list[str] = []
    outcomes: list[str] = []
    planted = np.zeros(n_traces, bool)
    for i in range(n_traces):
        seq: list[str] = []
        streak = 0
        for _ in range(max_tests):
            seq.append("edit")
            failed = rng.random() < p_fail
            seq.append("test_fail" if failed else "test_pass")
            streak = streak + 1 if failed else 0
            if rng.random() < (p_submit_fail if failed else p_submit_pass):
                break
        seq.append("submit")
        planted[i] = streak >= 2
        fail = rng.random() < (fail_with if planted[i] else fail_without) if pattern else None
        outcomes_i = fail
        for j, s in enumerate(seq):
            ids.append(f"t{i}")
            steps.append(j)
            states.append(s)
            errors.append(s == "test_fail")
            texts.append({"edit": "apply patch", "test_pass": "pytest -q", "test_fail": "pytest -q",
                          "submit": "submit"}[s])
        outcomes.append("?" if outcomes_i is None else ("failure" if outcomes_i else "success"))
    if not pattern:
        # The same dynamics, outcome independent of the history: the failure rate the planted corpus would have.
        rate = float(np.where(planted, fail_with, fail_without).mean())
        fails = rng.random(n_traces) < rate
        outcomes = ["failure" if f else "success" for f in fails]
    lengths = np.bincount(np.array([int(x[1:]) for x in ids]), minlength=n_traces)
    per_step_outcome = np.repeat(np.array(outcomes, dtype=object), lengths)
    table = pa.table({
        "trace_id": pa.array(ids, pa.string()),
        "task_id": pa.array(ids, pa.string()),
        "step_idx": pa.array(steps, pa.int64()),
        "step_kind": pa.array(["tool"] * len(ids), pa.string()),
        "state": pa.array(states, pa.string()),
        "error": pa.array(errors, pa.bool_()),
        "text": pa.array(texts, pa.string()),
        "outcome": pa.array(per_step_outcome.tolist(), pa.string()),
    })
    return TraceTable.from_dataframe(table, source=f"planted-history simulation ({'pattern' if pattern else 'null'}, "
                                                   f"{n_traces} traces)")
