"""Whole commands as a user runs them: each command on each shared corpus, as a fresh process.

What a user waits for is the whole process (interpreter start-up, imports, reading, every phase, writing), not the
inner loops the other benchmarks time. Each case is ``tracetochain COMMAND CORPUS …`` in a fresh subprocess: wall
time and CPU time (user + system of the child, which load on a shared machine barely moves), medians of
``--repeats`` runs interleaved round by round (so load hits every case alike), with ``os.getloadavg()`` recorded
before and after each case. Baseline rows: ``python -c "import numpy, pyarrow"`` (what any Arrow/NumPy tool pays
before its first line) and, for a folder of JSON trajectories, loading its files with the standard library beside
tracetochain reading them (each timed inside one process, interpreter start-up excluded; tracetochain's time includes
importing NumPy and pyarrow, which the standard library's does not). Reading is timed twice: as the command line reads
(pyarrow told that pandas is not used, ``cli._input.pyarrow_without_pandas``) and as a notebook's first
``read_traces`` call, where pyarrow imports pandas on its first array when pandas is installed (~0.4 s).

Corpora (skipped when absent): the bundled demo (200 τ-bench airline episodes), the 250 mini-SWE-agent trajectories
of ``../shared/data/swebench-verified-mini-swe-agent-gemini-3-pro``, τ-bench's gpt-4o airline file and a τ²-bench
results file. Commands: fit, audit, report, audit --model auto (its worker processes on every CPU, the default, and
with ``-j 1``, in one process), paths (when ``tracetochain paths --help`` works),
compare (the corpus against itself: the cost of two analyses and the comparison; and the demo against τ-bench's
gpt-4o airline run, two corpora of one domain). The authors' SWE-bench protocol,
whole process against whole process, is ``bench_protocols.py`` (its ``process`` columns).

Writes ``results/bench_commands.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
CORPORA: dict[str, Path] = {
    "demo (200 τ-bench airline)": REPO / "src" / "tracetochain" / "datasets" / "data" / "tau_airline_sample.jsonl",
    "SWE mini-swe-agent (250)": SHARED / "swebench-verified-mini-swe-agent-gemini-3-pro",
    "τ-bench gpt-4o airline": SHARED / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json",
    "τ²-bench": SHARED / "tau2-bench" / "data" / "simulations" /
    "2025-08-10T02:44:06.496849_telecom_llm_agent_gpt-4o_user_simulator_gpt-4o.json",
}
#: The corpus whose reading is compared with loading its JSON files (acceptance: at most 3×).
READ_CORPUS = "SWE mini-swe-agent (250)"
#: Two different corpora of one domain for `compare A B` (the demo's episodes against τ-bench's gpt-4o airline run):
#: two readings by two readers and two analyses, as a user compares two runs.
COMPARE_PAIR = ("demo (200 τ-bench airline)", "τ-bench gpt-4o airline")


#: The floors under `fit`: the modules it needs before reading a trace, and the command-line framework alone (a typer
#: command with fit's kinds of options that imports numpy and pyarrow and does nothing; typer ≥ 0.26 coerces every
#: option through a pydantic TypeAdapter).
FIT_IMPORTS = "import numpy, pyarrow, scipy.sparse, scipy.linalg, typer, rich"
EMPTY_COMMAND = """
import numpy, pyarrow
from pathlib import Path
from typing import Annotated, Optional
import typer
app = typer.Typer()
@app.command()
def fit(source: Path, output: Annotated[Optional[Path], typer.Option("-o")] = None, force: bool = False,
        quiet: Annotated[bool, typer.Option("-q")] = False, seed: int = 0, confidence: float = 0.95,
        samples: Optional[int] = None, states: str = "label", reader: Optional[str] = None,
        horizon: Optional[int] = None, jobs: Optional[int] = None, model: str = "markov") -> None:
    pass
