"""The benchmark scripts keep running (tiny configurations, nothing saved): timings are measured in benchmarks/,
never asserted here; what is asserted is that every engine and repeat gives the same result."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def run(script: str, *args: str) -> str:
    r = subprocess.run([sys.executable, str(BENCH / script), *args, "--no-save"], capture_output=True, text=True,
                       timeout=600, cwd=BENCH.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.mark.slow
def test_bench_scale_runs_both_tasks_and_engines_agree() -> None:
    pytest.importorskip("psutil")
    out = run("bench_scale.py", "--sizes", "10000", "--repeats", "1", "--fit-engines", "in-memory,local",
              "--audit-engines", "local")
    assert "### ingest + fit + audit + uncertainty" in out and "|NO|" not in out.replace(" ", "")
    assert out.count("yes") >= 3


@pytest.mark.slow
def test_bench_peers_runs_and_its_checks_pass() -> None:
    out = run("bench_peers.py", "--sizes", "10000", "--repeats", "1", "--horizon-repeats", "1",
              "--curve-repeats", "0")
    assert "correctness: all checks passed" in out


@pytest.mark.slow
def test_bench_protocols_runs_ours_without_a_peer(shared_data: Path) -> None:
    out = run("bench_protocols.py", "--cases", "sub", "--repeats", "1")
    assert "sub-sample 160 (80/80)" in out and "m=7" in out and "ΔAIC=" in out


@pytest.mark.slow
def test_bench_startup_runs() -> None:
    out = run("bench_startup.py", "--repeats", "1")
    assert "import tracetochain" in out and "heavy libraries loaded by `import tracetochain`: none" in out


@pytest.mark.slow
def test_bench_model_families_runs_and_every_family_finds_r_inf() -> None:
    out = run("bench_model_families.py", "--traces", "800")
    rows = [line for line in out.splitlines() if line.startswith("|") and "family" not in line and "--" not in line]
    assert len(rows) == 9
    truth = float(out.split("(truth ")[1].split(")")[0])
    for row in rows:
        assert abs(float(row.strip("|").split("|")[-1]) - truth) < 0.06, row


@pytest.mark.slow
def test_bench_costs_runs() -> None:
    out = run("bench_costs.py", "--sizes", "10", "--repeats", "1")
    assert "random 10" in out and "cost_report" in out


@pytest.mark.slow
def test_bench_paths_runs() -> None:
    out = run("bench_paths.py", "--synthetic", "200", "--rounds", "1")
    assert "paths / fit" in out


@pytest.mark.slow
def test_the_calibration_benchmarks_run_in_worker_processes() -> None:
    """audit_calibration and ks_rescale_calibration (run by hand, before a change to the audit's layers) had rotted
    on a renamed keyword of ks_calibrated; their corpora now go through parallel_map, here on two processes."""
    out = run("ks_rescale_calibration.py", "--corpora", "4", "--traces", "400", "--bootstrap", "19", "--workers", "2")
    assert "1/40" in out and "size in [0.02, 0.09], full size:" in out
    out = run("audit_calibration.py", "--quick", "--workers", "2")
    assert "power_memory0.6_>=0.95:" in out
