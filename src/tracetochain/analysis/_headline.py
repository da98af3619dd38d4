"""The headline: the one sentence a report, ``fit``'s summary and the pull-request comment lead with.

It names the most decision-relevant finding the analysis supports, and never restates the failure rate. A state's
failure share z_i r⊖_i / (1 − R∞) says where failing runs *end*; when every run ends in the same state (SWE-bench
agents all ``submit``, the verdict applied after it) that state holds ~100 % of the failures and the sentence says
nothing the pass rate did not. So the headline is chosen from candidate :class:`Finding` objects, each with a kind,
a sentence, whether the analysis supports it, and a priority:

1. ``path`` (priority 3) — a path pattern whose success rate differs with q < 0.05 (supplied by the paths analysis
   through ``extra``; :func:`choose_headline` takes any list);
2. ``state`` (priority 2) — an informative state: the held-out discrimination is informative (its AUC interval lies
   above 0.5) and a state that a share ≥ :data:`MIN_REACH` of runs reach has eventual success h_i at least
   :data:`MIN_GAP` away from R∞ ("runs that reach X succeed 21 % of the time, against 74 % overall"); among those,
   the state with the largest reach × |R∞ − h_i| (the runs whose outcome it shifts), a state below R∞ first (a
   failure-prone state is what a team can act on);
3. ``no_separation`` (priority 1) — the held-out AUC interval is not above 0.5: "nothing in the path separates failing
   runs from succeeding ones: AUC 0.51 [0.45, 0.57]; the verdict is decided after the last step";
4. ``weak_separation`` (priority 1) — informative by the rule, but no state is reached often enough with a gap large
   enough to name;
5. ``rate`` (priority 0) — R∞ with its interval, when nothing else is measured (no held-out splits).

:func:`choose_headline` returns the supported finding of highest priority (first in list order on ties).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: A state is named in the headline only when at least this share of runs reach it...
MIN_REACH = 0.05
#: ... and runs that reach it succeed at least this much more or less often than R∞ (absolute).
MIN_GAP = 0.05


@dataclass(frozen=True)
class Finding:
    """A candidate for the headline (module docstring)."""

    kind: str
    sentence: str
    supported: bool = True
    priority: int = 0
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "sentence": self.sentence, "supported": self.supported,
                "priority": self.priority, "evidence": self.evidence}


def choose_headline(findings: Sequence[Finding]) -> Finding | None:
    """The supported finding of highest priority (the first one listed on ties); None when none is supported."""
    best: Finding | None = None
    for f in findings:
        if f.supported and (best is None or f.priority > best.priority):
            best = f
    return best


def reach_probabilities(chain: Any) -> np.ndarray:
    """P(a run ever visits state i) = z_i / N_ii, with z = π0 N the expected visits and N = (I − Q)⁻¹ (a visit count
    from the first visit on is N_ii in expectation)."""
    Q = np.asarray(chain.Q, np.float64)
    m = Q.shape[0]
    if m == 0:
        return np.zeros(0)
    N_diag = np.diag(np.linalg.solve(np.eye(m) - Q, np.eye(m)))
    z = np.asarray(chain.expected_visits(), np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.clip(np.where(N_diag > 0, z / N_diag, 0.0), 0.0, 1.0)


def state_finding(chain: Any, discrimination: Any) -> Finding | None:
    """The informative-state finding of the module docstring, or None."""
    if discrimination is None or discrimination.informative is not True or chain.n_states == 0:
        return None
    r = chain.r_inf
    h = np.asarray(chain.success_probabilities, np.float64)
    reach = reach_probabilities(chain)
    ok = (reach >= MIN_REACH) & (np.abs(r - h) >= MIN_GAP)
    below = ok & (h < r)
    pick = below if below.any() else ok
    if not pick.any():
        return None
    score = np.where(pick, reach * np.abs(r - h), -1.0)
    i = int(np.argmax(score))
    name = chain.state_names[i]
    sentence = (f"Runs that reach `{name}` succeed {h[i]:.0%} of the time, against {r:.0%} overall "
                f"({reach[i]:.0%} of runs reach it; the path separates outcomes: held-out "
                f"{discrimination.auc_text()}).")
    return Finding("state", sentence, True, 2, {"state": name, "success_from_state": float(h[i]), "r_inf": float(r),
                                               "reach": float(reach[i]), "auc": discrimination.auc})


def candidate_findings(chain: Any, discrimination: Any, *, r_inf_interval: tuple[float, float] | None = None
                       ) -> list[Finding]:
    """The analysis's own candidates (module docstring); the paths analysis adds its own to the list."""
    out: list[Finding] = []
    state = state_finding(chain, discrimination)
    if state is not None:
        out.append(state)
    if discrimination is not None and discrimination.available and discrimination.informative is False:
        out.append(Finding("no_separation", f"Nothing in the path separates failing runs from succeeding ones: "
                           f"held-out {discrimination.auc_text()}; the verdict is decided after the last step, so "
                           "no state can be blamed for the failures.", True, 1, {"auc": discrimination.auc}))
    elif discrimination is not None and discrimination.informative is True and state is None:
        out.append(Finding("weak_separation", f"The path separates outcomes only weakly: held-out "
                           f"{discrimination.auc_text()}; no state that at least {MIN_REACH:.0%} of runs reach "
                           f"succeeds {MIN_GAP * 100:.0f} points more or less often than the {chain.r_inf:.0%} "
                           "overall.", True, 1, {"auc": discrimination.auc}))
    iv = "" if r_inf_interval is None else f" [{r_inf_interval[0]:.2f}, {r_inf_interval[1]:.2f}]"
    why = ("" if discrimination is None or discrimination.available else
           f" (whether the path predicts the outcome was not measured: {discrimination.reason})")
    out.append(Finding("rate", f"Runs eventually succeed with probability {chain.r_inf:.2f}{iv}{why}.", True, 0,
                       {"r_inf": float(chain.r_inf)}))
    return out


def headline(result: Any, extra: Sequence[Finding] = ()) -> Finding:
    """The headline of an :class:`~tracetochain.analysis.AnalysisResult` (``extra``: findings of other analyses, e.g.
    path patterns with q < 0.05)."""
    iv = None
    if getattr(result, "ensemble", None) is not None:
        s = result.ensemble.stats("r_inf")
        if s.lower is not None:
            iv = (float(s.lower), float(s.upper))
    found = choose_headline([*extra, *candidate_findings(result.chain, result.discrimination, r_inf_interval=iv)])
    assert found is not None  # the rate finding is always supported
    return found


__all__ = ["MIN_GAP", "MIN_REACH", "Finding", "candidate_findings", "choose_headline", "headline",
           "reach_probabilities", "state_finding"]
