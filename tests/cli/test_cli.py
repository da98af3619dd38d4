"""The command line: fit/metrics output, JSON, errors as one line with exit code 2, help with examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import CliResult, run_cli

import tracetochain as tt

EXAMPLE = tt.datasets.example_path("tau_airline")


def run(*args: str) -> CliResult:
    return run_cli(*args)


@pytest.mark.slow
def test_fit_then_metrics(tmp_path: Path) -> None:
    out = tmp_path / "chain.json"
    r = run("fit", str(EXAMPLE), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "200 traces" in r.stdout and "R∞" in r.stdout and "Most failures leave from" in r.stdout
    chain = tt.AbsorbingChain.from_json(out)
    assert chain.metadata["ingest"]["n_traces"] == 200
    r = run("metrics", str(out), "--horizon", "50", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "tracetochain.metrics" and doc["schema_version"] == 1
    assert doc["r_inf"] == pytest.approx(chain.r_inf, abs=1e-15)
    assert len(doc["reliability"]) == 51 and doc["reliability"][0] == 0.0
    assert doc["pass_hat_k"]["3"] == pytest.approx(chain.r_inf**3)
    assert "NaN" not in r.stdout


def test_fit_json_carries_ingest_report(tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    src.write_text('{"trace_id":"a","step_idx":0,"state":"s","outcome":"success"}\nnot json\n'
                   '{"trace_id":"b","step_idx":0,"state":"s","outcome":"failure"}\n')
    r = run("fit", str(src), "--on-error", "skip", "--json", "--pseudocount", "0")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ingest"]["n_records_skipped"] == 1 and doc["ingest"]["problems"][0]["line"] == 2
    assert doc["r_inf"] == pytest.approx(0.5)


def test_bad_record_is_one_line_exit_2(tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    src.write_text('{"trace_id":"a","step_idx":0,"state":"s","outcome":"won"}\n')
    r = run("fit", str(src))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{src}:1" in lines[0] and "field 'outcome'" in lines[0]


def test_missing_file_and_bad_chain(tmp_path: Path) -> None:
    r = run("fit", str(tmp_path / "none.jsonl"))
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "c.json"
    bad.write_text('{"kind": "something else"}')
    r = run("metrics", str(bad))
    assert r.returncode == 2 and "not a tracetochain chain document" in r.stderr
    bad.write_text("{nope")
    r = run("metrics", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_usage_error_exit_code() -> None:
    r = run("fit", str(EXAMPLE), "--k", "0,x")
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.parametrize("cmd", [[], ["fit"], ["metrics"]])
def test_help_ends_with_an_example(cmd: list[str]) -> None:
    r = run(*cmd, "--help")
    assert r.returncode == 0
    tail = r.stdout.strip().splitlines()[-3:]
    assert any("Example: tracetochain" in line for line in tail), r.stdout


def test_version() -> None:
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"tracetochain {tt.__version__}"
