"""audit_partitioned and its siblings on the one analysis core: every statistic from sufficient statistics, equal
to the trace-level functions on the same (id-hashed) splits and weights; the engine is the caller's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from cli_runner import CliResult, run_cli

import tracetochain as tt
from tracetochain._outcome import OutcomeCode
from tracetochain.analysis import analyze
from tracetochain.audit import ks_calibrated, order_test
from tracetochain.audit._combine import cauchy_combination
from tracetochain.audit._holdout import empirical_rdc, mover_p_value
from tracetochain.audit._order import order_observations, order_test_counts, order_triplets
from tracetochain.chain import per_trace_counts
from tracetochain.engines import Engine
from tracetochain.exceptions import TraceValidationError
from tracetochain.partitioned import (
    audit_partitioned,
    bootstrap_partitioned,
    holdout_mask,
    poisson_weights,
    trace_id_hashes,
)
from tracetochain.traces._hashing import unit_hashes
from tracetochain.uncertainty import TraceBootstrap

FAST = {"n_bootstrap": 49, "n_permutations": 49, "trials_permutations": 99, "samples": 40}


def fingerprint(res: object) -> str:
    """Chain, certificate and ensemble of a result, without the provenance of where it ran."""
    cert = res.certificate.to_dict() if res.certificate is not None else None  # type: ignore[attr-defined]
    if cert is not None:
        cert.pop("settings")
    ens = res.ensemble  # type: ignore[attr-defined]
    draws = None if ens is None else {k: getattr(ens, k).tolist() for k in ("Q", "R_success", "R_failure", "pi0")}
    return json.dumps({"chain": res.chain.to_dict(), "certificate": cert, "draws": draws},  # type: ignore[attr-defined]
                      sort_keys=True)


def usable_traces(path: Path) -> tt.TraceTable:
    whole = tt.TraceTable.read(path)
    return whole.select_traces(whole.outcomes() != OutcomeCode.INVALID)


# ---------------------------------------------------------------------------------------------------- layers
@pytest.mark.slow
def test_every_layer_equals_the_trace_level_test_on_the_same_splits(corpus: dict[str, Path]) -> None:
    """Split s holds a usable trace out iff u(FNV-1a(id), seed, s) < ½. Rebuilt in memory, each split's chain, R∞
    check and calibrated KS test (same seeds) equal the layers computed from the partitions' summaries; the order
    layer equals the order test on all usable traces; the layer p-values are the Cauchy combination over the splits."""
    seed = 5
    usable = usable_traces(corpus["parquet"])
    res = analyze(corpus["jsonl"], engine="local", intervals=None, seed=seed,
                  partition_options={"bytes_per_partition": 20_000}, n_bootstrap=49, n_permutations=49,
                  trials_permutations=99)
    cert = res.certificate
    assert cert is not None and res.source["n_partitions"] > 10
    names = res.chain.state_names
    hashes = trace_id_hashes(pa.array(usable.trace_ids, pa.string()))
    ks_seeds = np.random.SeedSequence(seed).spawn(3)[0].spawn(5)
    checks, timings = cert.layers["r_inf"].detail, cert.layers["timing"].detail
    assert len(checks) == len(timings) == 5
    for s in range(5):
        test = holdout_mask(hashes, 0.5, seed, s)
        fit_t, test_t = usable.select_traces(np.flatnonzero(~test)), usable.select_traces(np.flatnonzero(test))
        chain_fit = tt.ChainEstimator(states=list(names)).fit(fit_t).fetch_model()
        chk = checks[s]
        k = int(np.count_nonzero(test_t.outcomes() == OutcomeCode.SUCCESS))
        assert (chk.r_inf, chk.successes, chk.n, chk.n_fit) == (chain_fit.r_inf, k, test_t.n_traces, fit_t.n_traces)
        assert chk.p_value == mover_p_value(chk.compared, fit_t.n_traces, k, test_t.n_traces)
        ks = ks_calibrated(chain_fit, test_t, refit="train", fit_traces=fit_t, n_bootstrap=49, seed=ks_seeds[s])
        assert (timings[s].statistic, timings[s].p_value, timings[s].n_times) == (ks.statistic, ks.p_value,
                                                                                   ks.n_times)
        assert cert.splits is not None and cert.splits["n_test"][s] == test_t.n_traces
    for name, layer in (("r_inf", checks), ("timing", timings)):
        assert cert.layers[name].p_value == pytest.approx(cauchy_combination([x.p_value for x in layer]), rel=1e-12)
    order = order_test(usable, names, n_permutations=0)
    for name in ("loglik1", "loglik2", "g2", "df", "delta_aic", "delta_bic", "p_chi2", "n_observations", "n_traces"):
        assert getattr(cert.order, name) == pytest.approx(getattr(order, name), rel=1e-12, abs=1e-9), name
    assert np.array_equal(np.asarray(cert.empirical_rdc), empirical_rdc(usable, cert.horizon))


@pytest.mark.slow
def test_in_sample_layers_equal_the_trace_level_tests(corpus: dict[str, Path]) -> None:
    """holdout=False: the timing layer is the calibrated KS of the chain of all traces against all traces (refit on
    each replicate) and the R∞ check is in-sample."""
    usable = usable_traces(corpus["parquet"])
    res = audit_partitioned(corpus["jsonl"], bytes_per_partition=20_000, holdout=False, seed=1, intervals="none",
                            n_bootstrap=49, n_permutations=49, trials_permutations=99)
    cert = res.certificate
    assert cert is not None and cert.splits is None
    full = tt.ChainEstimator(states=list(res.chain.state_names)).fit(usable).fetch_model()
    assert np.array_equal(res.chain.Q, full.Q) and np.array_equal(res.chain.pi0, full.pi0)
    ks_seed = np.random.SeedSequence(1).spawn(3)[0].spawn(1)[0]
    ks = ks_calibrated(full, usable, refit="same", n_bootstrap=49, seed=ks_seed)
    assert (cert.timing.statistic, cert.timing.p_value) == (ks.statistic, ks.p_value)
    assert cert.r_inf_check.in_sample and cert.r_inf_check.n == usable.n_traces
    assert cert.order.g2 == pytest.approx(order_test(usable, res.chain.state_names, n_permutations=0).g2, rel=1e-12)


# ---------------------------------------------------------------------------------------------------- intervals
@pytest.mark.slow
def test_bootstrap_replicates_are_poisson_weights_by_trace_id(corpus: dict[str, Path]) -> None:
    """Replicate b's counts are Σ_t w_tb · (trace t's counts) with w_tb the Poisson(1) weight of the trace's id
    hash; the partitioned ensemble equals TraceBootstrap's Poisson bootstrap of the same traces, bit for bit."""
    usable = usable_traces(corpus["parquet"])
    res = audit_partitioned(corpus["jsonl"], bytes_per_partition=20_000, seed=3, intervals="bootstrap",
                            samples=40, audit=False)
    codes, names = usable.state_labels()
    assert tuple(names) == res.chain.state_names
    P = per_trace_counts(np.asarray(codes, np.int64), usable.offsets, usable.outcomes(), len(names))
    W = poisson_weights(unit_hashes(usable.trace_id_array), 3, range(40))  # no task ids: each trace is its unit
    # Columns: the per-trace counts, then the two start exits of zero-step episodes (none in this corpus).
    np.testing.assert_array_equal(res.summary.boot[:, :-2], np.asarray(P.T @ W).T)
    assert not res.summary.boot[:, -2:].any()
    ref = TraceBootstrap(samples=40, seed=3, state_names=names).fit(usable).fetch_model()
    assert res.ensemble.method == ref.method == "bootstrap"
    for name in ("Q", "R_success", "R_failure", "pi0"):
        assert np.array_equal(getattr(res.ensemble, name), getattr(ref, name)), name


