"""Fixtures of the live-service tests (skipped without the serve extra)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed")
pytest.importorskip("uvicorn", reason="the serve extra is not installed")
pytest.importorskip("opentelemetry.proto", reason="the serve extra is not installed")
pytest.importorskip("opentelemetry.sdk", reason="the instrument extra is not installed")

from serve_helpers import ServeProcess


@pytest.fixture
def serve_process(tmp_path: Path) -> Iterator[callable]:
    started: list[ServeProcess] = []

    def start(*args: str, store: Path | None = None, **kw) -> ServeProcess:
        p = ServeProcess(store or tmp_path / "live.db", *args, **kw).start()
        started.append(p)
        return p

    yield start
    for p in started:
        if p.proc is not None and p.proc.poll() is None:
            p.stop()
