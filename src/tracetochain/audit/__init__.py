"""The audit certificate (``paper-spec.md`` §2.6–2.8, §4; ``math.md`` §7–8): are the traces a first-order chain?

Layers, each usable on its own, and the certificate that combines them:

* :func:`timing_test` — KS on success first-passage times: the calibrated lattice statistic with a
  parametric-bootstrap p-value (:func:`ks_calibrated`, default) or the paper's two-sample test (:func:`ks_paper`).
* :func:`order_test` — order 1 vs order 2 on per-trace likelihoods scored on the same observations (ΔAIC, ΔBIC,
  G² with a within-context permutation p-value), or the authors' concatenated-stream AIC (``mode="artifact"``).
* :func:`split_traces` / :func:`holdout_audit` — the held-out protocol: split raw traces, fit on one half, audit
  the other (L∞ between R(d) and the held-out RDC, R∞ against the held-out pass rate with an interval).
* :func:`trials_check` — per-task pass^k / pass@k against R∞^k / 1 − (1 − R∞)^k (Cor. 5).
* :func:`audit` → :class:`Certificate` — decision accept / partial / reject with the certified and withheld
  outputs.

>>> import tracetochain as tt
>>> from tracetochain.audit import audit
>>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=1)
>>> cert = audit(traces, n_bootstrap=99, n_permutations=99)
>>> cert.decision
'accept'
"""

from tracetochain.audit._certificate import (
    ALL_OUTPUTS,
    ASYMPTOTIC_OUTPUTS,
    CERTIFICATE_KIND,
    CERTIFICATE_SCHEMA_VERSION,
    TIMING_OUTPUTS,
    Certificate,
    audit,
    certify,
)
from tracetochain.audit._holdout import (
    HoldoutResult,
    RInfCheck,
    clopper_pearson_interval,
    empirical_rdc,
    fit_states_and_chain,
    holdout_audit,
    l_inf_distance,
    label_traces,
    r_inf_check,
    r_inf_check_counts,
    split_indices,
    split_traces,
    wilson_interval,
)
from tracetochain.audit._homogeneity import HomogeneityResult, homogeneity_from_counts, homogeneity_test
from tracetochain.audit._order import (
    OrderObservations,
    OrderResult,
    artifact_aic,
    order_observations,
    order_observations_from_codes,
    order_test,
    order_test_counts,
    order_triplets,
)
from tracetochain.audit._settings import OrderSettings, TimingSettings
from tracetochain.audit._studies import simulate_memory_traces, ss7_chain
from tracetochain.audit._timing import (
    TimingResult,
    kolmogorov_asymptotic_pvalue,
    ks_calibrated,
    ks_calibrated_times,
    ks_paper,
    lattice_ks_statistic,
    replicate_counts,
    success_time_cdf,
    timing_test,
)
from tracetochain.audit._trials import (
    TrialsResult,
    batched_r_inf,
    per_task_pass_at_k,
    per_task_pass_hat_k,
    trials_check,
)

__all__ = [
    "ALL_OUTPUTS",
    "ASYMPTOTIC_OUTPUTS",
    "CERTIFICATE_KIND",
    "CERTIFICATE_SCHEMA_VERSION",
    "TIMING_OUTPUTS",
    "Certificate",
    "HoldoutResult",
    "HomogeneityResult",
    "OrderObservations",
    "OrderResult",
    "OrderSettings",
    "RInfCheck",
    "TimingResult",
    "TimingSettings",
    "TrialsResult",
    "artifact_aic",
    "audit",
    "batched_r_inf",
    "certify",
    "clopper_pearson_interval",
    "empirical_rdc",
    "fit_states_and_chain",
    "holdout_audit",
    "homogeneity_from_counts",
    "homogeneity_test",
    "kolmogorov_asymptotic_pvalue",
    "ks_calibrated",
    "ks_calibrated_times",
    "ks_paper",
    "l_inf_distance",
    "label_traces",
    "lattice_ks_statistic",
    "order_observations",
    "order_observations_from_codes",
    "order_test",
    "order_test_counts",
    "order_triplets",
    "per_task_pass_at_k",
    "per_task_pass_hat_k",
    "r_inf_check",
    "r_inf_check_counts",
    "replicate_counts",
    "simulate_memory_traces",
    "split_indices",
    "split_traces",
    "ss7_chain",
    "success_time_cdf",
    "timing_test",
    "trials_check",
    "wilson_interval",
]
