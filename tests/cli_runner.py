"""Run the ``tracetochain`` command line inside the test process (no interpreter start-up, ~0.05 s a call).

``run_cli(*args)`` goes through the console entry point ``tracetochain.cli.main`` exactly as the installed
command does (argument parsing, error-to-exit-code mapping, stdout/stderr), and returns the same fields as
``subprocess.CompletedProcess``. A few tests in ``tests/cli/test_entry_point.py`` still start a real process to
check the entry point itself.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    args: tuple[str, ...] = ()


#: What the ``run`` fixture of ``tests/cli/conftest.py`` is: ``run(*args, stdin=bytes or text)``.
Run = Callable[..., CliResult]


class _Stream(io.TextIOWrapper):
    """A text stream with a ``buffer`` (like the real ``sys.stdout``) whose text can be read back."""

    def __init__(self, initial: str | bytes = "") -> None:
        data = initial if isinstance(initial, bytes) else initial.encode()
        super().__init__(io.BytesIO(data), encoding="utf-8", newline=None, write_through=True)

    def text(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode("utf-8", errors="replace")  # type: ignore[attr-defined]

    def isatty(self) -> bool:
        return False


def run_cli(*args: str, input: str | bytes | None = None) -> CliResult:
    from tracetochain.cli import main

    saved = sys.argv, sys.stdin, sys.stdout, sys.stderr
    saved_debug = os.environ.get("TRACETOCHAIN_DEBUG")
    out, err = _Stream(), _Stream()
    sys.argv = ["tracetochain", *args]
    sys.stdin, sys.stdout, sys.stderr = _Stream(input or ""), out, err
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, sys.stdin, sys.stdout, sys.stderr = saved
        if saved_debug is None:
            os.environ.pop("TRACETOCHAIN_DEBUG", None)  # --debug sets it for the rest of the process
        else:
            os.environ["TRACETOCHAIN_DEBUG"] = saved_debug
    return CliResult(code, out.text(), err.text(), args)

