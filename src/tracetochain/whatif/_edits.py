"""What-if edits on a fitted chain, evaluated exactly (Tran-Truong & Le 2026, Prop. 2 and study SS14; docs/numerics.md
§5).

An edit describes a design change — a fallback tool that rescues part of a state's failures, a different retry
probability, a new or re-weighted edge, a removed state — as a change of the chain's rows. :func:`apply_edits`
returns the edited chain (validated like any chain: rows still sum to 1); metrics on it are exact. Each edit keeps
its row summing to 1 by saying where the moved mass comes from.

Targets are state names, ``"success"`` or ``"failure"``; ``"*"`` as the state applies an edit to every state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from tracetochain.chain import AbsorbingChain
from tracetochain.exceptions import TraceToChainError

SUCCESS, FAILURE = "success", "failure"
TakeFrom = Literal["failure", "success", "proportional"]


class EditError(TraceToChainError, ValueError):
    """An edit cannot be applied (unknown state, probability out of range, nothing to move)."""


def _rows(chain: AbsorbingChain) -> NDArray[np.float64]:
    """The full (m, m+2) row-stochastic matrix [Q | R⊕ | R⊖]."""
    return np.column_stack([chain.Q, chain.R_success, chain.R_failure])


def _column(chain: AbsorbingChain, target: str) -> int:
    m = chain.n_states
    if target == SUCCESS:
        return m
    if target == FAILURE:
        return m + 1
    try:
        return chain.state_index(target)
    except KeyError:
        raise EditError(f"unknown target {target!r}: use a state name, 'success' or 'failure' "
                        f"(states: {', '.join(chain.state_names)})") from None


def _states(chain: AbsorbingChain, state: str) -> list[int]:
    if state == "*":
        return list(range(chain.n_states))
    try:
        return [chain.state_index(state)]
    except KeyError:
        raise EditError(f"unknown state {state!r}; states are: {', '.join(chain.state_names)}") from None


def _take(row: NDArray[np.float64], amount: float, source: int | None, keep: int, where: str) -> None:
    """Remove ``amount`` from ``row`` — from column ``source``, or proportionally from every column but ``keep``."""
    if amount <= 0:
        return
    if source is not None:
        if row[source] + 1e-12 < amount:
            raise EditError(f"{where}: needs {amount:.4g} from that outcome but it holds only {row[source]:.4g}")
        row[source] = max(row[source] - amount, 0.0)
        return
    others = np.ones(row.size, dtype=bool)
    others[keep] = False
    pool = row[others].sum()
    if pool + 1e-12 < amount:
        raise EditError(f"{where}: the rest of the row holds only {pool:.4g}, cannot give {amount:.4g}")
    row[others] *= (pool - amount) / pool if pool > 0 else 0.0


@dataclass(frozen=True)
class Reroute:
    """Move ``fraction`` of ``state``'s ``source`` mass (default: its failure exit) to ``target``.

    The paper's fallback tool (study SS14) is ``Reroute("*", 0.1)``: R⊕' = R⊕ + 0.1·R⊖, R⊖' = 0.9·R⊖ in every row.
    """

    state: str
    fraction: float
    target: str = SUCCESS
    source: str = FAILURE

    def apply(self, chain: AbsorbingChain, P: NDArray[np.float64]) -> None:
        if not 0 <= self.fraction <= 1:
            raise EditError(f"reroute fraction must be in [0, 1], got {self.fraction}")
        src, dst = _column(chain, self.source), _column(chain, self.target)
        for i in _states(chain, self.state):
            moved = self.fraction * P[i, src]
            P[i, src] -= moved
            P[i, dst] += moved

    def __str__(self) -> str:
        return f"reroute {self.fraction:g} of {self.state}'s {self.source} mass to {self.target}"


@dataclass(frozen=True)
class SetEdge:
    """Set P(state → target) to ``probability``; the difference is taken from (or given to) ``take_from``."""

    state: str
    target: str
    probability: float
    take_from: TakeFrom = "proportional"

    def apply(self, chain: AbsorbingChain, P: NDArray[np.float64]) -> None:
        if not 0 <= self.probability <= 1:
            raise EditError(f"probability must be in [0, 1], got {self.probability}")
        dst = _column(chain, self.target)
        src = None if self.take_from == "proportional" else _column(chain, self.take_from)
        if src == dst:
            raise EditError("take_from must differ from the edited target")
        for i in _states(chain, self.state):
            delta = self.probability - P[i, dst]
            if delta >= 0:
                _take(P[i], delta, src, dst, f"edge {chain.state_names[i]} → {self.target}")
            else:
                give = -delta
                if src is not None:
                    P[i, src] += give
                else:
                    others = np.ones(P.shape[1], dtype=bool)
                    others[dst] = False
                    pool = P[i, others].sum()
                    if pool > 0:
                        P[i, others] *= (pool + give) / pool
                    else:  # nothing else in the row: the freed mass goes to failure
                        P[i, -1] += give
            P[i, dst] = self.probability

    def __str__(self) -> str:
        return f"set {self.state} → {self.target} to {self.probability:g} (from {self.take_from})"


@dataclass(frozen=True)
class ScaleEdge:
    """Multiply P(state → target) by ``factor`` (compensated from ``take_from``)."""

    state: str
    target: str
    factor: float
    take_from: TakeFrom = "proportional"

    def apply(self, chain: AbsorbingChain, P: NDArray[np.float64]) -> None:
        if self.factor < 0:
            raise EditError(f"factor must be >= 0, got {self.factor}")
        dst = _column(chain, self.target)
        for i in _states(chain, self.state):
            SetEdge(chain.state_names[i], self.target, min(1.0, P[i, dst] * self.factor), self.take_from).apply(
                chain, P)

    def __str__(self) -> str:
        return f"scale {self.state} → {self.target} by {self.factor:g} (from {self.take_from})"


@dataclass(frozen=True)
class SetRetry:
    """Set the self-loop (retry) probability of ``state``; the rest of the row is rescaled proportionally."""

    state: str
    probability: float

    def apply(self, chain: AbsorbingChain, P: NDArray[np.float64]) -> None:
        for i in _states(chain, self.state):
            SetEdge(chain.state_names[i], chain.state_names[i], self.probability, "proportional").apply(chain, P)

    def __str__(self) -> str:
        return f"set the retry probability of {self.state} to {self.probability:g}"


@dataclass(frozen=True)
class RemoveState:
    """Remove ``state``: mass that entered it goes, per ``redistribute``,

    * ``"bypass"`` — along the removed state's own exits (exact state elimination: every path through it is kept,
      one step shorter per visit; R∞ is unchanged unless other edits apply),
    * ``"success"`` / ``"failure"`` — straight to that outcome,
    * ``"proportional"`` — over the rest of each row.
    """

    state: str
    redistribute: Literal["bypass", "success", "failure", "proportional"] = "bypass"

    # No ``apply``: removing a state changes the state set, so :func:`apply_edits` rebuilds the chain.

    def __str__(self) -> str:
        return f"remove {self.state} ({self.redistribute})"


Edit = Reroute | SetEdge | ScaleEdge | SetRetry | RemoveState


def _remove(chain: AbsorbingChain, P: NDArray[np.float64], pi0: NDArray[np.float64], edit: RemoveState
            ) -> tuple[NDArray[np.float64], NDArray[np.float64], tuple[str, ...], NDArray[np.float64]]:
    """The rows, π0, names and start exits after removing a state. π0 keeps its mass: the start exits (episodes that
    end before any step) are unchanged, except under ``bypass``, where runs that start in the state and leave it
    straight to an outcome become such episodes."""
    idx = _states(chain, edit.state) if edit.state != "*" else []
    if len(idx) != 1:
        raise EditError("remove needs one state name")
    s = idx[0]
    m = P.shape[0]
    if m == 1:
        raise EditError("cannot remove the only state")
    keep = np.array([i for i in range(m) if i != s])
    cols = np.r_[keep, m, m + 1]
    incoming = P[:, s].copy()
    start = pi0[s]
    exits = chain.start_exits.copy()
    if edit.redistribute == "bypass":
        loop = P[s, s]
        if loop >= 1.0:
            raise EditError(f"{edit.state} never exits; it cannot be bypassed")
        leave = P[s].copy()
        leave[s] = 0.0
        leave /= 1.0 - loop  # where a visit to s finally goes (geometric number of retries summed out)
        newP = P[np.ix_(keep, cols)] + np.outer(incoming[keep], leave[cols])
        new_pi0 = pi0[keep] + start * leave[keep]
        # Runs that start in s and leave it straight to an outcome have no state left: they end before any step.
        exits = exits + start * leave[[m, m + 1]]
    else:
        newP = P[np.ix_(keep, cols)]
        if edit.redistribute in (SUCCESS, FAILURE):
            newP[:, -2 if edit.redistribute == SUCCESS else -1] += incoming[keep]
        else:
            total = newP.sum(axis=1)
            newP *= np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0)[:, None]
        new_pi0 = pi0[keep]
        if new_pi0.sum() <= 0:
            raise EditError(f"every run starts in {edit.state}; removing it leaves no start state")
        new_pi0 = new_pi0 / new_pi0.sum()
        if exits.any():  # π0 keeps the mass of the runs that take a step
            new_pi0 = new_pi0 * pi0.sum()
    names = tuple(chain.state_names[i] for i in keep)
    return newP, new_pi0, names, exits


def apply_edits(chain: AbsorbingChain, edits: Sequence[Edit]) -> AbsorbingChain:
    """The chain after applying ``edits`` in order (exact; the result is validated as any chain)."""
    current = chain
    for edit in edits:
        P = _rows(current)
        if isinstance(edit, RemoveState):
            newP, pi0, names, exits = _remove(current, P, current.pi0.copy(), edit)
            m = len(names)
            current = AbsorbingChain(newP[:, :m], newP[:, m], newP[:, m + 1], pi0, names, current.metadata, exits)
            continue
        edit.apply(current, P)
        m = current.n_states
        if (P < -1e-12).any():
            raise EditError(f"{edit}: an entry would become negative")
        P = np.clip(P, 0.0, None)
        P /= P.sum(axis=1, keepdims=True)
        current = current.with_changes(Q=P[:, :m], R_success=P[:, m], R_failure=P[:, m + 1])
    return current
