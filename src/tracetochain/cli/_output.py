"""Printing library results on the terminal, safely (kept light: ``import tracetochain.cli`` loads no numerics)."""

from __future__ import annotations

import typer

from tracetochain._text import terminal_block


def echo_text(text: str, *, nl: bool = True) -> None:
    """Print a library result's text (``str(result)``): control characters from trace content made visible, each
    line cut to a readable length."""
    typer.echo(terminal_block(text), nl=nl)


__all__ = ["echo_text"]
