"""Order-k chains as a model family: the context is the last k observed states (BEGIN-padded at the start).

This is the order-k lift of the paper's SS14 (a chain on k-tuples, Tran-Truong & Le 2026, study SS14) made a proper
variable-order model: only the contexts seen in the fit traces get rows of their own, every row is shrunk toward its
order-(k − 1) suffix (down to the first-order row and the pooled root), and a context never seen backs off to its
longest seen suffix — exactly, since such a context's row *is* its suffix's (MacKay & Peto 1995; Bühlmann & Wyner
1999 for variable-length chains). The compiled chain has one state per seen context, so R∞, R(d) and every other
metric are those of the order-k model. The naive lift (smoothing every tuple over all tuples) instead puts mass on
successor tuples that cannot follow, which corrupts held-out likelihoods.

>>> import tracetochain as tt
>>> from tracetochain.models import LiftedModel
>>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 500, seed=1)
>>> LiftedModel(order=2).fit(traces).to_chain().chain.n_states <= 3 + 9 + 3
True
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain.models._context import CompiledArrays, ContextChainModel, ContextScheme
from tracetochain.models._encoded import EncodedTraces, Grouping

BEGIN = "^"


class OrderKScheme(ContextScheme):
    """Contexts = the last j ≤ k states; node ids 0 … m − 1 are the single states, then the seen longer tuples.

    A tuple (a_1 … a_j), a_j the most recent, is coded Σ_i a_{j−i} (m + 1)^i with BEGIN = m; one sorted code table
    per length.
    """

    name = "order-k"

    def __init__(self, order: int) -> None:
        if order < 1:
            raise ValueError(f"order must be >= 1, got {order}")
        self.order = int(order)
        self.m = 0
        self._codes: list[NDArray[np.int64]] = []
        self._ids: list[NDArray[np.int64]] = []

    def _step_codes(self, enc: EncodedTraces) -> list[NDArray[np.int64]]:
        """Code of the length-j context of every step, j = 1 … k."""
        base = self.m + 1
        pos = enc.position
        out: list[NDArray[np.int64]] = []
        code = np.zeros(enc.n_steps, np.int64)
        for i in range(self.order):
            prev = np.full(enc.n_steps, self.m, np.int64)
            ok = pos >= i
            idx = np.flatnonzero(ok)
            prev[idx] = enc.codes[idx - i]
            code = code + prev * base**i
            out.append(code.copy())
        return out

    def setup(self, enc: EncodedTraces) -> None:
        self.m = m = enc.n_symbols
        if (m + 1) ** self.order >= 2**62:
            raise ValueError(f"order {self.order} over {m} states is too large to code")
        codes = self._step_codes(enc)
        self._codes = [np.arange(m, dtype=np.int64)]
        self._ids = [np.arange(m, dtype=np.int64)]
        parents = [np.full(m, -1, np.int64)]
        levels = [np.ones(m, np.int64)]
        nxt = m
        base = m + 1
        for j in range(2, self.order + 1):
            seen = np.unique(codes[j - 1])
            ids = np.arange(nxt, nxt + seen.size, dtype=np.int64)
            nxt += seen.size
            self._codes.append(seen)
            self._ids.append(ids)
            parents.append(self._lookup(j - 1, seen % base ** (j - 1)))
            levels.append(np.full(seen.size, j, np.int64))
        self.parent = np.concatenate(parents)
        self.level = np.concatenate(levels)

    def _lookup(self, j: int, codes: NDArray[np.int64]) -> NDArray[np.int64]:
        """Node of length-j codes (−1 where unseen)."""
        table, ids = self._codes[j - 1], self._ids[j - 1]
        if j == 1:
            return codes.astype(np.int64)
        pos = np.searchsorted(table, codes)
        pos = np.minimum(pos, max(table.size - 1, 0))
        found = table.size > 0
        hit = (table[pos] == codes) if found else np.zeros(codes.size, bool)
        return np.where(hit, ids[pos] if found else -1, -1)

    def _deepest(self, per_level: list[NDArray[np.int64]]) -> NDArray[np.int64]:
        node = per_level[0].astype(np.int64).copy()
        for j in range(2, len(per_level) + 1):
            found = self._lookup(j, per_level[j - 1])
            node = np.where(found >= 0, found, node)
        return node

    def contexts(self, enc: EncodedTraces) -> NDArray[np.int64]:
        return self._deepest(self._step_codes(enc))

    def _node_codes(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(code, length) of every node, in node order."""
        code = np.concatenate(self._codes)
        length = np.concatenate([np.full(c.size, j + 1, np.int64) for j, c in enumerate(self._codes)])
        order = np.argsort(np.concatenate(self._ids))
        return code[order], length[order]

    def compile(self, rows: NDArray[np.float64], pi0: NDArray[np.float64], observed_names: tuple[str, ...]
                ) -> CompiledArrays:
        m, k, base = self.m, self.order, self.m + 1
        code, length = self._node_codes()
        n = code.size
        # Successor of node v after symbol x: the longest seen suffix of (v, x), at most k long.
        new_len = np.minimum(length + 1, k)
        ext = (code[:, None] * base + np.arange(m)[None, :]) % (base ** new_len)[:, None]
        nxt = np.tile(np.arange(m, dtype=np.int64), (n, 1))
        for j in range(2, k + 1):
            fits = new_len[:, None] >= j
            found = self._lookup(j, (ext % base**j).ravel()).reshape(n, m)
            nxt = np.where(fits & (found >= 0), found, nxt)
        # Start: the context (BEGIN, …, BEGIN, s_1) or its longest seen suffix.
        start_codes = [np.arange(m, dtype=np.int64) + sum(m * base**i for i in range(1, j)) for j in range(1, k + 1)]
        start = self._deepest(start_codes)
        p0 = np.zeros(n)
        np.add.at(p0, start, pi0)

        def names() -> tuple[str, ...]:
            return tuple(_context_name(int(c), int(L), m, observed_names) for c, L in zip(code, length, strict=True))

        return CompiledArrays(np.repeat(np.arange(n), m), nxt.ravel(), rows[:, :m].ravel(), rows[:, m].copy(),
                              rows[:, m + 1].copy(), p0, code % base, names)

    def settings(self) -> dict[str, Any]:
        return {"scheme": self.name, "order": self.order,
                "contexts_per_order": [int(c.size) for c in self._codes]}


@functools.lru_cache(maxsize=1 << 16)
def _context_name(code: int, length: int, m: int, observed: tuple[str, ...]) -> str:
    """The name "a|b|c" of a context coded in base m + 1 (digit m = BEGIN). Cached: the timing null and the interval
    refits compile thousands of contexts per refit, most of them seen in the refit before."""
    base = m + 1
    parts = [(code // base**i) % base for i in range(length)][::-1]
    return "|".join(BEGIN if p == m else observed[p] for p in parts)


class LiftedModel(ContextChainModel):
    """Order-k chain with backoff to shorter contexts (module docstring)."""

    family = "lifted"

    def __init__(self, order: int = 2, *, group: Grouping = "auto") -> None:
        super().__init__(group=group)
        if order < 1:
            raise ValueError(f"order must be >= 1, got {order}")
        self.order = order

    def _make_scheme(self) -> ContextScheme:
        return OrderKScheme(self.order)

    def like(self) -> LiftedModel:
        return LiftedModel(self.order, group=self.group)

    @property
    def size(self) -> int | None:
        return self.order

    @property
    def label(self) -> str:
        return f"lifted(k={self.order})"
