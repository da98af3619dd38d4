"""Benchmark: horizon reliability R(d), d = 0..1000, on a 1,000-state sparse chain and a 100-state dense one.

Target (issue): ``chain.reliability(1000)`` on a 1000-state sparse chain (~5 nonzeros per row) in under 0.1 s.

Timed separately, each as the median of ``--repeats`` (default 7) runs:

* ``construct``: ``AbsorbingChain(Q, R_success, R_failure, pi0, names)`` (validation + reachability analysis);
* ``r_inf``: first access of ``chain.r_inf`` on a fresh chain, which factors I − Q (LU; SuperLU above 400
  states) and solves once;
* ``R(d) warm``: ``chain.reliability(1000)`` on a chain whose factorization is already cached: the number the
  target refers to (chain construction excluded);
* ``R(d) cold``: ``chain.reliability(1000)`` on a fresh chain, so the factorization is included;
* ``floor``: a bare loop of 1000 ``csr @ vector`` products (dense for the dense chain) plus the same four
  dot products, i.e. what the sweep cannot go below in a Python loop.

Usage::

    python benchmarks/bench_horizon.py
    python benchmarks/bench_horizon.py --repeats 3 --horizon 1000
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results

import tracetochain

TARGET_S = 0.1


# ---------------------------------------------------------------------------------------------------- chains
def sparse_chain(m: int, nnz_per_row: int, seed: int) -> tuple[np.ndarray, ...]:
    """Q with ``nnz_per_row`` random successors per row (Dirichlet weights); exit prob. U(0.005, 0.05)."""
    rng = np.random.default_rng(seed)
    cols = np.argpartition(rng.random((m, m)), nnz_per_row, axis=1)[:, :nnz_per_row]
    w = rng.dirichlet(np.ones(nnz_per_row), size=m)
    exit_p = rng.uniform(0.005, 0.05, size=m)
    Q = np.zeros((m, m))
    np.put_along_axis(Q, cols, w * (1.0 - exit_p)[:, None], axis=1)
    share = rng.uniform(0.1, 0.9, size=m)
    pi0 = np.zeros(m)
    starts = rng.choice(m, size=10, replace=False)
    pi0[starts] = rng.dirichlet(np.ones(10))
    return (*_fix_rows(Q, exit_p * share, exit_p * (1.0 - share)), pi0)


def dense_chain(m: int, seed: int) -> tuple[np.ndarray, ...]:
    """Fully dense Q (Dirichlet(1) rows), exit prob. U(0.005, 0.05) per row, π0 Dirichlet over all states."""
    rng = np.random.default_rng(seed)
    exit_p = rng.uniform(0.005, 0.05, size=m)
    Q = rng.dirichlet(np.ones(m), size=m) * (1.0 - exit_p)[:, None]
    share = rng.uniform(0.1, 0.9, size=m)
    return (*_fix_rows(Q, exit_p * share, exit_p * (1.0 - share)), rng.dirichlet(np.ones(m)))


def _fix_rows(Q: np.ndarray, rs: np.ndarray, rf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Put the rounding error of each row into its failure exit so rows sum to 1 to machine precision."""
    rf = 1.0 - Q.sum(axis=1) - rs
    return Q, rs, rf


# ---------------------------------------------------------------------------------------------------- timing
def timed(fn: Callable[[Any], Any], repeats: int, setup: Callable[[], Any] | None = None) -> list[float]:
    """Wall times of ``fn(setup())`` (``fn(None)`` without setup); the setup is not timed."""
    out = []
    for _ in range(repeats):
        arg = setup() if setup is not None else None
        t0 = time.perf_counter()
        fn(arg)
        out.append(time.perf_counter() - t0)
    return out


def floor_sweep(Q: np.ndarray, rs: np.ndarray, rf: np.ndarray, pi0: np.ndarray, h: np.ndarray,
                horizon: int, sparse: bool) -> np.ndarray:
    """The bare minimum of a Python-loop sweep: one mat-vec and four dot products per step."""
    op: Any = scipy.sparse.csr_matrix(Q.T) if sparse else np.ascontiguousarray(Q.T)
    fs = np.zeros(horizon + 1)
    pi = pi0.copy()
    for d in range(1, horizon + 1):
        fs[d] = pi @ rs
        _ = pi @ rf
        pi = op @ pi
        _ = pi.sum(), pi @ h
    return np.cumsum(fs)


