"""Regression tests for the second attack pass outside the live service (N13, N15, N20–N22, N28).

Each reproduction ends in a located ``error:`` line (exit 2), a counted skip or a right answer — never an
``internal error``, never a warning or a worker traceback on the user's terminal.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import numpy as np
import pytest
from cli_runner import Run, run_cli
from test_attack_report import error_line, write_jsonl

from tracetochain.numerics.horizon import spectral_radius
from tracetochain.numerics.rewards import retry_cost
from tracetochain.traces import TraceTable


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    monkeypatch.chdir(tmp_path)
    return lambda *args, stdin=None: run_cli(*args, input=stdin)


def corpus(n: int = 30, extra_at: dict[str, dict[str, object]] | None = None) -> list[dict[str, object]]:
    """Two steps per trace, alternating outcomes; ``extra_at={"3": {...}}`` adds fields to trace 3's steps."""
    out = []
    for t in range(n):
        for i in range(2):
            rec: dict[str, object] = {"trace_id": f"t{t}", "step_idx": i, "state": "ab"[i],
                                      "outcome": "success" if t % 2 else "failure", "t_start": 1.7e9 + t + i}
            rec.update((extra_at or {}).get(str(t), {}))
            out.append(rec)
    return out


# ------------------------------------------------------------------------------------------------ N13
def test_n13_spectral_radius_of_zero_and_nilpotent_chains_above_600_states() -> None:
    assert spectral_radius(np.zeros((601, 601))) == 0.0
    path = np.diag(np.full(699, 0.5), k=1)  # states labelled by position: acyclic, nilpotent
    t = time.monotonic()
    assert spectral_radius(path) == 0.0
    assert time.monotonic() - t < 10
    # Self-loops and a cycle block: the largest of the blocks' radii (checked against the dense solve).
    rng = np.random.default_rng(0)
    Q = np.zeros((650, 650))
    Q[np.arange(600), np.arange(600)] = rng.uniform(0, 0.3, 600)
    block = rng.uniform(0, 1, (50, 50))
    Q[600:, 600:] = 0.9 * block / block.sum(axis=1, keepdims=True)
    Q[0, 600] = 0.1  # a path into the block changes nothing
    assert spectral_radius(Q) == pytest.approx(float(np.max(np.abs(np.linalg.eigvals(Q)))), rel=1e-9)


def test_n13_fit_with_601_one_step_states_and_no_intervals(tmp_path: Path, run: Run) -> None:
    write_jsonl(tmp_path / "s601.jsonl", [{"trace_id": f"t{t}", "step_idx": 0, "state": f"st{t}",
                                           "outcome": "success" if t % 2 else "failure"} for t in range(601)])
    r = run("metrics", "--help")
    assert r.returncode == 0
    from tracetochain.pipeline import fit_chain

    chain = fit_chain(TraceTable.read(tmp_path / "s601.jsonl")).chain
    assert chain.spectral_radius() == 0.0


# ------------------------------------------------------------------------------------------------ N15
def _exporter():
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_n15_step_on_async_functions_covers_the_awaited_work_and_its_error() -> None:
    import tracetochain.instrument as tt

    provider, exporter = _exporter()

    @tt.step("search", provider=provider)
    async def search(q: str) -> str:
        await asyncio.sleep(0.05)
        raise RuntimeError("boom")

    @tt.step("fetch", provider=provider)
    async def fetch(q: str) -> str:
        await asyncio.sleep(0.05)
        return q

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(search("x"))
    assert asyncio.run(fetch("y")) == "y"
    spans = {s.name: s for s in exporter.get_finished_spans()}
    failed, ok = spans["execute_tool search"], spans["execute_tool fetch"]
    assert (failed.end_time - failed.start_time) / 1e9 >= 0.04
    assert failed.status.status_code.name == "ERROR" and failed.attributes["error.type"] == "RuntimeError"
    assert (ok.end_time - ok.start_time) / 1e9 >= 0.04 and "error.type" not in ok.attributes


def test_n15_step_on_generator_functions_is_refused_at_decoration() -> None:
    import tracetochain.instrument as tt

    def gen():
        yield 1

    async def agen():
        yield 1

    for fn in (gen, agen):
        with pytest.raises(TypeError, match="generator function"):
            tt.step("tool")(fn)


