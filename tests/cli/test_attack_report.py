"""Regression tests for the attack report on the command line (findings F1–F28), one section per finding.

Each reproduction must end in a located ``error:`` line (exit 2), a counted skip or a correct result — never an
``internal error``, never exit 0 with data changed or lost, never a file written outside the named output. The
generators are the report's own, made smaller where the size did not matter. F8 (``compare`` minimum evidence)
belongs to the compare rewrite and is tested there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import CliResult as Result
from cli_runner import Run, run_cli


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    """The command line in this process, run from ``tmp_path`` (the report's "empty scratch folder")."""
    monkeypatch.chdir(tmp_path)
    return lambda *args, stdin=None: run_cli(*args, input=stdin)


def error_line(r: Result) -> str:
    """The one ``error:`` line of a run that must fail cleanly (exit 2, no traceback, no internal error)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return lines[0]


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def runs_jsonl(path: Path, n: int = 40) -> Path:
    """The report's ``runs.jsonl``: three steps per trace, alternating outcomes."""
    return write_jsonl(path, [{"trace_id": f"t{t}", "step_idx": i, "state": ["plan", "act", "check"][(t + i) % 3],
                               "outcome": "success" if t % 2 else "failure"} for t in range(n) for i in range(3)])


# ------------------------------------------------------------------------------------------------ F3, F4, F5, F24
def test_f3_convert_through_a_new_folder_does_not_replace_its_input(tmp_path: Path, run: Run) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"trace_id": f"t{i}", "step_idx": 0, "state": "a",
                                                "outcome": "success" if i % 2 else "failure"} for i in range(6)])
    before = src.read_bytes()
    for extra in ([], ["--force"]):
        line = error_line(run("convert", "in.jsonl", "-o", "other_dir/../in.jsonl", *extra))
        assert "is the input file" in line
    assert src.read_bytes() == before and not (tmp_path / "other_dir").exists()
    other = tmp_path / "existing.jsonl"
    other.write_text("keep")
    assert "already exists" in error_line(run("convert", "in.jsonl", "-o", "new2/../existing.jsonl"))
    assert other.read_text() == "keep"


@pytest.mark.parametrize("command", [
    ["report", "runs.jsonl", "-o", "runs.jsonl"],
    ["report", "runs.jsonl", "-o", "sub/../runs.jsonl", "--force"],
    ["fit", "runs.jsonl", "-o", "runs.jsonl", "--force"],
    ["monitor", "runs.jsonl", "--window", "10", "--html", "runs.jsonl", "--force"],
    ["convert", "runs.jsonl", "-o", "./runs.jsonl", "--force"],
])
def test_f4_no_command_writes_over_its_input(tmp_path: Path, run: Run, command: list[str]) -> None:
    before = runs_jsonl(tmp_path / "runs.jsonl").read_bytes()
    assert "is the input file" in error_line(run(*command))
    assert (tmp_path / "runs.jsonl").read_bytes() == before


def test_f4_export_does_not_write_over_its_chain(tmp_path: Path, run: Run) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    assert run("fit", "runs.jsonl", "-o", "chain.json", "-q").returncode == 0
    before = (tmp_path / "chain.json").read_bytes()
    assert "is the input file" in error_line(run("export", "chain.json", "--to", "dot", "-o", "chain.json",
                                                 "--force"))
    assert (tmp_path / "chain.json").read_bytes() == before


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["report", "runs.jsonl", "--uncertainty", "none", "--no-audit"],
    ["fit", "runs.jsonl", "-q", "-o", "report.html"],
    ["monitor", "runs.jsonl", "--window", "10", "--html", "report.html"],
    ["convert", "runs.jsonl", "-o", "report.html.jsonl"],
])
def test_f5_no_command_writes_through_a_symbolic_link(tmp_path: Path, run: Run, command: list[str]) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    name = command[command.index("-o") + 1] if "-o" in command else \
        command[command.index("--html") + 1] if "--html" in command else "report.html"
    link = tmp_path / name
    link.symlink_to("victim.txt")
    assert "symbolic link" in error_line(run(*command))
    assert victim.read_text() == "precious\n" and link.is_symlink()
    r = run(*command, "--force")
    assert r.returncode in (0, 3), r.stderr  # monitor may raise a drift alert
    assert victim.read_text() == "precious\n" and not link.is_symlink()


def test_f5_dangling_link_creates_nothing(tmp_path: Path, run: Run) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    (tmp_path / "dangling.html").symlink_to("created.txt")
    assert "symbolic link" in error_line(run("report", "runs.jsonl", "-o", "dangling.html"))
    assert not (tmp_path / "created.txt").exists()


