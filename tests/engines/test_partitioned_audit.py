"""audit_partitioned: one pass, sufficient statistics only; equal to the in-memory layers on the same split, and
identical (bit for bit) on every engine and every partitioning."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from cli_runner import CliResult, run_cli

import tracetochain as tt
from tracetochain.audit import (
    audit,
    empirical_rdc,
    ks_calibrated,
    order_observations,
    order_test,
    order_test_counts,
    order_triplets,
    r_inf_check,
)
from tracetochain.engines import Engine
from tracetochain.exceptions import TraceValidationError
from tracetochain.partitioned import (
    audit_partitioned,
    holdout_mask,
    plan_partitions,
    poisson_weights,
    trace_id_hashes,
)
from tracetochain.uncertainty import TraceBootstrap
from tracetochain.uncertainty._bootstrap import estimate_batch, per_trace_counts

FAST = {"n_bootstrap": 49, "n_permutations": 49, "n_resamples": 40}


def trace_ids(table: tt.TraceTable) -> pa.Array:
    return pa.array(table.trace_ids, pa.string())


def same_result(a: object, b: object) -> None:
    """Certificates, chains and ensembles equal bit for bit (the provenance of where it ran aside)."""
    def doc(r: object) -> str:
        d = r.certificate.to_dict()  # type: ignore[attr-defined]
        for key in ("engine", "n_partitions"):
            d["settings"].pop(key)
        return json.dumps(d, sort_keys=True)

    assert doc(a) == doc(b)
    assert json.dumps(a.chain.to_dict()) == json.dumps(b.chain.to_dict())  # type: ignore[attr-defined]
    for name in ("Q", "R_success", "R_failure", "pi0"):
        assert np.array_equal(getattr(a.ensemble, name), getattr(b.ensemble, name)), name  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------------- invariance
@pytest.mark.parametrize("size", [8000, 60_000])
def test_every_partitioning_and_engine_gives_the_same_audit(engine: Engine, corpus: dict[str, Path],
                                                            size: int) -> None:
    """JSONL in ~160 or ~20 partitions on either engine == the Parquet file read as one partition (locally).

    The corpus has invalid and censored traces and a state seen only in the last partitions, so vocabularies,
    order-test tables and bootstrap layouts are re-indexed while merging."""
    assert len(plan_partitions(corpus["jsonl"], bytes_per_partition=size)) > 10
    many = audit_partitioned(corpus["jsonl"], engine=engine, bytes_per_partition=size, **FAST)
    one = audit_partitioned(corpus["parquet"], rows_per_partition=10**9, **FAST)
    assert one.counts.n_partitions == 1 and many.counts.n_partitions > 10
    assert many.chain.state_names[-1] == "late_state"
    same_result(many, one)


def test_equals_the_in_memory_layers_on_the_same_split(corpus: dict[str, Path]) -> None:
    whole = tt.TraceTable.read(corpus["parquet"])
    res = audit_partitioned(corpus["jsonl"], bytes_per_partition=20_000, seed=5, **FAST)
    # The chain of all traces is the in-memory fit.
    assert json.dumps(res.chain.to_dict()) == json.dumps(tt.ChainEstimator().fit(whole).fetch_model().to_dict())
    # The split is a function of the ids: rebuild it in memory and run each layer there.
    test = holdout_mask(trace_id_hashes(trace_ids(whole)), 0.5, 5)
    fit_t, test_t = whole.select_traces(np.flatnonzero(~test)), whole.select_traces(np.flatnonzero(test))
    chain_fit = tt.ChainEstimator(states=list(res.chain.state_names)).fit(fit_t).fetch_model()
    cert = res.certificate
    assert np.array_equal(cert.chain.Q, chain_fit.Q) and np.array_equal(cert.chain.pi0, chain_fit.pi0)
    ks_seed = np.random.SeedSequence(5).spawn(3)[0]
    n_fit = int(np.count_nonzero(fit_t.outcomes() != 3))
    ks = ks_calibrated(chain_fit, test_t, refit="train", n_fit_traces=n_fit, n_bootstrap=49, seed=ks_seed)
    assert (cert.timing.statistic, cert.timing.p_value, cert.timing.n_times) == (ks.statistic, ks.p_value,
                                                                                 ks.n_times)
    order = order_test(fit_t, chain_fit, n_permutations=0)
    for name in ("loglik1", "loglik2", "g2", "df", "delta_aic", "delta_bic", "p_chi2", "n_observations", "n_traces"):
        assert getattr(cert.order, name) == pytest.approx(getattr(order, name), rel=1e-12, abs=1e-9), name
    rinf = r_inf_check(chain_fit.r_inf, test_t)
    assert (cert.r_inf_check.successes, cert.r_inf_check.n, cert.r_inf_check.lower) == (rinf.successes, rinf.n,
                                                                                        rinf.lower)
    assert np.array_equal(np.asarray(cert.empirical_rdc), empirical_rdc(test_t, cert.horizon))
    assert cert.holdout is not None and cert.holdout["n_train"] + cert.holdout["n_test"] == whole.n_traces


def test_bootstrap_replicates_are_poisson_weights_by_trace_id(corpus: dict[str, Path]) -> None:
    whole = tt.TraceTable.read(corpus["parquet"])
    res = audit_partitioned(corpus["jsonl"], bytes_per_partition=20_000, seed=3, intervals="bootstrap",
                            n_resamples=40, n_bootstrap=19, n_permutations=0)
    usable = whole.select_traces(whole.outcomes() != 3)
    codes, names = usable.state_labels()
    assert tuple(names) == res.chain.state_names
    P = per_trace_counts(np.asarray(codes, np.int64), usable.offsets, usable.outcomes(), len(names))
    W = poisson_weights(trace_id_hashes(trace_ids(usable)), 3, range(40))
    arrays = estimate_batch(np.asarray(P.T @ W).T, len(names), 1.0, "prior", "empirical")
    assert np.array_equal(arrays["Q"], res.ensemble.Q)
    assert res.ensemble.method == "bootstrap"


def test_bootstrap_interval_matches_trace_bootstrap_width() -> None:
    """The Poisson-by-id bootstrap and TraceBootstrap's multinomial resampling estimate the same spread."""
    chain = tt.datasets.random_chain(5, seed=2, rho=0.9)
    traces = tt.datasets.simulate_traces(chain, 1500, seed=4)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.parquet"
        traces.write(path)
        res = audit_partitioned(path, n_resamples=400, n_bootstrap=19, n_permutations=0)
    ref = TraceBootstrap(n_resamples=400, seed=0).fit(traces).fetch_model()
    a, b = res.ensemble.stats("r_inf"), ref.stats("r_inf")
    assert a.point == pytest.approx(b.point, abs=1e-12)
    assert (a.upper - a.lower) == pytest.approx(b.upper - b.lower, rel=0.25)


