"""Monte Carlo simulation of traces from an absorbing chain, vectorised across traces.

Convention (no off-by-one; docs/numerics.md §8): a trace visits transient states s_1..s_L and then exits
from s_L; its length is L = the step at which it is absorbed, so Pr[length ≤ d and success] = R(d). With
``max_steps`` = D, a trace still transient after D steps is *censored*, and Pr[success observed] = R(D) exactly.
With start exits (s, f) an episode ends before any step with probability s (success) or f (failure): its length is
0 and it has no state (R(0) = s).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from tracetochain._outcome import CENSORED, FAILURE, SUCCESS

#: Running traces × (states + 2) up to which a step's columns are found by counting cumulative entries directly
#: rather than by the binary search.
DIRECT_COUNT_CELLS = 1 << 15


@dataclass(frozen=True)
class StepTable:
    """A chain's step law as row-wise inverse-CDF tables, kept to the columns where each row's cumulative sum rises.

    Row i of the full table is the cumulative sum of [Q | R⊕ | R⊖][i] with its last entry set to 1 (a guard against
    rounding: every draw lands in some column). A draw u lands in the first column whose cumulative value exceeds u,
    which is always a column of positive probability or that last one — so only those are kept: ``cum[i, :w_i]``
    their cumulative values (the full table's, unchanged), ``+inf`` after them, and ``cols[i]`` their column
    numbers. Counting the kept entries ≤ u and reading ``cols`` gives the full table's column exactly, in a row as
    wide as the most columns any state can reach instead of m + 2: the chains compiled from lifted or duration
    models have thousands of states and a few dozen successors each. Build it once per chain
    (:meth:`~tracetochain.chain.AbsorbingChain.simulate` caches it) to simulate many times."""

    cum: NDArray[np.float64]
    cols: NDArray[np.int64]
    n_states: int


def step_table(Q: NDArray[np.float64], r_success: NDArray[np.float64], r_failure: NDArray[np.float64]) -> StepTable:
    """The :class:`StepTable` of a chain (columns 0..m−1 transient, m success, m + 1 failure)."""
    m = Q.shape[0]
    step = np.column_stack([Q, r_success, r_failure])
    full = np.cumsum(step, axis=1)
    full[:, -1] = 1.0
    keep = step > 0
    keep[:, -1] = True
    per_row = keep.sum(axis=1)
    rows, cols = np.nonzero(keep)  # row-major: each row's columns in increasing order
    pos = np.arange(rows.size) - np.repeat(np.cumsum(per_row) - per_row, per_row)  # rank within the row
    cum = np.full((m, int(per_row.max())), np.inf)
    table_cols = np.full(cum.shape, m + 1, dtype=np.int64)
    cum[rows, pos] = full[rows, cols]
    table_cols[rows, pos] = cols
    cum.flags.writeable = False  # cached on an immutable chain and shared by every simulation of it
    table_cols.flags.writeable = False
    return StepTable(cum, table_cols, m)


@dataclass(frozen=True)
class SimulatedTraces:
    """``length[i]`` = number of steps of trace i; ``outcome[i]`` ∈ {SUCCESS=0, FAILURE=1, CENSORED=2}.

    When paths were requested, ``states`` is the concatenation of every trace's transient state indices in order
    and ``offsets`` (length n + 1) delimits trace i as ``states[offsets[i]:offsets[i + 1]]``.
    """

    length: NDArray[np.int64]
    outcome: NDArray[np.int8]
    states: NDArray[np.int32] | None = None
    offsets: NDArray[np.int64] | None = None


def simulate_traces(
    Q: NDArray[np.float64],
    r_success: NDArray[np.float64],
    r_failure: NDArray[np.float64],
    pi0: NDArray[np.float64],
    n_traces: int,
    rng: np.random.Generator,
    *,
    max_steps: int = 10_000,
    record_paths: bool = False,
    caps: NDArray[np.int64] | None = None,
    start_exits: NDArray[np.float64] | None = None,
    table: StepTable | None = None,
) -> SimulatedTraces:
    """Simulate ``n_traces`` independent traces; one vectorised draw per step for all still-running traces.

    ``caps`` (one per trace, each ≥ 0) censors trace i after ``caps[i]`` steps instead of ``max_steps`` — independent
    censoring at a random time, as a censoring distribution drawn beforehand makes it (a cap of 0 censors an episode
    that would take a first step before it takes it). With ``caps`` the random stream is consumed exactly as without
    it until a trace is censored. ``start_exits`` (s, f): the start draw is over the m states (π0, a
    sub-distribution) and the two exits, one uniform per trace as without them; an episode that draws an exit has
    length 0 (and no path). ``table``: the chain's :func:`step_table`, when already built.
    """
    if n_traces < 0:
        raise ValueError(f"n_traces must be >= 0, got {n_traces}")
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if caps is not None:
        caps = np.asarray(caps, dtype=np.int64)
        if caps.shape != (n_traces,) or (n_traces and caps.min() < 0):
            raise ValueError("caps needs one cap >= 0 per trace")
        max_steps = int(max(1, min(max_steps, caps.max()))) if n_traces else max_steps
    m = Q.shape[0]
    # Columns 0..m-1 transient, m = success, m + 1 = failure.
    if table is None:
        table = step_table(Q, r_success, r_failure)
    elif table.n_states != m:
        raise ValueError(f"the step table is for {table.n_states} states, the chain has {m}")
    cum, cols = table.cum, table.cols
    width = cum.shape[1]
    flat = cum.ravel()
    n_halvings = int(width).bit_length()  # enough halvings to shrink [0, width] to one point
    exits = start_exits is not None and bool(np.any(np.asarray(start_exits) > 0))
    cum_pi0 = np.cumsum(np.concatenate([pi0, np.asarray(start_exits, dtype=np.float64)]) if exits else pi0)
    cum_pi0[-1] = 1.0

    state = np.searchsorted(cum_pi0, rng.random(n_traces), side="right").astype(np.int64)
    length = np.zeros(n_traces, dtype=np.int64)
    outcome = np.full(n_traces, CENSORED, dtype=np.int8)
    active = np.arange(n_traces)
    if exits:  # columns m and m + 1 of the start draw: success or failure before any step
        outcome[state == m] = SUCCESS
        outcome[state == m + 1] = FAILURE
        active = active[state < m]
    if caps is not None:
        active = active[caps[active] > 0]
    path_idx: list[NDArray[np.int64]] = []
    path_state: list[NDArray[np.int64]] = []
    for _ in range(max_steps):
        if active.size == 0:
            break
        cur = state[active]
        if record_paths:
            path_idx.append(active)
            path_state.append(cur)
        length[active] += 1
        u = rng.random(active.size)
        # Row-wise inverse CDF: the sampled column is the number of cumulative entries ≤ u. Few traces left (the
        # long tail of a simulation): count them directly, one comparison of the rows at once; else a binary search
        # run on all rows at once (the same comparisons, in O(log m) per trace, ~60 array operations a step — which
        # dominated when a handful of traces ran on for hundreds of steps). Both give the same column.
        if cur.size * width <= DIRECT_COUNT_CELLS:
            pos = (cum[cur] <= u[:, None]).sum(axis=1)
        else:
            base = cur * width
            lo = np.zeros(cur.size, dtype=np.int64)
            hi = np.full(cur.size, width, dtype=np.int64)
            for _ in range(n_halvings):
                mid = (lo + hi) >> 1
                below = flat[base + np.minimum(mid, width - 1)] <= u
                lo = np.where(below, mid + 1, lo)
                hi = np.where(below, hi, mid)
            pos = lo
        nxt = cols[cur, pos]
        absorbed = nxt >= m
        done = active[absorbed]
        outcome[done] = np.where(nxt[absorbed] == m, SUCCESS, FAILURE)
        active = active[~absorbed]
        state[active] = nxt[~absorbed]
        if caps is not None:
            active = active[length[active] < caps[active]]

    if not record_paths:
        return SimulatedTraces(length, outcome)
    if path_idx:
        idx = np.concatenate(path_idx)
        st = np.concatenate(path_state)
        order = np.argsort(idx, kind="stable")  # steps were appended in time order, so stable keeps it per trace
        states = st[order].astype(np.int32)
    else:
        states = np.zeros(0, dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(length)])
    return SimulatedTraces(length, outcome, states, offsets)
