"""Install size and time of a default ``pip install .``: a fresh venv, the wheel built from this checkout.

Measured: wall time of ``pip install <repo>`` into a new venv (wheels come from pip's configured indexes and
cache, so this is resolution + download/copy + unpacking, not compilation), the size on disk of the venv's
site-packages, and a per-distribution breakdown (the files each installed distribution's RECORD lists, pip and
setuptools excluded from the total since every venv has them). ``--extras plots,sklearn`` measures an install
with extras instead. Writes ``results/bench_install.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, write_results

REPO = Path(__file__).resolve().parents[1]
BASELINE = {"pip", "setuptools"}  # present in every fresh venv

SIZES = r"""
import json, sys, importlib.metadata as md
from pathlib import Path
out = {}
for dist in md.distributions():
    total = 0
    for f in dist.files or []:
        p = Path(dist.locate_file(f))
        try:
            total += p.stat().st_size
        except OSError:
            pass
    out[dist.metadata["Name"]] = total
print(json.dumps(out))
"""


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def measure(extras: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="tt-install-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        py = venv / "bin" / "python"
        site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        before = dir_size(site)
        target = f"{REPO}[{extras}]" if extras else str(REPO)
        t0 = time.perf_counter()
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", target],
                       check=True)
        seconds = time.perf_counter() - t0
        after = dir_size(site)
        per_dist = json.loads(subprocess.run([str(py), "-c", SIZES], capture_output=True, text=True,
                                             check=True).stdout)
        shutil.rmtree(venv / "lib", ignore_errors=True)
    added = {k: v for k, v in per_dist.items() if k not in BASELINE}
    return {"extras": extras, "install_s": seconds, "site_packages_mb": after / 2**20,
            "added_mb": (after - before) / 2**20,
            "distributions_mb": {k: v / 2**20 for k, v in sorted(added.items(), key=lambda kv: -kv[1])}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--extras", default="", help="comma list of extras to install (default: none)")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    res = measure(args.extras)
    dists = res["distributions_mb"]
    assert isinstance(dists, dict)
    rows = [[name, f"{mb:.1f}"] for name, mb in dists.items()]
    print(f"pip install {'.[' + args.extras + ']' if args.extras else '.'}: {res['install_s']:.0f} s, "
          f"site-packages {res['site_packages_mb']:.0f} MB ({res['added_mb']:.0f} MB added)")
    print(markdown_table(["distribution", "MB"], rows))
    if not args.no_save:
        name = "bench_install" + (f"_{args.extras.replace(',', '_')}" if args.extras else "")
        print(f"wrote {write_results(name, {'machine': machine_info(), **res})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