def test_posterior_and_no_intervals(corpus: dict[str, Path]) -> None:
    post = audit_partitioned(corpus["parquet"], intervals="posterior", n_resamples=200, n_bootstrap=19,
                             n_permutations=0)
    assert post.ensemble is not None and post.ensemble.method == "posterior"
    none = audit_partitioned(corpus["parquet"], intervals="none", n_bootstrap=19, n_permutations=0)
    assert none.ensemble is None
    with pytest.raises(ValueError, match="no intervals"):
        none.interval_summary()
    assert "R∞" in str(post) and post.to_dict()["kind"] == "tracetochain.partitioned_audit"


def test_in_sample_audit_matches_the_in_memory_audit(corpus: dict[str, Path]) -> None:
    whole = tt.TraceTable.read(corpus["parquet"])
    res = audit_partitioned(corpus["jsonl"], bytes_per_partition=20_000, holdout=False, seed=1, **FAST)
    mem = audit(whole, holdout=False, seed=1, n_bootstrap=49, n_permutations=0, trials=False)
    assert res.certificate.timing.statistic == mem.timing.statistic
    assert res.certificate.timing.p_value == mem.timing.p_value
    assert res.certificate.order.g2 == pytest.approx(mem.order.g2, rel=1e-12)
    assert res.certificate.decision == mem.decision
    assert res.certificate.l_inf == pytest.approx(mem.l_inf, abs=1e-15)


