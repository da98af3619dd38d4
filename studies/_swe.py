"""The real SWE-bench corpus of the artifact (``swebench_real/corpus.json``: 479 SWE-agent trajectories of SWE-bench
Verified) as the paper saw it.

One step per token; the state is the token's category in the ``shell-paper`` vocabulary
(:func:`tracetochain.featurize.vocab.categorize_shell_paper`) with the artifact's one quirk kept: a ``PYTHONPATH=…``
token stays a category of its own (OTHER), whereas ``shell-paper`` strips the assignment (and maps the bare token
to NONE). Outcome: ``resolved`` → success, else failure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

import tracetochain as tt
from studies._common import artifact_path
from tracetochain.featurize.vocab import categorize_shell_paper

CORPUS = "swebench_real/corpus.json"
SPLIT_SEED = 20260606


def artifact_category(token: str) -> str:
    """The artifact's category of one corpus token (``PYTHONPATH=…`` → OTHER, else ``shell-paper``'s)."""
    return "OTHER" if token.startswith("PYTHONPATH=") else categorize_shell_paper(None, token, None)


@lru_cache(maxsize=1)
def corpus() -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...], tuple[bool, ...]]:
    """(trace ids, per-trace category sequences, resolved flags) in the corpus file's order."""
    raw = json.loads(artifact_path(CORPUS).read_text(encoding="utf-8"))
    ids = tuple(raw)
    cats = tuple(tuple(artifact_category(t) for t in raw[i]["toks"]) for i in ids)
    return ids, cats, tuple(bool(raw[i]["resolved"]) for i in ids)


def available() -> bool:
    return artifact_path(CORPUS).is_file()


def table(label: Callable[[Sequence[str]], Sequence[str]] | None = None,
          rows: Sequence[int] | None = None) -> tt.TraceTable:
    """The corpus (or the traces ``rows``, in that order) as a TraceTable, states relabelled by ``label``."""
    ids, cats, ok = corpus()
    order = range(len(ids)) if rows is None else rows
    records = []
    for r in order:
        states = cats[r] if label is None else label(cats[r])
        outcome = "success" if ok[r] else "failure"
        records += [{"trace_id": ids[r], "step_idx": j, "state": s, "outcome": outcome} for j, s in enumerate(states)]
    return tt.TraceTable.from_records(records)


def order_lift(k: int) -> Callable[[Sequence[str]], list[str]]:
    """Order-k lift (study SS14): the state at step t is the tuple of the last k categories, BEGIN-padded."""
    def lift(c: Sequence[str]) -> list[str]:
        padded = ["BEGIN"] * (k - 1) + list(c)
        return ["|".join(padded[t:t + k]) for t in range(len(c))]
    return lift


def stage_lift(window: int, n_stages: int = 16) -> Callable[[Sequence[str]], list[str]]:
    """Phase-type lift (study SS14): state (category, stage), stage = min(⌊t/W⌋, B − 1)."""
    def lift(c: Sequence[str]) -> list[str]:
        return [f"{x}@{min(t // window, n_stages - 1)}" for t, x in enumerate(c)]
    return lift


def success_percentiles(chain: tt.AbsorbingChain, d_max: int, qs: Sequence[float] = (0.1, 0.5, 0.9)) -> list[int]:
    """Percentiles of the model's success time among runs that succeed within ``d_max`` steps (exact, no sampling):
    the smallest d with R(d)/R(d_max) ≥ q — the artifact's simulations keep only runs absorbed in ⊕ by d_max."""
    rel = chain.reliability(d_max)
    cdf = rel / rel[-1]
    return [int(np.searchsorted(cdf, q - 1e-12)) for q in qs]
