"""Helpers shared by the audit layers: state codes of labelled traces, seeded replicate blocks, JSON-safe values."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain.chain import AbsorbingChain, ChainPrior
from tracetochain.chain.shared import state_codes
from tracetochain.traces import TraceTable

#: Replicates simulated together (one vectorised simulation per block). Block j draws from
#: ``SeedSequence(seed).spawn(n_blocks)[j]`` and is always simulated whole, so replicate i gets the same numbers
#: whatever the total number of replicates B (a run with B = 999 extends the run with B = 199).
REPLICATE_BLOCK = 32

Seed = int | np.random.SeedSequence | None


def as_seed_sequence(seed: Seed) -> np.random.SeedSequence:
    """A SeedSequence from an int, a SeedSequence or None (fresh entropy)."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if seed is not None and (not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0):
        raise ValueError(f"seed must be a non-negative integer, a numpy SeedSequence or None, got {seed!r}")
    return np.random.SeedSequence(None if seed is None else int(seed))


def seed_record(seed: Seed) -> int | str | None:
    """What to write into a result for the seed (the entropy of a SeedSequence, so a run can be repeated)."""
    if isinstance(seed, np.random.SeedSequence):
        ent = seed.entropy
        return int(ent) if isinstance(ent, (int, np.integer)) else str(ent)
    return None if seed is None else int(seed)


def child_seeds(seed: Seed, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent child seeds (``SeedSequence.spawn``) for the parts of one audit."""
    return as_seed_sequence(seed).spawn(n)


def replicate_blocks(seed: Seed, n_replicates: int,
                     block: int = REPLICATE_BLOCK) -> Iterator[tuple[int, int, np.random.Generator]]:
    """Yield ``(first, count, rng)`` per block of replicates; the block is simulated whole, ``count`` are kept."""
    if n_replicates < 0:
        raise ValueError(f"the number of replicates must be >= 0, got {n_replicates}")
    n_blocks = -(-n_replicates // block)
    for j, child in enumerate(as_seed_sequence(seed).spawn(n_blocks)):
        first = j * block
        yield first, min(block, n_replicates - first), np.random.default_rng(child)


def chain_codes(traces: TraceTable, state_names: tuple[str, ...] | list[str]) -> NDArray[np.int64]:
    """State index (into ``state_names``) of every step of labelled traces; unknown labels are an error."""
    return state_codes(traces, state_names, of="the chain's states",
                       hint="label the traces with the chain's state model first (StateModel.label), or pass the "
                            "chain fitted on these labels")


def trace_lengths(traces: TraceTable) -> NDArray[np.int64]:
    """Number of steps of every trace (the first-passage time of a completed trace)."""
    out: NDArray[np.int64] = np.diff(traces.offsets).astype(np.int64)
    return out


def finite_or_none(x: float | None) -> float | None:
    """A float for JSON, or None when it is missing or not finite."""
    if x is None:
        return None
    v = float(x)
    return v if math.isfinite(v) else None


def json_safe(value: Any) -> Any:
    """Recursively make a value JSON-safe: numpy scalars/arrays to Python, non-finite floats to None."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [json_safe(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return finite_or_none(float(value))
    if isinstance(value, np.random.SeedSequence):
        return seed_record(value)
    return value


def json_dict(value: dict[str, Any]) -> dict[str, Any]:
    """:func:`json_safe` for a dict, typed as a dict."""
    out = json_safe(value)
    assert isinstance(out, dict)
    return out


def estimator_settings(chain: AbsorbingChain, pseudocount: float | None, unvisited: str | None,
                       initial: str | None) -> tuple[ChainPrior, str, str]:
    """The refit settings (prior, resolved unvisited policy, π0 rule): explicit values, else those recorded in the
    chain's metadata, else the defaults."""
    md = chain.metadata
    prior = ChainPrior.from_settings(pseudocount) if pseudocount is not None else ChainPrior.from_metadata(md)
    u = str(unvisited if unvisited is not None else md.get("unvisited_policy", "auto"))
    if u == "prior" and not prior.has_mass:
        u = "failure"
    i = str(initial if initial is not None else md.get("initial", "empirical"))
    if i not in ("empirical", "modal"):
        raise ValueError(f"initial must be 'empirical' or 'modal', got {i!r}")
    return prior, prior.resolve_unvisited(u), i
