"""Random numbers that are functions of a trace's id (or its task's id): held-out splits and bootstrap weights.

Which half of a split a trace falls in, and its weight in a bootstrap replicate, are computed from a 64-bit hash of
its id and the seed — never from its position in a file or in memory. So a trace gets the same role wherever it is
read: in memory, in any partition of a corpus, on any engine, in any order. That is what makes the in-memory analysis
and the partitioned one give the same numbers bit for bit.

* The id hash is 64-bit FNV-1a of the id's UTF-8 bytes (Fowler–Noll–Vo): stable across processes, machines and
  versions, unlike Python's ``hash``.
* A stream of uniforms on [0, 1) for (hash, seed, index) comes from SplitMix64's output function (Steele, Lea &
  Flood 2014), a bijective 64-bit mixer: u = top 53 bits of mix(hash XOR key(stream, seed, index)).
* Split s of ``n_splits`` holds a trace out iff u(hash, seed, s) < ``test_fraction``: the splits are independent
  random halves.
* Bootstrap weights of replicate b: Poisson(1) by inversion of u(hash, seed, b) (the Poisson bootstrap; Hanley &
  MacGibbon 2006, Chamandy et al. 2012), or Exponential(1) = −ln(1 − u) (the Bayesian bootstrap, Rubin 1981). Hashing
  the task id instead of the trace id gives every trial of a task the same weight: a cluster bootstrap.
"""

from __future__ import annotations

import functools
from typing import Literal

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)
SPLIT_STREAM = np.uint64(0x5EED_5B11_7000_0001)
BOOT_STREAM = np.uint64(0x5EED_B007_0000_0002)
#: Salt that keeps the hash of a trace without a task apart from any task's hash.
_NO_TASK_SALT = np.uint64(0x7A5C_0000_0000_0001)
_POISSON_MAX = 24  # P(Poisson(1) > 24) < 1e-25: weights are capped there
_TO_UNIT = 2.0 ** -53

WeightKind = Literal["poisson", "exponential"]


def fnv1a_hashes(ids: pa.Array | pa.ChunkedArray) -> NDArray[np.uint64]:
    """64-bit FNV-1a hash of every id (as UTF-8 text; null hashes as ""), vectorised over the ids.

    h₀ = 14695981039346656037, h ← (h XOR byte) × 1099511628211 mod 2⁶⁴ for each byte (Fowler–Noll–Vo).

    >>> int(fnv1a_hashes(pa.array(["a"]))[0]) == 0xAF63DC4C8601EC8C
    True
    """
    arr = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.string())
    arr = arr.fill_null("").cast(pa.large_string())
    n = len(arr)
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    if n == 0:
        return h
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64, count=n + 1, offset=arr.offset * 8)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    order = np.argsort(-lengths, kind="stable")  # longest first: the live ids of byte j are a prefix
    sorted_len = lengths[order]
    for j in range(int(sorted_len[0]) if n else 0):
        live = order[: int(np.searchsorted(-sorted_len, -j, side="left"))]
        h[live] = (h[live] ^ data[starts[live] + j].astype(np.uint64)) * _FNV_PRIME
    return h


def unit_hashes(trace_ids: pa.Array, task_ids: pa.Array | None = None) -> NDArray[np.uint64]:
    """The hash of each trace's resampling unit: its task's id when it has one (``task_ids`` given), else its own id
    (salted, so a trace id never collides with a task id)."""
    own = fnv1a_hashes(trace_ids)
    if task_ids is None:
        return own ^ _NO_TASK_SALT
    task = task_ids.combine_chunks() if isinstance(task_ids, pa.ChunkedArray) else task_ids
    has_task = np.asarray(task.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    out = own ^ _NO_TASK_SALT
    if has_task.any():
        out[has_task] = fnv1a_hashes(task.filter(pa.array(has_task)))
    return out


def splitmix64(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's output function (Steele, Lea & Flood 2014): a bijective 64-bit mixer, vectorised."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return out


def unit_uniforms(keys: NDArray[np.uint64]) -> NDArray[np.float64]:
    """Uniforms on [0, 1) from 64-bit keys (the top 53 bits)."""
    out: NDArray[np.float64] = (keys >> np.uint64(11)).astype(np.float64) * _TO_UNIT
    return out


def stream_key(stream: np.uint64, seed: int, index: int = 0) -> np.uint64:
    """The key of draw ``index`` of ``stream`` under ``seed`` (mixed twice, so nearby seeds and indices differ)."""
    with np.errstate(over="ignore"):
        key = splitmix64(np.array([stream ^ np.uint64(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)], dtype=np.uint64))
        return np.uint64(splitmix64(key + np.uint64(index))[0])


def hash_uniforms(hashes: NDArray[np.uint64], stream: np.uint64, seed: int, index: int = 0) -> NDArray[np.float64]:
    """u(hash, seed, index) on [0, 1) for every hash: the same number for the same id wherever it is computed."""
    return unit_uniforms(splitmix64(hashes ^ stream_key(stream, seed, index)))


def holdout_mask(hashes: NDArray[np.uint64], test_fraction: float, seed: int, split: int = 0) -> NDArray[np.bool_]:
    """True for the traces held out in split ``split``: u(id, seed, split) < ``test_fraction``.

    >>> h = fnv1a_hashes(pa.array([f"t{i}" for i in range(10_000)]))
    >>> abs(float(holdout_mask(h, 0.5, 0).mean()) - 0.5) < 0.02
    True
    >>> float((holdout_mask(h, 0.5, 0) == holdout_mask(h, 0.5, 0, split=1)).mean()) < 0.55   # independent halves
    True
    """
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction!r}")
    out: NDArray[np.bool_] = hash_uniforms(hashes, SPLIT_STREAM, seed, split) < test_fraction
    return out


@functools.cache
def _poisson1_cdf() -> NDArray[np.float64]:
    from scipy.special import pdtr  # poisson.cdf's own routine, bit for bit, without importing scipy.stats

    out: NDArray[np.float64] = pdtr(np.arange(_POISSON_MAX), 1.0)
    return out


def replicate_weights(hashes: NDArray[np.uint64], seed: int, replicates: range,
                      kind: WeightKind = "exponential") -> NDArray[np.float64]:
    """Bootstrap weights (n_units × len(replicates)): the weight of a unit in replicate b is a Poisson(1) draw
    (``"poisson"``) or an Exponential(1) draw (``"exponential"``, the Bayesian bootstrap) by inversion of
    u(hash, seed, b). Both have mean 1 and variance 1.

    >>> h = fnv1a_hashes(pa.array([f"t{i}" for i in range(20_000)]))
    >>> w = replicate_weights(h, 0, range(4), "poisson")
    >>> w.shape, round(float(w.mean()), 1), round(float(w.var()), 1)
    ((20000, 4), 1.0, 1.0)
    >>> round(float(replicate_weights(h, 0, range(4)).var()), 1)
    1.0
    """
    if kind not in ("poisson", "exponential"):
        raise ValueError(f"weights must be 'poisson' or 'exponential', got {kind!r}")
    out = np.empty((hashes.size, len(replicates)), dtype=np.float64)
    cdf = _poisson1_cdf() if kind == "poisson" else None
    for k, b in enumerate(replicates):
        u = hash_uniforms(hashes, BOOT_STREAM, seed, b)
        out[:, k] = np.searchsorted(cdf, u, side="right") if cdf is not None else -np.log1p(-u)
    return out
