"""``tracetochain.audit`` is one thing (issue 28): the package, which runs the audit when called.

``audit()`` lives in the analysis (it runs the whole pipeline, above the statistics of this package); the package
is importable as a package and ``tt.audit(traces)`` still reads as the function call it always was.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import tracetochain as tt


def test_the_package_is_a_package_in_any_import_order() -> None:
    # A fresh interpreter for each order: the answer must not depend on what was imported first.
    orders = (
        "import tracetochain.audit as A; assert A.Certificate.__name__ == 'Certificate'",
        "import tracetochain as tt; tt.audit; import tracetochain.audit as A; assert A.LayerResult",
        "from tracetochain import audit; import tracetochain.audit as A; assert A is audit and A.OUTPUTS",
        "from tracetochain.audit import audit; import tracetochain as tt; assert tt.audit.Certificate",
    )
    for code in orders:
        subprocess.run([sys.executable, "-c", code], check=True)


def test_calling_the_package_runs_the_analysis_audit() -> None:
    import tracetochain.audit as A
    from tracetochain.analysis import audit as analysis_audit

    assert isinstance(tt.audit, types.ModuleType) and tt.audit is A
    assert A.audit is analysis_audit and importlib.import_module("tracetochain.audit").audit is analysis_audit
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 200, seed=1)
    called = tt.audit(traces, n_bootstrap=49, n_permutations=49, seed=2)
    direct = analysis_audit(traces, n_bootstrap=49, n_permutations=49, seed=2)
    assert isinstance(called, A.Certificate)
    assert called.to_dict() == direct.to_dict()
