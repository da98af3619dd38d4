"""Regression tests for the attack report on the command line (findings F1–F28), one section per finding.

Each reproduction must end in a located ``error:`` line (exit 2), a counted skip or a correct result — never an
``internal error``, never exit 0 with data changed or lost, never a file written outside the named output. The
generators are the report's own, made smaller where the size did not matter. F8 (``compare`` minimum evidence)
belongs to the compare rewrite and is tested there.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


Run = Callable[..., Result]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    """The console entry point in this process, run from ``tmp_path`` (the report's "empty scratch folder")."""
    from tracetochain.cli import main

    monkeypatch.chdir(tmp_path)

    def call(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["tracetochain", *args])
        capsys.readouterr()
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return call


def error_line(r: Result) -> str:
    """The one ``error:`` line of a run that must fail cleanly (exit 2, no traceback, no internal error)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return lines[0]


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def runs_jsonl(path: Path, n: int = 40) -> Path:
    """The report's ``runs.jsonl``: three steps per trace, alternating outcomes."""
    return write_jsonl(path, [{"trace_id": f"t{t}", "step_idx": i, "state": ["plan", "act", "check"][(t + i) % 3],
                               "outcome": "success" if t % 2 else "failure"} for t in range(n) for i in range(3)])


# ------------------------------------------------------------------------------------------------ F3, F4, F5, F24
def test_f3_convert_through_a_new_folder_does_not_replace_its_input(tmp_path: Path, run: Run) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"trace_id": f"t{i}", "step_idx": 0, "state": "a",
                                                "outcome": "success" if i % 2 else "failure"} for i in range(6)])
    before = src.read_bytes()
    for extra in ([], ["--force"]):
        line = error_line(run("convert", "in.jsonl", "-o", "other_dir/../in.jsonl", *extra))
        assert "is the input file" in line
    assert src.read_bytes() == before and not (tmp_path / "other_dir").exists()
    other = tmp_path / "existing.jsonl"
    other.write_text("keep")
    assert "already exists" in error_line(run("convert", "in.jsonl", "-o", "new2/../existing.jsonl"))
    assert other.read_text() == "keep"


@pytest.mark.parametrize("command", [
    ["report", "runs.jsonl", "-o", "runs.jsonl"],
    ["report", "runs.jsonl", "-o", "sub/../runs.jsonl", "--force"],
    ["fit", "runs.jsonl", "-o", "runs.jsonl", "--force"],
    ["monitor", "runs.jsonl", "--window", "10", "--html", "runs.jsonl", "--force"],
    ["convert", "runs.jsonl", "-o", "./runs.jsonl", "--force"],
])
def test_f4_no_command_writes_over_its_input(tmp_path: Path, run: Run, command: list[str]) -> None:
    before = runs_jsonl(tmp_path / "runs.jsonl").read_bytes()
    assert "is the input file" in error_line(run(*command))
    assert (tmp_path / "runs.jsonl").read_bytes() == before


def test_f4_export_does_not_write_over_its_chain(tmp_path: Path, run: Run) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    assert run("fit", "runs.jsonl", "-o", "chain.json", "-q").returncode == 0
    before = (tmp_path / "chain.json").read_bytes()
    assert "is the input file" in error_line(run("export", "chain.json", "--to", "dot", "-o", "chain.json",
                                                 "--force"))
    assert (tmp_path / "chain.json").read_bytes() == before


@pytest.mark.parametrize("command", [
    ["report", "runs.jsonl", "--uncertainty", "none", "--no-audit"],
    ["fit", "runs.jsonl", "-q", "-o", "report.html"],
    ["monitor", "runs.jsonl", "--window", "10", "--html", "report.html"],
    ["convert", "runs.jsonl", "-o", "report.html.jsonl"],
])
def test_f5_no_command_writes_through_a_symbolic_link(tmp_path: Path, run: Run, command: list[str]) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    name = command[command.index("-o") + 1] if "-o" in command else \
        command[command.index("--html") + 1] if "--html" in command else "report.html"
    link = tmp_path / name
    link.symlink_to("victim.txt")
    assert "symbolic link" in error_line(run(*command))
    assert victim.read_text() == "precious\n" and link.is_symlink()
    r = run(*command, "--force")
    assert r.returncode in (0, 3), r.stderr  # monitor may raise a drift alert
    assert victim.read_text() == "precious\n" and not link.is_symlink()


def test_f5_dangling_link_creates_nothing(tmp_path: Path, run: Run) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    (tmp_path / "dangling.html").symlink_to("created.txt")
    assert "symbolic link" in error_line(run("report", "runs.jsonl", "-o", "dangling.html"))
    assert not (tmp_path / "created.txt").exists()


def test_f23_monitor_html_into_missing_folder_and_onto_a_folder(tmp_path: Path, run: Run) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    r = run("monitor", "runs.jsonl", "--window", "10", "--html", "missing_dir/m.html")
    assert r.returncode in (0, 3) and (tmp_path / "missing_dir" / "m.html").read_text().startswith("<!DOCTYPE")
    (tmp_path / "adir").mkdir()
    assert "is a folder" in error_line(run("monitor", "runs.jsonl", "--window", "10", "--html", "adir"))


def test_f23_whatif_edits_folder_is_refused(tmp_path: Path, run: Run) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    assert run("fit", "runs.jsonl", "-o", "chain.json", "-q").returncode == 0
    (tmp_path / "edits").mkdir()
    line = error_line(run("whatif", "chain.json", "--edits", "edits"))
    assert "edits: is a folder" in line


def test_f24_convert_leaves_no_temporary_files(tmp_path: Path, run: Run) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    assert run("convert", "runs.jsonl", "-o", "out.parquet").returncode == 0
    assert "already exists" in error_line(run("convert", "runs.jsonl", "-o", "out.parquet"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.parquet", "runs.jsonl"]


def test_force_is_the_same_everywhere(tmp_path: Path, run: Run) -> None:
    """Every command that writes a file refuses an existing one without --force and replaces it with --force."""
    runs_jsonl(tmp_path / "runs.jsonl")
    assert run("fit", "runs.jsonl", "-o", "chain.json", "-q").returncode == 0
    commands = [["fit", "runs.jsonl", "-q", "-o", "out.x"],
                ["report", "runs.jsonl", "--no-audit", "--uncertainty", "none", "-q", "-o", "out.x"],
                ["export", "chain.json", "-o", "out.x"],
                ["monitor", "runs.jsonl", "--window", "10", "--html", "out.x"],
                ["convert", "runs.jsonl", "-o", "out.jsonl"]]
    for command in commands:
        out = tmp_path / command[-1]
        out.write_text("old")
        assert "already exists; pass --force" in error_line(run(*command)), command
        assert out.read_text() == "old"
        assert run(*command, "--force").returncode in (0, 3) and out.read_text() != "old", command
        out.unlink()
    assert os.listdir(tmp_path) == ["runs.jsonl", "chain.json"] or set(os.listdir(tmp_path)) == {
        "runs.jsonl", "chain.json"}