def test_bootstrap_interval_matches_the_multinomial_bootstrap_width(tmp_path: Path) -> None:
    """The Poisson-by-id bootstrap and the classic multinomial resampling of traces estimate the same spread."""
    chain = tt.datasets.random_chain(5, seed=2, rho=0.9)
    traces = tt.datasets.simulate_traces(chain, 1500, seed=4)
    path = tmp_path / "t.parquet"
    traces.write(path)
    res = audit_partitioned(path, samples=400, audit=False)
    ref = TraceBootstrap(samples=400, weights="multinomial", seed=0).fit(traces).fetch_model()
    a, b = res.ensemble.stats("r_inf"), ref.stats("r_inf")
    assert a.point == pytest.approx(b.point, abs=1e-12)
    assert (a.upper - a.lower) == pytest.approx(b.upper - b.lower, rel=0.25)


def test_posterior_and_no_intervals(corpus: dict[str, Path]) -> None:
    post = audit_partitioned(corpus["parquet"], intervals="posterior", samples=200, audit=False)
    assert post.ensemble is not None and post.ensemble.method == "posterior" and post.ensemble.n_samples == 200
    lo, hi = post.intervals()["metrics"]["r_inf"]["lower"], post.intervals()["metrics"]["r_inf"]["upper"]
    assert lo < post.chain.r_inf < hi
    none = audit_partitioned(corpus["parquet"], intervals="none", audit=False)
    assert none.ensemble is None and none.intervals() is None
    assert "R∞" in str(post) and post.to_dict()["kind"] == "tracetochain.analysis"


