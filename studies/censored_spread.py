"""Side experiment to study CS: is R∞'s interval of one sample too narrow under censoring between steps (SS7 chain,
500 traces, ~28 % of traces cut at a random step), and does that explain ``compare``'s ΔR∞ size in study CS's
``ss7`` cell?

Not a study of the runner (no archive test): it backs the numbers quoted in ``docs/statistics.md`` and in the xfail
of ``tests/test_study_cs.py``. Three parts, each with its own seeds, so any prefix of a longer run is the shorter run:

``spread``
    ``corpora`` corpora of 500 traces of the cell (censored as study CS, or not with ``--uncensored``), each analysed
    by ``analyze`` three times: posterior with 1,000 and with 200 draws, bootstrap with 200 replicates. Reported: the
    point estimate's bias and its sd over corpora against the mean sd of the draws and against the mean half-width
    / 1.96 of the equal-tailed 95 % interval (ratios, bootstrap-over-corpora standard errors), coverage of the true
    R∞ (binomial standard errors, misses on each side), the skewness and excess kurtosis of the estimate over
    corpora, and the ΔR∞ exclusion rate of consecutive corpora taken as pairs (``difference_interval`` of their
    draws, as ``compare`` builds it).
``compare``
    Pairs ``start`` … ``stop`` − 1 of study CS's own compare job (same seeds: pairs 0-299 are the archived 300),
    ``compare(..., samples=200)`` with both methods; the draws of R∞ behind each ΔR∞ interval are kept. With
    ``--samples`` (and ``--methods``) the same pairs with more draws a side: what the draws' own error adds.
``draws``
    The finite-draw effect alone: two normal "posteriors" of equal width centred on independent normal estimates (a
    perfectly calibrated pair), 200 draws a side: how often ``difference_interval`` excludes 0, and the mean
    posterior mass of the interval.

``python -m studies.censored_spread spread --corpora 4000 --raw DIR`` (and ``--uncensored``), ``… compare --pairs
2000 --raw DIR``, ``… draws``; ``… summarize --raw DIR`` prints the tables from the saved arrays. One process; about
0.2 s per corpus and 0.4-0.7 s per pair on one core.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from studies.censored_steps import CELLS, chain_of, corpus
from studies.rn_statistics import _rate, table_from
from tracetochain import TraceTable
from tracetochain.uncertainty.shared import difference_interval

SPREAD_SEED = 777
COMPARE_SEED = 20261203  # study CS's default seed: its compare pairs, reproduced
N_TRACES = 500
DRAWS = 200


def _padded(x: Any, n: int) -> np.ndarray:
    out = np.full(n, np.nan)
    v = np.asarray(x, dtype=np.float64)
    out[: v.size] = v
    return out


def spread(cell: str, censored: bool, n_corpora: int, raw: Path, seed: int = SPREAD_SEED) -> Path:
    from tracetochain.analysis import analyze

    out: dict[str, list[Any]] = {k: [] for k in ("point", "post1000", "post200", "boot200", "cens")}
    path = raw / f"spread-{cell}-{'cens' if censored else 'unc'}.npz"
    t0 = time.perf_counter()
    for rep in range(n_corpora):
        rng = np.random.default_rng(np.random.SeedSequence([seed, rep, CELLS.index(cell), int(censored)]))
        traces = (corpus(cell, N_TRACES, rng) if censored
                  else TraceTable.from_arrow(table_from(chain_of(cell), N_TRACES, rng), source="uncensored"))
        s = analyze(traces, audit=False, intervals="posterior", samples=1000, seed=rep).ensemble.stats(
            "r_inf", return_samples=True)
        out["point"].append(s.point)
        out["post1000"].append(_padded(s.samples, 1000))
        for key, method in (("post200", "posterior"), ("boot200", "bootstrap")):
            r = analyze(traces, audit=False, intervals=method, samples=DRAWS, seed=rep)
            out[key].append(_padded(r.ensemble.stats("r_inf", return_samples=True).samples, DRAWS))
        out["cens"].append(traces.outcome_counts()["censored"] / N_TRACES)
        if (rep + 1) % 250 == 0 or rep + 1 == n_corpora:
            np.savez(path, **{k: np.array(v) for k, v in out.items()})
            print(f"{rep + 1} corpora, {time.perf_counter() - t0:.0f} s", flush=True)
    return path


def compare_pairs(cell: str, start: int, stop: int, raw: Path, seed: int = COMPARE_SEED, samples: int = DRAWS,
                  methods: tuple[str, ...] = ("posterior", "bootstrap")) -> Path:
    import tracetochain.analysis._compare as cmp_module

    captured: list[tuple[np.ndarray, np.ndarray]] = []
    original = cmp_module.difference_interval

    def spy(a: Any, b: Any, confidence: float) -> Any:
        if np.ndim(a) == 1:  # ΔR∞ (the reliability curve's call has columns)
            captured.append((np.array(a), np.array(b)))
        return original(a, b, confidence)

    res = {m: {"iv": [], "ra": [], "rb": [], "delta": []} for m in methods}
    tail = "" if samples == DRAWS else f"-s{samples}"
    path = raw / f"compare-{cell}-{start}-{stop}{tail}.npz"
    cmp_module.difference_interval = spy  # type: ignore[assignment]
    try:
        t0 = time.perf_counter()
        for rep in range(start, stop):
            # study CS's _compare_job, line for line
            rng = np.random.default_rng(np.random.SeedSequence([seed, rep, CELLS.index(cell), 2]))
            a, b = corpus(cell, N_TRACES, rng, "a"), corpus(cell, N_TRACES, rng, "b")
            for m, r in res.items():
                captured.clear()
                c = cmp_module.compare(a, b, intervals=m, samples=samples, seed=rep)
                ra, rb = captured[0]
                r["iv"].append(c.delta_r_inf_interval)
                r["delta"].append(c.delta_r_inf)
                r["ra"].append(_padded(ra, samples))
                r["rb"].append(_padded(rb, samples))
            if (rep + 1 - start) % 100 == 0 or rep + 1 == stop:
                np.savez(path, **{f"{m}_{k}": np.array(v) for m, r in res.items() for k, v in r.items()})
                print(f"{rep + 1 - start} pairs, {time.perf_counter() - t0:.0f} s", flush=True)
    finally:
        cmp_module.difference_interval = original  # type: ignore[assignment]
    return path


def finite_draws(reps: int = 20000, n: int = DRAWS, seed: int = 5) -> dict[str, Any]:
    from scipy.stats import norm

    rng = np.random.default_rng(seed)
    hits, mass = [], []
    for _ in range(reps):
        xa, xb = rng.normal(size=2)
        lo, hi = difference_interval(xa + rng.normal(size=n), xb + rng.normal(size=n), 0.95)
        hits.append(bool(lo > 0 or hi < 0))
        c = xb - xa
        mass.append(norm.cdf((hi - c) / np.sqrt(2)) - norm.cdf((lo - c) / np.sqrt(2)))
    return {"draws_per_side": n, "reps": reps, "exclusion": _rate(hits), "mean_mass": float(np.mean(mass)),
            "mean_mass_se": float(np.std(mass, ddof=1) / np.sqrt(reps))}


def _skew_kurt(x: np.ndarray) -> tuple[float, float]:
    d = x - x.mean()
    v = (d ** 2).mean()
    return float((d ** 3).mean() / v ** 1.5), float((d ** 4).mean() / v ** 2 - 3.0)


def _ratio_se(num: np.ndarray, den: np.ndarray, rng: np.random.Generator, B: int = 2000) -> tuple[float, float]:
    """sd(num) / mean(den) over corpora, and its bootstrap-over-corpora standard error."""
    n = num.size
    idx = rng.integers(0, n, (B, n))
    boot = num[idx].std(axis=1, ddof=1) / den[idx].mean(axis=1)
    return float(num.std(ddof=1) / den.mean()), float(boot.std())


def _pairs_exclusion(draws: np.ndarray) -> dict[str, Any]:
    hits = []
    for i in range(0, draws.shape[0] - 1, 2):
        a, b = draws[i], draws[i + 1]
        lo, hi = difference_interval(a[np.isfinite(a)], b[np.isfinite(b)], 0.95)
        hits.append(bool(lo > 0 or hi < 0))
    return _rate(hits)


def summarize_spread(path: Path, truth: float) -> dict[str, Any]:
    d = np.load(path)
    pt = d["point"]
    n = pt.size
    rng = np.random.default_rng(0)
    skew, kurt = _skew_kurt(pt)
    out: dict[str, Any] = {
        "corpora": n, "censored_share": float(d["cens"].mean()), "truth": truth,
        "bias": float(pt.mean() - truth), "bias_se": float(pt.std(ddof=1) / np.sqrt(n)),
        "sd_point": float(pt.std(ddof=1)), "skew_point": skew, "skew_se": float(np.sqrt(6 / n)),
        "excess_kurtosis_point": kurt, "kurtosis_se": float(np.sqrt(24 / n)), "methods": {}}
    for key in ("post1000", "post200", "boot200"):
        D = d[key]
        sds = np.nanstd(D, axis=1, ddof=1)
        lo, hi = np.nanquantile(D, 0.025, axis=1), np.nanquantile(D, 0.975, axis=1)
        half = (hi - lo) / 2 / 1.96
        cover = (lo <= truth) & (truth <= hi)
        r_sd, r_sd_se = _ratio_se(pt, sds, rng)
        r_hw, r_hw_se = _ratio_se(pt, half, rng)
        out["methods"][key] = {
            "mean_sd": float(sds.mean()), "sd_ratio": r_sd, "sd_ratio_se": r_sd_se,
            "mean_half_width_over_1.96": float(half.mean()), "half_width_ratio": r_hw, "half_width_ratio_se": r_hw_se,
            "coverage": float(cover.mean()), "coverage_se": float(np.sqrt(cover.mean() * (1 - cover.mean()) / n)),
            "miss_below": float(np.mean(hi < truth)), "miss_above": float(np.mean(lo > truth)),
            "pairs_exclusion": _pairs_exclusion(D)}
    return out


def summarize_compare(path: Path) -> dict[str, Any]:
    d = np.load(path)
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    for m in ("posterior", "bootstrap"):
        if f"{m}_iv" not in d.files:
            continue
        iv, delta = d[f"{m}_iv"], d[f"{m}_delta"]
        sd = np.sqrt(np.nanstd(d[f"{m}_ra"], axis=1, ddof=1) ** 2 + np.nanstd(d[f"{m}_rb"], axis=1, ddof=1) ** 2)
        hits = ((iv[:, 0] > 0) | (iv[:, 1] < 0)).tolist()
        ratio, ratio_se = _ratio_se(delta, sd, rng)
        out[m] = {"pairs": len(hits), "exclusion": _rate(hits), "first_300": _rate(hits[:300]),
                  "after_300": _rate(hits[300:]), "sd_delta": float(delta.std(ddof=1)),
                  "mean_sd_of_draws": float(sd.mean()), "sd_ratio": ratio, "sd_ratio_se": ratio_se,
                  "mean_delta": float(delta.mean()), "mean_delta_se": float(delta.std(ddof=1) / np.sqrt(delta.size))}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("spread", "compare", "draws", "summarize"))
    ap.add_argument("--cell", default="ss7", choices=CELLS)
    ap.add_argument("--corpora", type=int, default=4000)
    ap.add_argument("--uncensored", action="store_true")
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--samples", type=int, default=DRAWS, help="compare: draws a side (default 200, the study's)")
    ap.add_argument("--methods", default="posterior,bootstrap", help="compare: interval methods")
    ap.add_argument("--raw", type=Path, default=Path("censored-spread-raw"))
    args = ap.parse_args(argv)
    args.raw.mkdir(parents=True, exist_ok=True)
    if args.part == "spread":
        spread(args.cell, not args.uncensored, args.corpora, args.raw)
    elif args.part == "compare":
        compare_pairs(args.cell, args.start, args.start + args.pairs, args.raw, samples=args.samples,
                      methods=tuple(args.methods.split(",")))
    elif args.part == "draws":
        print(json.dumps(finite_draws(), indent=1))
    else:
        truth = chain_of(args.cell).r_inf
        doc: dict[str, Any] = {}
        for p in sorted(args.raw.glob(f"spread-{args.cell}-*.npz")):
            doc[p.stem] = summarize_spread(p, truth)
        for p in sorted(args.raw.glob(f"compare-{args.cell}-*.npz")):
            doc[p.stem] = summarize_compare(p)
        print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
