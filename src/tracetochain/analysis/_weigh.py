"""``auto`` weighs the certificate: among the candidates whose held-out fit is not worse than the choice's by more
than its standard error, the one whose own held-out layers certify more outputs (issue 30, item 7).

Held-out log-likelihood alone picks the model that predicts the traces best; it says nothing about whether the
certificate's layers then pass. On the SWE-type corpora ``auto`` kept ``lifted(k=3)``, whose timing layer rejects
(so R(d), budgets and mean steps are withheld), while ``duration`` passes timing. The rule here keeps the likelihood
in charge and uses the certificate as the tie-breaker it should be:

1. A checked candidate is *eligible* when the likelihood rule allows it: it is the first-order chain, or better than
   it (:func:`~tracetochain.models.selection.decide`), and its paired held-out gain against the choice,
   Σ_u (ℓ_u(candidate) − ℓ_u(choice)), is at least −1 standard error of that sum (the one-standard-error rule of
   Breiman et al. 1984 that already picks the choice among the better candidates).
2. Among the eligible ones, the one certifying the most outputs (an output is certified when every layer it rests on,
   :data:`~tracetochain.audit._certificate.OUTPUTS`, passes) replaces the choice when it certifies strictly more;
   ties keep the likelihood's choice.
3. A candidate that would certify an output the choice withholds but is not eligible is *named* with the reason
   (its held-out deficit in nats and standard errors), so the user sees which model would give the output and at
   what cost in fit (:func:`would_certify`).

A screening check (fewer timing replicates) never decides alone: the caller re-checks a switched-to candidate with
the certificate's full replicates before the switch stands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tracetochain.audit import OUTPUTS, LayerResult


def certified_outputs(layers: Mapping[str, LayerResult]) -> tuple[str, ...]:
    """The outputs whose every layer passes (the certificate's per-output rule without the decision)."""
    if not layers:
        return ()
    return tuple(o for o, rests in OUTPUTS.items()
                 if all(r in layers and layers[r].status == "pass" for r in rests))


def _gain(unit_loglik: Mapping[str, Sequence[float]], a: str, b: str) -> tuple[float, float] | None:
    from tracetochain.models.selection import paired_gain

    if a not in unit_loglik or b not in unit_loglik:
        return None
    return paired_gain(np.asarray(unit_loglik[a], dtype=np.float64), np.asarray(unit_loglik[b], dtype=np.float64))


def weigh_certificate(rows: Sequence[Any], chosen: str, unit_loglik: Mapping[str, Sequence[float]],
                      better: Sequence[str], baseline: str = "markov") -> str | None:
    """The candidate that replaces ``chosen`` by the rule of the module docstring (steps 1–2), or None.

    ``rows``: the model-choice rows (``name``, ``layers``); ``better``: the candidates better than the baseline."""
    mine = next((r for r in rows if r.name == chosen), None)
    if mine is None or not mine.layers:
        return None
    have = len(certified_outputs(mine.layers))
    best: tuple[int, float, str] | None = None
    for r in rows:
        if r.name == chosen or not r.layers or (r.name != baseline and r.name not in better):
            continue
        g = _gain(unit_loglik, r.name, chosen)
        if g is None or g[0] < -max(g[1], 1e-9):
            continue
        n = len(certified_outputs(r.layers))
        if n > have and (best is None or (n, g[0]) > best[:2]):
            best = (n, g[0], r.name)
    return None if best is None else best[2]


def would_certify(rows: Sequence[Any], chosen: str, unit_loglik: Mapping[str, Sequence[float]],
                  better: Sequence[str], baseline: str = "markov") -> list[dict[str, Any]]:
    """For every output the choice does not certify, the best-fitting checked candidate that would, and why it was
    not chosen (module docstring, step 3). JSON-ready rows: ``output``, ``candidate``, ``why_not_chosen``,
    ``gain_vs_chosen`` (nats), ``z_vs_chosen``, ``screen`` (its timing layer had screening replicates only)."""
    mine = next((r for r in rows if r.name == chosen), None)
    if mine is None or not mine.layers:
        return []
    own = set(certified_outputs(mine.layers))
    out: list[dict[str, Any]] = []
    for output in OUTPUTS:
        if output in own:
            continue
        able = [r for r in rows if r.name != chosen and output in certified_outputs(r.layers)]
        if not able:
            continue
        r = max(able, key=lambda x: x.heldout_loglik_per_trace if x.heldout_loglik_per_trace is not None
                else -math.inf)
        g = _gain(unit_loglik, r.name, chosen)
        gain, se = (None, None) if g is None else g
        z = None if g is None or not se else gain / se  # type: ignore[operator]
        if r.name != baseline and r.name not in better:
            why = f"{r.name} does not beat the first-order chain on held-out traces by the required margin"
        elif gain is not None and se is not None and gain < -se:
            why = (f"{r.name}'s held-out log-likelihood is {-gain:.1f} nats below {chosen}'s "
                   f"({-(z or 0.0):.1f} standard errors): more than the one-standard-error tolerance")
        else:
            why = f"{r.name} certifies no more outputs than {chosen} in all"
        out.append({"output": output, "candidate": r.name, "why_not_chosen": why, "gain_vs_chosen": gain,
                    "z_vs_chosen": z, "screen": r.timing_replicates is not None and r.name != chosen
                    and bool(r.note and "screening" in r.note)})
    return out
