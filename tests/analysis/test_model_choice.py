"""Model choice inside the one analysis: ``analyze(model=...)``, its certificate, the report section and ``--model``.

The default (``model="markov"``) must be the analysis it always was; ``auto`` must keep the first-order chain on
first-order data and find the mixture on data from two classes of tasks; the chosen model's certificate must rest on
its own held-out checks (never on the first-order chain's, never silently passed).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import tracetochain as tt
from tracetochain.analysis import AnalysisResult, analyze
from tracetochain.analysis._models import SCREEN_STOP_AFTER, certificate_stop_after
from tracetochain.audit._timing import TimingResult
from tracetochain.models.passk import PassKTest
from tracetochain.report import build_report, render_html
from tracetochain.report._markdown import render_markdown

#: Fewer sizes and replicates than the defaults: the same code paths, in seconds.
QUICK = {"n_bootstrap": 49, "n_permutations": 49, "trials_permutations": 199}
SIZES = {"sizes": {"hmm": (2,), "mixture": (2, 3), "lifted": (2,), "tasks": (2,)}}


def class_chains() -> tuple[tt.AbsorbingChain, tt.AbsorbingChain]:
    """Two chains on three states with different dynamics and success (R∞ about 0.63 and 0.27)."""
    a = tt.AbsorbingChain([[0.1, 0.7, 0.0], [0.0, 0.1, 0.7], [0.0, 0.0, 0.2]], [0.05, 0.05, 0.7],
                          [0.15, 0.15, 0.1], 0, ["a", "b", "c"])
    b = tt.AbsorbingChain([[0.6, 0.1, 0.1], [0.5, 0.2, 0.0], [0.3, 0.3, 0.1]], [0.05, 0.1, 0.1],
                          [0.15, 0.2, 0.2], 0, ["a", "b", "c"])
    return a, b


def mixture_tasks(n_tasks: int, trials: int, seed: int, *, names: tuple[str, str, str] = ("a", "b", "c")
                  ) -> tt.TraceTable:
    """Tasks that each draw one of two classes, and ``trials`` runs of that class's chain per task."""
    rng = np.random.default_rng(seed)
    cls = rng.integers(0, 2, n_tasks)
    parts = []
    for which, chain in enumerate(class_chains()):
        tasks = np.flatnonzero(cls == which)
        sim = tt.datasets.simulate_traces(chain, tasks.size * trials, seed=int(rng.integers(2**31))).to_arrow()
        ids = sim.column("trace_id").to_pylist()
        order = {x: i for i, x in enumerate(dict.fromkeys(ids))}
        sim = sim.set_column(0, "trace_id", pa.array([f"{which}-{x}" for x in ids]))
        sim = sim.append_column("task_id", pa.array([f"task{tasks[order[x] // trials]}" for x in ids]))
        rename = dict(zip(("a", "b", "c"), names, strict=True))
        sim = sim.set_column(sim.column_names.index("state"), "state",
                             pa.array([rename[s] for s in sim.column("state").to_pylist()]))
        parts.append(sim)
    return tt.TraceTable.from_arrow(pa.concat_tables(parts), source="two classes of tasks")


@pytest.fixture(scope="module")
def first_order() -> tt.TraceTable:
    return tt.datasets.simulate_traces(tt.datasets.notation_chain(), 500, seed=0)


@pytest.fixture(scope="module")
def mixture_data() -> tt.TraceTable:
    return mixture_tasks(100, 4, seed=1)


@pytest.fixture(scope="module")
def mixture_result(mixture_data: tt.TraceTable) -> AnalysisResult:
    return analyze(mixture_data, model="auto", model_options=SIZES, samples=40, intervals="bootstrap", **QUICK)


# ------------------------------------------------------------------------------------------------ default
def test_default_is_the_first_order_analysis_unchanged(first_order: tt.TraceTable) -> None:
    plain = analyze(first_order, samples=200, **QUICK)
    named = analyze(first_order, model="markov", samples=200, **QUICK)
    assert plain.model_choice is None and named.model_choice is None
    assert plain.chain.to_dict() == named.chain.to_dict()
    assert plain.certificate is not None and named.certificate is not None
    assert plain.certificate.to_dict() == named.certificate.to_dict()
    assert plain.settings == named.settings and "model" not in plain.settings
    assert plain.settings["split_by"] == "trace"
    assert plain.intervals() == named.intervals()
    assert plain.metrics().to_dict() == tt.summarize(plain.chain).to_dict()
    assert plain.to_dict()["model_choice"] is None


