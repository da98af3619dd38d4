"""The process pool of the model path (tracetochain/_parallel.py): results in order and the same for any number of
processes, progress counted here, errors raised here, small work kept in this process."""

from __future__ import annotations

import os

import pytest

import tracetochain as tt
from tracetochain import _parallel
from tracetochain._parallel import parallel_map, resolve_jobs, using_jobs


def _pid_and_square(x: int) -> tuple[int, int]:
    return os.getpid(), x * x


def _pid_after_a_pause(x: int) -> tuple[int, int]:
    import time

    time.sleep(0.2)  # long enough that the thread handing out jobs runs before this process has taken them all
    return os.getpid(), x * x


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ArithmeticError(f"job {x} failed")
    return x


def test_jobs_resolve_from_the_call_then_the_context_then_one() -> None:
    assert resolve_jobs() == 1  # a library call stays in its process unless asked (scikit-learn's convention)
    assert resolve_jobs(3) == 3
    with using_jobs(2):
        assert resolve_jobs() == 2 and resolve_jobs(5) == 5
        with using_jobs(None):
            assert resolve_jobs() == 2
    assert resolve_jobs() == 1
    assert resolve_jobs(-1) == _parallel.available_cpus() >= 1
    for bad in (0, -2):
        with pytest.raises(ValueError, match="n_jobs must be a positive number of processes or -1"):
            resolve_jobs(bad)
        with pytest.raises(ValueError, match="n_jobs"), using_jobs(bad):
            pass
    assert tt.using_jobs is using_jobs


def test_small_work_never_starts_a_process() -> None:
    seen: list[tuple[int, int]] = []
    out = parallel_map(_pid_and_square, list(range(6)), n_jobs=4, done=lambda i, n: seen.append((i, n)))
    assert [sq for _, sq in out] == [x * x for x in range(6)]
    assert {pid for pid, _ in out} == {os.getpid()}  # microseconds of work: not worth a worker's start
    assert seen == [(i, 6) for i in range(7)]
    assert parallel_map(_pid_and_square, [], n_jobs=4) == []


def test_work_worth_it_runs_in_worker_processes_in_order() -> None:
    seen: list[int] = []
    out = parallel_map(_pid_and_square, list(range(9)), n_jobs=2, min_seconds=0.0,
                       done=lambda i, n: seen.append(i))
    assert [sq for _, sq in out] == [x * x for x in range(9)]  # in the order of the items, whoever finished first
    assert out[0][0] == os.getpid()  # the first job runs here, timed
    assert {pid for pid, _ in out[1:]} - {os.getpid()}  # the rest in workers
    assert seen == list(range(10))


def test_this_process_shares_the_work_with_the_workers() -> None:
    """With n processes allowed, this process and n − 1 workers each take the next job when free: no core waits
    while another works (two workers on two cores left this process idle)."""
    seen: list[int] = []
    out = parallel_map(_pid_after_a_pause, list(range(8)), n_jobs=2, min_seconds=0.0,
                       done=lambda i, n: seen.append(i))
    assert [sq for _, sq in out] == [x * x for x in range(8)]
    pids = [pid for pid, _ in out]
    workers = set(pids) - {os.getpid()}
    assert len(workers) == 1  # n_jobs = 2: this process and one worker
    assert pids[0] == os.getpid()  # the timed first job
    assert pids[1:].count(os.getpid()) >= 2  # and a share of the rest: a worker starts in about a second
    assert seen == list(range(9))  # progress counted in order, here
    # a closure travels to the workers (cloudpickle): a user's own candidate factory does
    offset = 7
    assert parallel_map(lambda x: x + offset, [1, 2, 3], n_jobs=2, min_seconds=0.0) == [8, 9, 10]


def test_an_error_in_a_worker_is_raised_here() -> None:
    with pytest.raises(ArithmeticError, match="job 3 failed"):
        parallel_map(_fail_on_three, list(range(6)), n_jobs=2, min_seconds=0.0)
    with pytest.raises(ArithmeticError, match="job 3 failed"):
        parallel_map(_fail_on_three, list(range(6)), n_jobs=1)


