"""The audit certificate: one decision, every statistic, and which outputs may be reported (``paper-spec.md`` §2.7–2.8).

Decision rule (Alg. 2 plus the paper's selective acceptance, §4.3):

* **accept** iff the KS timing layer retains the model (p_KS > ``ks_level``) **and** the order layer keeps first
  order (by default ΔAIC ≤ 0; configurable, e.g. the permutation G² test). Every output is certified.
* **partial** when timing is rejected (p_KS ≤ ``ks_level`` or undefined) but the R∞ check holds (R∞ inside the
  interval of the held-out pass rate — in-sample when there is no split). R∞, pass@k, pass^k and ΔR∞ stay
  certified; R(d), the RDC, horizons, step budgets and mean steps are **withheld**.
  (``partial_when="any"`` also grants partial when only the order layer rejects.)
* **reject** otherwise: everything is withheld.

When the i.i.d.-trials check is flagged (Cor. 5), pass@k and pass^k — which assume exchangeable trials — move to the
withheld list whatever the decision (report the per-task empirical estimates instead).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from tracetochain._version import __version__
from tracetochain.audit._common import INVALID, fmt, json_dict, trace_lengths
from tracetochain.audit._holdout import (
    IntervalMethod,
    RInfCheck,
    SplitBy,
    empirical_rdc,
    fit_states_and_chain,
    holdout_audit,
    l_inf_distance,
    label_traces,
    r_inf_check,
)
from tracetochain.audit._order import OrderResult
from tracetochain.audit._settings import OrderSettings, TimingSettings
from tracetochain.audit._timing import TimingResult
from tracetochain.audit._trials import TrialsResult, trials_check
from tracetochain.chain import AbsorbingChain
from tracetochain.traces import TraceTable

CERTIFICATE_KIND = "tracetochain.certificate"
CERTIFICATE_SCHEMA_VERSION = 1

#: Outputs that depend only on R∞ (kept by a partial certificate).
ASYMPTOTIC_OUTPUTS = ("R_inf", "pass@k", "pass^k", "delta_R_inf")
#: Outputs that depend on the first-passage law (withheld when timing is rejected).
TIMING_OUTPUTS = ("R(d)", "RDC", "horizons", "step_budgets", "mean_steps")
ALL_OUTPUTS = ASYMPTOTIC_OUTPUTS + TIMING_OUTPUTS
IID_OUTPUTS = ("pass@k", "pass^k")

Decision = Literal["accept", "partial", "reject"]


@dataclass(frozen=True, eq=False)
class Certificate:
    """The audited verdict on a fitted chain. Build with :func:`audit` (or :func:`certify` from layer results)."""

    decision: Decision
    certified: tuple[str, ...]
    withheld: tuple[str, ...]
    reasons: tuple[str, ...]
    timing: TimingResult
    order: OrderResult
    r_inf_check: RInfCheck
    l_inf: float | None
    horizon: int | None
    holdout: dict[str, Any] | None
    trials: TrialsResult | None
    settings: dict[str, Any]
    ks_level: float
    chain: AbsorbingChain | None = field(default=None, repr=False)
    state_model: Any = field(default=None, repr=False)
    model_rdc: tuple[float, ...] = field(default=(), repr=False)
    empirical_rdc: tuple[float, ...] = field(default=(), repr=False)

    # ------------------------------------------------------------------ statistics
    @property
    def accepted(self) -> bool:
        return self.decision == "accept"

    @property
    def p_ks(self) -> float | None:
        return self.timing.p_value

    @property
    def D(self) -> float | None:
        return self.timing.statistic

    @property
    def delta_aic(self) -> float | None:
        return self.order.delta_aic

    @property
    def delta_bic(self) -> float | None:
        return self.order.delta_bic

    @property
    def g2(self) -> float | None:
        return self.order.g2

    @property
    def p_order(self) -> float | None:
        return self.order.p_value

    @property
    def r_inf(self) -> float:
        return self.r_inf_check.r_inf

    @property
    def pass_rate(self) -> float:
        return self.r_inf_check.pass_rate

    def statistics(self) -> dict[str, Any]:
        """Every headline number, flat (None where undefined)."""
        return json_dict({
            "p_ks": self.p_ks, "D": self.D, "ks_mode": self.timing.mode, "n_times": self.timing.n_times,
            "delta_aic": self.delta_aic, "delta_bic": self.delta_bic, "g2": self.g2, "df": self.order.df,
            "p_order": self.order.p_value, "p_order_permutation": self.order.p_permutation,
            "p_order_chi2": self.order.p_chi2,
            "keeps_order1": self.order.keeps_order1, "l_inf": self.l_inf, "horizon": self.horizon,
            "r_inf": self.r_inf, "pass_rate": self.pass_rate,
            "pass_rate_interval": [self.r_inf_check.lower, self.r_inf_check.upper],
            "r_inf_check_holds": self.r_inf_check.holds, "r_inf_in_sample": self.r_inf_check.in_sample,
            "trials_flagged": None if self.trials is None else self.trials.flagged,
        })

    # ------------------------------------------------------------------ io
    def to_dict(self, *, include_chain: bool = False, include_curves: bool = True) -> dict[str, Any]:
        """The versioned JSON document (no NaN: undefined numbers are null with a reason)."""
        holdout = None
        if self.holdout is not None:
            holdout = {k: v for k, v in self.holdout.items() if k not in ("fit_indices", "test_indices")}
        doc: dict[str, Any] = {
            "kind": CERTIFICATE_KIND,
            "schema_version": CERTIFICATE_SCHEMA_VERSION,
            "tracetochain_version": __version__,
            "decision": self.decision,
            "certified": list(self.certified),
            "withheld": list(self.withheld),
            "reasons": list(self.reasons),
            "statistics": self.statistics(),
            "timing": self.timing.to_dict(),
            "order": self.order.to_dict(),
            "r_inf_check": self.r_inf_check.to_dict(),
            "holdout": holdout,
            "trials": None if self.trials is None else self.trials.to_dict(),
            "settings": self.settings,
        }
        if include_curves:
            doc["rdc"] = {"horizon": self.horizon, "model": list(self.model_rdc),
                          "empirical": list(self.empirical_rdc), "l_inf": self.l_inf,
                          "empirical_denominator": "all (non-invalid) traces of the compared set"}
        if self.chain is not None:
            doc["chain"] = (self.chain.to_dict() if include_chain else
                            {"n_states": self.chain.n_states, "state_names": list(self.chain.state_names),
                             "r_inf": self.chain.r_inf})
        return json_dict(doc)

    def to_json(self, **kwargs: Any) -> str:
        import json

        return json.dumps(self.to_dict(**kwargs), indent=2, allow_nan=False, ensure_ascii=False)

    # ------------------------------------------------------------------ display
    def verdict(self) -> str:
        """A readable paragraph: the decision, why, and what may be reported."""
        head = {"accept": "ACCEPT — the traces support the first-order absorbing chain",
                "partial": "PARTIAL — the asymptotic outputs are supported, the timing outputs are not",
                "reject": "REJECT — the traces do not support the chain"}[self.decision]
        text = head + ". " + " ".join(self.reasons)
        if self.certified:
            text += " Certified: " + ", ".join(self.certified) + "."
        if self.withheld:
            text += " Withheld: " + ", ".join(self.withheld) + "."
        return text

    def __str__(self) -> str:
        lines = [f"Audit certificate: {self.decision.upper()}", "", self.verdict(), "",
                 "  " + self.timing.describe(), "  " + self.order.describe(), "  " + self.r_inf_check.describe()]
        if self.l_inf is not None:
            lines.append(f"  L∞(R(d), {'held-out' if self.holdout else 'in-sample'} RDC) over d = 0..{self.horizon}: "
                         f"{fmt(self.l_inf)}")
        if self.holdout is not None:
            h = self.holdout
            lines.append(f"  split: {h['n_train']} fit / {h['n_test']} test traces by {h['by']} (seed {h['seed']})")
        if self.trials is not None:
            lines += ["  " + ln for ln in self.trials.describe().splitlines()]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"Certificate(decision={self.decision!r}, p_ks={fmt(self.p_ks, 4)}, delta_aic={fmt(self.delta_aic, 1)},"
                f" r_inf={fmt(self.r_inf)}, withheld={list(self.withheld)})")

    def _repr_html_(self) -> str:
        colour = {"accept": "#1a7f37", "partial": "#9a6700", "reject": "#cf222e"}[self.decision]
        rows = [("KS timing", self.timing.describe()), ("Markov order", self.order.describe()),
                ("R∞ check", self.r_inf_check.describe()), ("L∞", fmt(self.l_inf)),
                ("certified", ", ".join(self.certified) or "—"), ("withheld", ", ".join(self.withheld) or "—")]
        if self.trials is not None:
            rows.append(("i.i.d. trials", self.trials.describe()))
        body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in rows)
        return (f"<div><b style='color:{colour}'>Audit certificate: {html.escape(self.decision.upper())}</b>"
                f"<p>{html.escape(self.verdict())}</p><table>{body}</table></div>")


# ------------------------------------------------------------------------------------------------ decision
def certify(timing: TimingResult, order: OrderResult, rinf: RInfCheck, *, ks_level: float = 0.05,
            trials: TrialsResult | None = None, partial_when: Literal["timing", "any"] = "timing",
            **fields: Any) -> Certificate:
    """Apply the decision rule (module docstring) to layer results and build the :class:`Certificate`."""
    if partial_when not in ("timing", "any"):
        raise ValueError(f"partial_when must be 'timing' or 'any', got {partial_when!r}")
    reasons: list[str] = []
    p = timing.p_value
    timing_ok = p is not None and p > ks_level
    if p is None:
        reasons.append(f"The timing layer is undefined ({'; '.join(timing.undefined.values())}), so the "
                       "first-passage law cannot be certified.")
    elif timing_ok:
        reasons.append(f"The success-time law fits (KS D = {fmt(timing.statistic)}, p = {fmt(p, 4)} > {ks_level}).")
    else:
        reasons.append(f"The success-time law is rejected (KS D = {fmt(timing.statistic)}, p = {fmt(p, 4)} ≤ "
                       f"{ks_level}).")
    order_ok = order.keeps_order1
    crit = {"aic": f"ΔAIC = {fmt(order.delta_aic, 1)}", "bic": f"ΔBIC = {fmt(order.delta_bic, 1)}",
            "permutation": f"permutation p = {fmt(order.p_permutation, 4)}",
            "chi2": f"χ² p = {fmt(order.p_chi2, 4)}"}[order.criterion]
    reasons.append(f"The order layer {'keeps' if order_ok else 'rejects'} first order ({crit}).")
    where = "in-sample" if rinf.in_sample else "held-out"
    if rinf.difference_lower is not None and rinf.difference_upper is not None:
        reasons.append(f"R∞ = {fmt(rinf.r_inf)} is {'consistent' if rinf.holds else 'inconsistent'} with the "
                       f"{where} pass rate {fmt(rinf.pass_rate)} (difference {rinf.r_inf - rinf.pass_rate:+.3f}, "
                       f"{rinf.confidence:.0%} interval [{rinf.difference_lower:+.3f}, {rinf.difference_upper:+.3f}] "
                       "counting the noise of both halves).")
    else:
        reasons.append(f"R∞ = {fmt(rinf.r_inf)} is {'inside' if rinf.holds else 'outside'} the {rinf.confidence:.0%} "
                       f"interval of the {where} pass rate {fmt(rinf.pass_rate)} [{fmt(rinf.lower)}, "
                       f"{fmt(rinf.upper)}]"
                       + (" (in-sample this is close to an identity, weak evidence)." if rinf.in_sample else "."))
    if timing_ok and order_ok:
        decision: Decision = "accept"
        certified, withheld = list(ALL_OUTPUTS), []
    elif rinf.holds and (not timing_ok or partial_when == "any"):
        decision = "partial"
        certified, withheld = list(ASYMPTOTIC_OUTPUTS), list(TIMING_OUTPUTS)
    else:
        decision = "reject"
        certified, withheld = [], list(ALL_OUTPUTS)
    if trials is not None and trials.flagged:
        moved = [o for o in IID_OUTPUTS if o in certified]
        certified = [o for o in certified if o not in IID_OUTPUTS]
        withheld += moved
        reasons.append("Repeated trials are not exchangeable draws from one chain (per-task pass^k exceeds R∞^k at "
                       f"k = {', '.join(map(str, trials.flagged_ks))}): the chain's pass@k/pass^k are withheld; "
                       "report the per-task estimates.")
    return Certificate(decision, tuple(certified), tuple(withheld), tuple(reasons), timing, order, rinf,
                       ks_level=ks_level, trials=trials, **fields)


# ------------------------------------------------------------------------------------------------ audit
def audit(traces: TraceTable, *, states: Any = "label", pseudocount: float = 1.0, unvisited: str = "auto",
          initial: str = "empirical", holdout: bool = True, test_fraction: float = 0.5, split_by: SplitBy = "trace",
          seed: int = 0, timing: TimingSettings | None = None, order: OrderSettings | None = None,
          horizon: int | None = None, interval: IntervalMethod = "wilson", confidence: float = 0.95,
          trials: bool = True, trials_bootstrap: int = 2000, partial_when: Literal["timing", "any"] = "timing",
          state_options: dict[str, Any] | None = None, **layer_options: Any) -> Certificate:
    """Fit and audit: states + chain, the KS timing layer, the Markov-order layer, the R∞ check, the i.i.d.-trials
    check, and the decision. Returns the :class:`Certificate`; the fitted chain is ``certificate.chain``.

    Parameters
    ----------
    traces : TraceTable
        Raw traces.
    states : str, state estimator, fitted state model or callable, default "label"
        How steps become states (see :func:`~tracetochain.audit.fit_states_and_chain`); ``state_options`` go to a
        spec string (e.g. ``states="categorical", state_options={"vocabulary": "shell"}``).
    pseudocount, unvisited, initial
        Chain-estimator settings.
    holdout : bool, default True
        Split the raw traces (``test_fraction``, ``split_by``, ``seed``) and audit the test half against the chain
        fitted on the fit half; False fits and audits in-sample.
    seed : int, default 0
        Seeds the split directly and, through ``SeedSequence(seed).spawn``, the KS bootstrap, the permutation test
        and the trials bootstrap.
    timing, order : TimingSettings, OrderSettings, optional
        Layer settings. Shortcuts accepted as keyword arguments: ``ks_mode``, ``ks_level``, ``n_bootstrap``,
        ``max_steps`` (timing) and ``order_mode``, ``order_criterion``, ``n_permutations``, ``parameter_count``,
        ``include_outcomes`` (order).
    horizon : int, optional
        D of the L∞ comparison (default: the longest compared trace).
    interval, confidence
        The pass-rate interval of the R∞ check (Wilson or Clopper–Pearson).
    trials, trials_bootstrap
        Run the i.i.d.-trials check (when task ids exist) with this many bootstrap replicates.
    partial_when : {"timing", "any"}, default "timing"
        Whether a partial certificate needs a timing rejection (the paper's rule) or any layer rejection.

    Examples
    --------
    >>> import tracetochain as tt
    >>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 400, seed=3)
    >>> cert = audit(traces, holdout=False, n_bootstrap=99, n_permutations=99)
    >>> cert.decision, cert.to_dict()["kind"]
    ('accept', 'tracetochain.certificate')
    """
    timing, order = _settings_from(timing, order, layer_options)
    ks_seed, order_seed, trials_seed = np.random.SeedSequence(seed).spawn(3)
    settings: dict[str, Any] = {
        "states": states if isinstance(states, str) else type(states).__name__,
        "state_options": dict(state_options or {}), "pseudocount": pseudocount, "unvisited": unvisited,
        "initial": initial, "holdout": holdout, "test_fraction": test_fraction if holdout else None,
        "split_by": split_by if holdout else None, "seed": seed, "timing": timing.to_dict(),
        "order": order.to_dict(), "interval": interval, "confidence": confidence, "trials": trials,
        "trials_bootstrap": trials_bootstrap, "partial_when": partial_when,
        "seeds": {"split": seed if holdout else None, "timing": f"SeedSequence({seed}).spawn(3)[0]",
                  "order": f"SeedSequence({seed}).spawn(3)[1]", "trials": f"SeedSequence({seed}).spawn(3)[2]"},
    }
    if holdout:
        ho = holdout_audit(traces, states=states, pseudocount=pseudocount, unvisited=unvisited, initial=initial,
                           test_fraction=test_fraction, by=split_by, seed=seed, horizon=horizon, interval=interval,
                           confidence=confidence, timing=timing, order=order, state_options=state_options)
        chain, model = ho.chain, ho.state_model
        timing_res, order_res, rinf = ho.timing, ho.order, ho.r_inf_check
        l_inf, D, model_rdc, emp_rdc = ho.l_inf, ho.horizon, ho.model_rdc, ho.empirical_rdc
        split_info: dict[str, Any] | None = ho.split
        fit_idx = np.asarray(ho.split["fit_indices"], np.int64)
    else:
        chain, model, labelled = fit_states_and_chain(traces, states, pseudocount=pseudocount, unvisited=unvisited,
                                                      initial=initial, state_options=state_options)
        timing_res = timing.run(chain, labelled, seed=ks_seed, refit="same")
        order_res = order.run(labelled, chain, seed=order_seed)
        rinf = r_inf_check(chain.r_inf, labelled, method=interval, confidence=confidence, in_sample=True)
        lengths = trace_lengths(labelled)[labelled.outcomes() != INVALID]
        D = int(lengths.max()) if horizon is None else int(horizon)
        m_rdc, e_rdc = chain.reliability(D), empirical_rdc(labelled, D)
        l_inf = l_inf_distance(m_rdc, e_rdc)
        model_rdc, emp_rdc = tuple(float(x) for x in m_rdc), tuple(float(x) for x in e_rdc)
        split_info = None
        fit_idx = np.arange(traces.n_traces, dtype=np.int64)
    trials_res = None
    if trials:
        all_labelled, kept = label_traces(model, traces)
        fit_mask_full = np.zeros(traces.n_traces, bool)
        fit_mask_full[fit_idx] = True
        trials_res = trials_check(all_labelled, chain, fit_mask=fit_mask_full[kept], n_bootstrap=trials_bootstrap,
                                  confidence=confidence, seed=trials_seed)
        if not trials_res.applicable and not trials_res.n_tasks:
            trials_res = None
    return certify(timing_res, order_res, rinf, ks_level=timing.level, trials=trials_res, partial_when=partial_when,
                   l_inf=l_inf, horizon=D, holdout=split_info, settings=settings, chain=chain, state_model=model,
                   model_rdc=model_rdc, empirical_rdc=emp_rdc)


_TIMING_KEYS = {"ks_mode": "mode", "ks_level": "level", "n_bootstrap": "n_bootstrap", "max_steps": "max_steps",
                "max_simulated_traces": "max_simulated_traces",
                "n_model": "n_model", "ks_outcome": "outcome", "ks_start": "start", "ks_pvalue": "pvalue",
                "paper_max_steps": "paper_max_steps"}
_ORDER_KEYS = {"order_mode": "mode", "order_criterion": "criterion", "order_level": "level",
               "n_permutations": "n_permutations", "parameter_count": "parameter_count",
               "include_outcomes": "include_outcomes"}


def _settings_from(timing: TimingSettings | None, order: OrderSettings | None,
                   options: dict[str, Any]) -> tuple[TimingSettings, OrderSettings]:
    from dataclasses import replace

    unknown = [k for k in options if k not in _TIMING_KEYS and k not in _ORDER_KEYS]
    if unknown:
        raise TypeError(f"audit() got unexpected keyword argument(s) {unknown}; layer shortcuts are "
                        f"{sorted(_TIMING_KEYS) + sorted(_ORDER_KEYS)}")
    t = timing or TimingSettings()
    o = order or OrderSettings()
    t_upd = {_TIMING_KEYS[k]: v for k, v in options.items() if k in _TIMING_KEYS}
    o_upd = {_ORDER_KEYS[k]: v for k, v in options.items() if k in _ORDER_KEYS}
    return (replace(t, **t_upd) if t_upd else t), (replace(o, **o_upd) if o_upd else o)