def test_bad_model_names_and_options_are_refused(first_order: tt.TraceTable) -> None:
    with pytest.raises(ValueError, match="model must be one of"):
        analyze(first_order, model="hidden")
    with pytest.raises(TypeError, match="model_options"):
        analyze(first_order, model_options={"sizes": {}})
    with pytest.raises(ValueError, match="held-out splits"):
        analyze(first_order, model="auto", holdout=False)
    with pytest.raises(TypeError, match="unknown model option"):
        analyze(first_order, model="auto", model_options={"size": 2}, intervals=None, **QUICK)


def test_a_partitioned_corpus_is_refused_with_a_way_forward(tmp_path: Path, first_order: tt.TraceTable) -> None:
    path = first_order.write(tmp_path / "runs.jsonl")
    with pytest.raises(ValueError, match="without --engine"):
        analyze(path, engine="local", model="auto")


# ------------------------------------------------------------------------------------------------ auto
@pytest.mark.slow
def test_auto_keeps_the_first_order_chain_on_first_order_data(first_order: tt.TraceTable) -> None:
    res = analyze(first_order, model="auto", model_options=SIZES, intervals=None, **QUICK)
    plain = analyze(first_order, intervals=None, **QUICK)
    mc = res.model_choice
    assert mc is not None and mc.chosen == "markov" and mc.first_order
    assert "first-order chain is kept" in mc.reason
    shares = mc.to_dict()["stability"]  # how often the rule keeps it over resampled held-out traces
    assert shares and sum(shares.values()) == pytest.approx(1.0) and "markov" in shares
    # No task repeats: the same splits, so the result is the first-order analysis plus the table.
    assert res.chain.to_dict() == plain.chain.to_dict()
    assert res.certificate is not None and plain.certificate is not None
    assert res.certificate.to_dict() == plain.certificate.to_dict()
    baseline = mc.candidate("markov")
    assert baseline.chosen and baseline.layers == dict(plain.certificate.layers)
    others = [c for c in mc.candidates if c.checked and c.name != "markov"]
    assert others and all(c.layers["order"].status == "not_applicable" for c in others)
    assert {c.family for c in mc.candidates} >= {"markov", "mixture", "lifted", "hmm", "duration"}
    assert not any("was chosen by its held-out likelihood" in n for n in mc.notes)  # the analysis's own halves


@pytest.mark.slow
def test_auto_finds_the_mixture_and_certifies_it_with_its_own_checks(
        mixture_result: AnalysisResult) -> None:
    res = mixture_result
    mc = res.model_choice
    assert mc is not None and mc.family == "mixture" and not mc.first_order, mc.describe()
    name = mc.chosen
    # Two classes recovered (a larger mixture may keep a third class of negligible weight).
    weights = res.compiled.component_weights
    assert int(np.sum(weights > 0.05)) == 2, weights
    # Units of the choice are tasks (held out whole); the checks use the certificate's own halves (by trace).
    assert mc.grouped_by == "task" and mc.splits["choice_by"] == "task"
    assert res.settings["split_by"] == "trace" and mc.splits["by"] == "trace"
    assert mc.trials == "task"
    # The analysis's chain is the compiled mixture (one block of the three observed states per class).
    assert res.chain.n_states == 3 * weights.size and res.chain.metadata["model"]["name"] == name
    assert res.compiled.observed_names == ("a", "b", "c")
    cert = res.certificate
    assert cert is not None and cert.settings["model"] == name
    # Every layer comes from the mixture's held-out checks …
    timing = cert.layers["timing"]
    assert all(isinstance(t, TimingResult) and t.mode == "monte-carlo" for t in timing.detail)
    assert name in timing.message
    assert all(isinstance(t, PassKTest) and t.trials == "task" for t in cert.layers["trials"].detail)
    assert name in cert.layers["r_inf"].message
    # … the order test does not apply to a model of task classes, and says so (never "pass") …
    order = cert.layers["order"]
    assert order.status == "not_applicable" and order.reason == "model_has_memory" and order.p_value is None
    assert cert.status("whatif") == "untested" and cert.status("sensitivity") == "untested"
    # … and the table's row of the choice is its certificate.
    row = mc.candidate(name)
    assert row.chosen and {k: (v.status, v.p_value, v.p_adjusted) for k, v in row.layers.items()} == \
        {k: (v.status, v.p_value, v.p_adjusted) for k, v in cert.layers.items()}
    # The data come from the model: its layers pass, R(d) and pass^k are certified; the first-order chain's
    # trials layer rejects (tasks differ), so the choice matters.
    assert cert.status("R(d)") == "certified" and cert.status("pass^k") == "certified"
    assert mc.candidate("markov").layers["trials"].status == "reject"
    # The choice's timing null stops sequentially (certificate_stop_after): each split drew at most its replicates
    # and every split that stopped early has the Besag–Clifford p = h / l.
    h = timing.statistics["stop_after"]
    assert h == certificate_stop_after(49) == 10
    assert all(n <= timing.statistics["n_replicates"] for n in timing.statistics["replicates_drawn"])
    for t in timing.detail:
        if "sequential" in t.settings:
            assert t.p_value == h / t.settings["sequential"]["replicates_drawn"]


