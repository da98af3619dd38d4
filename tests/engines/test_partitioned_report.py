"""`make_partitioned_report` / `report --engine`: the report document of a partitioned corpus, built from counts,
equals the in-memory report wherever the two compute the same thing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run_cli

import tracetochain as tt
from tracetochain.engines import Engine
from tracetochain.report import make_partitioned_report, make_report, render_html


def strip(doc: dict) -> dict:  # type: ignore[type-arg]
    return {k: v for k, v in doc.items() if k != "generated_at"}


def test_partitioned_report_equals_the_in_memory_report(engine: Engine, corpus: dict[str, Path]) -> None:
    whole = tt.TraceTable.read(corpus["parquet"])
    mem = make_report(whole, horizon=40, samples=300, seed=2, audit_options={"n_bootstrap": 49,
                                                                           "n_permutations": 49})
    part = make_partitioned_report(corpus["jsonl"], engine=engine, bytes_per_partition=20_000, horizon=40,
                                   samples=300, seed=2, audit_options={"n_bootstrap": 49, "n_permutations": 49})
    for key in ("chain", "metrics", "intervals", "bottlenecks", "model_success_pmf", "kind", "schema_version"):
        a, b = dict(part[key]) if isinstance(part[key], dict) else part[key], mem[key]
        if key == "metrics":  # the in-memory chain also records its (categorical) state model
            a, b = {k: v for k, v in a.items() if k != "chain_metadata"}, {k: v for k, v in b.items()
                                                                            if k != "chain_metadata"}
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True), key
    assert part["empirical"]["rdc"] == mem["empirical"]["rdc"]
    assert part["empirical"]["pass_rate"] == mem["empirical"]["pass_rate"]
    assert part["empirical"]["success_length_counts"] == mem["empirical"]["success_length_counts"]
    assert part["empirical"]["success_lengths"] is None and len(mem["empirical"]["success_lengths"]) > 0
    assert part["source"]["outcomes"] == mem["source"]["outcomes"]
    assert part["source"]["n_steps"] == sum(s["n_steps"] for s in part["states"]["taxonomy"])
    mem_tax = {s["name"]: s["n_steps"] for s in mem["states"]["taxonomy"]}
    assert {s["name"]: s["n_steps"] for s in part["states"]["taxonomy"]} == mem_tax
    assert part["certificate"]["decision"] in ("accept", "partial", "reject")
    assert part["settings"]["engine"] == engine.name and part["source"]["partitions"] > 10
    html = render_html(part)
    assert "<svg" in html and "late_state" in html


def test_bootstrap_report_and_same_document_on_every_partitioning(corpus: dict[str, Path]) -> None:
    a = make_partitioned_report(corpus["jsonl"], bytes_per_partition=20_000, uncertainty="bootstrap", samples=60,
                                audit_options={"n_bootstrap": 19, "n_permutations": 0})
    b = make_partitioned_report(corpus["parquet"], uncertainty="bootstrap", samples=60,
                                audit_options={"n_bootstrap": 19, "n_permutations": 0})
    assert a["intervals"]["method"] == "bootstrap"
    for key in ("chain", "metrics", "intervals", "empirical", "states"):
        assert json.dumps(a[key], sort_keys=True) == json.dumps(b[key], sort_keys=True), key
    with pytest.raises(ValueError, match="bootstrap-full"):
        make_partitioned_report(corpus["parquet"], uncertainty="bootstrap-full")  # type: ignore[arg-type]


def test_report_cli_with_engine(tmp_path: Path, corpus: dict[str, Path]) -> None:
    out = tmp_path / "r.json"
    r = run_cli("report", str(corpus["parquet"]), "--engine", "local", "-o", str(out), "--samples", "100", "-q")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["source"]["engine"] == "local" and doc["intervals"]["method"] == "posterior"
    html = tmp_path / "r.html"
    r = run_cli("report", str(corpus["parquet"]), "--engine", "local",
                "-o", str(html), "--uncertainty", "bootstrap", "--samples", "60",
                "--fail-under", "r_inf>=0.99")
    assert r.returncode == 3, r.stderr  # the gate fails: exit 3, the report is still written
    assert html.read_text().startswith("<!DOCTYPE html>")
    for bad, msg in ((["--no-audit"], "drop --no-audit"), (["--uncertainty", "bootstrap-full"], "in memory"),
                     (["--reader", "canonical"], "convert other formats")):
        r = run_cli("report", str(corpus["parquet"]), "--engine", "local", "-o", str(tmp_path / "x.html"), *bad)
        assert r.returncode == 2 and msg in r.stderr, (bad, r.stderr)
