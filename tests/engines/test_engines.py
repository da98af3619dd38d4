"""The engine boundary: map_reduce in one fixed tree, map_seeds over spawned seeds; same numbers on every engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetochain.engines import Engine, LocalEngine, TreeReducer, get_engine, spawn_seeds, tree_reduce
from tracetochain.exceptions import TraceToChainError


def paren(a: str, b: str) -> str:
    """Associative only up to bracketing: it shows the exact shape of the reduction tree."""
    return f"({a}{b})"


def bootstrap_like(seed: np.random.SeedSequence) -> tuple[np.ndarray, float]:
    """A replicate as the uncertainty layer draws one: multinomial counts, then a Dirichlet row."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(1000, [0.5, 0.3, 0.15, 0.05])
    row = rng.dirichlet(counts + 1.0)
    return counts, float(row @ np.arange(4))


class Boom(ValueError):
    pass


def fail_on_odd(p: int) -> int:
    if p % 2:
        raise Boom(f"partition {p} is odd")
    return p


# ---------------------------------------------------------------------------------------------------- the tree
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200))
def test_streaming_reducer_builds_the_level_by_level_tree(n: int) -> None:
    values = [str(i) for i in range(n)]
    r = TreeReducer(paren)
    for v in values:
        r.push(v)
    assert r.result() == tree_reduce(values, paren)
    assert len(r._stack) <= n.bit_length()  # O(log n) partial results held


def test_tree_shape_and_empty_input() -> None:
    assert tree_reduce(list("abcde"), paren) == "(((ab)(cd))e)"
    assert tree_reduce(["x"], paren) == "x"
    with pytest.raises(ValueError, match="at least one partition"):
        tree_reduce([], paren)
    with pytest.raises(ValueError, match="at least one partition"):
        LocalEngine().map_reduce(str, [], paren)
    with pytest.raises(ValueError, match="at least one partition"):
        TreeReducer(paren).result()


def test_map_reduce_is_the_same_tree_on_every_engine(engine: Engine) -> None:
    parts = list(range(13))
    assert engine.map_reduce(str, parts, paren) == tree_reduce([str(p) for p in parts], paren)
    # Float sums are associative only up to rounding: the fixed tree makes them bit-identical across engines.
    x = np.random.default_rng(3).standard_normal(37) * 10.0 ** np.arange(-18, 19)
    total = engine.map_reduce(lambda i: float(x[i]), list(range(37)), lambda a, b: a + b)
    assert total == tree_reduce([float(v) for v in x], lambda a, b: a + b)


def test_map_reduce_raises_the_first_partition_error_in_order(engine: Engine) -> None:
    with pytest.raises(Boom, match="partition 3 is odd"):
        engine.map_reduce(fail_on_odd, [0, 2, 3, 4, 5, 7], lambda a, b: a + b)


# ---------------------------------------------------------------------------------------------------- seeds
def test_spawned_seeds_are_numpy_children() -> None:
    ref = [s.generate_state(2).tolist() for s in np.random.SeedSequence(42).spawn(5)]
    assert [s.generate_state(2).tolist() for s in spawn_seeds(42, 5)] == ref
    assert [s.generate_state(2).tolist() for s in spawn_seeds(np.random.SeedSequence(42), 5)] == ref
    assert spawn_seeds(42, 0) == []
    with pytest.raises(ValueError, match="n must be"):
        spawn_seeds(1, -1)
    with pytest.raises(TypeError, match="seed must be"):
        spawn_seeds(None, 2)  # type: ignore[arg-type]


def test_map_seeds_gives_the_same_numbers_on_every_engine(engine: Engine) -> None:
    got = engine.map_seeds(bootstrap_like, 2024, 25)
    expected = [bootstrap_like(s) for s in np.random.SeedSequence(2024).spawn(25)]
    assert len(got) == 25
    for (c, v), (c_ref, v_ref) in zip(got, expected, strict=True):
        np.testing.assert_array_equal(c, c_ref)
        assert v == v_ref  # bit for bit
    assert engine.map_seeds(bootstrap_like, 2024, 0) == []
    other = engine.map_seeds(bootstrap_like, 2025, 3)
    assert not np.array_equal(other[0][0], got[0][0])


def test_map_seeds_raises_the_first_replicate_error(engine: Engine) -> None:
    def draw(seed: np.random.SeedSequence) -> int:
        i = seed.spawn_key[-1]
        if i in (5, 17):
            raise Boom(f"replicate {i}")
        return int(i)

    with pytest.raises(Boom, match="replicate 5"):
        engine.map_seeds(draw, 0, 20)


