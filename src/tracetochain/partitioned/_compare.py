"""Compare two partitioned corpora: :func:`tracetochain.analysis._compare.compare` with an engine."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracetochain.analysis._compare import Comparison, compare


def compare_partitioned(a: str | Path | Sequence[str | Path], b: str | Path | Sequence[str | Path], *,
                        engine: Any = None, format: str | None = None, by: str = "range", **options: Any
                        ) -> Comparison:
    """:func:`tracetochain.compare.compare` for two corpora of any size, partition by partition on ``engine``."""
    return compare(a, b, engine=engine or "local", reader=format, partition_options={"by": by}, **options)


__all__ = ["compare_partitioned"]
