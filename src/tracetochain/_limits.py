"""Resource limits: guards that stop a run before it exhausts memory or time — each error names the way forward.

The chain is dense: m transient states mean an m × (m + 2) matrix, an m × m factorization for every metric, and
one more for every posterior draw or bootstrap replicate. Sizes that would take hours or more memory than a CI
runner has (2 cores, 4 GB) are refused up front with a message saying what to do instead, rather than ending in a
``MemoryError`` minutes later.

Every limit can be raised through an environment variable (for a big machine and a deliberate choice):

==============================  =========  ==============================================================
variable                        default    what it bounds
==============================  =========  ==============================================================
``TRACETOCHAIN_MAX_STATES``     2,000      distinct states of a chain (fit, report, audit, compare, …)
``TRACETOCHAIN_MAX_HORIZON``    10,000     the largest step budget d of R(d) (``--horizon``)
``TRACETOCHAIN_MAX_SAMPLES``    100,000    posterior draws / bootstrap replicates (``--samples``)
``TRACETOCHAIN_MAX_CELLS``      5 × 10⁶    draws × (horizon + 1): the size of one band of R(d) draws
``TRACETOCHAIN_MAX_MEMORY_MB``  1,024      memory a run may plan for: interval draws (draws × states²), an
                                           in-memory read (else: use ``--engine local``)
==============================  =========  ==============================================================

Times are checked too (:func:`time_problem`): a time stamp is epoch seconds, and one in the year 10^21 is a broken
exporter, not data — it would overflow every calendar conversion downstream (``datetime`` raises, a window key
becomes unprintable). Readers refuse a time outside ±:data:`MAX_ABS_TIME` (year 2200 either side of 1970; relative
times such as 0.0, 1.5 pass); the live service also refuses times before 1970 and more than
:data:`MAX_FUTURE_SKEW` ahead of its own clock.
"""

from __future__ import annotations

import os

from tracetochain.exceptions import ResourceLimitError

DEFAULT_MAX_STATES = 2_000
DEFAULT_MAX_HORIZON = 10_000
DEFAULT_MAX_SAMPLES = 100_000
DEFAULT_MAX_CELLS = 5_000_000
DEFAULT_MAX_MEMORY_MB = 1_024
#: The largest absolute time stamp (epoch seconds) a trace may carry: 2200-01-01T00:00:00Z.
MAX_ABS_TIME = 7_258_118_400.0
#: How far ahead of the receive clock the live service accepts a span time (clock skew between hosts).
MAX_FUTURE_SKEW = 86_400.0
#: Peak bytes per (draw, d) cell of the R(d) bands: measured 2026-12-01, 1,000 draws × horizon 4,999 on 5 states
#: peak at 0.71 GB (10⁷ cells: 1.22 GB).
_BYTES_PER_CELL = 120


def _setting(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.replace("_", "").strip())
    except ValueError:
        raise ResourceLimitError(f"{name}={raw!r} is not a whole number") from None
    if value < 1:
        raise ResourceLimitError(f"{name}={raw!r} must be at least 1")
    return value


def max_states() -> int:
    """The largest number of distinct states a chain may have (``TRACETOCHAIN_MAX_STATES``, default 2,000)."""
    return _setting("TRACETOCHAIN_MAX_STATES", DEFAULT_MAX_STATES)


def max_horizon() -> int:
    """The largest step budget d of R(d) (``TRACETOCHAIN_MAX_HORIZON``, default 10,000)."""
    return _setting("TRACETOCHAIN_MAX_HORIZON", DEFAULT_MAX_HORIZON)


def max_samples() -> int:
    """The most posterior draws or bootstrap replicates (``TRACETOCHAIN_MAX_SAMPLES``, default 100,000)."""
    return _setting("TRACETOCHAIN_MAX_SAMPLES", DEFAULT_MAX_SAMPLES)


def memory_budget() -> int:
    """Bytes a run may plan to hold in memory (``TRACETOCHAIN_MAX_MEMORY_MB``, default 1,024 MB)."""
    return _setting("TRACETOCHAIN_MAX_MEMORY_MB", DEFAULT_MAX_MEMORY_MB) * 1_000_000


#: Bytes per draw and per transition entry that interval computations hold: the draw itself and the batched
#: solves' copies (measured: 1,000 posterior draws over 200 states peak at 1.15 GB, 4 × 8 × 1000 × 200² = 1.3 GB).
_BYTES_PER_DRAW_ENTRY = 32