@pytest.mark.slow
def test_the_chosen_model_gives_pass_k_and_intervals(mixture_result: AnalysisResult) -> None:
    res = mixture_result
    compiled = res.compiled
    m = res.metrics(ks=(1, 2, 3, 4))
    assert m.pass_hat_k == pytest.approx(list(compiled.pass_hat_k([1, 2, 3, 4])))
    w, r = compiled.component_weights, compiled.component_r_inf()
    assert m.pass_hat_k[2] == pytest.approx(float(np.sum(w * r**3)))
    assert m.pass_hat_k[2] > res.chain.r_inf ** 3  # tasks differ: Jensen
    iv = res.intervals(horizon=20, ks=(1, 2, 3))
    assert iv is not None and iv["method"] == "bootstrap (model refits)"
    q = iv["metrics"]["r_inf"]
    assert q["lower"] < q["point"] < q["upper"] and q["n_samples"] == 40
    assert iv["metrics"]["states"] == [] and "expanded states" in iv["unavailable"]["states"]
    assert len(iv["metrics"]["reliability"]["lower"]) == 21
    k3 = iv["metrics"]["pass_hat_k"]["3"]
    assert k3["lower"] <= m.pass_hat_k[2] <= k3["upper"]
    json.dumps(res.to_dict(), allow_nan=False)


@pytest.mark.slow
def test_a_named_family_is_kept_at_its_best_size(first_order: tt.TraceTable) -> None:
    res = analyze(first_order, model="lifted", model_options={"sizes": {"lifted": (2, 3)}}, intervals=None,
                  **QUICK)
    mc = res.model_choice
    assert mc is not None and mc.requested == "lifted" and mc.family == "lifted"
    assert mc.chosen in ("lifted(k=2)", "lifted(k=3)")
    assert {c.name for c in mc.candidates} == {"markov", "lifted(k=2)", "lifted(k=3)"}
    assert "lifted family was asked for" in mc.reason
    assert res.certificate is not None and res.certificate.settings["model"] == mc.chosen
    assert res.certificate.layers["trials"].status == "not_applicable"  # no task repeats
    # the certificate of a chosen family says that its choice saw the same held-out halves (docs/statistics.md)
    assert sum(f"{mc.chosen} was chosen by its held-out likelihood on the same halves" in n for n in mc.notes) == 1


# ------------------------------------------------------------------------------------------------ report
@pytest.mark.slow
def test_report_has_the_model_choice_section_escaped() -> None:
    hostile = ("<script>alert(1)</script>", "a|`@here`", "[x](http://e.vil)")
    traces = mixture_tasks(60, 4, seed=5, names=hostile)
    res = analyze(traces, model="mixture", model_options={"sizes": {"mixture": (2,)}}, intervals=None, **QUICK)
    doc = build_report(res, horizon=20, ks=(1, 2, 3))
    section = doc["model_choice"]
    assert section["chosen"] == "mixture(C=2)" and section["why"].startswith("mixture(C=2) is used")
    names = [c["name"] for c in section["candidates"]]
    assert names[0] == "markov" and "mixture(C=2)" in names
    chosen = next(c for c in section["candidates"] if c["chosen"])
    assert set(chosen["layers"]) == {"r_inf", "timing", "order", "trials"}
    assert chosen["heldout_loglik_se"] > 0 and chosen["n_parameters"] > 0
    json.dumps(doc, allow_nan=False)
    page = render_html(doc)
    assert 'id="model-choice"' in page and 'class="chosen"' in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "pass^k (model mixture(C=2))" in page
    # The result itself prints, renders HTML and converts like every result (one Display).
    assert "<script>alert" not in res._repr_html_() and "model: mixture(C=2)" in str(res)
    frame = res.to_frame("model_candidates")
    assert list(frame["candidate"])[:1] == ["markov"] and frame["chosen"].sum() == 1
    assert "nan" not in str(res.model_choice).lower()
    md = render_markdown(doc)
    assert "#### Model: `mixture(C=2)`" in md
    outside_code = re.sub(r"(`+)(?:.*?[^`])?\1(?!`)", "", md)  # trace content may only appear inside code spans
    assert "<script>" not in outside_code and "](http" not in outside_code and "@here" not in outside_code


