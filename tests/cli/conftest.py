"""The ``run`` fixture: the command line in this process (``cli_runner.run_cli``), ``stdin=`` feeding standard input."""

from __future__ import annotations

import pytest
from cli_runner import CliResult, Run, run_cli


@pytest.fixture
def run() -> Run:
    def call(*args: str, stdin: bytes | str | None = None) -> CliResult:
        return run_cli(*args, input=stdin)

    return call
