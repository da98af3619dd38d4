"""The few checks that need a real process: the installed entry points, exit codes and what reaches stderr.

Every other command-line test runs in-process through ``cli_runner.run_cli`` (same ``main()``, no start-up).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tracetochain as tt

EXAMPLE = tt.datasets.example_path("tau_airline")


def real(*args: str, module: bool = True) -> subprocess.CompletedProcess[str]:
    if module:
        cmd = [sys.executable, "-m", "tracetochain", *args]
    else:
        script = Path(sys.executable).with_name("tracetochain")
        if not script.exists():
            pytest.skip("the tracetochain console script is not installed beside this interpreter")
        cmd = [str(script), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_python_m_tracetochain_version() -> None:
    r = real("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"tracetochain {tt.__version__}" and r.stderr == ""


def test_console_script_help_and_no_arguments() -> None:
    r = real("--help", module=False)
    assert r.returncode == 0 and r.stdout.startswith("Usage: tracetochain") and "fit" in r.stdout
    r = real(module=False)  # no arguments: the help, and a usage exit code
    assert r.returncode in (0, 2) and "Usage: tracetochain" in r.stdout + r.stderr


@pytest.mark.slow
def test_fit_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "chain.json"
    r = real("fit", str(EXAMPLE), "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    assert tt.AbsorbingChain.from_json(out).metadata["ingest"]["n_traces"] == 200


@pytest.mark.slow
def test_bad_input_is_one_stderr_line_and_exit_2(tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    src.write_text('{"trace_id":"a","step_idx":0,"state":"s","outcome":"won"}\n')
    r = real("fit", str(src))
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{src}:1" in lines[0] and "field 'outcome'" in lines[0]


def test_usage_error_exits_2_with_click_message() -> None:
    r = real("fit", str(EXAMPLE), "--no-such-option")
    assert r.returncode == 2 and "No such option" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    r = real("--debug", "fit", str(tmp_path / "missing.jsonl"))
    assert r.returncode != 0 and "Traceback" in r.stderr


def _blas_timeout(code: str, **env: str) -> str:
    import os

    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run([sys.executable, "-c", code + "; import os; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))"],
                         capture_output=True, text=True, timeout=60, env={**base, **env}, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_the_command_line_stops_openblas_spinning_and_the_library_leaves_the_environment_alone() -> None:
    """OpenBLAS's idle threads spin ~0.1 CPU-s before sleeping (a quarter of `fit`'s CPU on the demo): the command
    line shortens their wait before numpy loads, never over the user's own value; importing the library changes
    nothing."""
    assert _blas_timeout("import tracetochain.cli") == "4"
    assert _blas_timeout("import tracetochain.cli", OPENBLAS_THREAD_TIMEOUT="12") == "12"
    assert _blas_timeout("import tracetochain, tracetochain.analysis") == "None"