def test_f23_monitor_html_into_missing_folder_and_onto_a_folder(tmp_path: Path, run: Run) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    r = run("monitor", "runs.jsonl", "--window", "10", "--html", "missing_dir/m.html")
    assert r.returncode in (0, 3) and (tmp_path / "missing_dir" / "m.html").read_text().startswith("<!DOCTYPE")
    (tmp_path / "adir").mkdir()
    assert "is a folder" in error_line(run("monitor", "runs.jsonl", "--window", "10", "--html", "adir"))


def test_f23_whatif_edits_folder_is_refused(tmp_path: Path, run: Run) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    assert run("fit", "runs.jsonl", "-o", "chain.json", "-q").returncode == 0
    (tmp_path / "edits").mkdir()
    line = error_line(run("whatif", "chain.json", "--edits", "edits"))
    assert "edits: is a folder" in line


def test_f24_convert_leaves_no_temporary_files(tmp_path: Path, run: Run) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    assert run("convert", "runs.jsonl", "-o", "out.parquet").returncode == 0
    assert "already exists" in error_line(run("convert", "runs.jsonl", "-o", "out.parquet"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.parquet", "runs.jsonl"]


@pytest.mark.slow
def test_force_is_the_same_everywhere(tmp_path: Path, run: Run) -> None:
    """Every command that writes a file refuses an existing one without --force and replaces it with --force."""
    runs_jsonl(tmp_path / "runs.jsonl")
    assert run("fit", "runs.jsonl", "-o", "chain.json", "-q").returncode == 0
    commands = [["fit", "runs.jsonl", "-q", "-o", "out.x"],
                ["report", "runs.jsonl", "--no-audit", "--uncertainty", "none", "-q", "-o", "out.x"],
                ["export", "chain.json", "-o", "out.x"],
                ["monitor", "runs.jsonl", "--window", "10", "--html", "out.x"],
                ["convert", "runs.jsonl", "-o", "out.jsonl"]]
    for command in commands:
        out = tmp_path / command[-1]
        out.write_text("old")
        assert "already exists; pass --force" in error_line(run(*command)), command
        assert out.read_text() == "old"
        assert run(*command, "--force").returncode in (0, 3) and out.read_text() != "old", command
        out.unlink()
    assert os.listdir(tmp_path) == ["runs.jsonl", "chain.json"] or set(os.listdir(tmp_path)) == {
        "runs.jsonl", "chain.json"}


# ------------------------------------------------------------------------------------------------ F1, F20
def _ten_good_lines() -> str:
    return "".join(json.dumps({"trace_id": f"t{i}", "step_idx": 0, "state": "a",
                               "outcome": "success" if i % 2 else "failure"}) + "\n" for i in range(10))


@pytest.mark.parametrize("bad_line", [
    b'{"trace_id":"x","step_idx":0,"state":"\xff","outcome":"success"}\n',
    b'{"trace_id":"x","step_idx":0,"state":"a","outcome":"success","text":' + b"[" * 100_000 + b"]" * 100_000
    + b"}\n",
    b'{"trace_id":"x","step_idx":' + b"7" * 5000 + b',"state":"a","outcome":"success"}\n',
], ids=["not-utf8", "deep", "digits"])
@pytest.mark.parametrize("engine", [[], ["--engine", "local"]], ids=["memory", "engine"])
def test_f1_bad_jsonl_lines_are_located_on_both_paths(tmp_path: Path, run: Run, bad_line: bytes,
                                                      engine: list[str]) -> None:
    (tmp_path / "eng_bad.jsonl").write_bytes(_ten_good_lines().encode() + bad_line)
    line = error_line(run("fit", "eng_bad.jsonl", *engine, "-q"))
    assert "eng_bad.jsonl:11:" in line and ("not UTF-8" in line or "not valid JSON" in line), line
    r = run("fit", "eng_bad.jsonl", *engine, "--on-error", "skip", "--json", "--uncertainty", "none")
    assert r.returncode == 0, r.stderr
    if not engine:
        doc = json.loads(r.stdout)
        assert doc["ingest"]["n_records_skipped"] == 1 and doc["ingest"]["n_traces"] == 10


def test_f1_utf16_file_on_the_engine_path(tmp_path: Path, run: Run) -> None:
    (tmp_path / "u16.jsonl").write_bytes(_ten_good_lines().encode("utf-16"))
    for engine in ([], ["--engine", "local"]):
        line = error_line(run("fit", "u16.jsonl", *engine, "-q", "--reader", "canonical") if not engine
                          else run("fit", "u16.jsonl", *engine, "-q"))
        assert "u16.jsonl:1:" in line and "not UTF-8" in line, line


def test_f20_fifo_inputs_are_refused_at_once(tmp_path: Path, run: Run) -> None:
    os.mkfifo(tmp_path / "pipe.jsonl")
    os.mkfifo(tmp_path / "pipe.json")
    assert "is a FIFO" in error_line(run("fit", "pipe.jsonl", "--engine", "local"))
    assert "is a FIFO" in error_line(run("metrics", "pipe.json"))
    assert "is a FIFO" in error_line(run("fit", "pipe.jsonl", "--reader", "canonical"))


# ------------------------------------------------------------------------------------------------ F2
def test_f2_nan_and_infinity_are_refused(tmp_path: Path, run: Run) -> None:
    nan, inf = float("nan"), float("inf")
    cases = {"reward": {"reward": nan}, "t_start": {"t_start": inf}, "t_end": {"t_end": -inf},
             "cost_usd": {"cost_usd": -inf}, "tokens_in": {"tokens_in": -3}}
    for field, extra in cases.items():
        path = tmp_path / f"{field}.jsonl"
        path.write_text(json.dumps({"trace_id": "a", "step_idx": 0, "state": "x", "outcome": "success", **extra})
                        + "\n" + json.dumps({"trace_id": "b", "step_idx": 0, "state": "x", "outcome": "failure"})
                        + "\n")
        line = error_line(run("convert", path.name, "-o", f"{field}.out.jsonl"))
        assert f"{field}.jsonl:1: field '{field}'" in line, line
        assert not (tmp_path / f"{field}.out.jsonl").exists()
        r = run("convert", path.name, "-o", f"{field}.skip.jsonl", "--on-error", "skip")
        assert r.returncode == 0, r.stderr
        text = (tmp_path / f"{field}.skip.jsonl").read_text()
        assert "NaN" not in text and "Infinity" not in text and text.count("\n") == 1


def test_f2_nan_on_several_steps_names_the_value(tmp_path: Path, run: Run) -> None:
    write_jsonl(tmp_path / "n.jsonl", [{"trace_id": "t0", "step_idx": i, "state": "x", "outcome": "success",
                                        "reward": float("nan")} for i in range(3)])
    line = error_line(run("fit", "n.jsonl"))
    assert "expected a finite number, got nan" in line and "earlier step" not in line


def test_f2_convert_never_writes_nan_from_an_extra_column(tmp_path: Path, run: Run) -> None:
    (tmp_path / "x.jsonl").write_text('{"trace_id":"a","step_idx":0,"state":"s","outcome":"success","score":NaN}\n')
    line = error_line(run("convert", "x.jsonl", "-o", "out.jsonl"))
    assert "field 'score'" in line and "cannot represent" in line and not (tmp_path / "out.jsonl").exists()
    assert run("convert", "x.jsonl", "-o", "out.parquet").returncode == 0  # Parquet carries NaN natively


# ------------------------------------------------------------------------------------------------ F7
@pytest.mark.parametrize("uncertainty", ["posterior", "bootstrap"])
def test_f7_all_success_with_pseudocount_zero(tmp_path: Path, run: Run, uncertainty: str) -> None:
    write_jsonl(tmp_path / "ok.jsonl", [{"trace_id": f"t{t}", "step_idx": i, "state": ["plan", "act"][i],
                                         "outcome": "success"} for t in range(30) for i in range(2)])
    r = run("fit", "ok.jsonl", "--pseudocount", "0", "--uncertainty", uncertainty, "--samples", "100", "--json",
            "-o", "c.json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["r_inf"] == 1.0
    shares = [s["failure_share"] for s in doc["intervals"]["metrics"]["states"]]
    assert all(s["point"] is None and s["lower"] is None for s in shares)
    assert run("metrics", "c.json", "--samples", "100").returncode == 0
    r = run("report", "ok.jsonl", "--pseudocount", "0", "--uncertainty", uncertainty, "--samples", "100",
            "--format", "json", "-o", "r.json", "-q")
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------------------------------------ F11, F22, F27
def test_f11_too_many_states_is_refused_with_the_fix(tmp_path: Path, run: Run,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    write_jsonl(tmp_path / "s.jsonl", [{"trace_id": f"t{t}", "step_idx": 0, "state": f"st{t}",
                                        "outcome": "success" if t % 2 else "failure"} for t in range(60)])
    monkeypatch.setenv("TRACETOCHAIN_MAX_STATES", "50")
    for engine in ([], ["--engine", "local"]):
        line = error_line(run("fit", "s.jsonl", *engine))
        assert "60 distinct states" in line and "--states categorical" in line and "ward" in line
        assert "TRACETOCHAIN_MAX_STATES" in line
    monkeypatch.setenv("TRACETOCHAIN_MAX_STATES", "100")
    assert run("fit", "s.jsonl", "--uncertainty", "none", "-q").returncode == 0


def test_f11_interval_draws_that_would_not_fit_memory(tmp_path: Path, run: Run,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    write_jsonl(tmp_path / "s.jsonl", [{"trace_id": f"t{t}", "step_idx": 0, "state": f"st{t}",
                                        "outcome": "success" if t % 2 else "failure"} for t in range(120)])
    monkeypatch.setenv("TRACETOCHAIN_MAX_MEMORY_MB", "300")  # the read fits (~0.2 GB), 1,000 draws do not
    line = error_line(run("fit", "s.jsonl"))
    assert "1,000 draws over 120 states" in line and "--samples" in line and "--uncertainty none" in line


@pytest.mark.parametrize("args", [
    ["metrics", "chain.json", "--horizon", "1000000000"],
    ["fit", "runs.jsonl", "--horizon", "10000000"],
    ["report", "runs.jsonl", "--horizon", "1000000000"],
    ["fit", "runs.jsonl", "--samples", "100000000"],
    ["report", "runs.jsonl", "--samples", "100000000"],
    ["monitor", "runs.jsonl", "--window", "inf"],
    ["monitor", "runs.jsonl", "--window", "nan"],
    ["report", "runs.jsonl", "--fail-under", "R(" + "9" * 5000 + ")>=0.1"],
    ["fit", "runs.jsonl", "--engine", "bogus"],
])
@pytest.mark.slow
def test_f22_unbounded_options_are_usage_errors(tmp_path: Path, run: Run, args: list[str]) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    assert run("fit", "runs.jsonl", "-o", "chain.json", "-q").returncode == 0
    r = run(*args)
    assert r.returncode == 2 and "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "report.html").exists()


def test_f27_large_input_points_to_the_engine(tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    runs_jsonl(tmp_path / "runs.jsonl", n=2000)  # ~0.5 MB: about 4 GB in memory is what the estimate says no to
    monkeypatch.setenv("TRACETOCHAIN_MAX_MEMORY_MB", "150")
    line = error_line(run("fit", "runs.jsonl"))
    assert "reading it in memory needs about" in line and "--engine local" in line
    monkeypatch.delenv("TRACETOCHAIN_MAX_MEMORY_MB")
    assert run("fit", "runs.jsonl", "-q").returncode == 0


# ------------------------------------------------------------------------------------------------ F12
def _chain_variants(chain: dict[str, object]) -> dict[str, object]:
    import copy

    def variant(mutate: Callable[[dict[str, object]], None]) -> dict[str, object]:
        doc = copy.deepcopy(chain)
        mutate(doc)
        return doc

    counts = "counts"
    return {
        "negative": variant(lambda d: d["metadata"][counts].__setitem__("transitions", [[-5] * 3] * 3)),  # type: ignore[index]
        "text": variant(lambda d: d["metadata"][counts].__setitem__("transitions", "abc")),  # type: ignore[index]
        "shape": variant(lambda d: d["metadata"][counts].__setitem__("transitions", [[1, 2], [3, 4]])),  # type: ignore[index]
        "missing": variant(lambda d: d["metadata"][counts].pop("initial")),  # type: ignore[index]
        "huge": variant(lambda d: d["metadata"][counts].__setitem__("exits_success", [10**30] * 3)),  # type: ignore[index]
        "n_traces": variant(lambda d: d["metadata"][counts].__setitem__("n_traces", [1, 2])),  # type: ignore[index]
        "metadata_list": variant(lambda d: d.__setitem__("metadata", [1])),
        "pseudocount": variant(lambda d: d["metadata"].__setitem__("pseudocount", -1)),  # type: ignore[attr-defined]
        "pseudocount_text": variant(lambda d: d["metadata"].__setitem__("pseudocount", "x")),  # type: ignore[attr-defined]
        "q_text": variant(lambda d: d["Q"][0].__setitem__(0, "a")),  # type: ignore[index]
        "ragged": variant(lambda d: d["Q"][0].pop()),  # type: ignore[index]
        "object_names": variant(lambda d: d.__setitem__("state_names", [{"a": 1}, "b", "c"])),
    }


@pytest.mark.slow
@pytest.mark.parametrize("command", ["metrics", "whatif", "export"])
def test_f12_malformed_chain_files(tmp_path: Path, run: Run, command: str) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    assert run("fit", "runs.jsonl", "-o", "chain.json", "-q").returncode == 0
    chain = json.loads((tmp_path / "chain.json").read_text())
    files = {}
    for name, doc in _chain_variants(chain).items():
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        files[name] = f"{name}.json"
    (tmp_path / "digits.json").write_text('{"kind": ' + "1" * 5000 + "}")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "bad8.json").write_bytes(b'{"kind": "\xff"}')
    (tmp_path / "adir").mkdir()
    for name in ("digits", "deep", "bad8"):
        files[name] = f"{name}.json"
    files["folder"] = "adir"
    files["zero"] = "/dev/zero"
    for name, path in files.items():
        line = error_line(run(command, path))
        assert line.startswith(f"error: {path}"), (name, line)
    (tmp_path / "{chain}.json").write_text((tmp_path / "chain.json").read_text())
    assert run(command, "{chain}.json").returncode == 0


# ------------------------------------------------------------------------------------------------ F13, F14, F15, F25
EVIL = "x` ![t](https://attacker.example/pixel.png) [sign in](https://attacker.example/login) @octocat `y"
CR = "z\r# Injected heading\r\r- [x] approved by @security-team\r"


def _markdown_traces(path: Path) -> Path:
    records = []
    for t in range(60):
        outcome = "failure" if t % 2 else "success"
        seq = ["plan", EVIL if t % 4 == 1 else CR] if outcome == "failure" else ["plan", "act"]
        records += [{"trace_id": f"t{t}", "step_idx": i, "state": s, "outcome": outcome} for i, s in enumerate(seq)]
    return write_jsonl(path, records)


def _rendered(markdown: str) -> str:
    markdown_it = pytest.importorskip("markdown_it")
    return str(markdown_it.MarkdownIt("commonmark").enable("table").render(markdown))


def test_f13_markdown_report_cannot_be_injected(tmp_path: Path, run: Run) -> None:
    _markdown_traces(tmp_path / "md.jsonl")
    r = run("report", "md.jsonl", "--format", "md", "-o", "comment.md", "--no-audit", "--uncertainty", "none",
            "--pseudocount", "0.5")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "comment.md").read_text(encoding="utf-8")
    assert "\r" not in text
    html = _rendered(text)
    assert "<img" not in html and "<a href" not in html and "<h1" not in html and "<li" not in html
    assert "attacker.example" in html  # the names are shown, as code


def test_f13_compare_markdown_cannot_be_injected(tmp_path: Path, run: Run) -> None:
    _markdown_traces(tmp_path / "a.jsonl")
    records = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    write_jsonl(tmp_path / "b.jsonl", [dict(r, outcome="failure") if r["trace_id"] in ("t0", "t2") else r
                                       for r in records])
    r = run("compare", "a.jsonl", "b.jsonl", "--markdown", "--samples", "50")
    assert r.returncode == 0, r.stderr
    html = _rendered(r.stdout)
    assert "<img" not in html and "<a href" not in html and "<h1" not in html and "\r" not in r.stdout


def test_f14_f15_mermaid_and_dot_labels(tmp_path: Path, run: Run) -> None:
    names = ["<img src=https://attacker.example/p.png>", "a\x00b", '<a href="https://attacker.example">x</a>']
    write_jsonl(tmp_path / "h.jsonl", [{"trace_id": f"{t}{o}", "step_idx": 0, "state": s, "outcome": o}
                                       for t, s in enumerate(names) for o in ("success", "failure")])
    assert run("fit", "h.jsonl", "-o", "h.json", "-q").returncode == 0
    mermaid = run("export", "h.json", "--to", "mermaid").stdout
    assert "<" not in mermaid and ">" not in mermaid.replace("-->", "") and "#lt;img" in mermaid
    dot = run("export", "h.json", "--to", "dot").stdout
    assert "\x00" not in dot and "a\\\\x00b" in dot


@pytest.mark.slow
def test_f25_long_state_names_are_cut_in_reports(tmp_path: Path, run: Run) -> None:
    long = "n" * 1_000_000
    write_jsonl(tmp_path / "l.jsonl", [{"trace_id": f"t{t}", "step_idx": i, "state": [long, "act"][i],
                                        "outcome": "success" if t % 2 else "failure"}
                                       for t in range(20) for i in range(2)])
    for fmt in ("html", "md"):
        r = run("report", "l.jsonl", "--format", fmt, "-o", f"r.{fmt}", "--no-audit", "--uncertainty", "none")
        assert r.returncode == 0, r.stderr
        assert (tmp_path / f"r.{fmt}").stat().st_size < 200_000, fmt
    assert len(run("fit", "l.jsonl", "--uncertainty", "none").stdout) < 50_000


# ------------------------------------------------------------------------------------------------ F16, F17, F18
def test_f16_csv_formula_cells_are_neutralised_and_read_back(tmp_path: Path, run: Run) -> None:
    formulas = ['=HYPERLINK("http://127.0.0.1/f","click")', "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0",
                "@SUM(1+1)*cmd|' /C calc'!A0", "\t=1+1", "'=already quoted", "plain"]
    write_jsonl(tmp_path / "in.jsonl", [{"trace_id": f"t{i}", "step_idx": 0, "state": s,
                                         "outcome": "success" if i % 2 else "failure"} for i, s in enumerate(formulas)])
    assert run("convert", "in.jsonl", "-o", "out.csv").returncode == 0
    import csv

    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as fh:
        cells = [row["state"] for row in csv.DictReader(fh)]
    assert all(not c or c[0] not in "=+-@\t\r" for c in cells), cells
    assert run("convert", "out.csv", "-o", "back.jsonl").returncode == 0
    back = [json.loads(line)["state"] for line in (tmp_path / "back.jsonl").read_text().splitlines()]
    assert back == formulas


def test_f17_terminal_escapes_are_made_visible(tmp_path: Path, run: Run) -> None:
    title = "\x1b]0;PWNED\x07\x1b[2J"
    write_jsonl(tmp_path / "e.jsonl", [{"trace_id": f"t{t}", "step_idx": i, "state": ["plan" + title, "act"][i],
                                        "outcome": "success" if t % 2 else "failure"}
                                       for t in range(20) for i in range(2)])
    r = run("fit", "e.jsonl", "--uncertainty", "none")
    assert r.returncode == 0 and "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "\\x1b]0;PWNED" in r.stdout
    (tmp_path / "ragged.csv").write_bytes(b"trace_id,step_idx,state,outcome\na,0,plan,success\n"
                                          b"b,0,\x1b]0;PWNED\x07\x1b[2J,x,y,z\n")
    line = error_line(run("fit", "ragged.csv"))
    assert "\x1b" not in line and "\x07" not in line and "\x00" not in line


def test_f18_a_bad_csv_byte_is_blamed_on_its_line(tmp_path: Path, run: Run) -> None:
    rows = ["trace_id,step_idx,state,outcome"] + [f"t{t},{i},{['plan', 'act'][i]},success"
                                                  for t in range(21) for i in range(2)]
    data = ("\n".join(rows[:-1]) + "\n").encode() + b"t20,1,act\xe9,success\n"
    (tmp_path / "c.csv").write_bytes(data)
    line = error_line(run("fit", "c.csv"))
    assert "c.csv:43: field 'state': not UTF-8" in line, line
    r = run("convert", "c.csv", "-o", "c.jsonl", "--on-error", "skip", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ingest"]["n_traces"] == 20 and doc["ingest"]["n_traces_skipped"] == 1


# ------------------------------------------------------------------------------------------------ F26
@pytest.mark.parametrize("steps", [[0, 7, 1000], [3, 4]], ids=["gaps", "late-start"])
@pytest.mark.parametrize("engine", [[], ["--engine", "local"]], ids=["memory", "engine"])
def test_f26_step_holes_are_reported(tmp_path: Path, run: Run, steps: list[int], engine: list[str]) -> None:
    records = [{"trace_id": "t0", "step_idx": s, "state": "x", "outcome": "success"} for s in steps]
    records += [{"trace_id": "t1", "step_idx": i, "state": "x", "outcome": "failure"} for i in range(2)]
    write_jsonl(tmp_path / "h.jsonl", records)
    line = error_line(run("fit", "h.jsonl", *engine, "-q"))
    assert "h.jsonl:" in line and "field 'step_idx'" in line and ("jumps" in line or "starts at" in line)
    r = run("fit", "h.jsonl", *engine, "--on-error", "skip", "--uncertainty", "none", "--json")
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------------------------------------ F9, F10
MINI_TRAJ = {"trajectory_format": "mini-swe-agent-1", "info": {"exit_status": "Submitted"},
             "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "fix"},
                          {"role": "assistant", "content": "THOUGHT\n```bash\nls -la\n```"},
                          {"role": "user", "content": "<returncode>0</returncode>\n<output>a</output>"},
                          {"role": "assistant", "content": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"}]}


def _mini_run(root: Path, ids: list[str], nested: bool = False) -> Path:
    root.mkdir()
    for iid in ids:
        folder = root / iid if nested else root
        folder.mkdir(exist_ok=True)
        (folder / f"{iid}.traj.json").write_text(json.dumps(dict(MINI_TRAJ, instance_id=iid)))
    (root / "results_summary.json").write_text(json.dumps(
        {"instances": [{"instance_id": iid, "resolved": i % 2 == 0} for i, iid in enumerate(ids)]}))
    return root


@pytest.mark.slow  # creating 200,010 files takes about a minute: the slow tier (CI runs it) keeps it
def test_f9_no_silent_stop_after_many_folder_entries(tmp_path: Path, run: Run) -> None:
    root = _mini_run(tmp_path / "run", ["aaa__x-1", "zzz__x-2"])
    for i in range(200_010):
        (root / f"b{i:07d}.txt").touch()
    r = run("convert", "run", "--reader", "mini-swe-agent", "-o", "out.jsonl", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ingest"]["n_traces"] == 2


def test_f9_unreadable_folder_is_named_or_counted(tmp_path: Path, run: Run,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _mini_run(tmp_path / "run1", ["a__x-1", "b__x-2", "c__x-3"], nested=True)
    real_scandir = os.scandir

    def scandir(path: object) -> object:
        if str(path).endswith("b__x-2"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)
    line = error_line(run("convert", "run1", "-o", "o.jsonl"))
    assert "b__x-2: cannot read this folder (Permission denied)" in line
    r = run("convert", "run1", "-o", "o.jsonl", "--on-error", "skip", "--json")
    assert r.returncode == 0, r.stderr
    ingest = json.loads(r.stdout)["ingest"]
    assert ingest["n_traces"] == 2 and any("folder could not be read" in k for k in ingest["skipped_by_reason"])


def test_f10_unreadable_trajectory_is_named_or_counted(tmp_path: Path, run: Run,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _mini_run(tmp_path / "run2", ["a__x-1", "b__x-2", "c__x-3"], nested=True)
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "b__x-2.traj.json":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    line = error_line(run("convert", "run2", "-o", "o.jsonl"))
    assert "b__x-2.traj.json: cannot read it (Permission denied)" in line
    r = run("convert", "run2", "-o", "o.jsonl", "--on-error", "skip", "--json")
    assert r.returncode == 0, r.stderr
    ingest = json.loads(r.stdout)["ingest"]
    assert ingest["n_traces"] == 2 and "file could not be read" in ingest["skipped_by_reason"]


def test_f10_any_read_error_in_a_reader_is_one_located_line(tmp_path: Path, run: Run,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    runs_jsonl(tmp_path / "runs.jsonl")
    import builtins

    real_open = builtins.open

    def failing_open(file: object, *args: object, **kwargs: object) -> object:
        if str(file).endswith("runs.jsonl") and args and "r" in str(args[0]):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", lambda self, *a, **k: failing_open(self, *a, **k))
    line = error_line(run("fit", "runs.jsonl", "--reader", "canonical"))
    assert "runs.jsonl" in line and "Permission denied" in line


# ------------------------------------------------------------------------------------------------ F19
READERS = Path(__file__).resolve().parents[1] / "data" / "readers"
REFLEXION_LOG = """BEGIN TRIAL 1
------------- BEGIN CORRECT AGENTS -------------

Question: Which band released the album first?
Thought 1: I need to search both albums.
Action 1: Search[Album A]
Observation 1: Album A is the debut album of Band X.
Thought 2: Album A came out first.
Action 2: Finish[Band X]
Observation 2: Answer is CORRECT
Correct answer: Band X
"""


@pytest.mark.parametrize("name, options", [
    ("langfuse/trace_download.json", []),
    ("otlp/collector.jsonl", ["-O", f"verdicts={READERS / 'otlp' / 'verdicts.json'}"]),
    ("swe_agent/token_corpus.json", []),
    ("reflexion.txt", []),
])
def test_f19_a_byte_order_mark_changes_nothing(tmp_path: Path, run: Run, name: str, options: list[str]) -> None:
    plain = tmp_path / Path(name).name
    if name == "reflexion.txt":
        plain.write_text(REFLEXION_LOG)
    else:
        plain.write_bytes((READERS / name).read_bytes())
    bom = tmp_path / f"bom_{plain.name}"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    docs = []
    for path in (plain, bom):
        r = run("convert", path.name, *options, "-o", f"{path.stem}.out.jsonl", "--json")
        assert r.returncode == 0, r.stderr
        docs.append(json.loads(r.stdout))
    assert docs[0]["reader"] == docs[1]["reader"] and docs[0]["n_steps"] == docs[1]["n_steps"] > 0


# ------------------------------------------------------------------------------------------------ F21
def write_bomb(path: Path, member_bytes: int) -> Path:
    """The report's generator: an inspect_ai .eval whose one sample member is mostly JSON whitespace."""
    import zipfile

    header = {"version": 2, "status": "success", "eval": {"eval_id": "e1", "run_id": "r1", "task": "t", "model": "m",
                                                          "created": "2026-01-01T00:00:00"}}
    sample = {"id": "s1", "epoch": 1, "messages": [{"role": "user", "content": "hi"},
                                                   {"role": "assistant", "content": "ok"}],
              "scores": {"match": {"value": "C"}}}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("header.json", json.dumps(header))
        with zf.open("samples/s1_epoch_1.json", "w", force_zip64=True) as fh:
            body = json.dumps(sample).encode()
            left, chunk = member_bytes - 1 - len(body), b" " * (1 << 22)
            while left > 0:
                n = min(left, len(chunk))
                fh.write(chunk[:n])
                left -= n
            fh.write(body)
    return path


@pytest.mark.slow
def test_f21_zip_bomb_is_refused_by_its_compression_ratio(tmp_path: Path, run: Run) -> None:
    bomb = write_bomb(tmp_path / "bomb.eval", 64 * 1024 * 1024)
    assert bomb.stat().st_size < 1_000_000
    line = error_line(run("convert", "bomb.eval", "-o", "o.jsonl"))
    assert "bomb.eval!samples/s1_epoch_1.json" in line and "times its" in line and "zip bomb" in line
    r = run("convert", "bomb.eval", "-o", "o.jsonl", "-O", "max_compression_ratio=100000", "--json")
    assert r.returncode == 0, r.stderr  # a trusted log can raise the ratio


def test_f21_default_caps_fit_a_small_runner() -> None:
    from tracetochain.readers import inspect_ai

    assert inspect_ai.DEFAULT_MAX_MEMBER_BYTES <= 256 * 1024**2
    assert inspect_ai.DEFAULT_MAX_DECOMPRESSED_BYTES <= 1024**3
    assert inspect_ai.DEFAULT_MAX_COMPRESSION_RATIO <= 100


# ------------------------------------------------------------------------------------------------ F28
TAU2_INFO = {"git_commit": "x", "num_trials": 1, "max_steps": 30, "max_errors": 10,
             "user_info": {"implementation": "user_simulator", "llm": "gpt-x"},
             "agent_info": {"implementation": "llm_agent", "llm": "gpt-y"},
             "environment_info": {"domain_name": "airline", "policy": "…"}}


def _tau2_sim(sid: str, **message_fields: object) -> dict[str, object]:
    return {"id": sid, "task_id": sid, "trial": 0, "termination_reason": "user_stop",
            "reward_info": {"reward": 1.0, "db_check": None},
            "messages": [{"role": "user", "content": "cancel", "turn_idx": 0},
                         {"role": "assistant", "content": "Done.", "turn_idx": 1,
                          "timestamp": "2026-01-01T00:00:00", **message_fields}]}


@pytest.mark.parametrize("field", [{"timestamp": "not-a-time"}, {"timestamp": "9999-99-99T00:00:00"},
                                   {"cost": float("nan")}, {"cost": -1.0},
                                   {"usage": {"prompt_tokens": float("inf")}}],
                         ids=["time-text", "time-range", "cost-nan", "cost-negative", "tokens-inf"])
def test_f28_bad_optional_values_are_errors_or_counted_skips(tmp_path: Path, run: Run,
                                                             field: dict[str, object]) -> None:
    sims = [_tau2_sim("s1"), _tau2_sim("s2", **field), _tau2_sim("s3")]
    (tmp_path / "res.json").write_text(json.dumps({"timestamp": "t", "info": TAU2_INFO, "tasks": [],
                                                   "simulations": sims}))
    line = error_line(run("convert", "res.json", "-o", "o.jsonl"))
    assert "res.json" in line and "messages[1]" in line, line
    r = run("convert", "res.json", "-o", "o.jsonl", "--on-error", "skip", "--json")
    assert r.returncode == 0, r.stderr
    ingest = json.loads(r.stdout)["ingest"]
    assert ingest["n_traces"] == 2 and ingest["n_traces_skipped"] == 1
    # the same message in an OpenAI-style JSONL log
    (tmp_path / "chat.jsonl").write_text("".join(json.dumps({"id": s["id"], "reward": 1.0, "messages": s["messages"]})
                                                 + "\n" for s in sims))
    line = error_line(run("convert", "chat.jsonl", "--reader", "openai-messages", "-o", "c.jsonl"))
    assert "chat.jsonl" in line and "messages[1]" in line, line
