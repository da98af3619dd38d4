"""`import tracetochain` and the command line's start-up stay light: heavy libraries load only when used.

Start-up time itself is measured in benchmarks/bench_startup.py, not here (timed tests are flaky on shared machines).
"""

from __future__ import annotations

import json
import subprocess
import sys

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
    assert set(tt.__all__) == {*tt._ATTRIBUTES, *tt._SUBMODULES, "__version__", "audit"}
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = tt.nope  # type: ignore[attr-defined]


def test_audit_name_means_the_function_whatever_was_imported_first() -> None:
    code = ("import sys, tracetochain.audit, tracetochain as tt\nfrom tracetochain import audit\n"
            "print(callable(tt.audit), callable(audit), tt.audit is sys.modules['tracetochain.audit'].audit)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "True"]
