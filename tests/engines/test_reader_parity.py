"""One core, every reader (issue 16): for a corpus in the format of **each registered reader**, the analysis is the
same, bit for bit — chain, counts, certificate and intervals — whether the traces are read into memory first, or the
path is handed to ``analyze`` with ``engine="local"`` or a Dask cluster; so are the report document, ``compare``
and ``tracetochain audit --json`` with and without ``--engine``.

The reader list comes from the registry: a reader registered without a corpus in ``reader_corpora.CORPORA`` fails
``test_every_registered_reader_has_a_corpus`` (by name), it is never skipped. Canonical JSONL and Parquet are cut
into many partitions; every other format is read on the driver by its reader and travels as one partition.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli
from engine_parity import FAST, same, without_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reader_corpora import CORPORA, Corpus, make_corpus

import tracetochain as tt
from tracetochain.analysis import analyze
from tracetochain.compare import compare
from tracetochain.engines import Engine
from tracetochain.readers import available_readers
from tracetochain.report import build_report

REGISTERED = list(available_readers())
CASES = [(reader, variant) for reader in REGISTERED for variant in CORPORA.get(reader, {"(none)": None})]
SIMULATED = [(r, v) for r, v in CASES if r in CORPORA and v != "fixture"]
IDS = [f"{r}-{v}" for r, v in CASES]


def _corpus(reader: str, variant: str, root: Path, **kw: Any) -> Corpus:
    if reader not in CORPORA:
        pytest.fail(f"reader {reader!r} is registered but has no corpus in tests/engines/reader_corpora.py (CORPORA): "
                    "add a writer (or a fixture file) so the engines are checked on its format")
    return make_corpus(reader, variant, root, **kw)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Corpus]:
    """One corpus per (reader, variant) for the module (written once: the engine tests share them)."""
    root = tmp_path_factory.mktemp("readers")
    return {(r, v): make_corpus(r, v, root / f"{r}-{v}") for r, variants in CORPORA.items() for v in variants}


def test_every_registered_reader_has_a_corpus() -> None:
    missing = [r for r in REGISTERED if r not in CORPORA]
    assert not missing, f"readers without a corpus in tests/engines/reader_corpora.py: {missing}"
    assert not set(CORPORA) - set(REGISTERED), "a corpus for a reader that is no longer registered"


@pytest.mark.slow
@pytest.mark.parametrize(("reader", "variant"), CASES, ids=IDS)
def test_memory_local_and_dask_give_the_same_analysis_for_every_reader(
        reader: str, variant: str, engine: Engine, corpora: dict[tuple[str, str], Corpus], tmp_path: Path) -> None:
    corpus = corpora.get((reader, variant)) or _corpus(reader, variant, tmp_path)
    traces = tt.read_traces(corpus.path, **corpus.options)
    assert traces.report.format == reader  # the corpus is in the format it stands for (detected, not forced)
    kw: dict[str, Any] = {"intervals": "bootstrap", "samples": 25, "seed": 7, **FAST}
    mem = analyze(traces, **kw)
    eng = analyze(corpus.path, engine=engine, reader_options=corpus.options, partition_options=corpus.partitions, **kw)
    # the engine read it with the same reader (a JSONL or folder in another format is not taken for canonical rows)
    assert eng.source["format"] == reader
    if corpus.partitions:
        assert eng.source["n_partitions"] > 3
    same(mem, eng)
    assert mem.source["n_traces"] == eng.source["n_traces"] == traces.n_traces


def test_posterior_intervals_and_learned_states_on_chat_logs(corpora: dict[tuple[str, str], Corpus]) -> None:
    """The other interval method and learned states (fitted on the fit half), on a format read by its reader."""
    corpus = corpora["tau2-bench", "json"]
    traces = tt.read_traces(corpus.path)
    opts = {"features": "kind,tool", "k_min": 2, "k_max": 3}
    mem = analyze(traces, states="ward", state_options=opts, samples=40, seed=2, **FAST)
    eng = analyze(corpus.path, engine="local", states="ward", state_options=opts, samples=40, seed=2, **FAST)
    assert mem.state_model is not None
    same(mem, eng)


@pytest.mark.parametrize(("reader", "variant"), [("openai-messages", "jsonl"), ("otlp", "jsonl"),
                                                 ("langfuse", "export")])
def test_the_report_document_is_the_same(reader: str, variant: str, corpora: dict[tuple[str, str], Corpus]) -> None:
    corpus = corpora[reader, variant]
    a = build_report(analyze(tt.read_traces(corpus.path, **corpus.options), samples=60, seed=1, **FAST), horizon=20)
    b = build_report(analyze(corpus.path, engine="local", reader_options=corpus.options, samples=60, seed=1, **FAST),
                     horizon=20)
    for key in ("chain", "metrics", "intervals", "certificate", "empirical", "output_status", "bottlenecks",
                "states", "thin_evidence"):
        da, db = a[key], b[key]
        if key in ("certificate", "intervals"):
            da, db = without_settings(da), without_settings(db)
        assert json.dumps(da, sort_keys=True) == json.dumps(db, sort_keys=True), key


@pytest.mark.parametrize(("reader", "variant"), [("tau2-bench", "json"), ("mast-csv", "csv"), ("reflexion", "txt")])
def test_compare_is_the_same_for_other_formats(reader: str, variant: str, engine: Engine, tmp_path: Path) -> None:
    a = make_corpus(reader, variant, tmp_path / "a", n_traces=90, seed=5)
    b = make_corpus(reader, variant, tmp_path / "b", n_traces=75, seed=9)
    mem = compare(tt.read_traces(a.path), tt.read_traces(b.path), samples=40, seed=4)
    part = compare(a.path, b.path, engine=engine, samples=40, seed=4)
    assert json.dumps(mem.to_dict(), sort_keys=True) == json.dumps(part.to_dict(), sort_keys=True)


@pytest.mark.slow
@pytest.mark.parametrize(("reader", "variant"), CASES, ids=IDS)
def test_cli_audit_gives_one_verdict_with_and_without_engine(reader: str, variant: str,
                                                             corpora: dict[tuple[str, str], Corpus],
                                                             tmp_path: Path) -> None:
    corpus = corpora.get((reader, variant)) or _corpus(reader, variant, tmp_path)
    options = [arg for key, value in corpus.options.items() for arg in ("-O", f"{key}={value}")]
    args = ["audit", str(corpus.path), *options, "--json", "--ks-samples", "19", "--samples", "0"]
    a, b = run_cli(*args), run_cli(*args, "--engine", "local")
    assert a.returncode == 0, a.stderr
    assert b.returncode == 0, b.stderr
    da, db = json.loads(a.stdout), json.loads(b.stdout)
    for doc in (da, db):
        assert doc.pop("settings")["audit"]["n_bootstrap"] == 19
    assert da == db


@pytest.mark.slow
@pytest.mark.parametrize(("reader", "variant"), SIMULATED, ids=[f"{r}-{v}" for r, v in SIMULATED])
@settings(max_examples=3, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n_traces=st.integers(20, 80), cut=st.integers(1, 4))
def test_random_corpora_random_seeds(reader: str, variant: str, tmp_path: Path, seed: int, n_traces: int,
                                     cut: int) -> None:
    """Random corpus (size and chain), random analysis seed and, for canonical JSONL/Parquet, random partitions."""
    corpus = make_corpus(reader, variant, tmp_path / f"{seed}-{n_traces}-{cut}", n_traces=n_traces, seed=seed)
    partitions = {k: max(1, v // cut) for k, v in corpus.partitions.items()}
    kw: dict[str, Any] = {"intervals": "bootstrap", "samples": 20, "seed": seed, **FAST}
    mem = analyze(tt.read_traces(corpus.path, **corpus.options), **kw)
    eng = analyze(corpus.path, engine="local", reader_options=corpus.options, partition_options=partitions, **kw)
    same(mem, eng)


@pytest.mark.parametrize("path", [
    "otlp/openinference.jsonl",  # a .jsonl file of spans, recognised without options
    "swe_agent/mini_run",  # a folder of trajectories
])
def test_an_engine_reads_with_the_reader_detection_picks(path: str) -> None:
    """Regression: with an engine, any ``.jsonl`` file and any folder used to be taken for canonical rows (and
    refused: "required field 'trace_id' is missing", "the directory holds no trace files"), while the same path read
    without an engine went to its own reader."""
    from reader_corpora import FIXTURES

    src = FIXTURES / path
    mem = analyze(src, intervals=None, **FAST)
    eng = analyze(src, engine="local", intervals=None, **FAST)
    assert eng.source["format"] == mem.source["format"] == tt.readers.detect_format(src) != "canonical"
    same(mem, eng)
