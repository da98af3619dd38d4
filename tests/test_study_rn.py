"""Study RN (ours): the archived full run meets the acceptance of "right numbers", and the study runs end to end.

The archive is the record users read in the README; this test keeps it honest: every coverage cell within 90–98 %
up to its Monte Carlo error (its Wilson interval meets the band), each layer's size under a first-order truth within
2–8 % up to that error, the certificate's family-wise rate at most 5 % + error, and the power the issue asked for.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = REPO / "studies" / "results" / "RN.json"


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _meets(cell: dict, lo: float, hi: float) -> bool:
    """The rate's Wilson 95 % interval meets [lo, hi] (the rate is within the band up to Monte Carlo error)."""
    w_lo, w_hi = cell["wilson"]
    return w_hi >= lo and w_lo <= hi


def test_archived_coverage_is_in_the_band_in_every_cell() -> None:
    doc = _load(ARCHIVE)
    assert doc["quick"] is False and doc["reps"] >= 300
    cells = doc["coverage"]
    assert {c.split("/")[0] for c in cells} >= {"rare-failure", "detour", "two-starts", "capped", "censored",
                                                  "task-clusters"}
    assert {int(c.split("/")[1]) for c in cells} == {30, 100, 500}
    checked = 0
    for name, cell in cells.items():
        for method in ("posterior", "bootstrap"):
            for quantity, cov in cell[method].items():
                if not isinstance(cov, dict) or cov.get("rate") is None:
                    continue
                assert _meets(cov, 0.90, 0.98), (name, method, quantity, cov)
                checked += 1
    assert checked >= 6 * 3 * 2  # R∞ at least, in every cell, size and method


def test_archived_sizes_and_power() -> None:
    audit = _load(ARCHIVE)["audit"]
    for scenario in ("null", "null-tasks"):
        assert audit[scenario]["n_traces"] == 300
        for layer, rate in audit[scenario]["raw_rejection"].items():
            if rate["n"]:
                assert _meets(rate, 0.02, 0.08), (scenario, layer, rate)
        assert audit[scenario]["withholds_something"]["wilson"][0] <= 0.05, scenario
    assert audit["null-tasks"]["raw_rejection"]["trials"]["n"] > 0  # the trials layer was tested
    assert audit["memory"]["n_traces"] == 1000 and audit["memory"]["withholds_something"]["rate"] >= 0.95
    assert audit["duration"]["n_traces"] == 1000 and audit["duration"]["withholds_something"]["rate"] >= 0.60


@pytest.mark.slow
def test_quick_run_writes_the_same_document(tmp_path: Path) -> None:
    """The study runs end to end (reduced sizes) and writes a document of the archive's shape."""
    proc = subprocess.run([sys.executable, "-m", "studies.rn_statistics", "--quick", "--jobs", "1"], cwd=REPO,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    quick = _load(REPO / "studies" / "results" / "quick" / "RN.json")
    full = _load(ARCHIVE)
    assert quick["quick"] is True and set(quick["coverage"]) == set(full["coverage"])
    assert set(quick["audit"]) == set(full["audit"])
    for cell in quick["coverage"].values():
        assert 0.6 <= cell["posterior"]["r_inf"]["rate"] <= 1.0  # 40 corpora: a smoke check, not the acceptance
