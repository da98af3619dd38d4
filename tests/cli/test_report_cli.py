"""report / audit / whatif / export on the command line, including the documented exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import CliResult, run_cli

import tracetochain as tt

EXAMPLE = tt.datasets.example_path()


def run(*args: str) -> CliResult:
    return run_cli(*args)


@pytest.fixture(scope="module")
def chain_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("chain") / "chain.json"
    assert run("fit", str(EXAMPLE), "-o", str(path), "-q").returncode == 0
    return path


@pytest.mark.slow
def test_report_html_md_json_and_gates(tmp_path: Path) -> None:
    html = tmp_path / "r.html"
    r = run("report", str(EXAMPLE), "-o", str(html), "--samples", "200", "--fail-under", "r_inf>=0.3")
    assert r.returncode == 0, r.stderr
    assert "certificate:" in r.stdout and html.read_text().startswith("<!DOCTYPE html>")
    md = tmp_path / "r.md"
    r = run("report", str(EXAMPLE), "-o", str(md), "--no-audit", "--uncertainty", "none", "--fail-under",
            "r_inf>=0.99")
    assert r.returncode == 3 and "FAIL" in r.stderr
    assert md.read_text().startswith("### Agent reliability")
    js = tmp_path / "r.json"
    r = run("report", str(EXAMPLE), "--format", "json", "-o", str(js), "--uncertainty", "bootstrap",
            "--samples", "100", "-q")
    assert r.returncode == 0, r.stderr
    doc = json.loads(js.read_text())
    assert doc["kind"] == "tracetochain.report" and doc["intervals"]["method"] == "bootstrap"
    assert doc["certificate"]["kind"] == "tracetochain.certificate"
    r = run("report", str(EXAMPLE), "-o", str(md), "--no-audit", "--fail-under", "pass^x>1", "--force")
    assert r.returncode == 2 and "cannot read the gate" in r.stderr


@pytest.mark.slow
def test_report_withholds_timing_on_swebench(shared_data: Path, tmp_path: Path) -> None:
    corpus = shared_data / "tracetochain-artifact" / "swebench_real" / "corpus.json"
    out = tmp_path / "swe.json"
    r = run("report", str(corpus), "--vocabulary", "shell", "--format", "json", "-o", str(out),
            "--uncertainty", "none", "--fail-under", "R(20)>=0.1")
    assert r.returncode == 3  # the gate refers to a withheld output
    doc = json.loads(out.read_text())
    assert "R(d)" in doc["withheld"] and doc["timing_status"] == "withheld"
    timing = doc["certificate"]["layers"]["timing"]
    assert timing["status"] == "reject" and doc["certificate"]["outputs"]["R(d)"]["because"] == ["timing"]
    assert doc["timing_withheld_reason"] == timing["message"]
    assert "success times do not follow the chain's law" in doc["timing_withheld_reason"]
    # Withholding timing touches only the outputs that rest on it (R∞ rests on the held-out R∞ check alone).
    assert doc["output_status"]["R_inf"] == doc["output_status"]["pass^1"] != "withheld"


@pytest.mark.slow
def test_audit_command(tmp_path: Path) -> None:
    r = run("audit", str(EXAMPLE), "--json", "--ks-samples", "49")
    assert r.returncode == 0, r.stderr
    cert = json.loads(r.stdout)
    assert cert["decision"] in ("accept", "partial", "reject") and "withheld" in cert
    r = run("audit", str(EXAMPLE), "--ks-samples", "49", "--fail-on-reject")
    assert r.returncode in (0, 4)
    assert "Audit certificate" in r.stdout


@pytest.mark.slow
def test_whatif_and_export(chain_file: Path, tmp_path: Path) -> None:
    r = run("whatif", str(chain_file), "--reroute", "*->success:0.1", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["whatif"]["delta_r_inf"] > 0 and doc["bottlenecks"]["by_failure_share"]
    r = run("whatif", str(chain_file), "--reroute", "nope->success:0.1")
    assert r.returncode == 2 and "unknown state 'nope'" in r.stderr
    for fmt, start in (("dot", "digraph"), ("mermaid", "flowchart"), ("prism", "//")):
        out = tmp_path / f"c.{fmt}"
        r = run("export", str(chain_file), "--to", fmt, "-o", str(out))
        assert r.returncode == 0 and out.read_text().startswith(start)


@pytest.mark.parametrize("cmd", ["report", "audit", "whatif", "export", "convert", "formats"])
def test_new_commands_help_ends_with_example(cmd: str) -> None:
    r = run(cmd, "--help")
    assert r.returncode == 0
    assert any("Example: tracetochain" in line for line in r.stdout.strip().splitlines()[-4:]), r.stdout
