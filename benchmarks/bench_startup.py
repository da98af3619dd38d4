"""Start-up cost: ``import tracetochain`` and ``tracetochain [COMMAND] --help``, each in fresh processes.

Wall time of the whole process (interpreter start-up included; the bare interpreter, ``python -c pass``, is
reported beside it) and its CPU time (user + system, which load on a shared machine barely moves), medians of
``--repeats`` runs interleaved round by round so that load on a shared machine hits every case alike. Also
records which heavy libraries ``import tracetochain`` loads (none, by design; ``tests/test_imports.py`` checks it)
and the ten slowest imports of ``-X importtime`` for a ``fit --help``.
Writes ``results/bench_startup.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results

COMMANDS = ["fit", "metrics", "report", "audit", "whatif", "export", "compare", "monitor", "convert", "formats"]
HEAVY = ["scipy", "pyarrow", "matplotlib", "sklearn", "polars", "pandas", "numpy"]


def cases() -> dict[str, list[str]]:
    py = sys.executable
    out = {"python -c pass": [py, "-c", "pass"], "import tracetochain": [py, "-c", "import tracetochain"],
           "tracetochain --help": [py, "-m", "tracetochain", "--help"]}
    out.update({f"tracetochain {c} --help": [py, "-m", "tracetochain", c, "--help"] for c in COMMANDS})
    return out


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall time, and CPU time (user + system) of the child: the latter barely moves with machine load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def slowest_imports(cmd: list[str], n: int = 10) -> list[tuple[str, float]]:
    err = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], capture_output=True, text=True).stderr
    rows = []
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("  "):
            rows.append((parts[2].strip(), int(parts[1]) / 1e6))
    return sorted(rows, key=lambda r: -r[1])[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    todo = cases()
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in todo}
    for cmd in todo.values():  # warm the file cache once
        timed(cmd)
    for _ in range(args.repeats):
        for name, cmd in todo.items():
            runs[name].append(timed(cmd))
    probe = "import json, sys, tracetochain; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                       check=True).stdout)
    heavy = [m for m in HEAVY if m in loaded]
    res = {name: {"median_s": median([w for w, _ in v]), "min_s": min(w for w, _ in v),
                  "median_cpu_s": median([c for _, c in v]), "runs": v} for name, v in runs.items()}
    print(markdown_table(["command", "median s", "min s", "median CPU s"],
                         [[n, f"{r['median_s']:.3f}", f"{r['min_s']:.3f}", f"{r['median_cpu_s']:.3f}"]
                          for n, r in res.items()]))
    print(f"heavy libraries loaded by `import tracetochain`: {heavy or 'none'}")
    top = slowest_imports(todo["tracetochain fit --help"])
    if not args.no_save:
        doc = {"machine": machine_info(), "repeats": args.repeats, "cases": res, "heavy_loaded_by_import": heavy,
               "fit_help_slowest_imports": top}
        print(f"wrote {write_results('bench_startup', doc)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
