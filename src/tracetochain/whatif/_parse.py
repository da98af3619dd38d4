"""Edits from the command line and from edit files.

Command-line forms (state names may contain ``:``; ``*`` means every state):

* ``--reroute "tool:search->success:0.1"`` — move 10% of the state's failure mass to success (or to a state);
* ``--set-edge "plan->act=0.3"`` — set P(plan → act) to 0.3, compensated proportionally over the row;
* ``--scale-edge "plan->failure*0.5"`` — halve an edge;
* ``--retry "tool:search=0.2"`` — set the self-loop probability;
* ``--remove "tool:lint"`` — remove a state (its visits bypassed);
* ``--edge-cost "tool:search->success=0.02"`` — the mass the edits add to that edge costs 0.02 per use (in the
  unit of the cost metric), e.g. the price of a fallback.

Edit files (TOML) list ``[[edit]]`` tables applied in order::

    [[edit]]
    kind = "reroute"      # reroute | set_edge | scale_edge | retry | remove
    state = "*"
    fraction = 0.1
    target = "success"    # optional; source = "failure" by default
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tracetochain._config_files import file_error, load_document, locate_line
from tracetochain.whatif._edits import Edit, EditError, RemoveState, Reroute, ScaleEdge, SetEdge, SetRetry

if TYPE_CHECKING:
    from tracetochain.whatif._analysis import EdgeCost

_FIELDS: dict[str, tuple[type, tuple[str, ...], tuple[str, ...]]] = {
    # kind: (class, required fields, optional fields)
    "reroute": (Reroute, ("state", "fraction"), ("target", "source")),
    "set_edge": (SetEdge, ("state", "target", "probability"), ("take_from",)),
    "scale_edge": (ScaleEdge, ("state", "target", "factor"), ("take_from",)),
    "retry": (SetRetry, ("state", "probability"), ()),
    "remove": (RemoveState, ("state",), ("redistribute",)),
}


def _number(text: str, what: str, spec: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise EditError(f"{spec!r}: {what} must be a number, got {text!r}") from None


def parse_edit(kind: str, spec: str) -> Edit:
    """One command-line edit: ``kind`` is reroute, set_edge, scale_edge, retry or remove."""
    spec = spec.strip()
    if kind == "remove":
        return RemoveState(spec)
    if kind == "retry":
        state, _, p = spec.rpartition("=")
        if not state:
            raise EditError(f"{spec!r}: write STATE=PROBABILITY, e.g. 'tool:search=0.2'")
        return SetRetry(state, _number(p, "the probability", spec))
    if "->" not in spec:
        raise EditError(f"{spec!r}: write SOURCE->TARGET…, e.g. 'tool:search->success:0.1'")
    state, rest = spec.split("->", 1)
    if kind == "reroute":
        target, _, frac = rest.rpartition(":")
        if not target:
            raise EditError(f"{spec!r}: write STATE->TARGET:FRACTION, e.g. '*->success:0.1'")
        return Reroute(state, _number(frac, "the fraction", spec), target)
    if kind == "set_edge":
        target, _, p = rest.rpartition("=")
        if not target:
            raise EditError(f"{spec!r}: write STATE->TARGET=PROBABILITY")
        return SetEdge(state, target, _number(p, "the probability", spec))
    if kind == "scale_edge":
        target, _, f = rest.rpartition("*")
        if not target:
            raise EditError(f"{spec!r}: write STATE->TARGET*FACTOR")
        return ScaleEdge(state, target, _number(f, "the factor", spec))
    raise EditError(f"unknown edit kind {kind!r}; use one of {', '.join(_FIELDS)}")


def parse_edge_cost(spec: str) -> EdgeCost:
    """``STATE->TARGET=COST``: the price of one use of the mass the edits add to that edge."""
    from tracetochain.whatif._analysis import EdgeCost

    spec = spec.strip()
    state, arrow, rest = spec.partition("->")
    target, _, cost = rest.rpartition("=")
    if not arrow or not state or not target:
        raise EditError(f"{spec!r}: write STATE->TARGET=COST, e.g. 'tool:search->success=0.02'")
    return EdgeCost(state, target, _number(cost, "the cost", spec))


def load_edits(path: str | Path) -> list[Edit]:
    """Read an edit file (TOML, or YAML with PyYAML); errors name the file, the line and the valid fields."""
    doc, text = load_document(path, EditError)
    p = str(path)
    entries = doc.get("edit", doc.get("edits")) if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise file_error(EditError, "no edits found", p, None, 'add [[edit]] tables with kind = "reroute", …')
    edits: list[Edit] = []
    for i, entry in enumerate(entries):
        line = locate_line(text, i, "kind", "edit")
        if not isinstance(entry, dict) or entry.get("kind") not in _FIELDS:
            raise file_error(EditError, f"edit {i + 1} needs kind = one of {', '.join(_FIELDS)}", p, line)
        cls, required, optional = _FIELDS[entry["kind"]]
        fields = {k: v for k, v in entry.items() if k != "kind"}
        for key in fields:
            if key not in required + optional:
                raise file_error(EditError, f"edit {i + 1} ({entry['kind']}): unknown field {key!r}", p,
                                 locate_line(text, i, key, "edit"),
                                 f"valid fields are kind, {', '.join(required + optional)}")
        missing = [k for k in required if k not in fields]
        if missing:
            raise file_error(EditError, f"edit {i + 1} ({entry['kind']}): missing {', '.join(missing)}", p, line)
        try:
            edits.append(cls(**fields))
        except TypeError as exc:  # pragma: no cover - fields are checked above
            raise file_error(EditError, f"edit {i + 1}: {exc}", p, line) from None
    return edits


def edits_from_options(**options: list[str]) -> list[Edit]:
    """Edits from repeated CLI options, in the order reroute, set_edge, scale_edge, retry, remove."""
    out: list[Edit] = []
    for kind in ("reroute", "set_edge", "scale_edge", "retry", "remove"):
        out += [parse_edit(kind, spec) for spec in options.get(kind) or []]
    return out


