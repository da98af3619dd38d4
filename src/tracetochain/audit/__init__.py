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
reproducing its studies.

>>> import tracetochain as tt
>>> from tracetochain.audit import audit
>>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=1)
>>> cert = audit(traces, n_bootstrap=99, n_permutations=99)
>>> cert.decision, cert.status("R(d)")
('accept', 'certified')
"""

from tracetochain.audit._censoring import censoring_survival, length_histograms
from tracetochain.audit._certificate import (
    ALL_OUTPUTS,
    CERTIFICATE_KIND,
    CERTIFICATE_SCHEMA_VERSION,
    LAYERS,
    OUTPUTS,
    Certificate,
    LayerResult,
    OutputCertification,
    audit,
    build_certificate,
)
from tracetochain.audit._combine import cauchy_combination, holm
from tracetochain.audit._holdout import (
    HoldoutResult,
    RInfCheck,
    clopper_pearson_interval,
    empirical_rdc,
    fit_states_and_chain,
    holdout_audit,
    l_inf_distance,
    label_traces,
    mover_p_value,
    r_inf_check,
    r_inf_check_counts,
    split_indices,
    split_traces,
    wilson_interval,
)
from tracetochain.audit._homogeneity import HomogeneityResult, homogeneity_from_counts, homogeneity_test
from tracetochain.audit._order import (
    OrderResult,
    artifact_aic,
    order_observations,
    order_observations_from_codes,
    order_test,
    order_test_counts,
    order_triplets,
)
from tracetochain.audit._settings import OrderSettings, TimingSettings
from tracetochain.audit._timing import (
    TimingResult,
    kolmogorov_asymptotic_pvalue,
    ks_calibrated,
    ks_calibrated_counts,
    ks_paper,
    lattice_ks_statistic,
    success_time_cdf,
    timing_test,
)
from tracetochain.audit._trials import (
    TaskTable,
    TrialsResult,
    per_task_pass_at_k,
    per_task_pass_hat_k,
    task_table,
    trials_check,
    trials_check_table,
)

__all__ = [
    "ALL_OUTPUTS",
    "CERTIFICATE_KIND",
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
    "TaskTable",
    "TimingResult",
    "TimingSettings",
    "TrialsResult",
    "artifact_aic",
    "audit",
    "build_certificate",
    "cauchy_combination",
    "censoring_survival",
    "clopper_pearson_interval",
    "empirical_rdc",
    "fit_states_and_chain",
    "holdout_audit",
    "holm",
    "homogeneity_from_counts",
    "homogeneity_test",
    "kolmogorov_asymptotic_pvalue",
    "ks_calibrated",
    "ks_calibrated_counts",
    "ks_paper",
    "l_inf_distance",
    "label_traces",
    "lattice_ks_statistic",
    "length_histograms",
    "mover_p_value",
    "order_observations",
    "order_observations_from_codes",
    "order_test",
    "order_test_counts",
    "order_triplets",
    "per_task_pass_at_k",
    "per_task_pass_hat_k",
    "r_inf_check",
    "r_inf_check_counts",
    "split_indices",
    "split_traces",
    "success_time_cdf",
    "task_table",
    "timing_test",
    "trials_check",
    "trials_check_table",
    "wilson_interval",
]
