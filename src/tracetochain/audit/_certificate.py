"""The audit certificate: one status per output, each backed by the layers that test the assumption it rests on.

Layers (each a calibrated test with a p-value):

* ``r_inf`` — the held-out R∞ check: the chain fitted on one half predicts the other half's pass rate (under the
  traces' censoring), over repeated random splits;
* ``timing`` — the held-out KS test of the success-time law, over the same splits;
* ``order`` — the Markov-order test (G² of order 2 against order 1, within-context permutation p-value) on all traces;
* ``trials`` — exchangeable trials: do repeated trials of one task succeed independently with one probability?

Outputs and what they rest on (:data:`OUTPUTS`): R∞ and pass^1 on ``r_inf``; R(d), the RDC, horizons, step budgets,
mean steps and costs also on ``timing``; pass^k (k ≥ 2) and pass@k also on ``trials``; what-if, sensitivities and the
fallback gains also on ``order``. An output is

* **certified** when every layer it rests on passes,
* **withheld** when one of them rejects (evidence against its assumption),
* **untested** when none rejects but one could not test (too little data, or — trials — no task was tried twice);
* **uninformative** (the advice about states: attribution, what-if gains, sensitivities — :data:`~tracetochain.audit.
  _discrimination.STATE_ADVICE_OUTPUTS`) when no layer rejects it but the states do not separate failing from
  succeeding held-out runs (:mod:`~tracetochain.audit._discrimination`: the lower bound of the held-out AUC interval
  is not above 0.5): nothing is wrong with the chain, and its ranking of states says nothing about which runs fail.
  It does not move the decision (which is about the chain's assumptions).

The decision is family-wise: each layer that applies is tested at ``level`` / L, L the number of layers that apply
(:func:`~tracetochain.audit._combine.family_test`; a layer that does not apply leaves the family), so a sound
chain loses any output with probability at most ``level``; an output's status depends only on the p-values of the
layers it rests on, and lowering any p-value never certifies more (monotone). Overall: **reject** when R∞ is
withheld (every output rests on it); **insufficient evidence** when nothing is rejected but a layer lacked the data
it needs (each says how many traces it would need); **accept** when every output is certified (pass^k may be
untested for lack of repeated tasks, which is said); **partial** otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from tracetochain._display import Display, ResultDisplay, Table, fmt_number
from tracetochain._version import __version__
from tracetochain.audit._combine import family_test
from tracetochain.audit._common import json_dict
from tracetochain.audit._discrimination import STATE_ADVICE_OUTPUTS, uninformative_sentence
from tracetochain.audit._holdout import RInfCheck
from tracetochain.audit._order import OrderResult
from tracetochain.audit._timing import TimingResult
from tracetochain.audit._trials import TrialsResult
from tracetochain.quantities import QUANTITIES

CERTIFICATE_KIND = "tracetochain.certificate"
#: 3: the output status ``uninformative`` and the ``discrimination`` document.
CERTIFICATE_SCHEMA_VERSION = 3

LAYERS = ("r_inf", "timing", "order", "trials")
LAYER_TITLES = {"r_inf": "R∞ check (held out)", "timing": "success-time law (held-out KS)",
                "order": "Markov order", "trials": "exchangeable trials"}
#: The outputs that are not one quantity of the registry (or that several share) and the layers each rests on.
_BASE_OUTPUTS: dict[str, tuple[str, ...]] = {
    "R_inf": ("r_inf",),
    "pass^1": ("r_inf",),
    "delta_R_inf": ("r_inf",),
    "attribution": ("r_inf",),
    "pass^k": ("r_inf", "trials"),
    "pass@k": ("r_inf", "trials"),
    "R(d)": ("r_inf", "timing"),
    "RDC": ("r_inf", "timing"),
    "horizons": ("r_inf", "timing"),
    "step_budgets": ("r_inf", "timing"),
    "mean_steps": ("r_inf", "timing"),
    "costs": ("r_inf", "timing"),
    "whatif": ("r_inf", "order"),
    "sensitivity": ("r_inf", "order"),
}
#: Every output and the layers it rests on: the base outputs, then the output of each quantity of the registry
#: (:data:`tracetochain.quantities.QUANTITIES`) that names one of its own, so that a new quantity is certified with
#: no edit here.
OUTPUTS: dict[str, tuple[str, ...]] = {**_BASE_OUTPUTS, **{
    q.output: q.rests_on for q in QUANTITIES.values() if q.output is not None and q.output not in _BASE_OUTPUTS}}
ALL_OUTPUTS = tuple(OUTPUTS)
#: The library's one key per quantity (``r_inf`` as in ``chain.r_inf``, the metrics JSON and the layers) → the
#: certificate's output name. The certificate JSON keeps ``R_inf`` / ``delta_R_inf`` (published in schema 3); in
#: Python both spellings are accepted.
OUTPUT_KEYS = {"r_inf": "R_inf", "delta_r_inf": "delta_R_inf"}
#: Outputs that rest on the first-passage law (the timing layer).
TIMING_OUTPUTS = tuple(o for o, layers in OUTPUTS.items() if "timing" in layers)
ASYMPTOTIC_OUTPUTS = tuple(o for o, layers in OUTPUTS.items() if layers == ("r_inf",))

LayerStatus = Literal["pass", "reject", "insufficient", "not_applicable", "not_run"]
OutputStatus = Literal["certified", "withheld", "untested", "uninformative"]
Decision = Literal["accept", "partial", "reject", "insufficient"]
DECISION_TITLES = {"accept": "ACCEPT", "partial": "PARTIAL", "reject": "REJECT",
                   "insufficient": "INSUFFICIENT EVIDENCE"}


@dataclass(frozen=True)
class LayerResult:
    """One layer of the certificate.

    ``p_value`` is the layer's own p-value (combined over the splits for the held-out layers); ``p_adjusted`` the
    family-adjusted one the decision uses (min(1, L p), L the layers that apply); ``status`` the outcome;
    ``reason`` a machine-readable code
    (``"consistent"``, ``"rejected"``, ``"too_few_traces"``, ``"no_repeated_tasks"``, ``"undefined"``, ``"skipped"``)
    and ``message`` its sentence; ``traces_needed`` how many usable traces the layer would need when it lacked data.
    ``split_p_values`` are the per-split p-values, ``share_rejecting`` the share of splits that reject on their own at
    the level and ``split_dependent`` whether the splits disagree enough that another seed could change the verdict.
    ``detail`` holds the layer's own result objects.
    """

    name: str
    status: LayerStatus
    p_value: float | None
    reason: str
    message: str
    p_adjusted: float | None = None
    traces_needed: int | None = None
    split_p_values: tuple[float | None, ...] = ()
    share_rejecting: float | None = None
    split_dependent: bool = False
    statistics: dict[str, Any] = field(default_factory=dict)
    detail: Any = field(default=None, repr=False, compare=False)

    @property
    def title(self) -> str:
        return LAYER_TITLES.get(self.name, self.name)

    def to_dict(self) -> dict[str, Any]:
        return json_dict({
            "name": self.name, "status": self.status, "p_value": self.p_value, "p_adjusted": self.p_adjusted,
            "reason": self.reason, "message": self.message, "traces_needed": self.traces_needed,
            "split_p_values": list(self.split_p_values), "share_rejecting": self.share_rejecting,
            "split_dependent": self.split_dependent, "statistics": self.statistics,
        })

    def describe(self) -> str:
        p = "" if self.p_value is None else f" p = {fmt_number(self.p_value, 4)}"
        if self.p_adjusted is not None and self.p_value is not None and self.p_adjusted != self.p_value:
            p += f" (adjusted for the family {fmt_number(self.p_adjusted, 4)})"
        split = ""
        if len(self.split_p_values) > 1 and self.share_rejecting is not None:
            split = (f"; {self.share_rejecting:.0%} of {len(self.split_p_values)} splits reject alone"
                     + (" — split-dependent" if self.split_dependent else ""))
        return f"{self.title}: {self.status.upper().replace('_', ' ')}{p}{split} — {self.message}"


@dataclass(frozen=True)
class OutputCertification:
    """The status of one output, the layers it rests on, and which of them decided it."""

    name: str
    status: OutputStatus
    rests_on: tuple[str, ...]
    because: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "rests_on": list(self.rests_on), "because": list(self.because)}


def certify_outputs(layers: dict[str, LayerResult], *, informative: bool | None = None
                    ) -> dict[str, OutputCertification]:
    """Each output's status from its layers' statuses (module docstring); ``informative`` False (the held-out
    discrimination rule) makes the state advice that no layer withholds uninformative."""
    out: dict[str, OutputCertification] = {}
    for name, rests in OUTPUTS.items():
        statuses = {layer: layers[layer].status if layer in layers else "not_run" for layer in rests}
        rejected = tuple(k for k, v in statuses.items() if v == "reject")
        open_ = tuple(k for k, v in statuses.items() if v in ("insufficient", "not_applicable", "not_run"))
        if rejected:
            out[name] = OutputCertification(name, "withheld", rests, rejected)
        elif open_:
            out[name] = OutputCertification(name, "untested", rests, open_)
        else:
            out[name] = OutputCertification(name, "certified", rests, ())
        if informative is False and name in STATE_ADVICE_OUTPUTS and out[name].status != "withheld":
            out[name] = OutputCertification(name, "uninformative", rests, ("discrimination",))
    return out


def with_discrimination(cert: Certificate, discrimination: Any) -> Certificate:
    """``cert`` with the held-out discrimination attached and the state advice's statuses set by its rule (the
    layers and the decision do not change)."""
    from dataclasses import replace

    informative = getattr(discrimination, "informative", None)
    return replace(cert, outputs=certify_outputs(cert.layers, informative=informative), discrimination=discrimination)


def decide(layers: dict[str, LayerResult], outputs: dict[str, OutputCertification]) -> Decision:
    """The overall decision (module docstring)."""
    if outputs["R_inf"].status == "withheld":
        return "reject"
    if any(layer.status == "reject" for layer in layers.values()):
        return "partial"
    if any(layer.status in ("insufficient", "not_run") for layer in layers.values()):
        return "insufficient"
    return "accept"


def apply_family(layers: dict[str, LayerResult], level: float) -> dict[str, LayerResult]:
    """Layers with family-adjusted p-values and the statuses they imply (module docstring): each layer of
    :data:`LAYERS` that applies (any status but ``not_applicable`` and ``not_run``) is tested at ``level`` / L, L the
    number of such layers; one that lacked the data stays in the family and cannot reject."""
    from dataclasses import replace

    family = {name: (layers[name].p_value if layers[name].status in ("pass", "reject") else None)
              for name in LAYERS if name in layers and layers[name].status not in ("not_applicable", "not_run")}
    rejected, adjusted = family_test(family, level)
    out: dict[str, LayerResult] = {}
    for name, layer in layers.items():
        if name not in family or family[name] is None:
            out[name] = layer
            continue
        rej = rejected[name]
        msg = layer.message
        if rej != (layer.status == "reject"):
            msg += (f" (rejected at the family-wise {level:g} level)" if rej else
                    f" (not rejected once the {len(family)} layers that apply are tested together at {level:g})")
        out[name] = replace(layer, status="reject" if rej else "pass", p_adjusted=adjusted[name],
                            reason="rejected" if rej else "consistent", message=msg)
    return out


# ------------------------------------------------------------------------------------------------ certificate
@dataclass(frozen=True, eq=False)
class Certificate(ResultDisplay):
    """The audited verdict on a fitted chain: layers, per-output statuses and the decision (module docstring).

    Build with :func:`~tracetochain.audit.audit` (or :func:`~tracetochain.analysis.analyze`, which returns it with
    the chain and intervals).
    """

    decision: Decision
    layers: dict[str, LayerResult]
    outputs: dict[str, OutputCertification]
    level: float
    settings: dict[str, Any]
    horizon: int | None = None
    l_inf: float | None = None
    model_rdc: tuple[float, ...] = field(default=(), repr=False)
    empirical_rdc: tuple[float, ...] = field(default=(), repr=False)
    splits: dict[str, Any] | None = None
    chain: Any = field(default=None, repr=False)
    state_model: Any = field(default=None, repr=False)
    #: The held-out discrimination (:class:`~tracetochain.audit._discrimination.Discrimination`), when measured.
    discrimination: Any = field(default=None, repr=False)

    # ------------------------------------------------------------------ statuses
    def status(self, output: str) -> OutputStatus:
        """certified / withheld / untested for an output of :data:`OUTPUTS` (or its quantity key, ``"r_inf"``)."""
        try:
            return self.outputs[OUTPUT_KEYS.get(output, output)].status
        except KeyError:
            raise KeyError(f"unknown output {output!r}; outputs are {list(OUTPUTS)}") from None

    def rests_on(self, output: str) -> tuple[str, ...]:
        """The layers an output rests on."""
        output = OUTPUT_KEYS.get(output, output)
        if output not in OUTPUTS:
            raise KeyError(f"unknown output {output!r}; outputs are {list(OUTPUTS)}")
        return OUTPUTS[output]

    def is_certified(self, output: str) -> bool:
        return self.status(output) == "certified"

    @property
    def certified(self) -> tuple[str, ...]:
        return tuple(o for o, c in self.outputs.items() if c.status == "certified")

    @property
    def withheld(self) -> tuple[str, ...]:
        return tuple(o for o, c in self.outputs.items() if c.status == "withheld")

    @property
    def untested(self) -> tuple[str, ...]:
        return tuple(o for o, c in self.outputs.items() if c.status == "untested")

    @property
    def uninformative(self) -> tuple[str, ...]:
        return tuple(o for o, c in self.outputs.items() if c.status == "uninformative")

    @property
    def pass_k_tested(self) -> tuple[int, ...] | None:
        """The k ≥ 2 whose pass^k the trials layer tested (held-out tasks with at least k trials); None when the layer
        does not say (a certificate built by hand)."""
        layer = self.layers.get("trials")
        if layer is None or "ks_tested" not in layer.statistics:
            return None
        return tuple(int(k) for k in layer.statistics["ks_tested"])

    def pass_k_status(self, k: int) -> OutputStatus:
        """The status of pass^k for one k: pass^1 is R∞'s; for k ≥ 2 that of ``pass^k``, except that a k the trials
        layer did not test (no two tasks were tried k times) is *untested* — never certified by extrapolation."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if k == 1:
            return self.status("pass^1")
        base = self.status("pass^k")
        tested = self.pass_k_tested
        if base == "certified" and tested is not None and k not in tested:
            return "untested"
        return base

    def _pass_k_doc(self) -> dict[str, Any]:
        tested = self.pass_k_tested
        top = max([10, *(tested or ())])
        return {"tested_k": None if tested is None else list(tested),
                "status_by_k": {str(k): self.pass_k_status(k) for k in range(1, top + 1)},
                "rule": "pass^k (k >= 2) is certified only for the k the trials layer tested on tasks with at least "
                        "k trials; larger k are untested"}

    @property
    def accepted(self) -> bool:
        return self.decision == "accept"

    @property
    def reasons(self) -> tuple[str, ...]:
        """One sentence per layer (the structured version is :attr:`layers`)."""
        return tuple(layer.describe() for layer in self.layers.values())

    # ------------------------------------------------------------------ layer shortcuts
    def _detail(self, name: str) -> Any:
        layer = self.layers.get(name)
        return None if layer is None else layer.detail

    @property
    def timing(self) -> TimingResult | None:
        """The timing layer's result on the first split (``layers["timing"].detail`` has them all)."""
        d = self._detail("timing")
        out: TimingResult | None = d[0] if isinstance(d, (list, tuple)) and d else d
        return out

    @property
    def r_inf_check(self) -> RInfCheck | None:
        """The R∞ check on the first split (``layers["r_inf"].detail`` has them all)."""
        d = self._detail("r_inf")
        out: RInfCheck | None = d[0] if isinstance(d, (list, tuple)) and d else d
        return out

    @property
    def order(self) -> OrderResult | None:
        d: OrderResult | None = self._detail("order")
        return d

    @property
    def trials(self) -> TrialsResult | None:
        d: TrialsResult | None = self._detail("trials")
        return d

    @property
    def p_ks(self) -> float | None:
        return self.layers["timing"].p_value if "timing" in self.layers else None

    @property
    def p_order(self) -> float | None:
        return self.layers["order"].p_value if "order" in self.layers else None

    @property
    def delta_aic(self) -> float | None:
        return None if self.order is None else self.order.delta_aic

    @property
    def r_inf(self) -> float | None:
        c = self.r_inf_check
        return None if c is None else c.r_inf

    @property
    def pass_rate(self) -> float | None:
        c = self.r_inf_check
        return None if c is None else c.pass_rate

    def statistics(self) -> dict[str, Any]:
        """Every headline number, flat (None where undefined)."""
        out: dict[str, Any] = {"decision": self.decision, "level": self.level}
        for name, layer in self.layers.items():
            out[f"p_{name}"] = layer.p_value
            out[f"p_{name}_adjusted"] = layer.p_adjusted
            out[f"{name}_status"] = layer.status
        o = self.order
        if o is not None:
            out.update({"delta_aic": o.delta_aic, "delta_bic": o.delta_bic, "g2": o.g2, "df": o.df})
        out["l_inf"] = self.l_inf
        return json_dict(out)

    # ------------------------------------------------------------------ io
    def to_dict(self, *, include_chain: bool = False, include_curves: bool = True) -> dict[str, Any]:
        """The versioned JSON document (no NaN: undefined numbers are null with a reason)."""
        details: dict[str, Any] = {}
        for name, layer in self.layers.items():
            d = layer.detail
            if isinstance(d, (list, tuple)):
                details[name] = [x.to_dict() for x in d if hasattr(x, "to_dict")]
            elif d is not None and hasattr(d, "to_dict"):
                details[name] = d.to_dict()
        doc: dict[str, Any] = {
            "kind": CERTIFICATE_KIND,
            "schema_version": CERTIFICATE_SCHEMA_VERSION,
            "tracetochain_version": __version__,
            "decision": self.decision,
            "level": self.level,
            "layers": {name: layer.to_dict() for name, layer in self.layers.items()},
            "outputs": {name: c.to_dict() for name, c in self.outputs.items()},
            "certified": list(self.certified),
            "withheld": list(self.withheld),
            "untested": list(self.untested),
            "uninformative": list(self.uninformative),
            "discrimination": None if self.discrimination is None else self.discrimination.to_dict(),
            "pass_k": self._pass_k_doc(),
            "statistics": self.statistics(),
            "splits": self.splits,
            "details": details,
            "settings": self.settings,
        }
        if include_curves:
            doc["rdc"] = {"horizon": self.horizon, "model": list(self.model_rdc),
                          "empirical": list(self.empirical_rdc), "l_inf": self.l_inf,
                          "empirical_denominator": "all usable traces (descriptive; the timing layer decides)"}
        if self.chain is not None:
            doc["chain"] = (self.chain.to_dict() if include_chain else
                            {"n_states": self.chain.n_states, "state_names": list(self.chain.state_names),
                             "r_inf": self.chain.r_inf})
        return json_dict(doc)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(**kwargs), indent=2, allow_nan=False, ensure_ascii=False)

    # ------------------------------------------------------------------ display
    def verdict(self) -> str:
        """A readable paragraph: the decision, why, and what may be reported."""
        head = {"accept": "ACCEPT — every output is supported by the traces",
                "partial": "PARTIAL — some outputs rest on assumptions the traces reject",
                "reject": "REJECT — the chain does not reproduce the held-out pass rate",
                "insufficient": "INSUFFICIENT EVIDENCE — too few traces to test every assumption"}[self.decision]
        if self.decision == "accept" and self.untested:  # say exactly what was tested, never more
            head = "ACCEPT — every output the traces could test is supported by them; the untested ones are listed"
        text = head + "."
        if self.certified:
            text += " Certified: " + ", ".join(self.certified) + "."
        if self.withheld:
            text += " Withheld: " + ", ".join(self.withheld) + "."
        if self.untested:
            text += " Untested: " + ", ".join(self.untested) + "."
        if self.uninformative and self.discrimination is not None:
            text += (" Uninformative: " + ", ".join(self.uninformative) + " — "
                     + uninformative_sentence(self.discrimination) + ".")
        tested = self.pass_k_tested
        if self.status("pass^k") == "certified" and tested is not None:
            text += (f" pass^k is certified for k = {_k_range(tested)} only (the k the repeated tasks could show); "
                     "larger k are untested." if tested else "")
        needs = [f"{layer.title} needs about {layer.traces_needed} usable traces" for layer in self.layers.values()
                 if layer.status == "insufficient" and layer.traces_needed]
        if needs:
            text += " " + "; ".join(needs) + "."
        return text

    def __str__(self) -> str:
        lines = [f"Audit certificate: {DECISION_TITLES[self.decision]} (family-wise level {self.level:g})", "",
                 self.verdict(), ""]
        lines += ["  " + layer.describe() for layer in self.layers.values()]
        if self.splits:
            s = self.splits
            lines.append(f"  held-out splits: {s.get('n_splits')} random halves by {s.get('by')} "
                         f"(seed {s.get('seed')}), about {s.get('mean_test')} of {s.get('n_usable')} usable traces "
                         "held out in each")
        if self.discrimination is not None:
            lines.append("  " + self.discrimination.describe())
        return "\n".join(lines)

    def __repr__(self) -> str:
        ps = ", ".join(f"p_{k}={fmt_number(v.p_value, 4)}" for k, v in self.layers.items())
        return f"Certificate(decision={self.decision!r}, {ps}, withheld={list(self.withheld)})"

    def _display(self) -> Display:
        layers = Table("layers", ("layer", "status", "p_value", "p_adjusted", "share_rejecting", "reason", "message"),
                       tuple((name, layer.status, layer.p_value, layer.p_adjusted, layer.share_rejecting, layer.reason,
                              layer.message) for name, layer in self.layers.items()), default_digits=4)
        outputs = Table("outputs", ("output", "status", "rests_on", "because"),
                        tuple((name, c.status, c.rests_on, c.because) for name, c in self.outputs.items()))
        return Display(f"{DECISION_TITLES[self.decision]} (family-wise level {self.level:g})", kind="Audit certificate",
                       lines=(self.verdict(),), tables=(layers, outputs))


def _k_range(ks: tuple[int, ...]) -> str:
    return str(ks[0]) if len(ks) == 1 else f"{ks[0]}–{ks[-1]}" if list(ks) == list(range(ks[0], ks[-1] + 1)) else \
        ", ".join(map(str, ks))


def build_certificate(layers: dict[str, LayerResult], *, level: float = 0.05, settings: dict[str, Any] | None = None,
                      **fields: Any) -> Certificate:
    """The family rule over the layers, per-output statuses and the decision, as a :class:`Certificate`."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    adjusted = apply_family(layers, level)
    ordered = {name: adjusted[name] for name in LAYERS if name in adjusted}
    outputs = certify_outputs(ordered)
    return Certificate(decide(ordered, outputs), ordered, outputs, level, dict(settings or {}), **fields)
