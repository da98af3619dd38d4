"""Drift monitoring: a step change is caught at the right window; a stationary stream stays quiet."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from cli_runner import run_cli

import tracetochain as tt
from tracetochain.monitor import monitor

BASE = tt.datasets.notation_chain()
WORSE = BASE.with_changes(Q=[[0.35, 0.3, 0], [0, 0.4, 0.3], [0, 0, 0.6]], R_failure=[0.25, 0.1, 0.1])


def stream(chains: list[tt.AbsorbingChain], n: int, seed: int) -> tt.TraceTable:
    parts = []
    for i, chain in enumerate(chains):
        t = tt.datasets.simulate_traces(chain, n, seed * 100 + i).to_arrow()
        ids = pa.array([f"w{i}-{x}" for x in t.column("trace_id").to_pylist()])
        parts.append(t.set_column(t.column_names.index("trace_id"), "trace_id", ids))
    return tt.TraceTable.from_arrow(pa.concat_tables(parts))


def test_step_change_alerts_at_the_right_window() -> None:
    result = monitor(stream([BASE, BASE, BASE, WORSE, WORSE], 200, 1), window=200)
    assert [w.alert for w in result.windows] == [False, False, False, True, True]
    assert result.windows[3].differing_states == ("plan",)  # the state whose failure rate jumped
    assert result.windows[3].r_inf < result.windows[0].r_inf_lower
    lines = result.json_lines().splitlines()
    assert len(lines) == 5 and json.loads(lines[3])["alert"] is True


@pytest.mark.slow
def test_stationary_streams_rarely_alert() -> None:
    """Family-wise false-alarm rate ≤ α = 0.05 by the Bonferroni rule: ≥ 95% of stationary runs stay quiet."""
    quiet = sum(not monitor(stream([BASE] * 4, 150, s), window=150, seed=s).alerts for s in range(40))
    assert quiet >= 38


def test_monitor_cli_exit_code(tmp_path: Path) -> None:
    path = tmp_path / "s.parquet"
    stream([BASE, BASE, WORSE], 200, 3).write(path)
    r = run_cli("monitor", str(path), "--window", "200", "--jsonl")
    assert r.returncode == 3, r.stderr
    assert [json.loads(x)["alert"] for x in r.stdout.splitlines()] == [False, False, True]


def test_monitor_html_page_is_self_contained_and_escaped(tmp_path: Path) -> None:
    from tracetochain.report._monitor_html import render_monitor_html

    result = monitor(stream([BASE, BASE, WORSE], 200, 4), window=200)
    doc = result.to_dict()
    doc["baseline"] = "<script>alert(1)</script>"
    page = render_monitor_html(doc)
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "<script>" not in page
    assert page.count('class="alert"') == 1
