"""One progress facility (tracetochain._progress): the library's callback, a live bar on a terminal, one line per
phase elsewhere, nothing with -q; the analysis and the commands report their phases through it."""

from __future__ import annotations

import io
import itertools
import re
from typing import Any

import pytest
from rich.console import Console

import tracetochain as tt
from tests.cli_runner import run_cli
from tracetochain import _progress
from tracetochain._progress import console_progress, counted, phase_reporter, progress_mode

DEMO = str(tt.datasets.example_path())


def test_a_one_argument_callback_gets_each_phase_once() -> None:
    seen: list[str] = []
    report = phase_reporter(seen.append)
    for phase, done in [("reading", None), ("audit: split chains", 0), ("audit: split chains", 1), ("chain", None)]:
        report(phase, done, 2 if done is not None else None)
    assert seen == ["reading", "audit: split chains", "chain"]


def test_a_three_argument_callback_gets_every_count() -> None:
    seen: list[tuple[str, Any, Any]] = []
    report = phase_reporter(lambda phase, done, total: seen.append((phase, done, total)))
    assert list(counted(report, "draws", range(3))) == [0, 1, 2]
    assert seen == [("draws", 0, 3), ("draws", 1, 3), ("draws", 2, 3), ("draws", 3, 3)]
    assert phase_reporter(report) is report  # adapting twice changes nothing


def test_analyze_reports_its_phases_with_counts() -> None:
    """The phases of the analysis in order, the audit's layers counted (done of 4), through the public progress=."""
    seen: list[tuple[str, Any, Any]] = []
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 200, seed=1)
    tt.analyze(traces, n_bootstrap=19, n_permutations=19, samples=50,
               progress=lambda phase, done=None, total=None: seen.append((phase, done, total)))
    phases = [p for p, _, _ in seen]
    order = list(dict.fromkeys(phases))
    assert order[:4] == ["reading", "states", "counting", "chain"]
    for layer in ("audit: R∞ layer", "audit: timing layer (KS)", "audit: order layer", "audit: trials layer"):
        assert layer in order
    assert order.index("audit: trials layer") < order.index("intervals (posterior)")
    assert ("audit: split chains", 5, 5) in seen and ("audit: order layer", 2, 4) in seen
    legacy: list[str] = []
    tt.analyze(traces, audit=False, samples=50, progress=legacy.append)  # the original one-argument callback
    assert legacy[:5] == ["reading", "states", "counting", "chain", "intervals (posterior)"]
    assert len(legacy) == len(set(legacy))  # each phase once, however many counted steps it had


class _Clock:
    """perf_counter for the lines display: each call advances by the next of ``steps`` seconds."""

    def __init__(self, steps: list[float]) -> None:
        self.now = 0.0
        self.steps = itertools.chain(steps, itertools.repeat(0.0))

    def __call__(self) -> float:
        self.now += next(self.steps)
        return self.now


def test_lines_mode_prints_each_phase_of_two_seconds_or_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a terminal: one line per finished phase longer than 2 s, with its duration and last count."""
    monkeypatch.setenv(_progress.PROGRESS_ENV, "auto")
    # perf_counter is read at each phase's start and end: reading 3 s, states 0.1 s, refits 5 s.
    monkeypatch.setattr(_progress.time, "perf_counter", _Clock([0.0, 3.0, 0.0, 0.1, 0.0, 5.0]))
    out = io.StringIO()
    with console_progress(stream=out) as progress:
        progress("reading")
        progress("states")
        progress("refits", 0, 10)
        progress("refits", 10, 10)
    assert out.getvalue().splitlines() == ["  reading: 3.0 s", "  refits (10/10): 5.0 s"]


def test_a_phase_interrupted_by_an_error_is_not_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_progress.PROGRESS_ENV, "lines")
    out = io.StringIO()
    with pytest.raises(RuntimeError), console_progress(stream=out, min_seconds=0.0) as progress:
        progress("reading")
        raise RuntimeError("bad record")
    assert out.getvalue() == ""


def test_terminal_mode_draws_a_bar_with_the_phase_and_its_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_progress.PROGRESS_ENV, "auto")
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    assert progress_mode(buf, False, terminal=console.is_terminal) == "bar"
    with console_progress(console=console) as progress:
        progress("model choice: candidates", 0, 6)
        progress("model choice: candidates", 3, 6)
        progress("intervals (posterior)")
    drawn = buf.getvalue()
    assert "model choice: candidates" in drawn and "0/6" in drawn and "intervals (posterior)" in drawn
    assert "ETA" in drawn


def test_quiet_and_off_print_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_progress.PROGRESS_ENV, "lines")
    out = io.StringIO()
    with console_progress(True, stream=out, min_seconds=0.0) as progress:
        progress("reading")
    monkeypatch.setenv(_progress.PROGRESS_ENV, "off")
    with console_progress(stream=out, min_seconds=0.0) as progress:
        progress("reading")
    assert out.getvalue() == ""


@pytest.fixture
def every_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines mode with every phase printed (the real threshold is 2 s: the demo corpus is faster than that)."""
    monkeypatch.setenv(_progress.PROGRESS_ENV, "lines")
    monkeypatch.setattr(_progress, "LINE_MIN_SECONDS", 0.0)


