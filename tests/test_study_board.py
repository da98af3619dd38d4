"""Study BOARD (ours, issue 29): the archived run meets the acceptance of the reliability board — simultaneous rank
intervals cover the true ranks ≥ 90 % of the time when the groups differ, and with all groups equal the board reports
a difference in ≤ 5 % of corpora (each up to its Monte Carlo error: the rate's Wilson interval meets the band)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = REPO / "studies" / "results" / "BOARD.json"


def test_archived_board_study_meets_the_acceptance() -> None:
    doc = json.loads(ARCHIVE.read_text(encoding="utf-8"))
    assert doc["study"] == "BOARD" and doc["quick"] is False and doc["reps"] >= 60
    assert doc["design"]["groups"] >= 10
    known, null = doc["known_differences"], doc["all_equal"]
    assert known["wilson"][1] >= 0.90 and known["simultaneous_coverage"] >= 0.90
    assert null["wilson"][0] <= 0.05 and null["any_difference_rate"] <= 0.05 + 0.02
    assert all(c >= 0.9 for c in known["per_group_coverage"])
    assert known["mean_pairs_found_different"] > 0  # the board is not silent when groups differ
    assert "Holm" in doc["design"]["method"]
    assert (ARCHIVE.with_suffix(".md")).read_text(encoding="utf-8").count("|") > 10


@pytest.mark.slow
def test_the_study_runs_end_to_end(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "studies.board_ranks", "--quick", "--out", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "BOARD.json").read_text(encoding="utf-8"))
    assert doc["quick"] is True and doc["reps"] == 20
    assert doc["known_differences"]["simultaneous_coverage"] >= 0.8
