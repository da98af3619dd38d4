"""The success-time law of a large expanded chain from its non-zeros (``SparseChain``, what the timing null's refits
use) equals the dense compiled chain's, and rejects what the dense chain rejects."""

from __future__ import annotations

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.audit.shared import success_time_cdf
from tracetochain.chain._sparse import SparseChain
from tracetochain.exceptions import NonAbsorbingError
from tracetochain.models import make_candidate
from tracetochain.models.evaluation import timing_check
from tracetochain.models.shared import encode_traces
from tracetochain.numerics.absorbing import SPARSE_THRESHOLD


def _wide_chain(m: int = 9) -> tt.AbsorbingChain:
    """m states, each moving to any other with a preference for the next one: order-3 contexts number ~m³."""
    rng = np.random.default_rng(4)
    Q = rng.dirichlet(np.ones(m), size=m) * 0.85
    Q[np.arange(m), (np.arange(m) + 1) % m] += 0.05
    r_s = np.full(m, 0.06)
    r_f = 1.0 - Q.sum(axis=1) - r_s
    return tt.AbsorbingChain(Q, r_s, r_f, 0, [f"s{i}" for i in range(m)])


@pytest.fixture(scope="module")
def wide_traces() -> tt.TraceTable:
    return tt.datasets.simulate_traces(_wide_chain(), 600, seed=11)


@pytest.mark.parametrize(("name", "threshold"), [("lifted(k=3)", SPARSE_THRESHOLD), ("duration", 100)])
def test_large_compiled_chain_has_the_dense_chains_success_time_law(name: str, threshold: int,
                                                                    wide_traces: tt.TraceTable,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # the duration family compiles this corpus to 126 states: the threshold is lowered (for both chains) to reach it
    monkeypatch.setattr("tracetochain.numerics.absorbing.SPARSE_THRESHOLD", threshold)
    enc = encode_traces(wide_traces)
    fitted = make_candidate(name).make().fit(enc)
    law = fitted.success_law_chain()
    dense = make_candidate(name).make().fit(enc).to_chain().chain
    assert dense.n_states > threshold, "the corpus must compile above the sparse threshold"
    assert isinstance(law, SparseChain) and law.n_states == dense.n_states
    assert law.r_inf == pytest.approx(dense.r_inf, rel=1e-12, abs=1e-14)
    np.testing.assert_allclose(law.reliability(120), dense.reliability(120), rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(success_time_cdf(law, 120, max_steps=60), success_time_cdf(dense, 120, max_steps=60),
                               rtol=1e-11, atol=1e-14)
    # once the model is compiled, its compiled chain answers
    assert fitted.to_chain() is not None and fitted.success_law_chain() is fitted.to_chain().chain


def test_small_compiled_chain_stays_dense(wide_traces: tt.TraceTable) -> None:
    fitted = make_candidate("lifted(k=2)").make().fit(encode_traces(wide_traces.select_traces(
        np.arange(wide_traces.n_traces) < 40)))
    compile_ = fitted.scheme_.compile
    calls = []
    fitted.scheme_.compile = lambda *a: calls.append(1) or compile_(*a)  # type: ignore[method-assign]
    law = fitted.success_law_chain()
    assert isinstance(law, tt.AbsorbingChain) and law.n_states <= SPARSE_THRESHOLD
    assert fitted.to_chain().chain is law and len(calls) == 1  # compiled once and kept, not again by to_chain()


def test_duplicate_transitions_add_up_and_rows_are_renormalised() -> None:
    # state 0 reaches state 1 through two triples (two contexts backing off to one); rows sum to 2 before scaling
    src, dst = np.array([0, 0, 0, 1, 2]), np.array([1, 1, 2, 2, 0])
    w = np.array([0.4, 0.6, 0.6, 0.8, 0.2])
    r_s, r_f = np.array([0.2, 0.8, 0.6]), np.array([0.2, 0.4, 0.2])
    law = SparseChain.from_transitions(src, dst, w, r_s, r_f, np.array([2.0, 0.0, 0.0]))
    Q = np.array([[0.0, 1.0, 0.6], [0.0, 0.0, 0.8], [0.2, 0.0, 0.0]])
    total = Q.sum(axis=1) + r_s + r_f
    dense = tt.AbsorbingChain(Q / total[:, None], r_s / total, r_f / total, [1.0, 0.0, 0.0])
    assert law.r_inf == pytest.approx(dense.r_inf, rel=1e-13)
    np.testing.assert_allclose(law.reliability(30), dense.reliability(30), rtol=1e-13, atol=1e-15)


def test_a_closed_loop_is_refused_as_the_dense_chain_refuses_it() -> None:
    # 1 ↔ 2 is a loop no exit leaves (state 0 exits, and moves into the loop)
    args = (np.array([0, 1, 2]), np.array([1, 2, 1]), np.ones(3), np.array([1.0, 0.0, 0.0]), np.zeros(3),
            np.array([1.0, 0.0, 0.0]))
    with pytest.raises(NonAbsorbingError):
        SparseChain.from_transitions(*args)
    with pytest.raises(NonAbsorbingError):
        tt.AbsorbingChain([[0.0, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0], 0)
    with pytest.raises(ValueError, match="finite"):  # what timing_check counts as an unusable replicate
        SparseChain.from_transitions(args[0], args[1], np.array([np.nan, 1.0, 1.0]), *args[3:])


def test_timing_null_with_sparse_refits_matches_dense_refits(wide_traces: tt.TraceTable,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The refitting null gives the same p-value whether its refits answer from their non-zeros or from the dense
    compiled chain (the statistics agree to rounding, far inside the KS tie tolerance)."""
    from tracetochain.models._context import ContextChainModel

    enc = encode_traces(wide_traces)
    half = np.arange(enc.n_traces) % 2 == 0
    fit, test = enc.select(np.flatnonzero(half)), enc.select(np.flatnonzero(~half))
    model = make_candidate("lifted(k=3)").make().fit(fit)
    assert isinstance(make_candidate("lifted(k=3)").make().fit(fit).success_law_chain(), SparseChain)
    compiled = model.to_chain()
    sparse = timing_check(compiled, test, n_bootstrap=12, seed=3, refit=model.like, fit_shape=fit)
    monkeypatch.setattr(ContextChainModel, "success_law_chain", lambda self: self.to_chain().chain)
    dense = timing_check(compiled, test, n_bootstrap=12, seed=3, refit=model.like, fit_shape=fit)
    assert sparse.p_value == dense.p_value and sparse.statistic == dense.statistic
    assert sparse.bootstrap["d_star_quantiles"] == pytest.approx(dense.bootstrap["d_star_quantiles"], rel=1e-10)