def test_fixed_vocabulary_and_state_model(corpus: dict[str, Path]) -> None:
    whole = tt.TraceTable.read(corpus["parquet"])
    names = sorted(set(whole.state_labels()[1]))[::-1]
    res = audit_partitioned(corpus["jsonl"], bytes_per_partition=20_000, states=names, **FAST)
    assert res.chain.state_names == tuple(names)
    ref = audit_partitioned(corpus["parquet"], states=names, **FAST)
    same_result(res, ref)
    with pytest.raises(TraceValidationError, match="not in the given states"):
        audit_partitioned(corpus["parquet"], states=names[1:], **FAST)
    ward = audit_partitioned(corpus["jsonl"], bytes_per_partition=20_000, states="ward",
                             state_options={"features": "kind,tool", "k_max": 4}, **FAST)
    assert "states" in ward.chain.metadata and ward.certificate.chain.metadata["states"]
    assert ward.chain.n_states <= 4


def test_bad_settings_are_refused(corpus: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="test_fraction"):
        audit_partitioned(corpus["parquet"], test_fraction=1.0)
    with pytest.raises(ValueError, match="intervals"):
        audit_partitioned(corpus["parquet"], intervals="jackknife")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="calibrated KS and the per-trace order test"):
        audit_partitioned(corpus["parquet"], ks_mode="paper")


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


def test_an_engine_passed_in_stays_open(engine: Engine, corpus: dict[str, Path]) -> None:
    """The caller owns an engine it passes (a Dask cluster is reused for the next job); one made from a name is
    closed by the function."""
    res = audit_partitioned(corpus["parquet"], engine=engine, **FAST)
    assert res.settings["engine"] == engine.name
    assert engine.map_reduce(lambda x: x, [1, 2, 3], lambda a, b: a + b) == 6


@pytest.mark.dask
def test_audit_cli_on_engines(tmp_path: Path) -> None:
    """`tracetochain audit --engine local|dask` print the same certificate (a 2-worker process cluster)."""
    pytest.importorskip("distributed")
    path = tmp_path / "sim.parquet"
    tt.datasets.simulate_traces(tt.datasets.notation_chain(), 3000, 5).write(path)

    def run(*extra: str) -> CliResult:
        return run_cli("audit", str(path), "--ks-samples", "49", *extra)

    docs = []
    for engine in ("local", "dask"):
        r = run("--engine", engine, "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["settings"].pop("engine") == engine
        docs.append(doc)
    assert docs[0] == docs[1] and docs[0]["decision"] == "accept"
    r = run("--engine", "local", "--samples", "50")
    assert r.returncode == 0, r.stderr
    assert "R∞ = " in r.stdout and "(bootstrap, 50 replicates)" in r.stdout and "Audit certificate" in r.stdout
    r = run("--engine", "local", "--reader", "tau-bench")
    assert r.returncode == 2 and "convert other formats" in r.stderr


def test_bootstrap_partitioned_is_the_audits_ensemble(engine: Engine, corpus: dict[str, Path]) -> None:
    from tracetochain.partitioned import bootstrap_partitioned

    chain, ens = bootstrap_partitioned(corpus["jsonl"], engine=engine, bytes_per_partition=20_000, n_resamples=40,
                                       seed=3)
    res = audit_partitioned(corpus["parquet"], seed=3, n_resamples=40, n_bootstrap=19, n_permutations=0)
    assert json.dumps(chain.to_dict()) == json.dumps(res.chain.to_dict())
    assert np.array_equal(ens.Q, res.ensemble.Q) and ens.method == "bootstrap"
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_partitioned(corpus["parquet"], n_resamples=0)


def test_fit_cli_bootstrap_intervals_on_an_engine(tmp_path: Path) -> None:
    path = tmp_path / "sim.parquet"
    tt.datasets.simulate_traces(tt.datasets.notation_chain(), 2000, 5).write(path)
    r = run_cli("fit", str(path), "--engine", "local", "--json", "--uncertainty", "bootstrap", "--samples", "60")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    iv = doc["intervals"]["metrics"]["r_inf"]
    assert doc["intervals"]["method"] == "bootstrap" and iv["lower"] < doc["r_inf"] < iv["upper"]
    r = run_cli("fit", str(path), "--engine", "local", "--uncertainty", "bootstrap-full")
    assert r.returncode == 2 and "states are fixed" in r.stderr