# ------------------------------------------------------------------------------------------------ N20
@pytest.mark.parametrize("value", [1e300, -1e300, 1.7e12, -6.2e10])
def test_n20_absurd_times_are_refused_naming_the_field(tmp_path: Path, run: Run, value: float) -> None:
    write_jsonl(tmp_path / "a.jsonl", corpus(extra_at={"3": {"t_start": value}}))
    line = error_line(run("monitor", "a.jsonl", "--by", "time"))
    assert "a.jsonl:7" in line and "t_start" in line and "epoch seconds" in line, line
    r = run("fit", "a.jsonl", "--on-error", "skip", "--uncertainty", "none", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ingest"]["n_traces_skipped"] == 1


def test_n20_relative_times_still_pass(tmp_path: Path) -> None:
    t = TraceTable.from_records(corpus(extra_at={"3": {"t_start": -5.0}, "4": {"t_start": 0.0}}))
    assert t.n_traces == 30


# ------------------------------------------------------------------------------------------------ N21
def test_n21_huge_costs_are_refused_at_ingest(tmp_path: Path, run: Run) -> None:
    for field, value in (("cost_usd", 1e300), ("tokens_in", 10**18)):
        write_jsonl(tmp_path / "c.jsonl", corpus(extra_at={"2": {field: value}}))
        line = error_line(run("fit", "c.jsonl", "--uncertainty", "none"))
        assert "c.jsonl:5" in line and field in line and "1e+15" in line, line
    mean, var = retry_cost(1.0, 1e300, 1.0, 1.0, 0.5)
    assert var is None and mean == pytest.approx(1e300)


# ------------------------------------------------------------------------------------------------ N22
@pytest.mark.slow
def test_n22_without_traces_the_cost_report_says_why_observed_is_missing() -> None:
    from tracetochain.costs import cost_report
    from tracetochain.pipeline import fit_chain

    recs = corpus(extra_at={str(t): {"cost_usd": 0.01 * (t + 1)} for t in range(30)})
    traces = TraceTable.from_records(recs)
    chain = fit_chain(traces).chain
    with_traces = cost_report(chain, traces=traces)
    without = cost_report(chain)
    assert "observed" in with_traces["metrics"]["cost_usd"]
    assert "observed" not in without["metrics"]["cost_usd"]
    assert any("observed cost per success" in n for n in without["notes"])


# ------------------------------------------------------------------------------------------------ N28
def test_n28_all_censored_cost_per_success_interval_is_undefined() -> None:
    from tracetochain.costs import cost_report
    from tracetochain.pipeline import fit_chain

    recs = [{**r, "outcome": "censored", "cost_usd": 0.5} for r in corpus()]
    traces = TraceTable.from_records(recs)
    doc = cost_report(fit_chain(traces).chain, traces=traces, samples=200)
    iv = doc["metrics"]["cost_usd"]["intervals"]["per_success"]
    assert iv["lower"] is None and iv["upper"] is None and "no trace succeeded" in iv["undefined"]


def test_n28_tau_bench_with_a_string_traj_is_named_correctly(tmp_path: Path) -> None:
    from tracetochain.readers.tau_bench import TauBenchReader

    path = tmp_path / "results.json"
    path.write_text(json.dumps([{"task_id": 1, "reward": 1.0, "traj": "not a list", "info": {}}]))
    refusal = TauBenchReader().sniff(path)
    assert "traj is a string" in str(getattr(refusal, "reason", refusal)), refusal


@pytest.mark.slow
def test_n28_model_families_print_no_numerical_warnings(tmp_path: Path, run: Run) -> None:
    write_jsonl(tmp_path / "m.jsonl", [
        {"trace_id": f"t{t}", "step_idx": i, "state": ["plan", "act", "check"][(t * 7 + i) % 3],
         "outcome": "success" if (t % 3) else "failure"} for t in range(60) for i in range(1 + t % 4)])
    r = run("fit", "m.jsonl", "--model", "mixture", "--uncertainty", "none")
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr, r.stderr


def test_n28_dask_workers_logs_are_silenced() -> None:
    import inspect

    from tracetochain.engines import dask as dask_engine

    assert '"silence_logs": logging.CRITICAL' in inspect.getsource(dask_engine.DaskEngine._start)
