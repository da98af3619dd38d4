"""One interval per number: `fit`, `audit`, `report` and `metrics` on the chain `fit` saved print the same R∞ interval
(the saved chain carries its corpus's design effect and its interval settings), and `fit` learns the states `report`
learns (the fit half of split 0, with or without the audit)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_runner import run_cli

import tracetochain as tt
from tracetochain.exceptions import ChainValidationError

DEMO = tt.datasets.example_path()
MINI = "swebench-verified-mini-swe-agent-gemini-3-pro/swebench_results/20251118_gemini-3-pro-74pct"


def _r_inf_everywhere(tmp_path: Path, corpus: Path, *extra: str) -> dict[str, tuple[float, float]]:
    chain = tmp_path / "chain.json"
    out: dict[str, tuple[float, float]] = {}
    r = run_cli("fit", str(corpus), *extra, "-o", str(chain), "--json")
    assert r.returncode == 0, r.stderr
    q = json.loads(r.stdout)["intervals"]["metrics"]["r_inf"]
    out["fit"] = (q["lower"], q["upper"])
    r = run_cli("metrics", str(chain), "--json")
    assert r.returncode == 0, r.stderr
    q = json.loads(r.stdout)["intervals"]["metrics"]["r_inf"]
    out["metrics"] = (q["lower"], q["upper"])
    report = tmp_path / "report.json"
    r = run_cli("report", str(corpus), *extra, "-o", str(report), "-q")
    assert r.returncode == 0, r.stderr
    q = json.loads(report.read_text())["intervals"]["metrics"]["r_inf"]
    out["report"] = (q["lower"], q["upper"])
    r = run_cli("audit", str(corpus), *extra, "--ks-samples", "49")
    assert r.returncode in (0, 4), r.stderr
    m = re.search(r"95% interval \[([0-9.]+), ([0-9.]+)\] \(posterior\)", r.stdout)
    assert m, r.stdout
    out["audit"] = (float(m.group(1)), float(m.group(2)))
    return out


def _assert_same(found: dict[str, tuple[float, float]]) -> None:
    lo, hi = found["fit"]
    for command, (a, b) in found.items():
        assert round(a, 4) == round(lo, 4) and round(b, 4) == round(hi, 4), (command, found)
    assert found["metrics"] == found["fit"] == found["report"]  # bit for bit where the JSON is read


@pytest.mark.slow
def test_demo_r_inf_interval_is_one_interval(tmp_path: Path) -> None:
    found = _r_inf_everywhere(tmp_path, DEMO)
    _assert_same(found)
    # the demo's tasks repeat: the interval is the tempered one, wider than the untempered posterior
    chain = tt.AbsorbingChain.from_json(tmp_path / "chain.json")
    assert chain.metadata["design_effect"] > 2.0
    untempered = tt.uncertainty.interval_summary(chain, samples=1000, design_effect=1.0)["metrics"]["r_inf"]
    lo, hi = found["fit"]
    assert untempered["upper"] - untempered["lower"] < 0.8 * (hi - lo)


def test_fit_and_report_learn_the_same_states(tmp_path: Path) -> None:
    args = ("--states", "ward", "--vocabulary", "chat")
    r = run_cli("fit", str(DEMO), *args, "--json", "--uncertainty", "none")
    assert r.returncode == 0, r.stderr
    fit_states = json.loads(r.stdout)["chain"]["state_names"] if "chain" in json.loads(r.stdout) else \
        [s["name"] for s in json.loads(r.stdout)["states"]]
    report = tmp_path / "r.json"
    r = run_cli("report", str(DEMO), *args, "-o", str(report), "-q", "--no-audit", "--uncertainty", "none")
    assert r.returncode == 0, r.stderr
    assert json.loads(report.read_text())["chain"]["state_names"] == fit_states


def test_metrics_says_why_when_the_fit_interval_was_a_bootstrap(tmp_path: Path) -> None:
    chain = tmp_path / "chain.json"
    r = run_cli("fit", str(DEMO), "-o", str(chain), "--uncertainty", "bootstrap", "--samples", "100", "-q")
    assert r.returncode == 0, r.stderr
    r = run_cli("metrics", str(chain))
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if "intervals:" in x)
    assert "design effect" in line and "trace-bootstrap" in line


def test_a_bad_saved_design_effect_is_refused(tmp_path: Path) -> None:
    chain = tmp_path / "chain.json"
    assert run_cli("fit", str(DEMO), "-o", str(chain), "-q").returncode == 0
    doc = json.loads(chain.read_text())
    doc["metadata"]["design_effect"] = 0.2
    chain.write_text(json.dumps(doc))
    with pytest.raises(ChainValidationError, match="design_effect"):
        tt.AbsorbingChain.from_json(chain)
    r = run_cli("metrics", str(chain))
    assert r.returncode != 0 and "metadata.design_effect" in r.stderr


@pytest.mark.slow
def test_swe_bench_r_inf_interval_is_one_interval(tmp_path: Path, shared_data: Path) -> None:
    if not (shared_data / MINI).exists():
        pytest.skip(f"{MINI} is not in the shared data")
    _assert_same(_r_inf_everywhere(tmp_path, shared_data / MINI, "--states", "categorical", "--vocabulary", "shell"))


@pytest.mark.slow
def test_fit_prints_the_step_budgets_interval(tmp_path: Path) -> None:
    """The summary computes the step budget's interval with every other number's: `fit` prints it beside the point."""
    chain = tmp_path / "chain.json"
    r = run_cli("fit", str(DEMO), "-o", str(chain), "--json")
    assert r.returncode == 0, r.stderr
    q = json.loads(r.stdout)["intervals"]["metrics"]["step_budget"]["exact"]
    shown = run_cli("fit", str(DEMO), "-o", str(chain), "--force")
    assert shown.returncode == 0, shown.stderr
    want = f"steps to within 0.01 of R∞  {q['point']:.0f} [{q['lower']:.0f}, {q['upper']:.0f}]"
    assert want in shown.stdout + shown.stderr, (want, shown.stdout)


def test_the_printed_fit_leaves_out_the_bound_it_does_not_show(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prop. 8's bound over the draws (an eigendecomposition of each) is computed for `--json`, which carries it, and
    not for the printed summary, which shows the bound's point only; the printed figures are the same either way."""
    from tracetochain.numerics.batched import ChainBatch

    calls: list[int] = []
    real = ChainBatch._eigenvector_condition

    def counted(self: ChainBatch) -> object:
        calls.append(self.size)
        return real(self)

    monkeypatch.setattr(ChainBatch, "_eigenvector_condition", counted)
    shown = run_cli("fit", str(DEMO))
    assert shown.returncode == 0, shown.stderr
    assert calls == [], "the printed summary drew the bound's interval"
    assert "steps to within" in shown.stdout
    r = run_cli("fit", str(DEMO), "--json")
    assert r.returncode == 0, r.stderr
    budget = json.loads(r.stdout)["intervals"]["metrics"]["step_budget"]
    assert set(budget) == {"exact", "prop8_bound", "kappa"} and calls