@pytest.mark.slow
def test_bootstrap_partitioned_is_the_audits_ensemble(engine: Engine, corpus: dict[str, Path]) -> None:
    chain, ens = bootstrap_partitioned(corpus["jsonl"], engine=engine, bytes_per_partition=20_000, samples=40,
                                       seed=3)
    res = audit_partitioned(corpus["parquet"], seed=3, samples=40, n_bootstrap=19, n_permutations=19,
                            trials_permutations=99)
    assert json.dumps(chain.to_dict()) == json.dumps(res.chain.to_dict())
    assert np.array_equal(ens.Q, res.ensemble.Q) and ens.method == "bootstrap"
    with pytest.raises(ValueError, match="samples must be >= 1"):
        bootstrap_partitioned(corpus["parquet"], samples=0)


# ---------------------------------------------------------------------------------------------------- settings
@pytest.mark.slow
def test_fixed_vocabulary_and_learned_states(corpus: dict[str, Path]) -> None:
    whole = tt.TraceTable.read(corpus["parquet"])
    names = sorted(set(whole.state_labels()[1]))[::-1]
    res = audit_partitioned(corpus["jsonl"], bytes_per_partition=20_000, states=names, **FAST)
    assert res.chain.state_names == tuple(names)
    assert fingerprint(res) == fingerprint(audit_partitioned(corpus["parquet"], states=names, **FAST))
    with pytest.raises(TraceValidationError, match="not in the given states"):
        audit_partitioned(corpus["parquet"], states=names[1:], **FAST)
    ward = audit_partitioned(corpus["jsonl"], bytes_per_partition=20_000, states="ward",
                             state_options={"features": "kind,tool", "k_max": 4}, **FAST)
    assert ward.chain.metadata["states"]["method"] == "ward" and ward.state_model is not None
    assert 2 <= ward.chain.n_states <= 4 and "(unseen)" not in ward.chain.state_names  # nearest centroid: no misfit


def test_bad_settings_are_refused(corpus: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="test_fraction"):
        audit_partitioned(corpus["parquet"], test_fraction=1.0)
    with pytest.raises(ValueError, match="intervals"):
        audit_partitioned(corpus["parquet"], intervals="jackknife")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_bootstrap, n_permutations and trials_permutations must be >= 1"):
        audit_partitioned(corpus["parquet"], n_permutations=0)
    with pytest.raises(TypeError, match="ks_mode"):
        audit_partitioned(corpus["parquet"], ks_mode="paper")  # the paper's KS is not a certificate layer


# ---------------------------------------------------------------------------------------------------- pieces
def test_split_and_weights_are_functions_of_the_id() -> None:
    h = trace_id_hashes(pa.array([f"trace-{i}" for i in range(50_000)]))
    mask = holdout_mask(h, 0.3, 7)
    assert mask.mean() == pytest.approx(0.3, abs=0.01)
    assert np.array_equal(holdout_mask(h[::-1], 0.3, 7), mask[::-1])  # order does not matter
    assert not np.array_equal(holdout_mask(h, 0.3, 8), mask)  # the seed does
    w = poisson_weights(h, 1, range(3, 6))
    assert np.array_equal(poisson_weights(h[:100], 1, range(4, 5))[:, 0], w[:100, 1])
    assert w.mean() == pytest.approx(1.0, abs=0.02) and w.var() == pytest.approx(1.0, abs=0.03)
    from scipy.stats import poisson

    freq = np.bincount(w.astype(int).ravel(), minlength=6)[:6] / w.size
    assert np.allclose(freq, poisson.pmf(np.arange(6), 1.0), atol=0.005)


def test_order_test_from_counts_equals_order_test() -> None:
    """Same statistics; the table-drawn permutation p-value agrees with the shuffled one (same null law)."""
    from tracetochain.datasets import simulate_memory_traces, ss7_chain

    for traces in (tt.datasets.simulate_traces(tt.datasets.random_chain(4, seed=1), 400, seed=2),
                   simulate_memory_traces(ss7_chain(), 300, memory=0.4, seed=3)):
        names = traces.state_labels()[1]
        a = order_test(traces, names, n_permutations=999, seed=1)
        obs = order_observations(traces, names)
        b = order_test_counts(order_triplets(obs), names, n_traces=obs.n_traces, n_permutations=999, seed=1)
        for name in ("loglik1", "loglik2", "g2", "df", "delta_aic", "delta_bic", "p_chi2", "n_observations", "params1",
                     "params2"):
            assert getattr(a, name) == getattr(b, name), name
        assert b.p_permutation == pytest.approx(a.p_permutation, abs=0.05)


