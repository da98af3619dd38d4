"""Acceptance (issue 20): the peak memory of any command on any input under 1 MB stays under 1 GB.

Each command runs in its own process under an address-space cap (``RLIMIT_AS``, so a runaway cannot hurt the
machine) and a time limit; its peak resident memory is read from ``wait4``'s ``ru_maxrss``. The inputs are small
(all under 1 MB) and adversarial — the attack report's: thousands of one-visit states, states just under the
limits, a megabyte-long state name, 100,000-deep nesting, a 5,000-digit integer, horizon × samples at the cap —
plus an ordinary corpus through the full report. A command may refuse its input (exit 2, one ``error:`` line), but
never by running out of memory: "ran out of memory" and "internal error" fail the test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: Each case is a process measured for its peak memory: resource measurements run in the slow tier.
pytestmark = pytest.mark.slow

ONE_GB = 1 << 30
#: The hard cap: generous above 1 GB so that an excess is measured (ru_maxrss) rather than turned into a crash.
ADDRESS_SPACE_CAP = 3 << 30
TIME_LIMIT = 300


def _write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert path.stat().st_size < 1_000_000, path
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("small_inputs")

    def one_step_states(m: int) -> list[dict[str, object]]:
        return [{"trace_id": f"t{t}", "step_idx": 0, "state": f"st{t}", "outcome": "success" if t % 2 else "failure"}
                for t in range(m)]

    _write_jsonl(folder / "states5000.jsonl", one_step_states(5000))
    _write_jsonl(folder / "states400.jsonl", one_step_states(400))
    _write_jsonl(folder / "runs.jsonl", [
        {"trace_id": f"t{t}", "step_idx": i, "state": ["plan", "search", "read", "edit", "test"][(t * 7 + i) % 5],
         "outcome": "success" if t % 3 else "failure"} for t in range(1500) for i in range(1 + t % 8)])
    _write_jsonl(folder / "longname.jsonl", [
        {"trace_id": f"t{t}", "step_idx": i, "state": ["n" * 900_000, "act"][i] if t == 0 else ["plan", "act"][i],
         "outcome": "success" if t % 2 else "failure"} for t in range(30) for i in range(2)])
    good = "".join(json.dumps({"trace_id": f"t{i}", "step_idx": 0, "state": "a",
                               "outcome": "success" if i % 2 else "failure"}) + "\n" for i in range(10))
    (folder / "deep.jsonl").write_text(good + '{"trace_id":"x","step_idx":0,"state":"a","outcome":"success","text":'
                                       + "[" * 100_000 + "]" * 100_000 + "}\n")
    (folder / "digits.jsonl").write_text(good + '{"trace_id":"x","step_idx":' + "7" * 5000
                                         + ',"state":"a","outcome":"success"}\n')
    return folder


COMMANDS = [
    ["fit", "states5000.jsonl"],
    ["fit", "states5000.jsonl", "--engine", "local"],
    ["report", "states5000.jsonl", "-o", "r1.html"],
    ["audit", "states5000.jsonl"],
    ["fit", "states400.jsonl"],
    ["fit", "states400.jsonl", "--uncertainty", "none"],
    ["report", "states400.jsonl", "-o", "r2.html", "--uncertainty", "none"],
    ["fit", "runs.jsonl", "--samples", "1000", "--horizon", "4999"],  # at the cells limit
    ["fit", "runs.jsonl", "--samples", "4000", "--horizon", "10000"],  # refused
    ["report", "runs.jsonl", "-o", "r3.html"],
    ["report", "runs.jsonl", "-o", "r4.json", "--format", "json", "--uncertainty", "bootstrap", "--samples", "500"],
    ["compare", "runs.jsonl", "states400.jsonl", "--samples", "200"],
    ["monitor", "runs.jsonl", "--window", "300"],
    ["report", "longname.jsonl", "-o", "r5.md", "--format", "md"],
    ["fit", "deep.jsonl", "--engine", "local"],
    ["fit", "digits.jsonl"],
    ["fit", "/dev/zero"],
    ["metrics", "/dev/zero"],
    ["convert", "runs.jsonl", "-o", "out.parquet"],
]


#: Runs one command under the cap and reports its exit code, stderr and peak RSS: the wrapper's only child, so
#: RUSAGE_CHILDREN is that command's own figure.
_WRAPPER = """
import json, resource, subprocess, sys
cap, limit = int(sys.argv[1]), float(sys.argv[2])
def preexec():
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
try:
    r = subprocess.run([sys.executable, "-m", "tracetochain", *sys.argv[3:]], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, preexec_fn=preexec, timeout=limit)
    code, err = r.returncode, r.stderr
except subprocess.TimeoutExpired:
    code, err = None, "timeout"
print(json.dumps({"code": code, "stderr": err,
                  "peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
"""


def _run_capped(args: list[str], cwd: Path) -> tuple[int | None, str, int]:
    """(exit code or None on timeout, stderr, peak RSS in bytes) of ``tracetochain ARGS`` in a capped process."""
    out = subprocess.run([sys.executable, "-c", _WRAPPER, str(ADDRESS_SPACE_CAP), str(TIME_LIMIT), *args], cwd=cwd,
                         capture_output=True, text=True, timeout=TIME_LIMIT + 60, check=True)
    doc = json.loads(out.stdout)
    return doc["code"], doc["stderr"], doc["peak"]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(c[:3]) for c in COMMANDS])
def test_peak_memory_under_one_gigabyte(inputs: Path, args: list[str]) -> None:
    code, stderr, peak = _run_capped(args, inputs)
    assert code is not None, f"{args} ran longer than {TIME_LIMIT} s"
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    assert "ran out of memory" not in stderr, stderr
    assert code in (0, 2, 3, 4), (code, stderr)
    if code == 2:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        assert last.startswith("error:") or "Usage:" in stderr, stderr
    assert peak < ONE_GB, f"{args}: peak RSS {peak / 1e9:.2f} GB"


def test_the_measurement_sees_an_excess(tmp_path: Path) -> None:
    """The harness itself: a command that holds 1.2 GB is measured above 1 GB (so the test above can fail)."""
    hog = tmp_path / "hog.py"
    hog.write_text("import numpy as np\na = np.ones(1_200_000_000 // 8)\nprint(a.sum())\n")
    out = subprocess.run([sys.executable, "-c", _WRAPPER.replace('"-m", "tracetochain", ', ""),
                          str(ADDRESS_SPACE_CAP), "120", str(hog)], capture_output=True, text=True, timeout=180,
                         check=True)
    doc = json.loads(out.stdout)
    assert doc["code"] == 0 and doc["peak"] > ONE_GB
