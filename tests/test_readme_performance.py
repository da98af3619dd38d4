"""The README's performance section is generated from benchmarks/results/*.json, never edited by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_readme_performance_section_matches_the_benchmark_results() -> None:
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "render_readme.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr + "\nrun: python benchmarks/render_readme.py"


def test_every_figure_comes_from_a_results_file() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import render_readme
    finally:
        sys.path.pop(0)
    text = render_readme.render()
    assert text.startswith(render_readme.BEGIN) and text.endswith(render_readme.END)
    assert "nan" not in text.lower().replace("nanoseconds", "")
    for script in ("bench_scale.py", "bench_protocols.py", "bench_peers.py", "bench_startup.py", "bench_install.py",
                   "bench_commands.py"):
        assert f"`{script}`" in text, script