@pytest.mark.slow
def test_ks_rescaled_bootstrap_agrees_with_the_full_one() -> None:
    """Replicates simulated at a quarter of the size and rescaled by √(1/4) give the same null quantiles."""
    chain = tt.datasets.random_chain(4, seed=5, rho=0.9)
    traces = tt.datasets.simulate_traces(chain, 2000, seed=6)
    fitted = tt.ChainEstimator().fit(traces).fetch_model()
    full = ks_calibrated(fitted, traces, n_bootstrap=199, seed=1, max_simulated_traces=None)
    small = ks_calibrated(fitted, traces, n_bootstrap=199, seed=1, max_simulated_traces=500)
    assert small.settings["simulated_traces"]["test"] == 500
    assert small.settings["simulated_traces"]["d_star_scale"] == pytest.approx(0.5)
    assert full.statistic == small.statistic
    q_full, q_small = full.bootstrap["d_star_quantiles"], small.bootstrap["d_star_quantiles"]
    for q in ("0.5", "0.9", "0.95"):
        assert q_small[q] == pytest.approx(q_full[q], rel=0.2), q
    assert abs(full.p_value - small.p_value) < 0.15
    assert ks_calibrated(fitted, traces, n_bootstrap=19, max_simulated_traces=5000).settings[
        "simulated_traces"]["d_star_scale"] == 1.0


@pytest.mark.slow
def test_an_engine_passed_in_stays_open(engine: Engine, corpus: dict[str, Path]) -> None:
    """The caller owns an engine it passes (a Dask cluster is reused for the next job); one made from a name is
    closed by the function."""
    res = audit_partitioned(corpus["parquet"], engine=engine, **FAST)
    assert res.source["engine"] == engine.name
    assert engine.map_reduce(lambda x: x, [1, 2, 3], lambda a, b: a + b) == 6
    from tracetochain.compare import compare

    cmp = compare(corpus["parquet"], corpus["jsonl"], engine=engine, samples=20)
    assert cmp.delta_r_inf == 0.0
    assert engine.map_reduce(lambda x: x, [1, 2], lambda a, b: a + b) == 3


@pytest.mark.slow
@pytest.mark.dask
def test_audit_cli_on_engines(tmp_path: Path) -> None:
    """`tracetochain audit --engine local|dask` print the same certificate (a 2-worker process cluster)."""
    pytest.importorskip("distributed")
    path = tmp_path / "sim.parquet"
    tt.datasets.simulate_traces(tt.datasets.notation_chain(), 3000, 5).write(path)

    def run(*extra: str) -> CliResult:
        return run_cli("audit", str(path), "--ks-samples", "49", *extra)

    docs = []
    for engine in (None, "local", "dask"):
        r = run("--json", *(("--engine", engine) if engine else ()))
        assert r.returncode == 0, r.stderr
        docs.append(json.loads(r.stdout))
    assert docs[0] == docs[1] == docs[2] and docs[0]["decision"] == "accept"
    r = run("--engine", "local", "--samples", "50")
    assert r.returncode == 0, r.stderr
    assert "R∞ = " in r.stdout and "% interval [" in r.stdout and "(posterior)" in r.stdout
    assert "Audit certificate" in r.stdout
    # Another reader is honoured with an engine: the file is read on the driver by it (here it refuses Parquet).
    r = run("--engine", "local", "--reader", "tau-bench")
    assert r.returncode == 2 and "sim.parquet:1: not UTF-8 text" in r.stderr and "Traceback" not in r.stderr


def test_fit_cli_bootstrap_intervals_on_an_engine(tmp_path: Path) -> None:
    path = tmp_path / "sim.parquet"
    tt.datasets.simulate_traces(tt.datasets.notation_chain(), 2000, 5).write(path)
    r = run_cli("fit", str(path), "--engine", "local", "--json", "--uncertainty", "bootstrap", "--samples", "60")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    iv = doc["intervals"]["metrics"]["r_inf"]
    assert doc["intervals"]["method"] == "bootstrap" and iv["lower"] < doc["r_inf"] < iv["upper"]
    r = run_cli("fit", str(path), "--engine", "local", "--uncertainty", "bootstrap-full")
    assert r.returncode == 2 and "bootstrap-full is a library option" in r.stderr
