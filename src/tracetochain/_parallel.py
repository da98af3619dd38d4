"""One way to spread independent jobs over processes: the held-out checks of a model choice (candidate × split),
the candidates' likelihood scores, the refits behind a chosen model's intervals and their metrics.

Every job carries its own seed (a split's, a candidate's, a refit's), so a job's result does not depend on which
process ran it or in what order: the output of ``n_jobs=4`` is the output of ``n_jobs=1``, bit for bit (tests).

How many processes:

- ``n_jobs`` of the call when given (``analyze(..., n_jobs=4)``), else the value set by :func:`using_jobs` around it
  (the command line's ``--jobs``), else 1 — scikit-learn's convention: a library call stays in its process unless
  asked. ``-1`` means every CPU this process may use (cgroup quotas and affinity counted, through joblib).
- Jobs run here, timed, until the work left, at their mean pace so far, is worth processes: at least
  :data:`MIN_PARALLEL_SECONDS`. The rest then go to the workers. A worker pays an interpreter start and the
  package's import (about a second, once per command: the pool is kept and reused), so a small corpus never starts
  one, and a cheap first job (the first-order baseline before the hidden-Markov fits) does not decide for the rest.

The workers are joblib's ``loky`` processes: started fresh (never forked from a process that may hold a progress
bar's thread), callables sent with cloudpickle (a user's own candidate factory, a closure, travels), no
``if __name__ == "__main__"`` guard needed in a user's script, and numpy's own threads limited per worker so the
processes do not oversubscribe the cores.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Work left (seconds, at the first job's pace) below which the remaining jobs stay in this process.
MIN_PARALLEL_SECONDS = 4.0

_JOBS: ContextVar[int | None] = ContextVar("tracetochain_n_jobs", default=None)


def available_cpus() -> int:
    """CPUs this process may use (affinity and cgroup quotas counted; joblib's count)."""
    from joblib import cpu_count

    return max(1, int(cpu_count()))


def resolve_jobs(n_jobs: int | None = None) -> int:
    """The number of processes a call may use (module docstring): ``n_jobs``, else the :func:`using_jobs` value,
    else 1; ``-1`` is every available CPU. Raises ``ValueError`` for 0 or below -1."""
    value = n_jobs if n_jobs is not None else _JOBS.get()
    if value is None:
        return 1
    value = int(value)
    if value == -1:
        return available_cpus()
    if value < 1:
        raise ValueError(f"n_jobs must be a positive number of processes or -1 (every CPU), got {value}")
    return value


@contextmanager
def using_jobs(n_jobs: int | None) -> Iterator[None]:
    """Within the block, library calls that are not given ``n_jobs`` use this many processes (None: leave as is)."""
    if n_jobs is None:
        yield
        return
    resolve_jobs(n_jobs)  # a bad value fails here, not in the middle of a run
    token = _JOBS.set(int(n_jobs))
    try:
        yield
    finally:
        _JOBS.reset(token)


def _indexed(fn: Callable[[T], R], index: int, item: T) -> tuple[int, R]:
    return index, fn(item)


def parallel_map(fn: Callable[[T], R], items: Sequence[T], *, n_jobs: int | None = None,
                 done: Callable[[int, int], None] | None = None, min_seconds: float | None = None) -> list[R]:
    """``[fn(x) for x in items]``, in order, over up to ``n_jobs`` processes (module docstring).

    ``fn`` and the items must pickle (cloudpickle: module functions, closures and lambdas do; open files do not).
    ``done(finished, total)`` is called here, in this process, after each job. An exception in a job is raised here.
    ``min_seconds``: the work left that is worth processes (default :data:`MIN_PARALLEL_SECONDS`).
    """
    total = len(items)
    out: list[Any] = [None] * total
    if total == 0:
        return []
    report = done or (lambda finished, total: None)
    report(0, total)
    workers_allowed = resolve_jobs(n_jobs)
    worth = MIN_PARALLEL_SECONDS if min_seconds is None else min_seconds
    start = time.perf_counter()
    for i in range(total):
        out[i] = fn(items[i])
        report(i + 1, total)
        left = total - i - 1
        pace = (time.perf_counter() - start) / (i + 1)
        workers = min(workers_allowed, left)
        if workers > 1 and pace * left >= worth:
            _map_in_workers(fn, items, range(i + 1, total), out, workers, lambda k: report(k, total))
            break
    return out


def _map_in_workers(fn: Callable[[T], R], items: Sequence[T], indices: range, out: list[Any], workers: int,
                    report: Callable[[int], None]) -> None:
    from concurrent.futures.process import BrokenProcessPool

    from joblib import Parallel, delayed

    from tracetochain.exceptions import ResourceLimitError

    # max_nbytes=None: no memory-mapping of arguments (they are small; /dev/shm may be tiny in a container)
    run = Parallel(n_jobs=workers, backend="loky", return_as="generator_unordered", max_nbytes=None)
    try:
        for finished, (index, result) in enumerate(run(delayed(_indexed)(fn, i, items[i]) for i in indices),
                                                    start=indices.start + 1):
            out[index] = result
            report(finished)
    except BrokenProcessPool as exc:  # a worker killed (out of memory, a signal): say what to do, not a traceback
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ResourceLimitError(f"a worker process of the {workers} running this step died ({why}); run it in one "
                                 "process with --jobs 1 (n_jobs=1), or free memory for the workers") from None