def test_get_engine() -> None:
    assert isinstance(get_engine(), LocalEngine)
    assert isinstance(get_engine("local"), LocalEngine)
    e = LocalEngine()
    assert get_engine(e) is e
    with pytest.raises(ValueError, match="unknown engine"):
        get_engine("ray")
    with pytest.raises(ValueError, match="--scheduler needs --engine dask"):
        get_engine("local", scheduler="tcp://x:8786")
    with pytest.raises(TypeError):
        get_engine(3)  # type: ignore[arg-type]
    with LocalEngine() as le:
        assert repr(le) == "LocalEngine()"


# ---------------------------------------------------------------------------------------------------- dask
def test_dask_is_imported_only_when_an_engine_is_used() -> None:
    code = ("import sys, tracetochain, tracetochain.engines, tracetochain.partitioned; "
            "e = tracetochain.engines.DaskEngine(); "
            "print(any(m in sys.modules for m in ('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_dask_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracetochain.engines import DaskEngine

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed → ImportError
    engine = DaskEngine()
    with pytest.raises(TraceToChainError, match=r"pip install 'tracetochain\[dask\]'"):
        engine.map_reduce(str, [1], paren)
    engine.close()  # nothing was started: nothing to close


@pytest.mark.dask
def test_dask_engine_closes_what_it_started() -> None:
    pytest.importorskip("distributed")
    from tracetochain.engines import DaskEngine

    with DaskEngine(processes=False, n_workers=1) as engine:
        assert engine.map_reduce(str, [1, 2, 3], paren) == "((12)3)"
        cluster, client = engine._cluster, engine.client
        assert "local cluster" in repr(engine)
    assert engine._client is None and client.status == "closed"
    assert cluster.status.name == "closed"
    with pytest.raises(ValueError, match="n_workers"):
        DaskEngine(n_workers=0).client  # noqa: B018


@pytest.mark.dask
def test_dask_engine_on_an_existing_cluster_leaves_it_running() -> None:
    distributed = pytest.importorskip("distributed")
    from tracetochain.engines import DaskEngine

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        with DaskEngine(cluster.scheduler_address) as by_address:
            seeds = by_address.map_seeds(bootstrap_like, 7, 9)
        assert cluster.status.name == "running"
        # A client is used as is (and left open); batching replicates changes nothing.
        with DaskEngine(client, replicates_per_task=1) as by_client:
            again = by_client.map_seeds(bootstrap_like, 7, 9)
        assert client.status == "running"
        for (a, x), (b, y) in zip(seeds, again, strict=True):
            np.testing.assert_array_equal(a, b)
            assert x == y
        with pytest.raises(TypeError, match="scheduler must be"):
            DaskEngine(3.5).client  # noqa: B018
        with pytest.raises(ValueError, match="replicates_per_task"):
            DaskEngine(client, replicates_per_task=0).map_seeds(bootstrap_like, 1, 2)


@pytest.mark.dask
@pytest.mark.slow  # ~5 s: two worker processes are spawned
def test_worker_processes_give_the_same_numbers(tmp_path: Path, corpus: dict[str, Path]) -> None:
    """Real worker processes (spawned, everything pickled): same chain, replicates and intervals as in process."""
    pytest.importorskip("distributed")
    import json

    from tracetochain import ChainEstimator, TraceTable
    from tracetochain.engines import DaskEngine
    from tracetochain.partitioned import fit_partitioned

    whole = TraceTable.read(corpus["parquet"])
    expected = ChainEstimator().fit(whole).fetch_model()
    uncertainty = pytest.importorskip("tracetochain.uncertainty")
    boot = uncertainty.TraceBootstrap(samples=20, seed=4).fit(whole).fetch_model()
    with DaskEngine(n_workers=2, threads_per_worker=1, processes=True) as engine:
        chain = fit_partitioned(corpus["parquet"], engine=engine, rows_per_partition=1000)
        draws = engine.map_seeds(bootstrap_like, 11, 6)
        boot_mapped = uncertainty.TraceBootstrap(samples=20, seed=4, engine=engine).fit(whole).fetch_model()
    assert json.dumps(chain.to_dict()) == json.dumps(expected.to_dict())
    assert np.array_equal(boot_mapped.Q, boot.Q)
    assert boot_mapped.stats("r_inf").upper == boot.stats("r_inf").upper
    for (c, v), (c_ref, v_ref) in zip(draws, LocalEngine().map_seeds(bootstrap_like, 11, 6), strict=True):
        np.testing.assert_array_equal(c, c_ref)
        assert v == v_ref
