"""Shared helpers for the benchmarks: machine description, medians, Markdown tables, result files."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "_data"
RESULTS_DIR = BENCH_DIR / "results"


def machine_info() -> dict[str, Any]:
    """CPU count, Python and library versions, BLAS threading and the date of the run."""
    import numpy as np
    import pyarrow as pa
    import scipy

    import tracetochain

    info: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gb": _memory_gb(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "pyarrow": pa.__version__,
        "tracetochain": tracetochain.__version__,
    }
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [
            {k: p.get(k) for k in ("internal_api", "version", "num_threads")} for p in threadpool_info()
        ]
    except ImportError:  # optional
        info["blas"] = None
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    return "\n".join([line(header), sep, *(line(r) for r in rows)])


def write_results(name: str, payload: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return path