def check_ensemble_size(n_draws: int, m: int, option: str = "--samples") -> None:
    """Refuse interval computations whose ``n_draws`` chains of ``m`` states would not fit :func:`memory_budget`.

    >>> check_ensemble_size(1000, 50)
    >>> check_ensemble_size(1000, 1000)
    Traceback (most recent call last):
    ...
    tracetochain.exceptions.ResourceLimitError: intervals from 1,000 draws over 1,000 states would hold about ...
    """
    budget = memory_budget()
    need = _BYTES_PER_DRAW_ENTRY * n_draws * m * m
    if need <= budget:
        return
    fits = budget // (_BYTES_PER_DRAW_ENTRY * max(m * m, 1))
    instead = f"{option} {fits:,} (the most that fits), " if fits >= 50 else ""
    raise ResourceLimitError(
        f"intervals from {n_draws:,} draws over {m:,} states would hold about {need / 1e9:.1f} GB (every draw is a "
        f"{m:,} × {m:,} chain; the budget is {budget / 1e9:.1f} GB). Use {instead}--uncertainty none, or fewer "
        "states (--states categorical or ward); on a larger machine raise TRACETOCHAIN_MAX_MEMORY_MB")


def available_memory() -> int | None:
    """Bytes this process can still use: ``TRACETOCHAIN_MAX_MEMORY_MB`` when set, else the least of the memory the
    kernel reports available, the cgroup's remaining allowance and the address-space limit; None if unknown."""
    if os.environ.get("TRACETOCHAIN_MAX_MEMORY_MB", "").strip():
        return memory_budget()
    found: list[int] = []
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError):
        pass
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_file, encoding="ascii") as fh:
                limit_text = fh.read().strip()
            with open(usage_file, encoding="ascii") as fh:
                usage = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if limit_text.isdigit() and int(limit_text) < 1 << 60:
            found.append(max(int(limit_text) - usage, 0))
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            found.append(soft)
    except (ImportError, OSError, ValueError):
        pass
    return min(found) if found else None


#: Peak memory of an in-memory ``fit`` per byte of input (text formats) or per Parquet row, and the interpreter's
#: own share: measured 2026-12-01 on the shared 2-core VM (1.8M steps in 60,000 traces, 7 columns): JSONL 269 MB →
#: 2.18 GB peak, CSV 105 MB → 0.68 GB, Parquet → 0.61 GB. ``--engine local`` stays near 0.7 GB at any size.
_PEAK_PER_TEXT_BYTE = {".jsonl": 8.5, ".ndjson": 8.5, ".json": 10.0, ".csv": 7.0}
_PEAK_PER_PARQUET_ROW = 320
_PEAK_BASE = 200_000_000


def estimate_in_memory_peak(path: str | os.PathLike[str]) -> int | None:
    """Rough peak memory (bytes) of reading and fitting ``path`` in memory; None when it cannot be told cheaply
    (folders of other formats, unknown extensions count at the JSONL rate)."""
    from pathlib import Path

    p = Path(os.fspath(path))
    files: list[Path] = []
    if p.is_file():
        files = [p]
    elif p.is_dir():
        for root, _, names in os.walk(p):  # symbolic links to folders are not followed (no loops)
            files += [Path(root) / n for n in names]
            if len(files) >= 100_000:
                break
    if not files:
        return None
    total = 0
    for f in files:
        suffix = f.suffix.lower()
        try:
            if suffix in (".parquet", ".pq"):
                import pyarrow.parquet as pq

                total += pq.read_metadata(f).num_rows * _PEAK_PER_PARQUET_ROW
            else:
                total += int(f.stat().st_size * _PEAK_PER_TEXT_BYTE.get(suffix, 8.5))
        except Exception:  # an unreadable file is the reader's to report, with its own message
            continue
    return _PEAK_BASE + total


def check_in_memory_read(path: str | os.PathLike[str]) -> None:
    """Refuse an in-memory read that would not fit in :func:`available_memory`, pointing to ``--engine local``.

    The threshold is 90% of the memory available when the command starts; ``TRACETOCHAIN_MAX_MEMORY_MB`` sets the
    memory explicitly (also to go ahead anyway on a machine whose available memory is under-reported).
    """
    available = available_memory()
    if available is None:
        return
    need = estimate_in_memory_peak(path)
    if need is None or need <= 0.9 * available:
        return
    raise ResourceLimitError(
        f"{os.fspath(path)}: reading it in memory needs about {need / 1e9:.1f} GB, and {available / 1e9:.1f} GB is "
        "available. Use --engine local (in Python: tracetochain.partitioned), which reads it partition by "
        "partition in well under 1 GB; or set TRACETOCHAIN_MAX_MEMORY_MB to the memory you can give it")


