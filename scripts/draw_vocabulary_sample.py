"""Draw the command and tool-name samples behind the vocabulary accuracy test (labels are added by hand).

Run from the repository root with the shared data beside it (``../shared/data``):

    python scripts/draw_vocabulary_sample.py

It writes ``tests/data/vocabulary/shell_unlabelled.jsonl`` and ``chat_unlabelled.jsonl``: steps drawn with a fixed
seed, stratified so that every kind of action the agents use appears often enough to measure (see
``docs/vocabularies.md``). Each record keeps what a vocabulary sees (``step_kind``, ``tool_name``, ``text``) and
where it came from. The labelled files (``shell_commands.jsonl``, ``chat_steps.jsonl``) were made from these by
reading every record and writing its category by the labelling rule in ``docs/vocabularies.md`` — never by
running a vocabulary. Re-running this script reproduces the unlabelled files byte for byte.
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from pathlib import Path

import tracetochain as tt

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
OUT = REPO / "tests" / "data" / "vocabulary"
SEED = 20251118

MINI_RUN = DATA / "swebench-verified-mini-swe-agent-gemini-3-pro" / "swebench_results" / "20251118_gemini-3-pro-74pct"
ARTIFACT = DATA / "tracetochain-artifact" / "swebench_real" / "corpus.json"
TAU = DATA / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"

#: Strata of mini-swe-agent steps (a step goes to the first stratum whose test it passes) and how many to draw.
#: The tests look at the surface of the command only, to spread the sample; they are not labels.
MINI_STRATA: list[tuple[str, int]] = [
    ("submit marker", 25), ("no action (rejected turn)", 25), ("heredoc", 45), ("sed -i", 35), ("sed other", 30),
    ("nl", 30), ("cat", 30), ("head/tail", 20), ("grep", 40), ("find", 15), ("python -c", 25), ("python", 35),
    ("test runner", 30), ("ls", 25), ("git diff", 15), ("git other", 15), ("rm", 20), ("mkdir/mv/cp/touch", 15),
    ("echo/printf", 15), ("other", 30),
]
ARTIFACT_PER_TOKEN = 6
CHAT_RARE_EXTRA = 20


def mini_stratum(kind: str | None, tool: str | None, text: str) -> str:
    first = text.lstrip().split("\n", 1)[0]
    if "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in text or "MINI_SWE_AGENT_FINAL_OUTPUT" in text:
        return "submit marker"
    if kind != "tool":
        return "no action (rejected turn)"
    if "<<" in first:
        return "heredoc"
    if tool == "sed":
        return "sed -i" if re.search(r"\bsed\s+(-\w*\s+)*-i", first) else "sed other"
    if tool in ("nl", "cat", "grep", "find", "ls", "rm"):
        return tool
    if tool in ("head", "tail"):
        return "head/tail"
    if tool in ("python", "python3"):
        return "python -c" if re.search(r"python3?\s+-c\b", first) else "python"
    if tool in ("pytest", "runtests.py", "test", "sphinx-build", "make", "tox") or (tool or "").endswith(".sh"):
        return "test runner"
    if tool == "git":
        return "git diff" if re.search(r"\bgit\s+diff\b", first) else "git other"
    if tool in ("mkdir", "mv", "cp", "touch", "rmdir"):
        return "mkdir/mv/cp/touch"
    if tool in ("echo", "printf"):
        return "echo/printf"
    return "other"


def draw_shell(rng: random.Random) -> list[dict[str, object]]:
    table = tt.read_traces(MINI_RUN)
    rows = table.to_arrow().select(["trace_id", "step_idx", "step_kind", "tool_name", "text"]).to_pylist()
    strata: dict[str, list[dict[str, object]]] = defaultdict(list)
    for r in rows:
        strata[mini_stratum(r["step_kind"], r["tool_name"], r["text"] or "")].append(r)
    sample: list[dict[str, object]] = []
    for name, n in MINI_STRATA:
        pool = strata[name]
        for r in rng.sample(pool, min(n, len(pool))):
            sample.append({"source": "mini-swe-agent", "where": f"{r['trace_id']}#{r['step_idx']}",
                           "stratum": name, "step_kind": r["step_kind"], "tool_name": r["tool_name"],
                           "text": r["text"]})
    corpus = json.loads(ARTIFACT.read_text())
    by_token: dict[str, list[str]] = defaultdict(list)
    for instance, rec in sorted(corpus.items()):
        for i, tok in enumerate(rec["toks"]):
            by_token[tok].append(f"{instance}#{i}")
    for tok in sorted(by_token):
        for where in rng.sample(by_token[tok], min(ARTIFACT_PER_TOKEN, len(by_token[tok]))):
            sample.append({"source": "swe-agent-artifact", "where": where, "stratum": tok, "step_kind": "tool",
                           "tool_name": tok, "text": None})
    return sample


def draw_chat(rng: random.Random) -> list[dict[str, object]]:
    files = [TAU, *sorted((DATA / "tau2-bench").rglob("*.json"))]
    rows: list[dict[str, object]] = []
    for path in files:
        table = tt.read_traces(path, include_user=True)
        arrow = table.to_arrow()
        tools = arrow.column("tool_name").to_pylist() if "tool_name" in arrow.column_names else [None] * arrow.num_rows
        for tid, idx, kind, tool in zip(arrow.column("trace_id").to_pylist(), arrow.column("step_idx").to_pylist(),
                                        arrow.column("step_kind").to_pylist(), tools, strict=True):
            rows.append({"source": path.relative_to(DATA).as_posix(), "where": f"{tid}#{idx}", "step_kind": kind,
                         "tool_name": tool})
    sample: list[dict[str, object]] = []
    seen: set[tuple[object, object]] = set()
    for r in rows:  # every distinct (step kind, tool) once
        key = (r["step_kind"], r["tool_name"])
        if key not in seen:
            seen.add(key)
            sample.append(r)
    chosen = {id(r) for r in sample}
    rest = [r for r in rows if id(r) not in chosen]
    sample += rng.sample(rest, 400)  # and steps as they occur
    chosen = {id(r) for r in sample}
    for rare in ("think", "transfer_to_human_agents"):  # tools too rare in a uniform draw to measure
        pool = [r for r in rows if r["tool_name"] == rare and id(r) not in chosen]
        sample += rng.sample(pool, min(len(pool), CHAT_RARE_EXTRA))
    return [{"source": r["source"], "where": r["where"], "step_kind": r["step_kind"], "tool_name": r["tool_name"]}
            for r in sample]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, draw in (("shell", draw_shell), ("chat", draw_chat)):
        records = draw(random.Random(SEED))
        path = OUT / f"{name}_unlabelled.jsonl"
        path.write_text("".join(json.dumps({"id": i, **r}, ensure_ascii=False) + "\n" for i, r in enumerate(records)),
                        encoding="utf-8")
        print(f"{path.relative_to(REPO)}: {len(records)} records")


if __name__ == "__main__":
    main()
