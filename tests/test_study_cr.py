"""Study CR (ours): the archived run of ``studies/compare_real.py`` — real runs split at random into two halves,
compared with the default settings — calls the halves different in R∞ within its 5 % size on every corpus (the
Wilson 95 % interval of the rate meets the bound), and a call is never more frequent than either of its two parts
(the interval excluding 0, the permutation test rejecting)."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = REPO / "studies" / "results" / "CR.json"
BUNDLED = "τ-bench airline (bundled, 50 tasks × 4)"


def _load() -> dict:
    return json.loads(ARCHIVE.read_text(encoding="utf-8"))


def test_archive_is_a_full_run_on_every_real_corpus() -> None:
    doc = _load()
    assert doc["splits"] >= 400 and not doc["missing"]
    assert len(doc["corpora"]) == 4
    for e in doc["corpora"].values():
        assert e["splits"] == doc["splits"] and min(e["n_per_half"]) >= 20
    # the bundled run's halves share their tasks: the permutation test relabels within each task there
    assert doc["corpora"][BUNDLED]["shared_tasks"] >= 40


def test_halves_of_one_run_are_called_different_within_the_size() -> None:
    for name, e in _load()["corpora"].items():
        for claim in ("delta", "permutation", "state"):
            assert e[claim]["wilson"][0] <= 0.05, (name, claim, e[claim])


def test_a_call_needs_both_the_interval_and_the_permutation_test() -> None:
    for name, e in _load()["corpora"].items():
        assert e["delta"]["k"] <= min(e["interval"]["k"], e["permutation"]["k"]), name
