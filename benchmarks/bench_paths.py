"""Benchmark: `tracetochain paths` against `tracetochain fit` on the same folder (issue 25: paths within 2× fit).

Each command runs in a fresh process (the whole command: interpreter start, reading, states, the work, printing
JSON), interleaved round by round so that a loaded machine slows both alike; the figures are medians of wall and
CPU seconds. Default corpus: the 250 shared mini-swe-agent SWE-bench trajectories (``../shared/data/``); any other
folder or file with ``--corpus``. A synthetic corpus (``--synthetic N``: the planted-pattern agent of
``studies/insight_paths.py``, N traces) shows the scaling without the shared data.

Usage::

    python benchmarks/bench_paths.py                          # the SWE-bench folder, 5 rounds
    python benchmarks/bench_paths.py --synthetic 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results

REPO = Path(__file__).resolve().parents[1]
SWE = REPO.parent / "shared" / "data" / "swebench-verified-mini-swe-agent-gemini-3-pro"


def timed(args: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one command in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "tracetochain", *args], capture_output=True, text=True,
                       cwd=REPO, timeout=3600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{r.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def synthetic(n: int, folder: Path) -> Path:
    sys.path.insert(0, str(REPO))
    import numpy as np

    from studies.insight_paths import simulate

    path = folder / f"planted-{n}.parquet"
    simulate("planted", n, np.random.default_rng(0)).write(path)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--synthetic", type=int, default=0, help="Use a simulated corpus of this many traces.")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = synthetic(args.synthetic, Path(tmp)) if args.synthetic else (args.corpus or SWE)
        if not corpus.exists():
            print(f"corpus {corpus} not found (pass --corpus or --synthetic N)")
            return 0
        commands = {"fit": ["fit", str(corpus), "--json"], "paths": ["paths", str(corpus), "--json"]}
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
        for _ in range(args.rounds):
            for name, cmd in commands.items():
                times[name].append(timed(cmd))
    rows = []
    summary: dict[str, Any] = {}
    for name in commands:
        wall = median([w for w, _ in times[name]])
        cpu = median([c for _, c in times[name]])
        summary[name] = {"wall_s": wall, "cpu_s": cpu, "rounds": times[name]}
        rows.append([f"`tracetochain {name}`", f"{wall:.2f}", f"{cpu:.2f}"])
    ratio = summary["paths"]["wall_s"] / summary["fit"]["wall_s"]
    cpu_ratio = summary["paths"]["cpu_s"] / summary["fit"]["cpu_s"]
    rows.append(["paths / fit", f"{ratio:.2f}×", f"{cpu_ratio:.2f}×"])
    print(f"### paths vs fit on {corpus.name} (median of {args.rounds} interleaved rounds; target ≤ 2×)\n")
    print(markdown_table(["command", "wall s", "CPU s"], rows))
    if not args.no_save:
        write_results("bench_paths", {"corpus": str(corpus), "rounds": args.rounds, "commands": summary,
                                      "ratio_wall": ratio, "ratio_cpu": cpu_ratio, "machine": machine_info()})
    print(json.dumps({"ratio_wall": ratio, "ratio_cpu": cpu_ratio}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
