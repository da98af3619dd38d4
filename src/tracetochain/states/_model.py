"""StateModel: the fitted map from steps to named transient states, with its taxonomy.

Every state-discovery method (Ward clustering, categories, milestones) returns one. ``label(traces)`` gives a
:class:`~tracetochain.TraceTable` whose ``state`` column holds the state names, ready for
:class:`~tracetochain.ChainEstimator` (pass ``states=model.state_names`` to keep this order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table
from tracetochain.traces import TraceTable


@dataclass(frozen=True)
class StateInfo:
    """One state of the taxonomy: its name, size and what it is made of (descriptor → share of its steps)."""

    name: str
    n_steps: int
    share_of_steps: float
    composition: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "n_steps": self.n_steps, "share_of_steps": self.share_of_steps,
                "composition": dict(self.composition)}


#: How a method names its states, where it is not by the dominant kind and its share (Ward's names).
_NAMING = {"informative": "; a name is the base state and the history that sets it apart (what came before it)",
           # categories and milestones are named by what they are; only learned clusters carry a bracketed share
           "categorical": "", "milestones": "", "label": ""}


@dataclass(frozen=True, eq=False, repr=False)
class StateModel(ResultDisplay):
    """Fitted state assignment. ``assign(traces)`` returns a state index per step; ``to_frame()`` is the taxonomy."""

    method: str
    state_names: tuple[str, ...]
    taxonomy: tuple[StateInfo, ...]
    settings: dict[str, Any]
    assign: Callable[[TraceTable], NDArray[np.int64]] = field(repr=False)
    fit_labels: NDArray[np.int64] | None = field(default=None, repr=False)
    scores: dict[int, float] = field(default_factory=dict)

    @property
    def n_states(self) -> int:
        return len(self.state_names)

    def predict(self, traces: TraceTable) -> NDArray[np.int64]:
        """State index of every step of ``traces`` (table order)."""
        return self.assign(traces)

    def label(self, traces: TraceTable) -> TraceTable:
        """``traces`` with its ``state`` column set to the state names."""
        return traces.with_states(self.predict(traces), self.state_names)

    def describe(self) -> str:
        """The taxonomy in words, one state per line."""
        how = _NAMING.get(self.method, "; a name is the kind most of the state's steps are, with that kind's share "
                                       "of its steps in brackets")
        lines = [f"{self.n_states} states ({self.method}){how}"]
        width = max([28, *(len(s.name) for s in self.taxonomy)])  # long names (informative states) stay aligned
        for s in self.taxonomy:
            parts = ", ".join(f"{k} {v:.0%}" for k, v in list(s.composition.items())[:4])
            lines.append(f"  {s.name:<{width}} {s.n_steps:>8} steps ({s.share_of_steps:.1%})  [{parts}]")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "state_names": list(self.state_names),
                "taxonomy": [s.to_dict() for s in self.taxonomy], "settings": dict(self.settings),
                "silhouette_by_k": {str(k): v for k, v in self.scores.items()}}

    def __str__(self) -> str:
        return self.describe()

    def _display(self) -> Display:
        rows = tuple((s.name, s.n_steps, s.share_of_steps,
                      ", ".join(f"{k} {v:.0%}" for k, v in list(s.composition.items())[:4])) for s in self.taxonomy)
        return Display(f"{self.n_states} states ({self.method})", kind="States",
                       tables=(Table("taxonomy", ("state", "n_steps", "share_of_steps", "composition"), rows),))


TaxonomyRow = tuple[str, int, float, dict[str, float]]


def build_taxonomy(labels: NDArray[np.int64], n_states: int, descriptor: NDArray[np.int64],
                   descriptor_names: tuple[str, ...], *, top: int = 5) -> list[TaxonomyRow]:
    """Per state: (dominant descriptor, size, share of that descriptor, composition) from step-level data."""
    n_desc = max(len(descriptor_names), 1)
    table = np.bincount(labels * n_desc + descriptor, minlength=n_states * n_desc).reshape(n_states, n_desc) \
        if labels.size else np.zeros((n_states, n_desc), np.int64)
    out = []
    for s in range(n_states):
        row = table[s]
        size = int(row.sum())
        order = np.argsort(-row, kind="stable")
        comp = {descriptor_names[i]: float(row[i] / size) for i in order[:top] if row[i] > 0} if size else {}
        dom = descriptor_names[int(order[0])] if size else "empty"
        out.append((dom, size, float(row[order[0]] / size) if size else 0.0, comp))
    return out


def readable_names(dominants: list[tuple[str, float]]) -> tuple[str, ...]:
    """Names such as ``tool:search (94%)`` from each state's dominant descriptor and its share, made unique."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for dom, share in dominants:
        base = f"{dom} ({share:.0%})"
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base} #{seen[base]}")
    return tuple(names)


def taxonomy_infos(names: tuple[str, ...], rows: list[tuple[str, int, float, dict[str, float]]],
                   total: int) -> tuple[StateInfo, ...]:
    return tuple(StateInfo(n, size, size / total if total else 0.0, comp)
                 for n, (_, size, _, comp) in zip(names, rows, strict=True))
