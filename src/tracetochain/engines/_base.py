"""The engine boundary: *where* counting and replicates run, never *what* they compute.

Two operations cover the work that scales:

* ``map_reduce(fn, partitions, reduce)``: ``fn`` maps each partition (a small descriptor; the engine ships it to
  wherever the data is read) to a partial result, typically transition counts; ``reduce`` combines two partial
  results. Every engine combines the partial results in the same tree (:func:`tree_reduce`: adjacent pairs,
  level by level, the earlier partitions always on the left), so even a ``reduce`` that is only associative up to
  rounding (float sums) or that depends on order (merging state vocabularies in order of first appearance) gives
  bit-identical answers on every engine.
* ``map_seeds(fn, seed, n)``: replicate ``i`` runs ``fn(children[i])`` with
  ``children = np.random.SeedSequence(seed).spawn(n)`` (:func:`spawn_seeds`); results come back in replicate
  order. Same seed → same numbers, on every engine and for any number of workers.

Engines: :class:`~tracetochain.engines.LocalEngine` (in process, the default) and
:class:`~tracetochain.engines.DaskEngine` (the ``[dask]`` extra).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from tracetochain.exceptions import EngineError

P = TypeVar("P")
R = TypeVar("R")
T = TypeVar("T")

SeedLike = int | Sequence[int] | np.random.SeedSequence


@runtime_checkable
class Engine(Protocol):
    """Where partitions are counted and replicates are run. Engines are context managers."""

    name: str

    def map_reduce(self, fn: Callable[[P], R], partitions: Sequence[P], reduce: Callable[[R, R], R]) -> R:
        """``reduce`` over ``fn(p)`` for every partition, earlier partitions always on the left."""
        ...

    def map_seeds(self, fn: Callable[[np.random.SeedSequence], T], seed: SeedLike, n: int) -> list[T]:
        """``[fn(s) for s in spawn_seeds(seed, n)]``, possibly computed elsewhere."""
        ...

    def close(self) -> None:
        """Release whatever the engine started (no-op for engines that started nothing)."""
        ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...


def spawn_seeds(seed: SeedLike, n: int) -> list[np.random.SeedSequence]:
    """The ``n`` child seeds of ``seed``: child ``i`` seeds replicate ``i`` on every engine.

    ``seed`` is an int (or a sequence of ints) → ``np.random.SeedSequence(seed).spawn(n)``. A ``SeedSequence`` is
    used as given (``seed.spawn(n)``, which advances its spawn counter, as numpy does).

    >>> [int(s.generate_state(1)[0]) for s in spawn_seeds(7, 2)] == \\
    ...     [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(7).spawn(2)]
    True
    """
    n = _check_n(n)
    if isinstance(seed, np.random.SeedSequence):
        return list(seed.spawn(n))
    if isinstance(seed, (bool, np.bool_)) or seed is None:
        raise TypeError(f"seed must be an int, a sequence of ints or a numpy SeedSequence, got {seed!r}")
    return list(np.random.SeedSequence(seed).spawn(n))


def _check_n(n: int) -> int:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    return int(n)


def _check_partitions(partitions: Sequence[Any]) -> list[Any]:
    parts = list(partitions)
    if not parts:
        raise ValueError("map_reduce needs at least one partition (there is no neutral element to return)")
    return parts


def tree_reduce(values: Sequence[R], reduce: Callable[[R, R], R]) -> R:
    """Combine ``values`` pairwise, level by level: ``[a, b, c, d, e]`` → ``[ab, cd, e]`` → ``[abcd, e]`` → ``abcde``.

    The reduction tree every engine uses. :class:`TreeReducer` builds the same tree while the values stream in.

    >>> tree_reduce(list("abcde"), lambda x, y: f"({x}{y})")
    '(((ab)(cd))e)'
    """
    level = _check_partitions(values)
    while len(level) > 1:
        nxt = [reduce(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]  # type: ignore[no-any-return]


class TreeReducer:
    """Streaming form of :func:`tree_reduce`: at most log2(n) + 1 partial results are held at any time.

    A full block of 2^k values is combined as soon as it is complete (a binary counter); at the end the remaining
    blocks, largest first, are folded from the right, which is exactly the level-by-level tree.

    >>> r = TreeReducer(lambda x, y: f"({x}{y})")
    >>> for v in "abcde":
    ...     r.push(v)
    >>> r.result()
    '(((ab)(cd))e)'
    """

    def __init__(self, reduce: Callable[[Any, Any], Any]) -> None:
        self._reduce = reduce
        self._stack: list[tuple[int, Any]] = []  # (log2 of the block size, combined value)

    def push(self, value: Any) -> None:
        level = 0
        while self._stack and self._stack[-1][0] == level:
            _, left = self._stack.pop()
            value = self._reduce(left, value)
            level += 1
        self._stack.append((level, value))

    def result(self) -> Any:
        if not self._stack:
            raise ValueError("map_reduce needs at least one partition (there is no neutral element to return)")
        acc = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            acc = self._reduce(left, acc)
        return acc


def get_engine(engine: str | Engine | None = None, *, scheduler: str | None = None, **options: Any) -> Engine:
    """An engine from its name, as the CLI's ``--engine`` / ``--scheduler`` give it.

    ``None`` or ``"local"`` → :class:`LocalEngine`; ``"dask"`` → :class:`DaskEngine` (``scheduler`` is the address
    of a running Dask scheduler; without one a local cluster is started, configured by ``options``). An engine
    object is returned as is.
    """
    if engine is None or engine == "local":
        if scheduler is not None:
            raise EngineError("--scheduler needs --engine dask")
        from tracetochain.engines.local import LocalEngine

        return LocalEngine()
    if engine == "dask":
        from tracetochain.engines.dask import DaskEngine

        return DaskEngine(scheduler, **options)
    if isinstance(engine, str):
        raise EngineError(f"unknown engine {engine[:80]!r}; use --engine local or --engine dask")
    if not isinstance(engine, Engine):
        raise TypeError(f"expected an engine name or an Engine, got {type(engine).__name__}")
    return engine
