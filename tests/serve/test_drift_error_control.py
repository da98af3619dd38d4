"""Drift alerts over an open-ended stream: false alarms stay below α over the whole stream (alpha spending), and a
real regression is caught in the window where it starts. Monte Carlo with a fixed seed."""

from __future__ import annotations

import numpy as np
import pytest

from tracetochain.serve import WindowSpec
from tracetochain.serve._live import LiveAnalysis, alpha_spent
from tracetochain.serve._store import EpisodeRow

# A three-state agent: plan → act (retry act) → success / failure; `broken` raises act's failure probability.
STATES = ("plan", "act", "check")


def stream(rng: np.random.Generator, n_windows: int, per_window: int, broken_from: int | None) -> LiveAnalysis:
    live = LiveAnalysis(WindowSpec("count", per_window), level=0.05, min_traces=20)
    rows = []
    for i in range(n_windows * per_window):
        broken = broken_from is not None and i >= broken_from * per_window
        path = ["plan"]
        outcome = None
        while outcome is None and len(path) < 30:
            r = rng.random()
            if path[-1] == "plan":
                path.append("act")
            elif path[-1] == "act":
                fail = 0.35 if broken else 0.1
                if r < fail:
                    outcome = "failure"
                elif r < fail + 0.2:
                    path.append("act")
                else:
                    path.append("check")
            else:
                outcome = "success" if r < 0.85 else "failure"
        rows.append(EpisodeRow(i + 1, f"e{i}", f"e{i}", 0.0, None, outcome or "censored", tuple(path)))
    live.add_episodes(rows)
    live._update_completion()  # the tests of every completed window, without the snapshot's estimates
    return live


def test_alpha_spending_sums_to_alpha() -> None:
    assert sum(alpha_spent(0.05, j) for j in range(1, 200_000)) < 0.05
    assert alpha_spent(0.05, 1) > alpha_spent(0.05, 2) > 0


@pytest.mark.slow
def test_stationary_streams_rarely_alarm_and_regressions_are_caught() -> None:
    rng = np.random.default_rng(2026)
    false_alarms = sum(bool(stream(rng, 8, 60, None).drift_events) for _ in range(300))
    # α = 0.05 up to the χ² approximation, which is a little liberal on windows this small (60 episodes: 6.8% of
    # 600 streams measured; 5.5% at 100, 4.7% at 200): 27 of 300 is 9%.
    assert false_alarms <= 27, false_alarms
    caught_at_once = early = 0
    for _ in range(40):
        live = stream(rng, 6, 100, broken_from=3)
        windows = [e["window"] for e in live.drift_events]
        early += any(w < 3 for w in windows)  # a false alarm before the regression (≤ α_1 + α_2 ≈ 3.8% each)
        caught_at_once += 3 in windows
    assert early <= 5, early
    assert caught_at_once >= 36, caught_at_once  # power ≥ 90% in the window where the regression starts