PHASE_LINE = re.compile(r"^  (.+?)(?: \(\d+/\d+\))?: \d+\.\d s$")


def _phases(stderr: str) -> list[str]:
    """The phase names of the progress lines in ``stderr`` ("  name (done/total): 1.2 s")."""
    return [m.group(1) for m in map(PHASE_LINE.match, stderr.splitlines()) if m]


@pytest.mark.slow
@pytest.mark.usefixtures("every_phase")
def test_report_names_its_phases_in_a_pipe(tmp_path: Any) -> None:
    """`report` in a pipe: a line per phase, the cost section and the rendering named (they were one "writing")."""
    r = run_cli("report", DEMO, "-o", str(tmp_path / "r.html"), "--samples", "200", "--splits", "2")
    assert r.returncode == 0, r.stderr
    phases = _phases(r.stderr)
    for phase in ("reading", "chain", "audit: R∞ layer", "intervals (posterior)", "report: cost section",
                  "report: rendering html", "report: writing"):
        assert phase in phases, (phase, r.stderr)
    assert "writing" not in [p for p in phases if not p.startswith("report:")]


@pytest.mark.slow
@pytest.mark.usefixtures("every_phase")
def test_fit_and_audit_show_their_phases_and_fit_q_is_silent(tmp_path: Any) -> None:
    r = run_cli("fit", DEMO, "--samples", "200")
    assert r.returncode == 0, r.stderr
    assert {"reading", "chain", "intervals (posterior)", "cost section"} <= set(_phases(r.stderr))
    assert _phases(run_cli("fit", DEMO, "--samples", "200", "-q").stderr) == []
    a = run_cli("audit", DEMO, "--splits", "2", "--ks-samples", "19", "--samples", "0")
    assert a.returncode == 0, a.stderr
    assert {"reading", "audit: split chains", "audit: order layer"} <= set(_phases(a.stderr))


@pytest.mark.usefixtures("every_phase")
def test_paths_and_compare_show_their_phases_in_a_pipe() -> None:
    """`paths` (its reading is most of its time on a folder of trajectories) and `compare` (two readings, two
    analyses) narrate their phases in a pipe too."""
    p = run_cli("paths", DEMO, "--json")
    assert p.returncode == 0, p.stderr
    assert {"reading", "paths: states, candidates and tests"} <= set(_phases(p.stderr))
    c = run_cli("compare", DEMO, DEMO, "--samples", "50")
    assert c.returncode == 0, c.stderr
    assert {"reading A", "reading B", "comparing (both analyses)"} <= set(_phases(c.stderr))


@pytest.fixture
def fake_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line's streams answer isatty() True (progress picks the live bar, as on a terminal)."""
    from tests import cli_runner

    monkeypatch.setenv(_progress.PROGRESS_ENV, "auto")
    monkeypatch.setattr(cli_runner._Stream, "isatty", lambda self: True)


@pytest.mark.usefixtures("fake_terminal")
@pytest.mark.parametrize(("args", "phase"), [
    (("fit", DEMO, "--samples", "50"), "cost section"),
    (("paths", DEMO), "paths: states, candidates and tests"),
])
def test_on_a_terminal_commands_draw_the_bar_not_lines(args: tuple[str, ...], phase: str) -> None:
    """On a terminal the phases are drawn by the live bar (its elapsed/ETA columns), never as the plain lines a
    pipe gets."""
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    assert phase in r.stderr and "ETA" in r.stderr
    assert _phases(r.stderr) == []


@pytest.mark.slow
@pytest.mark.usefixtures("every_phase")
def test_model_auto_names_its_long_phases_in_a_pipe(tmp_path: Any) -> None:
    """`--model auto` (the longest command: tens of seconds on a few hundred traces) reports the model choice and
    the checks of the candidates as phases of their own. Slow tier: the choice itself takes ~30 CPU-s."""
    corpus = tmp_path / "sim.jsonl"
    tt.datasets.simulate_traces(tt.datasets.notation_chain(), 200, seed=2).write(corpus)
    r = run_cli("fit", str(corpus), "--model", "auto", "--samples", "50")
    assert r.returncode == 0, r.stderr
    assert {"reading", "model choice (auto)", "cost section"} <= set(_phases(r.stderr))


@pytest.mark.slow
@pytest.mark.usefixtures("every_phase")
def test_audit_summarises_a_chosen_models_refits_in_view(tmp_path: Any) -> None:
    """The metrics of a chosen model's refits (a tenth of a second or more each on thousands of expanded states)
    are a phase of their own in the audit, not silent work while the certificate is printed."""
    corpus = tmp_path / "sim.jsonl"
    tt.datasets.simulate_traces(tt.datasets.notation_chain(), 200, seed=2).write(corpus)
    r = run_cli("audit", str(corpus), "--model", "lifted", "--ks-samples", "19", "--samples", "40")
    assert r.returncode == 0, r.stderr
    phases = _phases(r.stderr)
    assert any(p.startswith("metrics of ") and p.endswith(" refits") for p in phases), phases
