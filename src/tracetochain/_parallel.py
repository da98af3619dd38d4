"""One way to spread independent jobs over processes: the held-out checks of a model choice (candidate × split),
the candidates' likelihood scores, the refits behind a chosen model's intervals and their metrics.

Every job carries its own seed (a split's, a candidate's, a refit's), so a job's result does not depend on which
process ran it or in what order: the output of ``n_jobs=4`` is the output of ``n_jobs=1``, bit for bit (tests).

How many processes:

- ``n_jobs`` of the call when given (``analyze(..., n_jobs=4)``), else the value set by :func:`using_jobs` around it
  (the command line's ``--jobs``), else 1 — scikit-learn's convention: a library call stays in its process unless
  asked. ``-1`` means every CPU this process may use (cgroup quotas and affinity counted, through joblib).
- Jobs run here, timed, until the work left, at their mean pace so far, is worth processes: at least
  :data:`MIN_PARALLEL_SECONDS`. This process and n − 1 workers then share the rest, each taking the next job when
  it is free, so no core idles while another has work. A worker pays an interpreter start and the package's import
  (about a second, once per command: the pool is kept and reused), so a small corpus never starts one, and a cheap
  first job (the first-order baseline before the hidden-Markov fits) does not decide for the rest.

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

#: Work left (seconds, at the jobs' pace so far) below which the remaining jobs stay in this process. A worker's
#: start costs about a second of another core while this process keeps working, so two seconds of work left already
#: finish sooner shared (it was four while this process sat idle during the workers' share).
MIN_PARALLEL_SECONDS = 2.0

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
        processes = min(workers_allowed, left)
        if processes > 1 and pace * left >= worth:
            _map_in_workers(fn, items, range(i + 1, total), out, processes, lambda k: report(k, total))
            break
    return out


#: Thread-pool variables of the numerical libraries, set in every worker as joblib's ``loky`` backend sets them
#: (a worker's share of the CPUs), unless this process's environment sets them.
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                     "VECLIB_MAXIMUM_THREADS", "NUMBA_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def _worker_env(processes: int) -> dict[str, str]:
    import os

    share = str(max(available_cpus() // processes, 1))
    env = {var: os.environ.get(var, share) for var in _THREAD_VARIABLES}
    env.setdefault("ENABLE_IPC", os.environ.get("ENABLE_IPC", "1"))  # TBB schedulers coordinate across processes
    return env


def _map_in_workers(fn: Callable[[T], R], items: Sequence[T], indices: range, out: list[Any], processes: int,
                    report: Callable[[int], None]) -> None:
    """Run the jobs ``indices`` over ``processes`` processes: this one and ``processes − 1`` workers.

    Every process takes the next job in the list when it is free (list scheduling; a thread here hands the
    workers theirs, one at a time), so no core waits while another has work left: a pool of two workers on two cores
    left this process idle while they worked. Whoever runs a job, its result goes to its own slot, so the output
    does not depend on who ran what.
    """
    import threading
    from collections import deque
    from concurrent.futures import FIRST_COMPLETED, Future, wait
    from concurrent.futures.process import BrokenProcessPool

    from joblib.externals.loky import get_reusable_executor

    from tracetochain.exceptions import ResourceLimitError

    # Idle workers are kept five minutes, as joblib keeps its pool: the model path's steps reuse them.
    executor = get_reusable_executor(max_workers=processes - 1, timeout=300, env=_worker_env(processes))
    pending = deque(indices)
    lock = threading.Lock()
    finished = [indices.start]
    failure: list[BaseException] = []

    def record(index: int, result: Any) -> None:
        with lock:  # the progress display is told in order, from one thread at a time
            out[index] = result
            finished[0] += 1
            report(finished[0])

    def next_index() -> int | None:
        with lock:
            return None if failure or not pending else pending.popleft()

    def feed() -> None:
        # Keeps one job in flight per worker; runs in a thread of this process (it only waits on the workers).
        running: dict[Future[Any], int] = {}
        try:
            while True:
                while len(running) < processes - 1:
                    i = next_index()
                    if i is None:
                        break
                    running[executor.submit(_indexed, fn, i, items[i])] = i
                if not running:
                    return
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    del running[future]
                    index, result = future.result()
                    record(index, result)
        except BaseException as exc:  # raised here, in this process, after this process's own job
            with lock:
                failure.append(exc)
                pending.clear()
            for future in running:
                future.cancel()

    feeder = threading.Thread(target=feed, name="tracetochain-workers", daemon=True)
    feeder.start()
    try:
        while (i := next_index()) is not None:
            record(i, fn(items[i]))
    except BaseException as exc:
        with lock:
            pending.clear()
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C: do not wait for the workers' jobs to finish
            executor.shutdown(wait=False, kill_workers=True)
        feeder.join()
        raise
    feeder.join()
    if failure:
        error = failure[0]
        if isinstance(error, BrokenProcessPool):  # a worker killed (out of memory, a signal): say what to do
            why = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ResourceLimitError(f"a worker process of the {processes - 1} running this step died ({why}); run "
                                     "it in one process with --jobs 1 (n_jobs=1), or free memory for the workers"
                                     ) from None
        raise error
