"""The permutation test of ΔR∞ (``uncertainty._permutation``): its relabellings respect tasks and set sizes, its
p-value does not depend on the order traces were read in, it holds its size on one agent under censoring and task
heterogeneity, it has power, and ``compare`` calls a difference only when it rejects too."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

import tracetochain as tt
from tracetochain.analysis._compare import compare
from tracetochain.analysis._summary import SummarySpec, summarize_traces
from tracetochain.chain import ChainPrior
from tracetochain.uncertainty._permutation import TraceVectors, _labellings, permutation_delta_r_inf

CHAIN = tt.datasets.notation_chain()


def _corpus(chain: tt.AbsorbingChain, n_tasks: int, trials: int, seed: int, *, censor: float = 0.0,
            hard: float = 0.0, prefix: str = "t") -> tt.TraceTable:
    """``trials`` runs of each of ``n_tasks`` tasks; a task is 'hard' (success exits × 0.3) with probability
    ``hard`` (task heterogeneity in difficulty, fixed per task id across sets); a trace is cut after a
    Geometric(0.3) number of steps with probability ``censor``."""
    rng = np.random.default_rng(seed)
    tables = []
    for k in range(n_tasks):
        is_hard = np.random.default_rng(10_000 + k).random() < hard
        c = chain
        if is_hard:
            rs = chain.R_success * 0.3
            c = chain.with_changes(R_success=rs, R_failure=chain.R_failure + chain.R_success - rs)
        t = tt.datasets.simulate_traces(c, trials, seed=int(rng.integers(2**31))).to_arrow()
        ids = pa.array([f"{prefix}{k}-{x}" for x in t.column("trace_id").to_pylist()], pa.string())
        t = t.set_column(t.schema.get_field_index("trace_id"), "trace_id", ids)
        tables.append(t.append_column("task_id", pa.array([f"task{k}"] * t.num_rows, pa.string())))
    table = pa.concat_tables(tables)
    if censor:
        # cut a trace after C ~ Geometric(0.3) steps with probability `censor`, if it has not ended by then
        tid = table.column("trace_id").to_numpy(zero_copy_only=False)
        step = table.column("step_idx").to_numpy()
        outcome = np.array(table.column("outcome").to_pylist(), dtype=object)
        uniq, inv = np.unique(tid, return_inverse=True)
        cap = np.where(rng.random(uniq.size) < censor, rng.geometric(0.3, uniq.size), 10**9)
        cut = cap < np.bincount(inv, minlength=uniq.size)  # the trace has more steps than its cap
        keep = step < cap[inv]
        outcome[cut[inv]] = "censored"
        table = table.set_column(table.schema.get_field_index("outcome"), "outcome",
                                 pa.array(outcome.tolist(), table.schema.field("outcome").type))
        table = table.filter(pa.array(keep))
    return tt.TraceTable.from_arrow(table, source=f"corpus-{seed}")


def _vectors(traces: tt.TraceTable, names: tuple[str, ...]) -> TraceVectors:
    states = traces.to_arrow().column("state").to_pylist()
    codes = np.array([names.index(s) for s in states], dtype=np.int64)
    s = summarize_traces(traces, codes, names, SummarySpec(n_splits=0, keep_trace_vectors=True))
    assert s.vectors is not None
    return s.vectors


def _test(a: tt.TraceTable, b: tt.TraceTable, seed: int = 0, permutations: int = 199) -> float:
    names = CHAIN.state_names
    return permutation_delta_r_inf(_vectors(a, names), _vectors(b, names), n_states=len(names),
                                   prior=ChainPrior.from_settings(None, None), unvisited="prior", initial="empirical",
                                   permutations=permutations, seed=seed).p_value


def test_relabellings_keep_each_shared_task_and_move_one_sided_tasks_whole() -> None:
    names = CHAIN.state_names
    a = _vectors(_corpus(CHAIN, 6, 3, 1), names).ordered()
    b_tasks = _corpus(CHAIN, 6, 2, 2)  # tasks 0-5 on both sides, 3 trials in A and 2 in B
    only_b = _corpus(CHAIN, 4, 2, 3, prefix="u")  # tasks named task0-3 too: renamed below to be B's own
    t = only_b.to_arrow()
    t = t.set_column(t.schema.get_field_index("task_id"), "task_id",
                     pa.array([f"b-{x}" for x in t.column("task_id").to_pylist()], pa.string()))
    b = _vectors(tt.TraceTable.from_arrow(pa.concat_tables([b_tasks.to_arrow(), t]), source="b"), names).ordered()
    blocks, shared, whole = _labellings(a, b, 50, seed=3)
    labels = np.concatenate(list(blocks), axis=1).astype(bool)
    assert (shared, whole) == (6, 4)
    # the same draws whatever the block size
    assert (np.concatenate(list(_labellings(a, b, 50, seed=3, block=7)[0]), axis=1).astype(bool) == labels).all()
    task = np.concatenate([a.task_hash, b.task_hash])
    assert labels.sum(axis=0).tolist() == [a.n] * 50  # A keeps its size
    moved = False
    for key in np.unique(task):
        rows = task == key
        if key in set(a.task_hash.tolist()):  # shared: A keeps 3 of its trials, which ones varies
            assert set(labels[rows].sum(axis=0).tolist()) == {3}
            moved |= len({tuple(c) for c in labels[rows].T}) > 1
        else:  # B's own tasks: both trials always on one side, together
            col = labels[rows]
            assert (col == col[0]).all()
    assert moved
    assert (labels[:, 0] != labels[:, 1]).any()  # not the same relabelling twice


def test_the_p_value_does_not_depend_on_the_order_traces_were_read() -> None:
    names = CHAIN.state_names
    a, b = _corpus(CHAIN, 15, 4, 4, censor=0.3), _corpus(CHAIN, 15, 4, 5, censor=0.3, prefix="s")
    va, vb = _vectors(a, names), _vectors(b, names)
    rng = np.random.default_rng(0)
    perm = rng.permutation(va.n)
    shuffled = TraceVectors(va.trace_hash[perm], va.task_hash[perm], va.has_task[perm], va.counts[perm])
    half = va.n // 2
    pieces = [TraceVectors(x.trace_hash[s], x.task_hash[s], x.has_task[s], x.counts[s])
              for x, s in ((shuffled, slice(half, None)), (shuffled, slice(0, half)))]
    kw = {"n_states": len(names), "prior": ChainPrior.from_settings(None, None), "unvisited": "prior",
          "initial": "empirical", "seed": 9}
    p0 = permutation_delta_r_inf(va, vb, **kw)
    p1 = permutation_delta_r_inf(pieces[0].merge(pieces[1]), vb, **kw)
    assert p0 == p1


def test_compare_reports_the_test_and_the_identity_relabelling_is_its_own_delta() -> None:
    a, b = _corpus(CHAIN, 20, 3, 6), _corpus(CHAIN, 20, 3, 7, prefix="s")
    c = compare(a, b, samples=50, seed=1)
    t = c.delta_r_inf_test
    assert t is not None and t.used == t.permutations == 199 and t.shared_tasks == 20 and t.whole_units == 0
    assert t.statistic == pytest.approx(c.delta_r_inf, abs=1e-12)
    assert c.to_dict()["delta_r_inf_test"]["p_value"] == t.p_value
    assert f"permutation p = {t.p_value:.3g}" in c.verdict


@pytest.mark.parametrize("hard,censor", [pytest.param(0.0, 0.3, marks=pytest.mark.slow),
                                         pytest.param(0.4, 0.0, marks=pytest.mark.slow), (0.4, 0.3)])
def test_size_on_one_agent(hard: float, censor: float) -> None:
    """Two samples of one agent (20 tasks × 3 trials a side, the same tasks; tasks of two difficulties; ~30 % of
    traces cut between steps): the test rejects at 5 % and 20 % within binomial error of the level."""
    ps = np.array([_test(_corpus(CHAIN, 20, 3, 2 * r, censor=censor, hard=hard),
                         _corpus(CHAIN, 20, 3, 2 * r + 1, censor=censor, hard=hard, prefix="s"),
                         seed=r, permutations=99) for r in range(120)])
    # Binomial(120, 0.05) exceeds 12 with probability 0.4 %, Binomial(120, 0.2) exceeds 36 with 0.4 %.
    assert (ps <= 0.05).sum() <= 12 and (ps <= 0.2).sum() <= 36
    assert (ps <= 0.5).sum() >= 40  # and it is not trivially conservative


def test_power_against_a_worse_agent() -> None:
    rs = CHAIN.R_success * 0.6
    worse = CHAIN.with_changes(R_success=rs, R_failure=CHAIN.R_failure + CHAIN.R_success - rs)
    # R∞ 0.625 against 0.375, 300 traces a side (ΔR∞'s sd ≈ 0.05): every relabelling is below the observed gap
    assert _test(_corpus(CHAIN, 50, 6, 1, censor=0.3), _corpus(worse, 50, 6, 2, censor=0.3, prefix="s")) == 0.005


def test_compare_does_not_call_a_difference_the_test_does_not_confirm() -> None:
    a, b = _corpus(CHAIN, 20, 3, 8), _corpus(CHAIN, 20, 3, 9, prefix="s")
    c = compare(a, b, samples=50, seed=1)
    assert c.delta_r_inf_test is not None
    lo_hi = (0.01, 0.2)
    confirmed = dataclasses.replace(c, delta_r_inf_interval=lo_hi,
                                    delta_r_inf_test=dataclasses.replace(c.delta_r_inf_test, p_value=0.01))
    assert confirmed.direction == "better" and not confirmed.unconfirmed
    refused = dataclasses.replace(confirmed, delta_r_inf_test=dataclasses.replace(c.delta_r_inf_test, p_value=0.2))
    assert refused.direction == "same" and refused.interval_direction == "better" and refused.unconfirmed
    assert "the interval excludes 0 but the permutation test of no difference does not reject (p = 0.2 > 0.05)" \
        in refused.verdict
    assert refused.to_dict()["direction"] == "same"


def test_over_the_memory_budget_the_test_is_skipped_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    import tracetochain._limits as limits

    # room for 50 draws of a 3-state chain, not for 400 traces' count vectors (16 bytes a stored count)
    monkeypatch.setattr(limits, "memory_budget", lambda: 20_000)
    c = compare(tt.datasets.simulate_traces(CHAIN, 400, 1), tt.datasets.simulate_traces(CHAIN, 400, 2), samples=50)
    assert c.delta_r_inf_test is None and "permutation" not in c.verdict
    doc = c.to_dict()["delta_r_inf_test"]
    assert doc["p_value"] is None and "TRACETOCHAIN_MAX_MEMORY_MB" in doc["skipped"]


def test_the_command_line_default_is_the_library_default() -> None:
    import inspect

    from tracetochain.cli._whatif import compare as compare_command
    from tracetochain.uncertainty._permutation import PERMUTATIONS

    assert inspect.signature(compare_command).parameters["permutations"].default == PERMUTATIONS
    assert inspect.signature(compare).parameters["permutations"].default == PERMUTATIONS


def test_a_relabelling_without_a_statistic_counts_as_reaching_the_observed_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Leaving such relabellings out would condition on the labels; they count against the null's rejection."""
    from tracetochain.numerics.batched import ChainBatch

    names = CHAIN.state_names
    a, b = _corpus(CHAIN, 15, 4, 4), _corpus(CHAIN, 15, 4, 5, prefix="s")
    kw = {"n_states": len(names), "prior": ChainPrior.from_settings(None, None), "unvisited": "prior",
          "initial": "empirical", "seed": 3, "permutations": 99}
    full = permutation_delta_r_inf(_vectors(a, names), _vectors(b, names), **kw)
    r_inf = ChainBatch.r_inf

    def every_third_lost(self: ChainBatch) -> np.ndarray:
        out = np.array(r_inf(self), dtype=np.float64)
        if out.size > 1:  # the relabellings' blocks (the observed statistic is a batch of one)
            out[::3] = np.nan
        return out

    monkeypatch.setattr(ChainBatch, "r_inf", every_third_lost)
    lost = permutation_delta_r_inf(_vectors(a, names), _vectors(b, names), **kw)
    assert lost.statistic == full.statistic and lost.permutations == 99 and lost.used < 99
    assert lost.p_value >= (1 + (99 - lost.used)) / 100 and lost.p_value >= full.p_value
