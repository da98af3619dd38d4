"""The quantity registry: one table, consistent with the certificate, the ensemble and the one-chain values."""

from __future__ import annotations

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.audit import OUTPUTS
from tracetochain.audit._certificate import _BASE_OUTPUTS
from tracetochain.quantities import HEADLINE_QUANTITIES, QUANTITIES, lookup, reported_scalars
from tracetochain.uncertainty import DirichletPosterior


def test_every_entry_is_complete_and_certified_by_known_layers():
    layers = {"r_inf", "timing", "order", "trials"}
    for key, q in QUANTITIES.items():
        assert q.key == key and q.doc
        assert set(q.rests_on) <= layers, key
        if q.output is not None:
            assert OUTPUTS[q.output] == q.rests_on, f"{key}: rests on {q.rests_on}, its output {q.output} on " \
                                                    f"{OUTPUTS[q.output]}"
        if q.reported or q.gateable or q.alertable:
            assert q.label and q.output is not None, key
        if q.gateable:
            assert q.better is not None or q.key == "mean_steps_given_failure", key


def test_base_outputs_are_kept_and_new_outputs_come_from_the_registry():
    assert list(OUTPUTS)[: len(_BASE_OUTPUTS)] == list(_BASE_OUTPUTS)
    for name in set(OUTPUTS) - set(_BASE_OUTPUTS):
        assert any(q.output == name for q in QUANTITIES.values())


def test_aliases_resolve_and_do_not_collide():
    seen: dict[str, str] = {}
    for q in QUANTITIES.values():
        for name in (q.key, *q.aliases):
            assert seen.setdefault(name, q.key) == q.key, f"{name} names {seen[name]} and {q.key}"
    assert lookup("R∞").key == lookup("Rinf").key == "r_inf"
    assert lookup("no such thing") is None


def test_headline_quantities_are_reported_scalars():
    assert HEADLINE_QUANTITIES == ("r_inf", "failure_probability", "mean_steps", "steps_std",
                                   "mean_steps_given_success", "mean_steps_given_failure", "spectral_radius")
    assert set(HEADLINE_QUANTITIES) <= {q.key for q in reported_scalars()}


@pytest.mark.parametrize("key", [q.key for q in reported_scalars()])
def test_reported_scalar_point_is_the_ensemble_point(key):
    chain = tt.datasets.notation_chain()
    ens = DirichletPosterior(samples=50, seed=0).fit(
        tt.ChainEstimator().fit(tt.datasets.simulate_traces(chain, 200, seed=1)).fetch_model()).fetch_model().ensemble
    q = QUANTITIES[key]
    value, why = q.point(ens.reference)
    s = ens.stats(key)
    assert why is None and s.point == pytest.approx(value)
    assert s.lower <= s.upper


def test_unavailable_reads_the_models_own_table():
    class Family:
        def unavailable_quantities(self) -> dict[str, str]:
            return {"mean_steps": "no step count in this family"}

    assert QUANTITIES["mean_steps"].unavailable(Family()) == "no step count in this family"
    assert QUANTITIES["r_inf"].unavailable(Family()) is None
    assert QUANTITIES["r_inf"].unavailable(tt.datasets.notation_chain()) is None


def test_point_never_returns_nan():
    chain = tt.AbsorbingChain([[0.5]], [0.0], [0.5], [1.0], ["a"])  # success unreachable
    value, why = QUANTITIES["mean_steps_given_success"].point(chain)
    assert value is None and why
    assert np.isfinite(QUANTITIES["r_inf"].point(chain)[0])


def test_a_family_marks_a_quantity_unavailable_in_its_refit_intervals():
    """A chosen model's intervals iterate the registry; a family's ``unavailable_quantities`` turns a number into
    None with the family's reason, with no branch on the family in the consumer."""
    from tracetochain.analysis._models import model_intervals

    class Compiled:
        family = "fake"

        def __init__(self, chain):
            self.chain = chain

        def pass_hat_k(self, ks):
            return [self.chain.r_inf ** k for k in ks]

        def pass_at_k(self, ks):
            return [1 - (1 - self.chain.r_inf) ** k for k in ks]

        def unavailable_quantities(self):
            return {"median_steps_to_success": "this family does not model step times"}

    chain = tt.datasets.notation_chain()
    draws = [Compiled(tt.ChainEstimator().fit(tt.datasets.simulate_traces(chain, 200, seed=s)).fetch_model())
             for s in range(5)]
    doc = model_intervals(Compiled(chain), draws, horizon=10, ks=(1, 2), delta=0.01, settings={"confidence": 0.9})
    m = doc["metrics"]
    assert m["median_steps_to_success"]["point"] is None
    assert m["median_steps_to_success"]["point_undefined"] == "this family does not model step times"
    assert m["r_inf"]["point"] == pytest.approx(chain.r_inf) and m["r_inf"]["lower"] is not None
    assert set(m) >= {q.key for q in reported_scalars()}