app()
"""
FLOORS = {"floor: the modules fit imports": FIT_IMPORTS,
          "floor: an empty typer command with fit's options": EMPTY_COMMAND}


def commands(python: str, corpus: Path, out: Path, with_paths: bool) -> dict[str, list[str]]:
    py = [python, "-m", "tracetochain"]
    c = str(corpus)
    cmds = {
        "fit": [*py, "fit", c, "-o", str(out / "chain.json"), "--force"],
        "fit -q": [*py, "fit", c, "-o", str(out / "chain.json"), "--force", "-q"],
        "audit": [*py, "audit", c],
        "audit --model auto": [*py, "audit", c, "--model", "auto"],
        "audit --model auto -j 1": [*py, "audit", c, "--model", "auto", "-j", "1"],
        "report": [*py, "report", c, "-o", str(out / "report.html"), "--force", "-q"],
        "compare": [*py, "compare", c, c],
    }
    if with_paths:
        cmds["paths"] = [*py, "paths", c]
    return cmds


def _env() -> dict[str, str]:
    """The commands' environment: no progress display, and byte-code caching as a user has it (a sandbox's
    PYTHONDONTWRITEBYTECODE would make every run recompile an editable checkout's modules)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["TRACETOCHAIN_PROGRESS"] = "off"
    return env


def compile_package(python: str) -> None:
    """Byte-compile the tracetochain the interpreter imports, so no measured run pays the first run's compilation
    (as on a user's machine after the first command; pip compiles an installed package at install time)."""
    where = subprocess.run([python, "-c", "import os, tracetochain; print(os.path.dirname(tracetochain.__file__))"],
                           capture_output=True, text=True, check=True, env=_env()).stdout.strip()
    subprocess.run([python, "-m", "compileall", "-q", where], check=True, env=_env())


def timed(cmd: list[str]) -> dict[str, Any]:
    """Wall and CPU (user + system) time of one child process, its peak memory, and its exit code.

    The child's own resource usage comes from ``os.wait4`` on its pid: ``RUSAGE_CHILDREN``'s ``ru_maxrss`` is the
    largest of every child waited for so far, so it cannot give one run's peak."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=_env())
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace").strip()
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_mb": usage.ru_maxrss / 1024,
            "returncode": proc.returncode,
            "error": stderr.splitlines()[-1] if proc.returncode and stderr else None}


READ_PROBE = r"""
import json, sys, time, resource
from pathlib import Path
root = Path(sys.argv[1])
files = sorted(p for p in root.rglob("*") if p.suffix in (".json", ".traj") and p.is_file())
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
if sys.argv[2] == "json":
    t0, c0 = time.perf_counter(), cpu()
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in files]
elif sys.argv[2] == "command line":
    import tracetochain as tt
    from tracetochain.cli._input import pyarrow_without_pandas
    t0, c0 = time.perf_counter(), cpu()
    pyarrow_without_pandas()
    tt.read_traces(root)
else:
    import tracetochain as tt
    t0, c0 = time.perf_counter(), cpu()
    tt.read_traces(root)
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": cpu() - c0, "files": len(files)}))
"""


def read_case(python: str, corpus: Path, how: str) -> dict[str, Any]:
    proc = subprocess.run([python, "-c", READ_PROBE, str(corpus), how], capture_output=True, text=True,
                          check=True, env=_env())
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


#: Packages whose import time is reported on its own in the breakdown (the rest are summed as "other").
BREAKDOWN_PACKAGES = ("numpy", "pyarrow", "scipy", "typer", "click", "pydantic", "pydantic_core", "rich", "pandas",
                      "tracetochain")


def import_breakdown(python: str, cmd: list[str], repeats: int = 3) -> dict[str, Any]:
    """Where the start-up of one command goes: ``python -X importtime`` of the whole command, each module's own
    import time summed by top-level package (scipy's share includes what it makes NumPy import: scipy 1.17's
    array-API layer touches every lazily imported NumPy submodule, numpy.f2py and numpy.testing included, which
    ``import numpy`` alone never loads), median of ``repeats`` runs, beside the process's wall time."""
    import re

    runs: list[dict[str, float]] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        proc = subprocess.run([python, "-X", "importtime", *cmd[1:]], capture_output=True, text=True, env=_env())
        wall = time.perf_counter() - t0
        if proc.returncode:
            return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
        per: dict[str, float] = {"process (wall)": wall}
        for line in proc.stderr.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+\d+ \| (\s*)(\S+)", line)
            if not m:
                continue
            top = m.group(3).split(".")[0]
            key = top if top in BREAKDOWN_PACKAGES else "other"
            # what scipy's array-API layer pulls in from NumPy counts to scipy (see the docstring)
            if top == "numpy" and any(x in m.group(3) for x in ("f2py", "testing", "ma.", "polynomial")):
                key = "scipy"
            per[key] = per.get(key, 0.0) + int(m.group(1)) / 1e6
        per["imports (all)"] = sum(v for k, v in per.items() if k != "process (wall)")
        runs.append(per)
    keys = sorted({k for r in runs for k in r}, key=lambda k: -median([r.get(k, 0.0) for r in runs]))
    return {"command": " ".join(cmd[1:]), "repeats": repeats,
            "seconds": {k: median([r.get(k, 0.0) for r in runs]) for k in keys}}


