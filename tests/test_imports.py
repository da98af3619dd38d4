"""`import tracetochain` and the command line's start-up stay light: heavy libraries load only when used.

Start-up time itself is measured in benchmarks/bench_startup.py, not here (timed tests are flaky on shared machines).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("scipy", "pyarrow", "matplotlib", "sklearn", "polars", "pandas", "dask")


def loaded_after(code: str) -> list[str]:
    """The heavy top-level packages in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return [m for m in json.loads(out.strip().splitlines()[-1]) if m in HEAVY]


@pytest.mark.parametrize("code", [
    "import tracetochain",
    "import tracetochain as tt; tt.__version__; dir(tt)",
    "import tracetochain.cli",
    "from tracetochain.cli import app",
])
def test_import_loads_no_heavy_dependency(code: str) -> None:
    assert loaded_after(code) == []


def test_help_loads_no_heavy_dependency() -> None:
    code = ("import sys\nfrom tracetochain.cli import main\nsys.argv = ['tracetochain', 'fit', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass")
    assert loaded_after(code) == []


def test_every_public_name_resolves() -> None:
    import tracetochain as tt

    for name in tt.__all__:
        assert getattr(tt, name) is not None, name
    assert set(tt.__all__) <= set(dir(tt))
    assert set(tt.__all__) == {*tt._ATTRIBUTES, *tt._SUBMODULES, "__version__"}
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = tt.nope  # type: ignore[attr-defined]


def test_audit_name_is_the_callable_package_whatever_was_imported_first() -> None:
    code = ("import sys, tracetochain.audit, tracetochain as tt\nfrom tracetochain import audit\n"
            "print(callable(tt.audit), callable(audit), tt.audit is sys.modules['tracetochain.audit'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "True"]


# What `tracetochain fit` on a canonical file must not import: each is ≥ 0.1 CPU-s of start-up (scipy.stats alone
# ~1 CPU-s) that no part of the default fit needs. pandas is on the list even when installed: pyarrow's pandas shim
# would import it on the first `pa.array` (~0.4 s), and the command line tells pyarrow it is absent
# (cli/_input.pyarrow_without_pandas). scipy.sparse.linalg and scipy.sparse.csgraph serve only chains of more than
# 400 states (SuperLU) or 600 (ARPACK); the reachability search before every solve is NumPy.
FIT_DENY = ("scipy.stats", "scipy.optimize", "scipy.interpolate", "scipy.integrate", "scipy.spatial",
            "scipy.sparse.linalg", "scipy.sparse.csgraph", "sklearn", "polars", "pandas", "jinja2", "starlette",
            "uvicorn", "dask", "distributed", "matplotlib", "opentelemetry", "yaml", "hypothesis", "rich", "joblib")

_WATCH_DENIED = r'''
import json, os, runpy, sys, traceback
DENY = set(json.loads(sys.argv[1]))
seen = {}
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name in DENY and name not in seen:
            frames = [f for f in traceback.extract_stack()[:-1] if "importlib" not in f.filename]
            seen[name] = [frames[-1].filename, frames[-1].line] if frames else ["?", ""]
        return None
sys.meta_path.insert(0, Watch())
sys.argv = ["tracetochain", *sys.argv[2:]]
try:
    runpy.run_module("tracetochain", run_name="__main__")
except SystemExit as e:
    if e.code not in (0, None):
        raise
print("DENIED " + json.dumps(seen))
'''


def denied_imports(args: list[str], deny: tuple[str, ...] = FIT_DENY) -> dict[str, str]:
    """Deny-listed modules a CLI run imported, each with the file and line whose import loaded it."""
    out = subprocess.run([sys.executable, "-c", _WATCH_DENIED, json.dumps(deny), *args], capture_output=True,
                         text=True, check=True).stdout
    seen: dict[str, list[str]] = json.loads(out.rsplit("DENIED ", 1)[1])
    return {m: f"{file}: {line}" for m, (file, line) in seen.items()}


def test_fit_imports_nothing_on_the_deny_list(tmp_path: Path) -> None:
    """One run of the command, watched for the deny-list and for scipy.sparse, which it does import (the counts): so
    an empty answer means the modules were not imported, not that the watcher saw nothing."""
    from tracetochain.datasets import example_path

    out = tmp_path / "chain.json"
    seen = denied_imports(["fit", str(example_path()), "-o", str(out), "-q"], deny=(*FIT_DENY, "scipy.sparse"))
    assert "tracetochain" in seen.pop("scipy.sparse", "not imported")
    assert seen == {}
    assert out.exists()


def test_compare_does_not_import_scipy_stats() -> None:
    """compare's homogeneity test (chi2.sf), the bootstrap's Poisson weights (poisson.cdf) and the held-out checks'
    intervals (norm.ppf, beta.ppf) call scipy.special's routines, which are those distributions' own, bit for bit:
    importing scipy.stats for them cost ~1 CPU-s of a 3 s command."""
    from tracetochain.datasets import example_path

    seen = denied_imports(["compare", str(example_path()), str(example_path())],
                          deny=("scipy.stats", "scipy.special"))
    assert "tracetochain" in seen.pop("scipy.special", "not imported")
    assert seen == {}


def test_audit_does_not_import_scipy_stats() -> None:
    """The audit's order layer draws its random tables with numpy (audit._order.random_tables, tested against the
    exact law) instead of scipy.stats.random_table, whose import was ~0.5 s of every audit and report."""
    from tracetochain.datasets import example_path

    seen = denied_imports(["audit", str(example_path())], deny=("scipy.stats", "scipy.special"))
    assert "tracetochain" in seen.pop("scipy.special", "not imported")
    assert seen == {}


def test_the_special_functions_are_the_distributions_own() -> None:
    """What the swap above rests on: the same values, bit for bit, over each function's range of use."""
    import numpy as np
    import scipy.special as sc
    from scipy.stats import beta, chi2, norm, poisson

    rng = np.random.default_rng(0)
    q = rng.random(10_000)
    a, b = rng.random(2_000) * 500 + 0.5, rng.random(2_000) * 500 + 0.5
    x, df = rng.random(2_000) * 300, rng.integers(1, 500, 2_000)
    assert np.array_equal(norm.ppf(q), sc.ndtri(q))
    assert np.array_equal(beta.ppf(q[:2_000], a, b), sc.betaincinv(a, b, q[:2_000]))
    assert np.array_equal(chi2.sf(x, df), sc.chdtrc(df, x))
    assert np.array_equal(poisson.cdf(np.arange(40), 1.0), sc.pdtr(np.arange(40), 1.0))


def test_pyarrow_still_converts_pandas_after_the_command_line_hid_it() -> None:
    """The probe that keeps pyarrow from importing pandas on its first array leaves pandas usable: pyarrow's own
    conversions import it on demand, both ways."""
    pytest.importorskip("pandas")
    code = ("import sys\nfrom tracetochain.cli._input import pyarrow_without_pandas\npyarrow_without_pandas()\n"
            "import pyarrow as pa\nt = pa.table({'a': [1, 2]})\nassert 'pandas' not in sys.modules\n"
            "df = t.to_pandas()\nprint(type(df).__name__, pa.Table.from_pandas(df).equals(t))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["DataFrame", "True"]
