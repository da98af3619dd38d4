"""The audit: are the traces an absorbing first-order chain, and which outputs do they support?

Layers, each a calibrated test usable on its own:

* **R∞ check** — :func:`r_inf_check` / :func:`r_inf_check_counts`: R∞ of the chain fitted on one half against the
  held-out pass rate (MOVER interval of the difference, and its p-value; censoring-aware).
* **timing** — :func:`ks_calibrated` / :func:`ks_calibrated_counts`: KS of the success times on the integer lattice
  with a parametric-bootstrap p-value (censoring-aware); :func:`ks_paper` is the TraceToChain paper's two-sample test.
* **order** — :func:`order_test` / :func:`order_test_counts`: order 1 against order 2 (G² with a within-context
  permutation p-value; ΔAIC/ΔBIC reported), or the authors' concatenated-stream AIC (``mode="artifact"``).
* **trials** — :func:`trials_check` / :func:`trials_check_table`: do repeated trials of a task succeed independently
  with one probability (exact dispersion test), with per-task pass^k / pass@k.

:func:`audit` runs them all on repeated held-out splits and returns the :class:`Certificate`: a status per output
(certified / withheld / untested) and a decision (accept / partial / reject / insufficient evidence) at a stated
family-wise level. :func:`holdout_audit` and :func:`split_traces` are the paper's single-split protocol, kept for
reproducing its studies. The statistics behind each layer are described in ``docs/statistics.md``.

``tracetochain.audit`` is this package, and calling it runs the audit: ``tt.audit(traces)`` is
``tracetochain.analysis.audit(traces)``, and ``import tracetochain.audit as A; A.Certificate`` is the certificate
class (the function lives in the analysis, which builds on this package).

Only what a user needs is public here. The building blocks the studies, benchmarks and the analysis core use (the
layers on sufficient statistics, interval helpers, the artifact's AIC, Holm and Cauchy combination, …) live in the
private modules (``tracetochain.audit._holdout``, ``._timing``, ``._order``, ``._trials``, ``._combine``, …);
importing one of them from ``tracetochain.audit`` still works but warns and names its module.

>>> import tracetochain as tt
>>> from tracetochain.audit import audit
>>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=1)
>>> cert = audit(traces, n_bootstrap=99, n_permutations=99)
>>> cert.decision, cert.status("R(d)")
('accept', 'certified')
"""

import importlib
import sys
import types
from typing import Any

from tracetochain._compat import moved_attribute
from tracetochain.audit._certificate import (
    CERTIFICATE_SCHEMA_VERSION,
    LAYERS,
    OUTPUTS,
    Certificate,
    LayerResult,
    OutputCertification,
)
from tracetochain.audit._holdout import HoldoutResult, RInfCheck, holdout_audit, r_inf_check, split_traces
from tracetochain.audit._homogeneity import HomogeneityResult
from tracetochain.audit._order import OrderResult, order_test
from tracetochain.audit._settings import OrderSettings, TimingSettings
from tracetochain.audit._timing import TimingResult, ks_calibrated, ks_paper
from tracetochain.audit._trials import TrialsResult, trials_check

__all__ = [
    "CERTIFICATE_SCHEMA_VERSION",
    "LAYERS",
    "OUTPUTS",
    "Certificate",
    "HoldoutResult",
    "HomogeneityResult",
    "LayerResult",
    "OrderResult",
    "OrderSettings",
    "OutputCertification",
    "RInfCheck",
    "TimingResult",
    "TimingSettings",
    "TrialsResult",
    "audit",
    "holdout_audit",
    "homogeneity_test",
    "ks_calibrated",
    "ks_paper",
    "order_test",
    "r_inf_check",
    "split_traces",
    "trials_check",
]

#: Names this package exported before its public API was trimmed → the private module that defines them.
_MOVED: dict[str, str] = {
    **dict.fromkeys(("ALL_OUTPUTS", "CERTIFICATE_KIND", "build_certificate"), "_certificate"),
    **dict.fromkeys(("censoring_survival", "length_histograms"), "_censoring"),
    **dict.fromkeys(("cauchy_combination", "holm"), "_combine"),
    **dict.fromkeys(("clopper_pearson_interval", "empirical_rdc", "fit_states_and_chain", "l_inf_distance",
                     "label_traces", "mover_p_value", "r_inf_check_counts", "split_indices", "wilson_interval"),
                    "_holdout"),
    "homogeneity_from_counts": "_homogeneity",
    **dict.fromkeys(("artifact_aic", "order_observations", "order_observations_from_codes", "order_test_counts",
                     "order_triplets"), "_order"),
    **dict.fromkeys(("kolmogorov_asymptotic_pvalue", "ks_calibrated_counts", "lattice_ks_statistic",
                     "success_time_cdf", "timing_test"), "_timing"),
    **dict.fromkeys(("TaskTable", "per_task_pass_at_k", "per_task_pass_hat_k", "task_table", "trials_check_table"),
                    "_trials"),
}


#: Entry points that run the analysis on traces (``tracetochain.analysis._entry_points``): they sit above this package
#: (the analysis core builds on the statistics here), so they are imported on first use.
_ENTRY_POINTS = ("audit", "homogeneity_test")


class _AuditPackage(types.ModuleType):
    """``tracetochain.audit`` is this package — ``import tracetochain.audit as A; A.Certificate`` — and calling it
    runs :func:`tracetochain.analysis.audit` (which lives in the analysis: it runs the whole pipeline), so
    ``tt.audit(traces)`` reads as it always did. ``from tracetochain.audit import audit`` is the function itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.audit(*args, **kwargs)  # the analysis's function, via __getattr__ below


sys.modules[__name__].__class__ = _AuditPackage


def __getattr__(name: str) -> Any:
    if name in _ENTRY_POINTS:
        return getattr(importlib.import_module("tracetochain.analysis._entry_points"), name)
    return moved_attribute(__name__, name, _MOVED)
