"""Every Python block of the README runs as written, each on its own (a fresh namespace), in a folder that holds what
the blocks read: ``runs.jsonl`` (the bundled τ-bench airline sample, with a dollar cost on every step so that the cost
block has something to add up) and ``traces/`` (the same rows cut into two canonical partitions)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tracetochain as tt

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
#: Blocks that take minutes (model choice over every family; a Dask local cluster): the slow tier runs them.
SLOW = ("choose_model(", "DaskEngine(")


def _params() -> list[object]:
    return [pytest.param(i, marks=[pytest.mark.slow] if any(s in b for s in SLOW) else [], id=f"block{i}")
            for i, b in enumerate(BLOCKS)]


@pytest.fixture
def runs_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rows = [json.loads(x) for x in tt.datasets.example_path().read_text().splitlines() if x.strip()]
    for r in rows:  # a deterministic price per step: LLM calls cost more than tool calls
        r["cost_usd"] = 0.012 if r.get("step_kind") == "llm" else 0.001
    text = [json.dumps(r) for r in rows]
    (tmp_path / "runs.jsonl").write_text("\n".join(text) + "\n")
    (tmp_path / "traces").mkdir()
    ids = sorted({r["trace_id"] for r in rows})
    first = set(ids[: len(ids) // 2])
    for k, keep in enumerate((lambda t: t in first, lambda t: t not in first)):
        (tmp_path / "traces" / f"part-{k}.jsonl").write_text(
            "\n".join(t for t, r in zip(text, rows, strict=True) if keep(r["trace_id"])) + "\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("index", _params())
def test_readme_block_runs_as_written(index: int, runs_folder: Path) -> None:
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile(BLOCKS[index], f"README.md python block {index}", "exec"), namespace)
    if index == 0:
        assert (runs_folder / "chain.json").exists()