@pytest.mark.slow
def test_report_of_the_first_order_chain_says_why_it_stayed(first_order: tt.TraceTable) -> None:
    res = analyze(first_order, model="auto", model_options={"candidates": ("markov", "lifted"),
                                                            "sizes": {"lifted": (2,)}}, intervals=None, **QUICK)
    doc = build_report(res, horizon=20)
    assert doc["model_choice"]["first_order"] and doc["model_choice"]["why"].startswith("The first-order chain")
    assert doc["states_expanded"] is False and doc["pass_k_trials"] == "iid"
    assert "pass^k (chain, i.i.d.)" in render_html(doc)


# ------------------------------------------------------------------------------------------------ CLI
@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("model_cli")
    a = mixture_tasks(30, 4, seed=7).write(folder / "a.jsonl")
    b = mixture_tasks(30, 4, seed=8).write(folder / "b.jsonl")
    return Path(a), Path(b)


@pytest.mark.slow
def test_cli_audit_with_a_model_and_the_default_unchanged(runs: tuple[Path, Path]) -> None:
    from cli_runner import run_cli

    a, _ = runs
    aud = run_cli("audit", str(a), "--model", "mixture", "--json", "--ks-samples", "49", "--samples", "0",
                  "--splits", "3")
    assert aud.returncode == 0, aud.stderr
    cert = json.loads(aud.stdout)
    assert cert["settings"]["model"] == cert["model_choice"]["chosen"] and cert["model_choice"]["family"] == "mixture"
    assert cert["layers"]["order"]["status"] == "not_applicable"
    assert cert["outputs"]["whatif"]["status"] == "untested"
    plain = run_cli("fit", str(a), "--json", "--samples", "50")
    same = run_cli("fit", str(a), "--model", "markov", "--json", "--samples", "50")
    assert plain.returncode == same.returncode == 0 and plain.stdout == same.stdout
    assert "model_choice" not in json.loads(plain.stdout)
    refused = run_cli("fit", str(a), "--model", "auto", "--engine", "local")
    assert refused.returncode == 2 and "without --engine" in refused.stderr
    for command in ("fit", "report", "audit", "compare"):
        assert "--model" in run_cli(command, "--help").stdout, command


@pytest.mark.slow
def test_cli_model_round_trip(runs: tuple[Path, Path], tmp_path: Path) -> None:
    """fit, report and compare with --model: the JSON carries the choice, the page its section."""
    from cli_runner import run_cli

    a, b = runs
    out = run_cli("fit", str(a), "--model", "mixture", "--json", "--samples", "50")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["model_choice"]["chosen"].startswith("mixture(C=") and doc["model_choice"]["trials"] == "task"
    assert doc["intervals"]["method"] == "bootstrap (model refits)"
    compiled = doc["model_choice"]["compiled"]
    assert doc["pass_hat_k"]["3"] == pytest.approx(sum(w * r**3 for w, r in zip(compiled["class_weights"],
                                                                                  compiled["class_r_inf"],
                                                                                  strict=True)))
    page = tmp_path / "r.html"
    rep = run_cli("report", str(a), "--model", "mixture", "-o", str(page), "--uncertainty", "none", "--splits", "3")
    assert rep.returncode == 0, rep.stderr
    assert "(mixture(C=" in rep.stdout and 'id="model-choice"' in page.read_text()
    cmp_ = run_cli("compare", str(a), str(b), "--model", "mixture", "--json", "--samples", "50")
    assert cmp_.returncode == 0, cmp_.stderr
    comparison = json.loads(cmp_.stdout)
    assert comparison["model"]["chosen"].startswith("mixture(C=")
    assert comparison["r_inf"]["a"] == pytest.approx(comparison["model"]["r_inf"]["a"])
    assert comparison["method"] == "bootstrap (model refits)"


