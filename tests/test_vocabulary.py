"""One vocabulary (issue 28): one outcome coding, one name per concept, old spellings warn for one release.

The names (docs/architecture.md): ``samples`` counts replicates, ``level`` is a significance level, ``intervals``
says how intervals are made, ``r_inf`` keys R∞, :class:`~tracetochain.OutcomeCode` codes outcomes. One test per
deprecated alias: the old spelling warns, names the new one, and gives the same result.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.traces import Outcome, OutcomeCode

SRC = Path(tt.__file__).resolve().parent
OLD = pytest.warns(DeprecationWarning)


@pytest.fixture(scope="module")
def traces() -> tt.TraceTable:
    return tt.datasets.simulate_traces(tt.datasets.notation_chain(), 120, seed=5)


@pytest.fixture(scope="module")
def chain(traces: tt.TraceTable) -> tt.AbsorbingChain:
    return tt.ChainEstimator().fit(traces).fetch_model()


def _warns(new: str) -> pytest.WarningsChecker:
    return pytest.warns(DeprecationWarning, match=rf"use \.?{new}")


# ------------------------------------------------------------------------------------------------ outcome codes
def test_outcome_code_is_the_position_in_outcome(traces: tt.TraceTable) -> None:
    assert [c.name for c in OutcomeCode] == [o.name for o in Outcome]
    assert [int(c) for c in OutcomeCode] == [0, 1, 2, 3]
    assert tt.OutcomeCode is OutcomeCode
    codes = traces.outcomes()
    assert set(np.unique(codes)) <= set(OutcomeCode)
    assert int((codes == OutcomeCode.SUCCESS).sum()) == traces.outcome_counts()["success"]


def _outcome_literals(tree: ast.AST) -> list[int]:
    """Lines that bind an outcome name to an integer, or compare ``.outcomes()`` with a bare integer."""
    names = {"SUCCESS", "FAILURE", "CENSORED", "INVALID"}
    found: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = [t for tgt in node.targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])]
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            if any(isinstance(t, ast.Name) and t.id.lstrip("_") in names for t in targets) and any(
                    isinstance(v, ast.Constant) and isinstance(v.value, int) for v in values):
                found.append(node.lineno)
        if isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and isinstance(c.value, int)
                                                 for c in node.comparators):
            left = node.left
            while isinstance(left, ast.Subscript):
                left = left.value
            if isinstance(left, ast.Call) and isinstance(left.func, ast.Attribute) and left.func.attr == "outcomes":
                found.append(node.lineno)
    return found


def test_no_module_codes_outcomes_itself() -> None:
    offenders = {}
    for path in SRC.rglob("*.py"):
        if path.name == "_outcome.py":
            continue
        lines = _outcome_literals(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            offenders[path.relative_to(SRC).as_posix()] = lines
    assert not offenders, f"use tracetochain._outcome (OutcomeCode) instead of integers: {offenders}"


# ------------------------------------------------------------------------------------------------ R∞'s key
def test_r_inf_is_one_key_in_python(traces: tt.TraceTable) -> None:
    cert = tt.analyze(traces, intervals=None, n_bootstrap=19, n_permutations=19).certificate
    assert cert is not None
    assert cert.status("r_inf") == cert.status("R_inf") and cert.rests_on("r_inf") == ("r_inf",)
    doc = cert.to_dict()
    assert "R_inf" in str(doc)  # the published output name of schema 3 stays


# ------------------------------------------------------------------------------------------------ replicate counts
def test_analyze_n_samples(traces: tt.TraceTable) -> None:
    new = tt.analyze(traces, audit=False, samples=60, seed=1)
    with _warns("samples="):
        old = tt.analyze(traces, audit=False, n_samples=60, seed=1)
    assert old.ensemble is not None and new.ensemble is not None
    assert old.ensemble.n_samples == new.ensemble.n_samples == 60
    with pytest.raises(TypeError, match="both samples= and"):
        tt.analyze(traces, audit=False, samples=60, n_samples=60)


def test_board_n_samples(traces: tt.TraceTable) -> None:
    from tracetochain.analysis._board import board

    with _warns("samples="), pytest.raises(ValueError):
        board(traces, by="no-such-field", n_samples=60)  # the keyword is mapped before the call fails on `by`


def test_dirichlet_posterior_n_samples(chain: tt.AbsorbingChain) -> None:
    from tracetochain.uncertainty import DirichletPosterior

    with _warns("samples="):
        post = DirichletPosterior(n_samples=70, seed=2)
    assert post.samples == 70 and post.get_params()["samples"] == 70
    with _warns(".samples"):
        assert post.n_samples == 70
    new = DirichletPosterior(samples=70, seed=2).fit(chain).fetch_model()
    old = post.fit(chain).fetch_model()
    assert old.ensemble.stats("r_inf").mean == new.ensemble.stats("r_inf").mean


def test_trace_bootstrap_n_resamples(traces: tt.TraceTable) -> None:
    from tracetochain.uncertainty import TraceBootstrap

    with _warns("samples="):
        boot = TraceBootstrap(n_resamples=20, seed=3)
    assert boot.samples == 20
    with _warns(".samples"):
        assert boot.n_resamples == 20
    assert boot.fit(traces).fetch_model().n_samples == 20


def test_partitioned_n_resamples(traces: tt.TraceTable, tmp_path: Path) -> None:
    from tracetochain.partitioned import audit_partitioned, bootstrap_partitioned

    path = tmp_path / "t.parquet"
    traces.write(path)
    with _warns("samples="):
        _, ens = bootstrap_partitioned(path, n_resamples=20, seed=1)
    assert ens.n_samples == 20
    with _warns("samples="):
        res = audit_partitioned(path, n_resamples=20, audit=False, seed=1)
    assert res.ensemble is not None and res.ensemble.n_samples == 20


def test_homogeneity_test_n_replicates(traces: tt.TraceTable) -> None:
    from tracetochain.audit import homogeneity_test

    a, b = traces.select_traces(np.arange(60)), traces.select_traces(np.arange(60, 120))
    new = homogeneity_test(a, b, samples=30, seed=1)
    with _warns("samples="):
        old = homogeneity_test(a, b, n_replicates=30, seed=1)
    assert old.p_value == new.p_value


# ------------------------------------------------------------------------------------------------ interval method
def test_compare_method(traces: tt.TraceTable) -> None:
    from tracetochain.compare import compare

    a, b = traces.select_traces(np.arange(60)), traces.select_traces(np.arange(60, 120))
    new = compare(a, b, intervals="posterior", samples=60)
    with _warns("intervals="):
        old = compare(a, b, method="posterior", samples=60)
    assert old.method == new.method == "posterior" and old.delta_r_inf_interval == new.delta_r_inf_interval


def test_interval_summary_method(chain: tt.AbsorbingChain) -> None:
    from tracetochain.uncertainty import interval_summary

    new = interval_summary(chain, intervals="posterior", samples=60)
    with _warns("intervals="):
        old = interval_summary(chain, method="posterior", samples=60)
    assert old["method"] == new["method"] == "posterior"


# ------------------------------------------------------------------------------------------------ level
def test_monitor_alpha(traces: tt.TraceTable) -> None:
    from tracetochain.monitor import monitor

    new = monitor(traces, window=60, level=0.1)
    with _warns("level="):
        old = monitor(traces, window=60, alpha=0.1)
    assert old.level == new.level == 0.1 and old.threshold == new.threshold
    with _warns(".level"):
        assert old.alpha == 0.1
    doc = old.to_dict()
    assert doc["level"] == doc["alpha"] == 0.1  # "alpha" is schema 1's published key


def test_live_analysis_alpha() -> None:
    from tracetochain.serve import WindowSpec
    from tracetochain.serve._live import LiveAnalysis

    with _warns("level="):
        live = LiveAnalysis(WindowSpec("count", 100.0), alpha=0.01)
    assert live.level == 0.01
    with _warns(".level"):
        assert live.alpha == 0.01


def test_cost_report_method(chain: tt.AbsorbingChain) -> None:
    from tracetochain.costs import cost_report

    new = cost_report(chain, intervals=None)
    with _warns("intervals="):
        old = cost_report(chain, method=None)
    assert old == new


def test_informative_states_alpha() -> None:
    from tracetochain.states import InformativeStates

    with _warns("level="):
        est = InformativeStates(alpha=0.05)
    assert est.level == 0.05 and InformativeStates().level == 0.01
    with _warns(".level"):
        assert est.alpha == 0.05


def test_serve_config_alpha(tmp_path: Path) -> None:
    from tracetochain.serve import ServeConfig

    with _warns("level="):
        config = ServeConfig(store=tmp_path / "s.db", alpha=0.02)
    assert config.level == 0.02
    with _warns(".level"):
        assert config.alpha == 0.02
    with pytest.raises(ValueError, match="level must be"):
        ServeConfig(store=tmp_path / "s.db", level=2.0).check()


def test_cli_alpha_is_the_old_level(traces: tt.TraceTable, tmp_path: Path) -> None:
    from tests.cli_runner import run_cli

    path = tmp_path / "t.jsonl"
    traces.write(path)
    new = run_cli("monitor", str(path), "--window", "60", "--level", "0.1", "--jsonl")
    old = run_cli("monitor", str(path), "--window", "60", "--alpha", "0.1", "--jsonl")
    assert new.returncode == old.returncode and new.stdout == old.stdout
    assert re.search(r"--alpha.*deprecated|deprecated.*--alpha", old.stderr, re.S), old.stderr
