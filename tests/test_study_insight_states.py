"""Study INSIGHT_STATES (issue 25 item 2): the archived full run meets the acceptance, its Markdown is rendered from
its JSON, and the study runs end to end (quick, slow tier).

Acceptance: on the planted corpus (failure after two failing tests in a row before submit) at 500 traces the
informative chain's held-out AUC is ≥ 0.75 and a state names the pattern, while the label chain's AUC is 0.5; on
the two null corpora (a first-order chain; the planted dynamics with an outcome independent of the history) the
model rarely splits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = REPO / "studies" / "results" / "INSIGHT_STATES.json"


def _load() -> dict:
    return json.loads(ARCHIVE.read_text(encoding="utf-8"))


def test_archived_planted_pattern_is_found_and_named() -> None:
    doc = _load()
    assert doc["quick"] is False and doc["reps"] >= 100
    at_500 = doc["planted"]["500"]
    assert at_500["auc_label"]["mean"] == pytest.approx(0.5, abs=1e-9)
    assert at_500["auc_informative"]["mean"] >= 0.75
    assert at_500["auc_informative_at_least_075"]["rate"] >= 0.95
    assert at_500["named"]["rate"] >= 0.95
    for n in ("300", "500", "1000"):  # and no worse with more traces
        assert doc["planted"][n]["named"]["rate"] >= 0.9, n
        assert doc["planted"][n]["auc_informative"]["mean"] >= 0.75, n


def test_archived_nulls_rarely_split() -> None:
    doc = _load()
    for scenario in ("first-order", "planted-null"):
        e = doc["null"][scenario]
        assert e["any_split"]["n"] >= 100
        assert e["any_split"]["rate"] <= 0.05, scenario
        assert e["mean_splits"] <= 0.1, scenario
        # Staying put means the informative chain predicts exactly as the label chain does.
        assert e["auc_informative"]["mean"] == pytest.approx(e["auc_label"]["mean"], abs=0.01)


def test_archived_markdown_is_rendered_from_the_json() -> None:
    sys.path.insert(0, str(REPO))
    try:
        from studies.insight_states import render
    finally:
        sys.path.remove(str(REPO))
    md = (REPO / "studies" / "results" / "INSIGHT_STATES.md").read_text(encoding="utf-8")
    assert md == render(_load())


@pytest.mark.slow
def test_quick_run_writes_a_document_of_the_archive_shape() -> None:
    proc = subprocess.run([sys.executable, "-m", "studies.insight_states", "--quick"], cwd=REPO, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    quick = json.loads((REPO / "studies" / "results" / "quick" / "INSIGHT_STATES.json").read_text(encoding="utf-8"))
    full = _load()
    assert quick["quick"] is True and set(quick["planted"]) == set(full["planted"])
    assert set(quick["null"]) == set(full["null"])
    assert quick["planted"]["500"]["named"]["rate"] >= 0.75  # 12 corpora: a smoke check, not the acceptance
