"""Synthetic boards for the board tests: configurations of increasing reliability with repeated trials of tasks."""

from __future__ import annotations

import numpy as np

import tracetochain as tt


def configs(n_groups: int, seed: int = 0, tasks: int = 12, trials: int = 3) -> tt.TraceTable:
    """``n_groups`` configurations of increasing reliability, each with tasks × trials short episodes."""
    rng = np.random.default_rng(seed)
    rows = []
    for g in range(n_groups):
        for t in range(tasks):
            p = rng.beta(2 + g, 4)
            for r in range(trials):
                ok = rng.random() < p
                for i in range(int(rng.integers(1, 4))):
                    rows.append({"trace_id": f"g{g}/t{t}/r{r}", "step_idx": i, "state": ["plan", "act"][i % 2],
                                 "outcome": "success" if ok else "failure", "task_id": f"t{t}", "trial": r,
                                 "config": f"<b>cfg{g:02d}</b>" if g == 0 else f"cfg{g:02d}",
                                 "total_cost_usd": 0.01 * (g + 1)})
    return tt.TraceTable.from_records(rows)
