"""Regenerate the bundled demo file from the τ-bench historical trajectories (run from the repository root).

    python scripts/make_tau_airline_sample.py ../shared/data/tau-bench/historical_trajectories/gpt-4o-airline.json

One canonical row per assistant turn (a tool call → step_kind "tool" with its tool name; plain text → "llm"), the
tool's reply flagged as a step error when it starts with "Error" (τ-bench's convention), outcome success when
reward ≥ 1 − 1e−6 (τ-bench's own pass test). Only the first tool call of a turn is kept, as τ-bench itself does. Free
text is left out to keep the file small. The real τ-bench reader arrives with the readers issue; this script is
the documented, reproducible conversion until then.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path("src/tracetochain/datasets/data/tau_airline_sample.jsonl")


def convert(src: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for ep in json.loads(src.read_text(encoding="utf-8")):
        outcome = "success" if ep["reward"] >= 1 - 1e-6 else "failure"
        trace_id = f"airline-task{ep['task_id']:03d}-trial{ep['trial']}"
        traj = ep["traj"]
        step = 0
        for i, msg in enumerate(traj):
            if msg["role"] != "assistant":
                continue
            calls = msg.get("tool_calls") or []
            row: dict[str, object] = {"trace_id": trace_id, "task_id": str(ep["task_id"]), "trial": ep["trial"],
                                      "step_idx": step, "outcome": outcome, "reward": float(ep["reward"])}
            if calls:
                call_id = calls[0].get("id")
                reply = next((m for m in traj[i + 1:] if m["role"] == "tool"
                              and (call_id is None or m.get("tool_call_id") == call_id)), None)
                row |= {"step_kind": "tool", "tool_name": calls[0]["function"]["name"],
                        "error": bool(reply and str(reply.get("content") or "").startswith("Error"))}
            else:
                row |= {"step_kind": "llm", "error": False}
            rows.append(row)
            step += 1
    return rows


if __name__ == "__main__":
    rows = convert(Path(sys.argv[1]))
    OUT.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} steps to {OUT}")
