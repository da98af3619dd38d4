"""`tracetochain serve` on the command line: refusals before the port is bound, export, verdicts posted later."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_service import PB, proto_body, record_spans

import tracetochain.instrument as tt
from tracetochain.traces._table import TraceTable


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracetochain", "serve", *args], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize(("args", "needle"), [
    (["--host", "0.0.0.0"], "needs both an ingest token and a read token"),
    (["--window", "5 parsecs"], "not a duration"),
    (["--durability", "sometimes"], "durability must be 'full' or 'normal'"),
    (["-O", "outcome_atribute=x"], "unknown options ['outcome_atribute']"),
])
def test_bad_settings_exit_2_with_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    r = _serve("--store", str(tmp_path / "x.db"), *args)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_bad_rules_file_is_reported_with_its_line(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nwhen = "P(a -> failure) > 0.1"\n\n[[rule]]\nwhen = "R∞ < 0.8 over 7m"\n')
    r = _serve("--store", str(tmp_path / "x.db"), "--rules", str(rules))
    assert r.returncode == 2 and "rules.toml:5:" in r.stderr and "whole number of windows" in r.stderr


@pytest.mark.slow
def test_post_verdict_and_export(serve_process, tmp_path: Path) -> None:
    proc = serve_process("--settle", "0.1", "--window", "10", "--no-stdout-alerts")
    ids: list[str] = []

    def run(p) -> None:
        for _ in range(3):
            with tt.episode("agent", provider=p) as ep:
                ids.append(ep.trace_id)
                with tt.step("lookup", provider=p):
                    pass

    import httpx

    httpx.post(proc.url + "/v1/traces", content=proto_body(record_spans(run)), headers=PB).raise_for_status()
    proc.wait_for(lambda d: d["status"]["pending_verdicts"] == 3, timeout=30)
    tt.post_verdict(ids[0], True, endpoint=proc.url)
    tt.post_verdict(ids[1], "failed", endpoint=proc.url)
    tt.post_verdict(ids[2], reward=0.9, endpoint=proc.url)
    doc = proc.wait_for(lambda d: d["n_episodes"] == 3, timeout=30)
    assert doc["status"]["pending_verdicts"] == 0
    proc.stop()
    out = tmp_path / "steps.parquet"
    r = _serve("--store", str(proc.store), "--export-parquet", str(out))
    assert r.returncode == 0 and "3 episodes" in r.stdout
    table = TraceTable.read(out)
    assert table.outcome_counts()["success"] == 1 and table.outcome_counts()["failure"] == 2


@pytest.mark.slow
def test_a_store_that_is_not_one_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "notes.db"
    bad.write_text("not a database " * 100)
    r = _serve("--store", str(bad), "--port", "1")
    assert r.returncode == 2 and "cannot open the store" in r.stderr and "Traceback" not in r.stderr