# ------------------------------------------------------------------------------------------------ real data
@pytest.mark.slow
def test_tau_bench_report_with_auto_certifies_r_d_or_says_why(shared_data: Path, tmp_path: Path) -> None:
    """τ-bench airline gpt-4o (50 tasks × 4 trials): `report --model auto` picks a model that lets tasks differ and
    certifies R(d) and pass^k with it — or the report says exactly which layer withheld them."""
    from cli_runner import run_cli

    src = shared_data / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"
    out = tmp_path / "tau.json"
    res = run_cli("report", str(src), "--model", "auto", "--states", "categorical", "--vocabulary", "chat",
                  "-o", str(out), "--samples", "100")
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    mc = doc["model_choice"]
    assert not mc["first_order"] and mc["trials"] == "task", mc["why"]
    status = doc["output_status"]
    # R(d) rests on the R∞ and timing layers of the chosen model; when it is not certified the report names the layer
    # and says why (shown in the failure message).
    why = doc["timing_withheld_reason"] or doc["timing_untested_reason"]
    assert status["R(d)"] == "certified", f"R(d) {status['R(d)']}: {why}"
    assert why is None
    # pass^1..4 of the chosen model inside the per-task estimates' task-bootstrap intervals (issue 15).
    per_task = doc["per_task_pass_k"]
    for k, (lo, hi) in zip(per_task["ks"], per_task["pass_hat_k_interval"], strict=True):
        if 2 <= k <= 4:
            assert lo <= doc["metrics"]["pass_hat_k"][str(k)] <= hi, k
    assert status["pass^k"] == "certified", doc["certificate"]["layers"]["trials"]["message"]


def test_a_choice_that_fails_timing_names_the_candidate_to_forecast_with() -> None:
    from tracetochain.analysis._models import CandidateResult, _forecast_hint
    from tracetochain.audit._certificate import LayerResult

    def row(name: str, family: str, ll: float, timing: str, p: float) -> CandidateResult:
        layers = {"r_inf": LayerResult("r_inf", "pass", 0.5, "consistent", ""),
                  "timing": LayerResult("timing", timing, p, "x", "")}
        return CandidateResult(name, family, None, 10, ll, 0.1, None, None, None, False, "", layers)

    rows = [row("lifted(k=3)", "lifted", -59.3, "reject", 0.005), row("duration", "duration", -60.7, "pass", 0.2),
            row("hmm(K=6)", "hmm", -61.5, "reject", 0.005),
            row("duration+tasks(C=2)", "task-classes", -60.0, "pass", 0.3)]
    hint = _forecast_hint(rows, "lifted(k=3)")
    assert len(hint) == 1 and "duration+tasks(C=2) passes it" in hint[0] and "make_candidate" in hint[0]
    assert "--model duration" in _forecast_hint(rows[:3], "lifted(k=3)")[0]
    assert _forecast_hint(rows, "duration") == []
    assert "stay withheld" in _forecast_hint([rows[0], rows[2]], "lifted(k=3)")[0]


def test_the_chosen_models_sequential_stop_leaves_every_actionable_p_value_exact() -> None:
    """Besag & Clifford's p equals the full test's whenever fewer than h of the B replicates reach D, and a stopped
    test has p = h / l ≥ h / B: with h ≥ B / 10 that is above every level a certificate acts on, so stopping changes
    no decision the full test would make at 5 % — it only spares the replicates of a model that fits."""
    for n in (19, 49, 99, 199, 499, 999, 1999):
        h = certificate_stop_after(n)
        assert h >= SCREEN_STOP_AFTER and h / n >= 0.1 - 1e-12
    assert certificate_stop_after(199) == 20


def test_the_timing_screen_can_reject_at_the_family_threshold() -> None:
    """With 49 replicates the screen's smallest p (0.02) lay above level / 3: it could never reject."""
    from tracetochain.analysis._models import screen_replicates
    for level in (0.05, 0.01):
        assert 1 / (screen_replicates(level) + 1) < level / 3


def test_pass_k_test_uses_every_k_some_tasks_can_show() -> None:
    """Tasks with 2 and 5 trials: the default tested k = 2 only (the fewest trials of any task)."""
    from tracetochain.models import pass_k_test

    class Iid:
        trials = "iid"
        n_components = 1

        class chain:
            r_inf = 0.6

        @staticmethod
        def pass_hat_k(ks: list[int]) -> list[float]:
            return [0.6 ** k for k in ks]

    c = np.array([1, 2, 0, 3, 4, 2, 1, 5, 3, 2])
    n = np.array([2, 2, 2, 5, 5, 5, 2, 5, 5, 2])
    res = pass_k_test((c, n), Iid(), n_simulations=99, min_traces=10)
    assert res.ks == (2, 3, 4, 5) and res.p_value is not None
    assert res.empirical[3] == pytest.approx(np.mean([0, 0, 1, 0, 0]))  # pass^5 from the five 5-trial tasks
