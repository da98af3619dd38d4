"""`tracetochain board`, several inputs and `--where`/`--by` on the analysing commands (issue 29)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run_cli

SECURITY = Path(__file__).resolve().parents[1] / "data" / "board" / "security"
FAST = ("--samples", "200", "--no-audit")


def test_board_of_a_folder_with_where_and_cards(tmp_path: Path) -> None:
    out = tmp_path / "board.json"
    r = run_cli("board", str(SECURITY), "--by", "meta.model", "--where", "metadata.attack_type=none", *FAST,
                "-o", str(out), "--cards", str(tmp_path / "cards"))
    assert r.returncode == 0, r.stderr
    assert "read 4 files" in r.stderr and "verdict: metadata.success" in r.stderr
    doc = json.loads(out.read_text())
    assert [row["group"] for row in doc["rows"]] and len(doc["rows"]) == 3
    assert doc["filters"] == ["metadata.attack_type=none"] and sum(row["n_episodes"] for row in doc["rows"]) == 24
    assert len(list((tmp_path / "cards").glob("*.json"))) == 3 == len(list((tmp_path / "cards").glob("*.md")))
    assert "Example:" in run_cli("board", "--help").stdout


def test_board_formats_and_several_inputs(tmp_path: Path) -> None:
    files = sorted(str(p) for p in SECURITY.glob("*.jsonl"))
    r = run_cli("board", *files[:2], "--by", "source_file", *FAST, "--format", "csv", "-q")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("rank,rank_lower,rank_upper,group")
    r = run_cli("board", str(SECURITY / "*.jsonl"), "--by", "meta.defense", *FAST, "-q")
    assert r.returncode == 0 and "Multiplicity" in r.stdout and "| spotlighting |" in r.stdout


@pytest.mark.slow
def test_fit_report_and_convert_take_several_inputs_where_and_by(tmp_path: Path) -> None:
    files = sorted(str(p) for p in SECURITY.glob("*.jsonl"))
    r = run_cli("fit", *files, "--where", "meta.defense=none", "--json", "--uncertainty", "none")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ingest"]["filters"] == ["meta.defense=none"]
    assert "selected 24 traces" in r.stderr
    r = run_cli("fit", str(SECURITY), "--by", "meta.model", "--json", "--samples", "200")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["rows"]) == 3
    out = tmp_path / "board.md"
    r = run_cli("report", str(SECURITY), "--by", "meta.defense", "--no-audit", "--samples", "200", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "Reliability board by `meta.defense`" in out.read_text()
    table = tmp_path / "all.jsonl"
    r = run_cli("convert", str(SECURITY), "-o", str(table), "--where", "metadata.attack_type!=none")
    assert r.returncode == 0, r.stderr and "wrote 24 traces" in r.stdout
    rows = [json.loads(x) for x in table.read_text().splitlines()]
    assert {row["meta.model"] for row in rows} == {"gpt-4o", "claude-3-5-sonnet", "llama-3-70b"}


def test_errors_name_the_field_and_the_fix(tmp_path: Path) -> None:
    r = run_cli("fit", str(SECURITY), "--where", "meta.modle=gpt-4o")
    assert r.returncode == 2 and "no field 'meta.modle'" in r.stderr and "meta.model" in r.stderr
    ep = {"messages": [{"role": "assistant", "content": "x"}], "metadata": {"success": True, "passed": "no"}}
    bad = tmp_path / "two.jsonl"
    bad.write_text(json.dumps(ep) + "\n" + json.dumps(ep) + "\n")
    r = run_cli("fit", str(bad))
    assert r.returncode == 2 and "metadata.success, metadata.passed" in r.stderr and "outcome_key=" in r.stderr
    r = run_cli("board", str(tmp_path / "none*.jsonl"), "--by", "x")
    assert r.returncode == 2 and "no file matches" in r.stderr


def test_compare_many_inputs_is_the_board() -> None:
    files = sorted(str(p) for p in SECURITY.glob("*.jsonl"))
    r = run_cli("compare", *files[:3], "--json", "--samples", "200")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "tracetochain.board" and len(doc["rows"]) == 3 and len(doc["pairs"]) == 3
    r = run_cli("compare", str(SECURITY), "--by", "meta.defense", "--markdown", "--samples", "200")
    assert r.returncode == 0 and "Holm" in r.stdout
    r = run_cli("compare", files[0])
    assert r.returncode == 2 and "two inputs" in r.stderr