def bench_chain(label: str, arrays: tuple[np.ndarray, ...], horizon: int, repeats: int) -> dict[str, Any]:
    Q, rs, rf, pi0 = arrays
    names = [f"s{i}" for i in range(Q.shape[0])]

    def build() -> tracetochain.AbsorbingChain:
        return tracetochain.AbsorbingChain(Q, rs, rf, pi0, names)

    chain = build()
    _ = chain.r_inf  # warm the factorization (and any lazy imports) once
    chain.reliability(horizon)

    t_construct = timed(lambda _: build(), repeats)
    t_rinf = timed(lambda c: c.r_inf, repeats, setup=build)
    t_warm = timed(lambda _: chain.reliability(horizon), repeats)
    t_cold = timed(lambda c: c.reliability(horizon), repeats, setup=build)
    sparse = Q.shape[0] >= 128 and np.count_nonzero(Q) <= 0.2 * Q.size  # mirrors numerics.horizon
    h = np.asarray(chain.success_probabilities)
    t_floor = timed(lambda _: floor_sweep(Q, rs, rf, pi0, h, horizon, sparse), repeats)

    sweep = chain.sweep(horizon)
    rel = sweep.reliability
    ref = floor_sweep(Q, rs, rf, pi0, h, horizon, sparse)
    return {
        "chain": label,
        "n_states": int(Q.shape[0]),
        "nnz_Q": int(np.count_nonzero(Q)),
        "horizon": horizon,
        "construct_s": median(t_construct),
        "r_inf_s": median(t_rinf),
        "reliability_warm_s": median(t_warm),
        "reliability_cold_s": median(t_cold),
        "floor_s": median(t_floor),
        "runs": {"construct": t_construct, "r_inf": t_rinf, "reliability_warm": t_warm,
                 "reliability_cold": t_cold, "floor": t_floor},
        "r_inf": chain.r_inf,
        "R_at_horizon": float(rel[-1]),
        "residual_at_horizon": float(sweep.residual[-1]),
        "max_abs_diff_vs_floor": float(np.max(np.abs(rel - ref))),
        "mean_steps": chain.mean_steps(),
    }


# ---------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--horizon", type=int, default=1000)
    ap.add_argument("--states", type=int, default=1000, help="states of the sparse chain")
    ap.add_argument("--nnz-per-row", type=int, default=5)
    ap.add_argument("--dense-states", type=int, default=100)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--no-save", action="store_true",
                    help="do not write benchmarks/results/bench_horizon.json")
    args = ap.parse_args(argv)

    results = [
        bench_chain("sparse", sparse_chain(args.states, args.nnz_per_row, args.seed), args.horizon,
                    args.repeats),
        bench_chain("dense", dense_chain(args.dense_states, args.seed + 1), args.horizon, args.repeats),
    ]
    header = ["chain", "states", "nnz(Q)", "construct s", "r_inf s (factor)", f"R(0..{args.horizon}) s",
              "R cold s", "floor s"]
    rows = [[r["chain"], f"{r['n_states']:,}", f"{r['nnz_Q']:,}", f"{r['construct_s']:.4f}",
             f"{r['r_inf_s']:.4f}", f"{r['reliability_warm_s']:.4f}", f"{r['reliability_cold_s']:.4f}",
             f"{r['floor_s']:.4f}"]
            for r in results]
    print(markdown_table(header, rows))
    sp = results[0]
    print(f"\ntarget: R(0..{args.horizon}) on the {sp['n_states']}-state sparse chain "
          f"{sp['reliability_warm_s'] * 1e3:.1f} ms < {TARGET_S * 1e3:.0f} ms: "
          f"{'met' if sp['reliability_warm_s'] < TARGET_S else 'MISSED'}")
    for r in results:
        print(f"{r['chain']}: R∞ = {r['r_inf']:.6f}, R({args.horizon}) = {r['R_at_horizon']:.6f}, "
              f"tail R∞ − R({args.horizon}) = {r['residual_at_horizon']:.2e}, "
              f"mean steps {r['mean_steps']:.1f}")
    if not args.no_save:
        path = write_results("bench_horizon", {
            "benchmark": "bench_horizon",
            "description": "AbsorbingChain.reliability(horizon) (forward sweep), median of repeats; "
                           "construction and the I - Q factorization (r_inf) timed separately",
            "target": {"n_states": 1000, "horizon": 1000, "reliability_s": TARGET_S},
            "repeats": args.repeats,
            "seed": args.seed,
            "machine": machine_info(),
            "results": results,
        })
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
