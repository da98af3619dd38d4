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
    """The drift test's scipy routines were imported inside the first drift test, ~1 s of CPU mid-stream while the
    live lock was held. LiveService.start imports them before any span arrives: after start, a drift test imports
    no scipy module at all (and never scipy.stats, which the χ² p-value no longer needs)."""
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        import numpy as np
        from tracetochain.serve import LiveService, ServeConfig
        svc = LiveService(ServeConfig(store=Path({str(tmp_path / 'live.db')!r}), alerts_to_stdout=False))
        before = "scipy.special" in sys.modules
        svc.start()
        try:
            loaded = set(sys.modules)
            from tracetochain.audit.shared import homogeneity_from_counts
            a = np.array([[5.0, 3.0, 2.0, 1.0], [0.0, 4.0, 6.0, 2.0]])
            b = np.array([[2.0, 6.0, 2.0, 3.0], [1.0, 2.0, 7.0, 1.0]])
            homogeneity_from_counts(a, b, ["s0", "s1"], n_traces=(10, 10))
            new = sorted(m for m in set(sys.modules) - loaded if m.startswith("scipy"))
            print(before, "scipy.special" in loaded, "scipy.stats" in sys.modules, new)
        finally:
            svc.stop()
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "False", "[]"], out.stdout + out.stderr
