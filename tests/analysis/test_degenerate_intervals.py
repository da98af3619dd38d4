"""Finding N14: the expanded models' refit intervals were zero-width on corpora where every trace ended the same way
(40 all-success traces: R∞ [0.99998, 0.999995], pass^5 [0.9999, 0.99997]). Refits cannot draw the other outcome,
so the intervals of proportions must contain the Jeffreys interval of the observed outcomes."""

from __future__ import annotations

import pytest

import tracetochain as tt
from tracetochain.analysis import analyze
from tracetochain.audit._holdout import jeffreys_interval

QUICK = {"n_bootstrap": 19, "n_permutations": 19, "trials_permutations": 99}


def _corpus(outcome: str, n: int = 40) -> tt.TraceTable:
    """The attack report's reproduction: 1–3 steps of plan/act/check, every trace ending with ``outcome``."""
    records = [{"trace_id": f"t{t}", "step_idx": i, "state": s, "outcome": outcome}
               for t in range(n) for i, s in enumerate(["plan", "act", "check"][:1 + t % 3])]
    return tt.TraceTable.from_records(records)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["duration", "mixture"])
def test_all_success_corpus_gets_at_least_the_jeffreys_interval(model: str) -> None:
    res = analyze(_corpus("success"), model=model, samples=20, intervals="bootstrap", **QUICK)
    iv = res.intervals(horizon=10, ks=(1, 3, 5))
    assert iv is not None and iv["method"] == "bootstrap (model refits)"
    lo, _ = jeffreys_interval(40, 40)
    r = iv["metrics"]["r_inf"]
    assert r["lower"] <= lo + 1e-12 and r["upper"] == pytest.approx(1.0)
    assert r["upper"] - r["lower"] > 0.05  # was 1.5e-5 wide
    k5 = iv["metrics"]["pass_hat_k"]["5"]
    assert k5["lower"] <= lo ** 5 + 1e-12  # a gate on pass^5's lower bound no longer passes 0.999 from 40 runs
    rel = iv["metrics"]["reliability"]
    assert rel["lower"][-1] < 0.95 and all(a <= b for a, b in zip(rel["lower"], rel["upper"], strict=True))
    assert iv["binomial_floor"]["failures"] == 0 and iv["binomial_floor"]["rule"] == "jeffreys"


@pytest.mark.slow
def test_all_failure_corpus_mirror_image() -> None:
    res = analyze(_corpus("failure"), model="mixture", samples=20, intervals="bootstrap", **QUICK)
    iv = res.intervals(horizon=10, ks=(1, 3))
    assert iv is not None
    r = iv["metrics"]["r_inf"]
    assert r["lower"] == pytest.approx(0.0, abs=1e-6) and r["upper"] >= jeffreys_interval(0, 40)[1] - 1e-12


def test_jeffreys_interval_limits() -> None:
    assert jeffreys_interval(0, 10)[0] == 0.0 and jeffreys_interval(10, 10)[1] == 1.0
    lo, hi = jeffreys_interval(0, 0)  # nothing ended: the prior's own interval
    assert lo < 0.01 and hi > 0.99


@pytest.mark.slow
def test_an_ensemble_of_large_chains_gets_intervals_one_refit_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SWE-type corpora compiled to 957–2,187 states and their intervals were refused by the memory limit, so
    R∞, R(d) and pass^k printed with no interval. The refits are kept fitted and each is compiled only while its
    quantities are computed, and not kept: no two dense refits are ever in memory together."""
    from tracetochain.models._base import TraceModel

    kept: list[int] = []
    compile_once = TraceModel.to_chain

    def spy(self: TraceModel, *, keep: bool = True) -> object:
        out = compile_once(self, keep=keep)
        kept.append(int(keep))
        return out

    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 120, seed=3)
    res = analyze(traces, model="duration", samples=12, intervals="bootstrap", **QUICK)
    sel = res.model_choice
    assert sel is not None and sel.intervals_unavailable is None and len(sel.draws) == 12
    assert all(not hasattr(d, "chain") and d._compiled is None for d in sel.draws)  # fitted refits, not compiled
    monkeypatch.setattr(TraceModel, "to_chain", spy)
    iv = res.intervals(horizon=10, ks=(1, 2))
    assert kept == [0] * 12  # each draw compiled once, and not kept
    assert all(d._compiled is None for d in sel.draws)
    assert iv is not None and iv["metrics"]["r_inf"]["lower"] < iv["metrics"]["r_inf"]["upper"]
    assert iv["metrics"]["mean_steps"]["lower"] is not None


def test_few_repeated_tasks_warn_that_intervals_may_be_narrow() -> None:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 30, seed=4).to_arrow()
    import pyarrow as pa

    ids = traces.column("trace_id").to_pylist()
    order = {t: i for i, t in enumerate(dict.fromkeys(ids))}
    traces = traces.append_column("task_id", pa.array([f"task{order[t] % 6}" for t in ids]))  # 6 tasks × 5 trials
    res = analyze(tt.TraceTable.from_arrow(traces), audit=False, intervals="posterior", samples=50)
    iv = res.intervals(horizon=10, ks=(1, 2))
    assert iv is not None and any("only 6 tasks repeat" in w for w in iv["warnings"])
    many = analyze(tt.datasets.simulate_traces(tt.datasets.notation_chain(), 30, seed=4), audit=False,
                   intervals="posterior", samples=50).intervals(horizon=10, ks=(1, 2))
    assert many is not None and "warnings" not in many  # no task ids: nothing to warn about