def summarize(runs: list[dict[str, Any]], load: list[tuple[list[float], list[float]]]) -> dict[str, Any]:
    ok = [r for r in runs if r.get("returncode", 0) == 0]
    doc: dict[str, Any] = {"runs": runs, "load_before_after": load}
    if ok:
        doc["median_wall_s"] = median([r["wall_s"] for r in ok])
        doc["median_cpu_s"] = median([r["cpu_s"] for r in ok])
        if "peak_mb" in ok[0]:
            doc["median_peak_mb"] = median([r["peak_mb"] for r in ok])
    else:
        doc["error"] = runs[-1].get("error")
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--corpus", action="append", help="only these corpora (names as in the results; repeatable)")
    ap.add_argument("--command", action="append", help="only these commands (repeatable)")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter that runs the commands and the baseline, e.g. the runtime-only .venv of "
                         "`make demo` (where pyarrow finds no pandas to import on its first array)")
    ap.add_argument("--auto-repeats", type=int, default=None,
                    help="runs of the `--model auto` cases (default: --repeats); they take minutes each, so a quiet "
                         "window may only hold one. The rows say how many runs their median is of.")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    compile_package(args.python)
    with_paths = subprocess.run([args.python, "-m", "tracetochain", "paths", "--help"],
                                capture_output=True).returncode == 0
    cases: dict[str, dict[str, Any]] = {}
    plan: dict[str, Any] = {"baseline: python -c 'import numpy, pyarrow'": (
        [args.python, "-c", "import numpy, pyarrow"], None)}
    demo = CORPORA[next(iter(CORPORA))]
    with tempfile.TemporaryDirectory() as tmp:
        if not args.command or "fit" in args.command:
            for name, code in FLOORS.items():
                extra = [str(demo), "-o", str(Path(tmp) / "floor.json"), "--force", "-q"] if "typer" in name else []
                plan[name] = ([args.python, "-c", code, *extra], None)
        for name, path in CORPORA.items():
            if args.corpus and name not in args.corpus:
                continue
            if not path.exists():
                cases[name] = {"skipped": f"{path} is absent"}
                continue
            for cmd_name, cmd in commands(args.python, path, Path(tmp), with_paths).items():
                if args.command and cmd_name not in args.command:
                    continue
                plan[f"{name} | {cmd_name}"] = (cmd, None)
            a, b = COMPARE_PAIR
            if name == b and CORPORA[a].exists() and (not args.command or "compare" in args.command):
                plan[f"{a} vs {b} | compare"] = (
                    [args.python, "-m", "tracetochain", "compare", str(CORPORA[a]), str(path)], None)
            if name == READ_CORPUS and (not args.command or "read" in args.command):
                plan[f"{name} | read: json.loads of every file"] = (None, (path, "json"))
                plan[f"{name} | read: as the command line reads"] = (None, (path, "command line"))
                plan[f"{name} | read: tracetochain.read_traces"] = (None, (path, "tracetochain"))
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in plan}
        loads: dict[str, list[tuple[list[float], list[float]]]] = {k: [] for k in plan}
        for rnd in range(args.repeats):
            for key, (cmd, read) in plan.items():
                if "--model auto" in key and args.auto_repeats is not None and rnd >= args.auto_repeats:
                    continue
                before = list(os.getloadavg())
                r = timed(cmd) if cmd is not None else read_case(args.python, *read)
                loads[key].append((before, list(os.getloadavg())))
                runs[key].append(r)
                print(f"[{rnd + 1}/{args.repeats}] {key}: {r['wall_s']:.2f} s wall, {r['cpu_s']:.2f} s CPU"
                      + (f" (exit {r['returncode']}: {r['error']})" if r.get("returncode") else ""), flush=True)
    for key in plan:
        cases[key] = summarize(runs[key], loads[key])
    ratios: dict[str, float] = {}
    base = cases[next(iter(plan))]
    demo_fit = cases.get(f"{next(iter(CORPORA))} | fit")
    if demo_fit and "median_wall_s" in demo_fit:
        ratios["demo fit / import numpy, pyarrow (wall)"] = demo_fit["median_wall_s"] / base["median_wall_s"]
        ratios["demo fit / import numpy, pyarrow (CPU)"] = demo_fit["median_cpu_s"] / base["median_cpu_s"]
        for name in FLOORS:
            floor = cases.get(name)
            if floor and "median_wall_s" in floor:
                ratios[f"{name.removeprefix('floor: ')} / import numpy, pyarrow (wall)"] = \
                    floor["median_wall_s"] / base["median_wall_s"]
    for corpus in CORPORA:
        shown, quiet = cases.get(f"{corpus} | fit"), cases.get(f"{corpus} | fit -q")
        if shown and quiet and "median_cpu_s" in shown and "median_cpu_s" in quiet:
            ratios[f"{corpus}: fit / fit -q (CPU; the printed summary and cost section)"] = \
                shown["median_cpu_s"] / quiet["median_cpu_s"]
    for corpus, short in ((READ_CORPUS, "SWE"), (next(iter(CORPORA)), "demo")):
        plain = cases.get(f"{corpus} | audit")
        for jobs in ("", " -j 1"):
            auto = cases.get(f"{corpus} | audit --model auto{jobs}")
            if auto and plain and "median_cpu_s" in auto and "median_cpu_s" in plain:
                ratios[f"{short} audit --model auto{jobs} / audit (wall)"] = \
                    auto["median_wall_s"] / plain["median_wall_s"]
                ratios[f"{short} audit --model auto{jobs} / audit (CPU)"] = auto["median_cpu_s"] / plain["median_cpu_s"]
    rj = cases.get(f"{READ_CORPUS} | read: json.loads of every file")
    for how, label in (("as the command line reads", "SWE reading (command line) / json.loads (CPU)"),
                       ("tracetochain.read_traces", "SWE reading (read_traces, first call) / json.loads (CPU)")):
        rt = cases.get(f"{READ_CORPUS} | read: {how}")
        if rj and rt and "median_cpu_s" in rj and "median_cpu_s" in rt:
            ratios[label] = rt["median_cpu_s"] / rj["median_cpu_s"]
    demo_path = CORPORA[next(iter(CORPORA))]
    breakdown = None
    if not args.command or "fit -q" in args.command:
        with tempfile.TemporaryDirectory() as tmp:
            breakdown = import_breakdown(args.python, commands(args.python, demo_path, Path(tmp), False)["fit -q"])
    doc = {"machine": machine_info(), "repeats": args.repeats, "cases": cases, "ratios": ratios,
           "import_breakdown": breakdown,
           "paths_command": with_paths, "python": args.python,
           "pandas_installed": subprocess.run([args.python, "-c", "import pandas"],
                                              capture_output=True).returncode == 0}
    rows = [[k, f"{v['median_wall_s']:.2f}", f"{v['median_cpu_s']:.2f}"] for k, v in cases.items()
            if "median_wall_s" in v]
    print(markdown_table(["case", "wall s", "CPU s"], rows))
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}")
    if not args.no_save:
        write_results("bench_commands", doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