@pytest.mark.slow
def test_auto_gives_the_same_analysis_in_worker_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job of the model path (candidates' scores, candidate × split checks, refits, the refits' metrics) has
    its own seed: the analysis in two worker processes is the analysis in one, to the last digit."""
    import json

    from tests.analysis.test_model_choice import QUICK, SIZES, mixture_tasks

    traces = mixture_tasks(60, 4, seed=5)
    kwargs = {"model": "auto", "model_options": SIZES, "samples": 30, "intervals": "bootstrap", **QUICK}
    serial = tt.analyze(traces, n_jobs=1, **kwargs)
    from joblib.externals import loky

    pools: list[int] = []
    executor = loky.get_reusable_executor

    def counted(max_workers: int, **kwargs):  # type: ignore[no-untyped-def]
        pools.append(max_workers)
        return executor(max_workers=max_workers, **kwargs)

    monkeypatch.setattr(loky, "get_reusable_executor", counted)
    monkeypatch.setattr(_parallel, "MIN_PARALLEL_SECONDS", 0.0)  # every map goes to the workers
    parallel = tt.analyze(traces, n_jobs=2, **kwargs)

    def doc(res: tt.AnalysisResult) -> str:
        sel = res.model_choice
        assert sel is not None and not sel.first_order
        return json.dumps({"choice": sel.to_dict(),
                           "certificate": res.certificate.to_dict() if res.certificate else None,
                           "intervals": res.intervals(horizon=20, ks=(1, 2, 3))}, sort_keys=True, default=str)

    assert pools and set(pools) == {1}  # scores, checks, refits and their metrics: this process and one worker
    assert doc(parallel) == doc(serial)
    assert parallel.model_choice is not None and parallel.model_choice.n_jobs == 2


def _die_in_a_worker(x: int, parent: int) -> int:
    if os.getpid() != parent:
        os._exit(9)  # as the kernel's out-of-memory killer would end it
    import time

    time.sleep(0.2)  # this process's own share: slow enough that a worker is handed a job
    return x


def test_a_worker_that_dies_is_a_clear_error_not_a_traceback() -> None:
    import functools

    from tracetochain.exceptions import ResourceLimitError

    with pytest.raises(ResourceLimitError, match=r"worker process .* died .* --jobs 1"):
        parallel_map(functools.partial(_die_in_a_worker, parent=os.getpid()), list(range(5)), n_jobs=2,
                     min_seconds=0.0)


@pytest.mark.parametrize("command", ["fit", "audit", "report", "compare"])
def test_the_commands_with_a_model_take_jobs_and_refuse_a_bad_count(command: str) -> None:
    from cli_runner import run_cli

    from tracetochain.datasets import example_path

    r = run_cli(command, "--help")
    assert "--jobs" in r.stdout and "TRACETOCHAIN_JOBS" in r.stdout
    src = str(example_path())
    args = [src, src] if command == "compare" else [src]
    for bad in ("0", "-3"):
        r = run_cli(command, *args, "--model", "auto", "--jobs", bad)
        assert r.returncode == 2 and "expected a positive number of processes, or -1" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_a_board_in_worker_processes_is_the_same_board(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each group's row is ``analyze()`` of that group alone, with the board's seed: the rows computed in worker
    processes are the rows computed here."""
    import json

    from board_data import configs

    from tracetochain.analysis.shared import board

    table = configs(4)
    fast = {"samples": 200, "n_bootstrap": 99, "n_permutations": 49}
    serial = board(table, by="config", ks=(1, 2), n_jobs=1, **fast)
    monkeypatch.setattr(_parallel, "MIN_PARALLEL_SECONDS", 0.0)
    lines: list[str] = []
    parallel = board(table, by="config", ks=(1, 2), n_jobs=2, progress=lines.append, **fast)
    assert json.dumps(parallel.to_dict(), sort_keys=True) == json.dumps(serial.to_dict(), sort_keys=True)
    assert lines[0] == "analysing 4 groups by config" and lines[-1] == "group 4 of 4 done"
