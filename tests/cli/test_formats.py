"""``tracetochain convert`` and ``tracetochain formats``, and the detected-reader line of ``fit``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import CliResult as Result
from cli_runner import Run, run_cli

import tracetochain as tt
from tracetochain.readers import available_readers

EXAMPLE = tt.datasets.example_path("tau_airline")


@pytest.fixture
def run() -> Run:
    """The command line in this process (``cli_runner.run_cli``); ``stdin=`` feeds standard input."""
    return lambda *args, stdin=None: run_cli(*args, input=stdin)
SWE_RUN = Path(__file__).resolve().parents[1] / "data" / "readers" / "swe_agent" / "sweagent_run"


def one_error_line(r: Result | subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_convert_round_trips_the_canonical_table(tmp_path: Path, suffix: str, run: Run) -> None:
    out = tmp_path / f"traces{suffix}"
    r = run("convert", str(EXAMPLE), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "reader: canonical (detected" in r.stdout and "200 traces" in r.stdout
    assert f"wrote 200 traces, 2454 steps to {out}" in r.stdout
    back = tt.read_traces(out)
    src = tt.read_traces(EXAMPLE)
    assert (back.n_traces, back.n_steps, back.outcome_counts()) == (src.n_traces, src.n_steps, src.outcome_counts())
    assert back.state_labels()[1] == src.state_labels()[1]
    assert not list(tmp_path.glob(".*partial*"))


def test_convert_refuses_to_overwrite_unless_forced(tmp_path: Path, run: Run) -> None:
    out = tmp_path / "t.parquet"
    out.write_text("keep me")
    line = one_error_line(run("convert", str(EXAMPLE), "-o", str(out)))
    assert "already exists" in line and "--force" in line and out.read_text() == "keep me"
    r = run("convert", str(EXAMPLE), "-o", str(out), "--force", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["format"] == "canonical" and doc["format_detected"] is True and doc["output_type"] == "Parquet"
    assert doc["ingest"]["n_traces"] == 200 and doc["n_steps"] == 2454 and doc["outcomes"]["success"] == 84
    assert tt.read_traces(out).n_traces == 200
    line = one_error_line(run("convert", str(out), "-o", str(out), "--force"))
    assert "is the input file" in line


def test_convert_bad_output_and_bad_input(tmp_path: Path, run: Run) -> None:
    line = one_error_line(run("convert", str(EXAMPLE), "-o", str(tmp_path / "t.txt")))
    assert "cannot write .txt" in line and ".jsonl, .csv or .parquet" in line
    assert not (tmp_path / "t.txt").exists()
    line = one_error_line(run("convert", str(EXAMPLE), "--reader", "tau-bench", "-o", str(tmp_path / "t.csv")))
    assert str(EXAMPLE) in line and not (tmp_path / "t.csv").exists()
    line = one_error_line(run("convert", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "t.csv")))
    assert "no such file" in line


def test_convert_skip_reports_and_reader_options(tmp_path: Path, run: Run) -> None:
    r = run("convert", str(SWE_RUN), "--on-error", "skip", "-o", str(tmp_path / "a.jsonl"))
    assert r.returncode == 0, r.stderr
    assert "reader: swe-agent (detected" in r.stdout and "skipped 1 records (1 traces dropped whole)" in r.stdout
    assert "no SWE-bench verdict for this instance" in r.stdout and "wrote 2 traces" in r.stdout
    verdicts = tmp_path / "v.json"
    verdicts.write_text(json.dumps({"demo__pkg-101": True, "demo__pkg-202": False, "demo__pkg-303": True}))
    r = run("convert", str(SWE_RUN), "--reader", "swe-agent", "-O", f"verdicts={verdicts}",
            "-o", str(tmp_path / "b.csv"))
    assert r.returncode == 0, r.stderr
    assert "detected" not in r.stdout and "wrote 3 traces" in r.stdout
    assert tt.read_traces(tmp_path / "b.csv").outcome_counts()["success"] == 2
    r = run("convert", str(SWE_RUN), "-O", "nonsense=1", "-o", str(tmp_path / "c.csv"))
    assert r.returncode == 2 and "['nonsense']" in r.stderr and "Traceback" not in r.stderr
    r = run("convert", str(SWE_RUN), "-O", "verdicts", "-o", str(tmp_path / "c.csv"))
    assert r.returncode == 2 and "KEY=VALUE" in r.stderr


def test_parse_reader_options() -> None:
    from tracetochain.cli._formats import parse_reader_options

    assert parse_reader_options(["a=1", "b=x,y", 'c={"k": 2}', "d=true", "e="]) == {
        "a": 1, "b": "x,y", "c": {"k": 2}, "d": True, "e": ""}
    assert parse_reader_options(None) == {}


def test_formats_lists_every_reader(run: Run) -> None:
    r = run("formats", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["name"] for row in rows] == list(available_readers())
    assert all(row["description"] and row["needs"] and row["builtin"] for row in rows)
    r = run("formats")
    assert r.returncode == 0, r.stderr
    for name in available_readers():
        assert name in r.stdout
    assert "verdicts=PATH" in r.stdout


@pytest.mark.slow
def test_fit_says_which_reader_it_detected(run: Run) -> None:
    r = run("fit", str(EXAMPLE))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("reader: canonical (detected")
    r = run("fit", str(EXAMPLE), "--reader", "canonical")
    assert r.returncode == 0, r.stderr
    assert "detected" not in r.stdout


@pytest.mark.parametrize("cmd", ["convert", "formats"])
def test_help_ends_with_an_example(cmd: str, run: Run) -> None:
    r = run(cmd, "--help")
    assert r.returncode == 0
    tail = r.stdout.strip().splitlines()[-3:]
    assert any(f"Example: tracetochain {cmd}" in line for line in tail), r.stdout


def test_exit_code_in_a_real_process(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    out.write_text("x")
    r = subprocess.run([sys.executable, "-m", "tracetochain", "convert", str(EXAMPLE), "-o", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert "already exists" in one_error_line(r)