def time_problem(t: float, *, now: float | None = None) -> str | None:
    """Why ``t`` (epoch seconds) is not a plausible time stamp, or None when it is.

    Without ``now`` (files read offline) a time must lie within ±:data:`MAX_ABS_TIME`; with ``now`` (the receive
    time of a live request) it must also be after 1970-01-01 and at most :data:`MAX_FUTURE_SKEW` after ``now``.

    >>> time_problem(1.7e9), time_problem(1.7e9, now=1.7e9)
    (None, None)
    >>> time_problem(1e21)
    'is 1e+21 s, past the year 2200 (epoch seconds are expected, e.g. 1767225600)'
    >>> time_problem(1.7e9 + 2 * 86400, now=1.7e9)
    'is 172,800 s (2.0 days) ahead of the receive time; a day of clock skew is allowed'
    """
    if not -MAX_ABS_TIME <= t <= MAX_ABS_TIME:  # also False for NaN
        return (f"is {t:.6g} s, {'past the year 2200' if t > 0 else 'before the year 1740'} "
                "(epoch seconds are expected, e.g. 1767225600)")
    if now is not None:
        if t <= 0:
            return f"is {t:.6g} s, not after 1970-01-01 (epoch time is expected)"
        if t > now + MAX_FUTURE_SKEW:
            ahead = t - now
            return (f"is {ahead:,.0f} s ({ahead / 86400:.1f} days) ahead of the receive time; a day of clock skew is "
                    "allowed")
    return None


def check_state_count(m: int, where: str) -> None:
    """Refuse a chain of ``m`` distinct states above :func:`max_states`, naming the fix.

    >>> check_state_count(10, "the traces")
    >>> check_state_count(10**5, "the traces")
    Traceback (most recent call last):
    ...
    tracetochain.exceptions.ResourceLimitError: the traces have 100,000 distinct states; ...
    """
    limit = max_states()
    if m <= limit:
        return
    raise ResourceLimitError(
        f"{where} {'have' if where.endswith('s') else 'has'} {m:,} distinct states; tracetochain fits chains of at "
        f"most {limit:,} (the chain is a dense {m:,} × {m + 2:,} matrix, and every metric and interval draw solves "
        f"an {m:,} × {m:,} system). Group the steps into fewer states with --states categorical (with --vocabulary "
        f"shell or chat) or --states ward (clustering), or relabel them; to go higher on a large machine, set "
        f"TRACETOCHAIN_MAX_STATES")


def check_horizon(horizon: int, option: str = "--horizon") -> int:
    """A step budget between 0 and :func:`max_horizon`."""
    limit = max_horizon()
    if not 0 <= horizon <= limit:
        raise ResourceLimitError(
            f"{option} must be between 0 and {limit:,}, got {horizon:,} (R(d) is computed for every d up to it; "
            "beyond a few thousand steps it equals R∞ to many digits — the output gives the exact remaining mass "
            "R∞ − R(d)); set TRACETOCHAIN_MAX_HORIZON to go higher")
    return horizon


def check_samples(samples: int, horizon: int | None = None, option: str = "--samples") -> int:
    """A number of draws between 1 and :func:`max_samples` whose R(d) band (draws × (horizon + 1)) fits memory."""
    limit = max_samples()
    if not 1 <= samples <= limit:
        raise ResourceLimitError(
            f"{option} must be between 1 and {limit:,}, got {samples:,} (interval end points settle to about "
            "1/√samples; 1,000–10,000 is plenty); set TRACETOCHAIN_MAX_SAMPLES to go higher")
    if horizon is not None:
        cells = _setting("TRACETOCHAIN_MAX_CELLS", DEFAULT_MAX_CELLS)
        if samples * (horizon + 1) > cells:
            raise ResourceLimitError(
                f"{option} {samples:,} with --horizon {horizon:,} keeps {samples * (horizon + 1):,} values of R(d) per "
                f"quantity (the limit is {cells:,}: about {cells * _BYTES_PER_CELL / 1e9:.1f} GB across the curves "
                "and their intervals); lower one of them, or set TRACETOCHAIN_MAX_CELLS")
    return samples


__all__ = ["DEFAULT_MAX_HORIZON", "DEFAULT_MAX_MEMORY_MB", "DEFAULT_MAX_SAMPLES", "DEFAULT_MAX_STATES", "MAX_ABS_TIME",
           "MAX_FUTURE_SKEW", "available_memory", "check_ensemble_size", "check_horizon", "check_in_memory_read",
           "check_samples", "check_state_count", "estimate_in_memory_peak", "max_horizon", "max_samples", "max_states",
           "memory_budget", "time_problem"]
