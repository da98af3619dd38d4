"""`fit` never names a state as a failure source that no trace failed from without saying the share is prior mass."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runner import run_cli


def test_fit_marks_failure_shares_that_only_the_prior_gives(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with path.open("w") as fh:  # failures always leave from "act"; "plan" and "check" never fail
        for i in range(40):
            states = ["plan", "act", "check"] if i % 2 else ["plan", "act"]
            for j, s in enumerate(states):
                fh.write(json.dumps({"trace_id": f"t{i}", "step_idx": j, "state": s,
                                     "outcome": "success" if i % 2 else "failure"}) + "\n")
    r = run_cli("fit", str(path))
    assert r.returncode == 0, r.stderr
    rows = {line.split("│")[1].strip(): line for line in r.stdout.splitlines() if line.count("│") >= 5}
    assert "*" not in rows["act"].split("│")[2]
    assert "*" in rows["plan"].split("│")[2] and "*" in rows["check"].split("│")[2]
    assert "no trace failed from this state" in r.stdout
