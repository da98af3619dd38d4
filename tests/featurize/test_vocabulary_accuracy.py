"""The built-in vocabularies on hand-labelled real actions (``tests/data/vocabulary``): at least 95 % right in every
category with 20 or more examples, and the accuracy table in ``docs/vocabularies.md`` is up to date."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import vocabulary_accuracy as accuracy  # noqa: E402

sys.path.pop(0)


@pytest.mark.parametrize(("vocabulary", "sample"), accuracy.SAMPLES)
def test_every_measured_category_is_at_least_95_percent_right(vocabulary: str, sample: str) -> None:
    records = accuracy.load(sample)
    assert len(records) >= 500
    measured = 0
    for category, (n, correct, wrong) in accuracy.scores(vocabulary, records).items():
        if n >= accuracy.MIN_EXAMPLES:
            measured += 1
            assert correct / n >= accuracy.TARGET, (category, n, correct, dict(wrong))
    assert measured >= 6


def test_the_shell_sample_covers_what_the_agents_do() -> None:
    records = accuracy.load("shell_commands.jsonl")
    texts = [str(r["text"] or "") for r in records]
    for needle, at_least in (("<<'EOF' >", 20), ("sed -i", 20), ("sed -n", 20), ("python3 -c", 10), ("nl -ba", 20),
                             ("grep -r", 10), ("git diff", 15), ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", 20)):
        assert sum(needle in t for t in texts) >= at_least, needle
    assert sum(r["source"] == "swe-agent-artifact" for r in records) >= 100
    assert {r["tool_name"] for r in records if r["source"] == "swe-agent-artifact"} >= {
        "submit", "edit:view", "edit:create", "edit:str_replace", "python", "grep", "find", "git", "none"}
    counts: dict[str, int] = {}
    for r in records:
        counts[str(r["label"])] = counts.get(str(r["label"]), 0) + 1
    assert all(n >= accuracy.MIN_EXAMPLES for n in counts.values()), counts  # every category is measured


def test_the_accuracy_table_in_the_docs_is_current() -> None:
    text = accuracy.DOC.read_text(encoding="utf-8")
    assert accuracy.updated(text) == text, "run: python scripts/vocabulary_accuracy.py"


def test_labels_use_each_vocabularys_categories() -> None:
    from tracetochain.featurize.vocab import get_vocabulary

    for vocabulary, sample in accuracy.SAMPLES:
        allowed = set(get_vocabulary(vocabulary).categories)
        for line in (accuracy.DATA / sample).read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            assert rec["label"] in allowed and rec["source"] and rec["where"], rec["id"]
