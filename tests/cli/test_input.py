"""One input convention on every command that reads traces: ``--reader``, ``-O KEY=VALUE``, ``-`` for stdin, and
the old option spellings kept as deprecated aliases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import Run, run_cli

import tracetochain as tt
from tracetochain.cli._input import stdin_suffix

EXAMPLE = tt.datasets.example_path("tau_airline")


@pytest.fixture
def run() -> Run:
    """The command line in this process (``cli_runner.run_cli``); ``stdin=`` feeds standard input."""
    return lambda *args, stdin=None: run_cli(*args, input=stdin)


def chat_episodes(n: int = 40) -> list[dict[str, object]]:
    """Message-list episodes whose verdict sits in a nested boolean (``metadata.success``)."""
    episodes = []
    for i in range(n):
        messages = [{"role": "user", "content": "help"},
                    {"role": "assistant", "content": None,
                     "tool_calls": [{"id": f"c{i}", "type": "function",
                                     "function": {"name": "get_order", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": f"c{i}", "content": "ok"}]
        if i % 3:
            messages.append({"role": "assistant", "content": "done"})
        episodes.append({"id": f"ep{i}", "messages": messages, "metadata": {"success": i % 2 == 0}})
    return episodes


@pytest.fixture
def nested_verdicts(tmp_path: Path) -> Path:
    """The acceptance shape: a metadata header line, then message-list episodes with a nested boolean verdict."""
    path = tmp_path / "chat.jsonl"
    header = {"metadata": {"benchmark": "shop", "model": "m", "defence": "none"}}
    path.write_text("".join(json.dumps(e) + "\n" for e in [header, *chat_episodes()]))
    return path


COMMANDS_READING_TRACES = {
    "fit": ["fit", "{path}", "--json", "--uncertainty", "none"],
    "report": ["report", "{path}", "-o", "{out}/r.json", "--no-audit", "--uncertainty", "none", "--force"],
    "audit": ["audit", "{path}", "--ks-samples", "19", "--json"],
    "compare": ["compare", "{path}", "{path}", "--samples", "50", "--json"],
    "monitor": ["monitor", "{path}", "--window", "20", "--jsonl"],
    "convert": ["convert", "{path}", "-o", "{out}/t.jsonl", "--force"],
}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS_READING_TRACES))
def test_every_command_takes_reader_and_options(command: str, nested_verdicts: Path, tmp_path: Path,
                                                run: Run) -> None:
    args = [a.format(path=nested_verdicts, out=tmp_path) for a in COMMANDS_READING_TRACES[command]]
    found = run(*args)  # the only verdict field in the episodes is used, and named
    assert found.returncode in (0, 3, 4) and "Traceback" not in found.stderr, found.stderr
    assert "verdict: metadata.success" in found.stderr + found.stdout
    assert "-O outcome_key=" in found.stderr + found.stdout  # and how to choose another
    r = run(*args, "-O", "outcome_key=metadata.success")  # one option, the reader still detected
    assert r.returncode in (0, 3, 4), r.stderr  # monitor may alert (3), audit may reject (4); nothing else
    assert "reader: openai-messages (detected" in r.stderr + r.stdout
    r = run(*args, "--reader", "openai-messages", "-O", "outcome_key=metadata.success")
    assert r.returncode in (0, 3, 4), r.stderr
    assert "deprecated" not in r.stderr and "detected" not in r.stderr


def test_fit_reads_the_nested_verdict(nested_verdicts: Path, run: Run) -> None:
    r = run("fit", str(nested_verdicts), "-O", "outcome_key=metadata.success", "--json", "--pseudocount", "0",
            "--uncertainty", "none")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ingest"]["format"] == "openai-messages" and doc["ingest"]["n_traces"] == 40
    assert doc["ingest"]["run_metadata"]["metadata"]["benchmark"] == "shop"
    assert doc["r_inf"] == pytest.approx(0.5)
    assert "reader: openai-messages (detected" not in r.stdout  # JSON on stdout stays JSON


def test_detected_reader_is_named_on_stderr(nested_verdicts: Path, run: Run) -> None:
    r = run("audit", str(nested_verdicts), "-O", "outcome_key=metadata.success", "--ks-samples", "19")
    assert r.returncode in (0, 4), r.stderr
    assert "reader: openai-messages (detected" in r.stderr
    r = run("audit", str(nested_verdicts), "--reader", "openai-messages", "-O", "outcome_key=metadata.success",
            "--ks-samples", "19")
    assert "detected" not in r.stderr


@pytest.mark.parametrize("command", ["fit", "convert", "report", "audit"])
def test_standard_input(command: str, tmp_path: Path, run: Run) -> None:
    data = EXAMPLE.read_bytes()
    args = {"fit": ["fit", "-", "--json", "--uncertainty", "none"],
            "convert": ["convert", "-", "-o", str(tmp_path / "t.parquet")],
            "report": ["report", "-", "-o", str(tmp_path / "r.json"), "--no-audit", "--uncertainty", "none"],
            "audit": ["audit", "-", "--ks-samples", "19", "--json"]}[command]
    r = run(*args, stdin=data)
    assert r.returncode in (0, 4), r.stderr
    if command == "fit":
        assert json.loads(r.stdout)["ingest"]["source"] == "<stdin>"
    if command == "convert":
        assert tt.read_traces(tmp_path / "t.parquet").n_traces == 200
    if command == "report":
        assert json.loads((tmp_path / "r.json").read_text())["source"]["n_traces"] == 200


def test_standard_input_errors_name_stdin(run: Run) -> None:
    r = run("fit", "-", stdin=b'{"trace_id": "a", "step_idx": 0, "state": "s", "outcome": "won"}\n'
                              b'{"trace_id": "b", "step_idx": 0, "state": "s", "outcome": "success"}\n')
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: <stdin>:1: field 'outcome'") and "tracetochain-stdin" not in line
    assert line.endswith("read as canonical (detected; choose another with --reader NAME)")
    r = run("fit", "-", stdin=b"")
    assert r.returncode == 2 and "standard input is empty" in r.stderr
    r = run("compare", "-", "-", stdin=b"")
    assert r.returncode == 2 and "only one of A and B" in r.stderr


def test_stdin_suffix() -> None:
    assert stdin_suffix(b"PK\x03\x04rest") == ".eval"
    assert stdin_suffix(b"PAR1....") == ".parquet"
    assert stdin_suffix(b"\xef\xbb\xbf[{}]") == ".json"
    assert stdin_suffix(b'{"a": 1}\n{"a": 2}') == ".jsonl"
    assert stdin_suffix(b'{"a": {"b": [1, 2, 3]}}') == ".json"
    assert stdin_suffix(b'{"a": "cut off') == ".json"
    assert stdin_suffix(b"trace_id,step_idx\nx,0") == ".csv"
    assert stdin_suffix(b"Question: x\nThought 1: y") == ".txt"


def test_deprecated_spellings_still_work(tmp_path: Path, run: Run) -> None:
    r = run("fit", str(EXAMPLE), "--format", "canonical", "--json", "--uncertainty", "none")
    assert r.returncode == 0 and "--format (for the input reader) is deprecated; use --reader" in r.stderr
    r = run("convert", str(EXAMPLE), "-f", "canonical", "-o", str(tmp_path / "t.jsonl"))
    assert r.returncode == 0 and "deprecated" in r.stderr and "detected" not in r.stdout
    r = run("audit", str(EXAMPLE), "--bootstrap", "19", "--json")
    assert r.returncode in (0, 4) and "--bootstrap is deprecated; use --ks-samples" in r.stderr
    cert = json.loads(r.stdout)
    assert cert["settings"]["audit"]["n_bootstrap"] == 19
    # The KS p-values of the five splits are (1 + #exceedances) / (19 + 1): they really ran 19 replicates.
    timing_ps = cert["layers"]["timing"]["split_p_values"]
    assert len(timing_ps) == 5 and all(p is not None and abs(p * 20 - round(p * 20)) < 1e-9 for p in timing_ps)
    r = run("fit", str(EXAMPLE), "--format", "canonical", "--reader", "tau-bench")
    assert r.returncode == 2 and "give only --reader" in r.stderr


@pytest.mark.slow
def test_engine_reads_any_input_on_the_driver(tmp_path: Path, run: Run) -> None:
    """With --engine, an input that is not a canonical Parquet/JSONL corpus (another reader, reader options, a CSV,
    standard input) is read on the driver and travels as one partition: the same numbers as without an engine."""
    import pyarrow.csv

    def fit(*args: str, stdin: bytes | None = None) -> dict[str, object]:
        r = run("fit", *args, "--json", "--uncertainty", "none", stdin=stdin)
        assert r.returncode == 0, r.stderr
        doc: dict[str, object] = json.loads(r.stdout)
        return doc

    plain = fit(str(EXAMPLE))
    assert fit(str(EXAMPLE), "--engine", "local", "--reader", "canonical") == plain
    csv = tmp_path / "traces.csv"
    pyarrow.csv.write_csv(tt.datasets.load_example().to_arrow(), csv)
    from_csv = fit(str(csv))
    assert fit(str(csv), "--engine", "local") == from_csv
    assert from_csv["r_inf"] == plain["r_inf"] and from_csv["states"] == plain["states"]
    piped = fit("-", "--engine", "local", stdin=EXAMPLE.read_bytes())
    assert piped["r_inf"] == plain["r_inf"] and piped["states"] == plain["states"]
    r = run("audit", "-", "--engine", "local", stdin=b"")
    assert r.returncode == 2 and "standard input is empty" in r.stderr


def test_python_dash_m_is_the_same_program() -> None:
    r = subprocess.run([sys.executable, "-m", "tracetochain", "--version"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("tracetochain ")
