"""The live service's per-span CPU: what made it regress must not come back (benchmarks/bench_serve.py measures it;
these tests pin the causes found)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed")


@pytest.mark.slow
def test_the_drift_tests_scipy_is_imported_at_start_not_mid_stream(tmp_path: Path) -> None:
    """audit._homogeneity imports scipy.stats lazily (fit's start-up); the first live drift test then paid ~1 s of
    CPU mid-stream while holding the live lock. LiveService.start imports it before any span arrives."""
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from tracetochain.serve import LiveService, ServeConfig
        svc = LiveService(ServeConfig(store=Path({str(tmp_path / 'live.db')!r}), alerts_to_stdout=False))
        before = "scipy.stats" in sys.modules
        svc.start()
        try:
            print(before, "scipy.stats" in sys.modules)
        finally:
            svc.stop()
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr
