"""One-call entry points that run the analysis on traces: :func:`audit` (the certificate alone) and
:func:`homogeneity_test` (do two trace sets share one chain?).

The statistics themselves live in :mod:`tracetochain.audit` and work on sufficient statistics; these functions only
label the traces, summarise them with the analysis core and hand the summaries to the statistic. Users import them
from :mod:`tracetochain.audit` (and ``tracetochain.audit``), which re-exports them on first use.
"""

from __future__ import annotations

from typing import Any

from tracetochain._compat import renamed_parameters
from tracetochain.analysis._analyze import analyze, label_steps
from tracetochain.analysis._summary import SummarySpec, reindex_summary, summarize_traces
from tracetochain.audit import Certificate, HomogeneityResult
from tracetochain.audit.shared import homogeneity_from_counts
from tracetochain.traces import TraceTable
from tracetochain.uncertainty.shared import tasks_repeat


def audit(traces: Any, **options: Any) -> Certificate:
    """Fit and audit ``traces``: the certificate of :func:`tracetochain.analysis.analyze` (no intervals).

    Options are those of :func:`~tracetochain.analysis.analyze` (states, prior, splits, levels, …); the fitted chain
    is ``certificate.chain``.

    >>> import tracetochain as tt
    >>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 400, seed=3)
    >>> cert = audit(traces, n_bootstrap=99, n_permutations=99)
    >>> cert.decision, cert.status("R_inf")
    ('accept', 'certified')
    """
    options.setdefault("intervals", None)
    cert = analyze(traces, **options).certificate
    assert cert is not None
    return cert


@renamed_parameters(n_replicates="samples")
def homogeneity_test(a: TraceTable, b: TraceTable, *, states: list[str] | tuple[str, ...] | None = None,
                     level: float = 0.05, samples: int = 200, seed: int = 0) -> HomogeneityResult:
    """Test whether two labelled trace sets share one transition kernel, state by state
    (:mod:`tracetochain.audit._homogeneity`: per-state G² with the Rao–Scott design-effect correction, Holm).

    Both tables must carry state labels on the same vocabulary (``states``; default: the union of their labels in
    order of first appearance, A first). Invalid traces are left out. The design effects come from ``samples``
    Poisson-bootstrap replicates of each set (by task when tasks repeat).
    """
    summaries = []
    for k, t in enumerate((a, b)):
        codes, names = label_steps(t, None)
        spec = SummarySpec(seed=seed + k, n_splits=0, n_replicates=samples,
                           resample_by="task" if tasks_repeat(t) else "trace")
        summaries.append(summarize_traces(t, codes, names, spec, check_traces=False))
    vocab = tuple(states) if states is not None else tuple(dict.fromkeys([*summaries[0].state_names,
                                                                           *summaries[1].state_names]))
    sa, sb = (reindex_summary(x, vocab) for x in summaries)
    return homogeneity_from_counts(sa.counts.outcome_matrix(), sb.counts.outcome_matrix(), list(vocab), level=level,
                                   n_traces=(sa.n_usable, sb.n_usable), boot=(sa.boot, sb.boot), seed=seed)
