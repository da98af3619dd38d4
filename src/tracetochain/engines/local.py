"""LocalEngine: everything in this process, in partition and replicate order (the default engine)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from tracetochain.engines._base import SeedLike, TreeReducer, _check_partitions, spawn_seeds

P = TypeVar("P")
R = TypeVar("R")
T = TypeVar("T")


class LocalEngine:
    """Run partitions and replicates one after the other in this process.

    Only one partition's data is in memory at a time (plus the running reduction), so a corpus larger than memory
    can still be counted, just not in parallel.

    >>> with LocalEngine() as engine:
    ...     engine.map_reduce(lambda p: p * p, [1, 2, 3], lambda a, b: a + b)
    14
    """

    name = "local"

    def map_reduce(self, fn: Callable[[P], R], partitions: Sequence[P], reduce: Callable[[R, R], R]) -> R:
        parts = _check_partitions(partitions)
        reducer = TreeReducer(reduce)  # the tree every engine uses; holds O(log n) partial results
        for p in parts:
            reducer.push(fn(p))
        out: R = reducer.result()
        return out

    def map_seeds(self, fn: Callable[[np.random.SeedSequence], T], seed: SeedLike, n: int) -> list[T]:
        return [fn(s) for s in spawn_seeds(seed, n)]

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "LocalEngine()"
