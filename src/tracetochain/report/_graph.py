"""The chain as a picture and as text for other tools: inline SVG (no system binary), DOT, Mermaid and PRISM.

All inputs are the chain document (``AbsorbingChain.to_dict()``) plus per-state visits; nothing is recomputed
beyond layout. State names are untrusted text: SVG/HTML output escapes them, DOT and Mermaid use safe node ids
(``s0``, ``s1`` …) with the name as a quoted label, PRISM uses the index and a comment.
"""

from __future__ import annotations

import html
import math
from collections import deque
from typing import Any

import numpy as np

from tracetochain._text import dot_label, mermaid_label, one_line, shorten

SUCCESS_COLOR = "#1a7f37"
FAILURE_COLOR = "#cf222e"
STATE_COLOR = "#0969da"


def _arrays(chain: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    return (np.asarray(chain["Q"], float), np.asarray(chain["R_success"], float), np.asarray(chain["R_failure"], float),
            np.asarray(chain["pi0"], float), [str(n) for n in chain["state_names"]])


def _start_exits(chain: dict[str, Any]) -> tuple[float, float]:
    """(s, f): the episodes that end in success / failure before any step (chain documents of version 2)."""
    s, f = chain.get("start_exits") or (0.0, 0.0)
    return float(s), float(f)


def layered_layout(chain: dict[str, Any], min_prob: float = 0.05) -> dict[int, tuple[int, int]]:
    """(layer, slot) per state: BFS depth from the start states over edges ≥ ``min_prob``; unreached states last."""
    Q, _, _, pi0, names = _arrays(chain)
    m = len(names)
    depth = [-1] * m
    queue: deque[int] = deque()
    for i in np.argsort(-pi0, kind="stable"):
        if pi0[i] > 0:
            depth[int(i)] = 0
            queue.append(int(i))
    while queue:
        i = queue.popleft()
        for j in np.argsort(-Q[i], kind="stable"):
            if Q[i, j] >= min_prob and depth[int(j)] < 0:
                depth[int(j)] = depth[i] + 1
                queue.append(int(j))
    last = max([*depth, 0]) + 1
    depth = [d if d >= 0 else last for d in depth]
    slots: dict[int, int] = {}
    pos: dict[int, tuple[int, int]] = {}
    for i in range(m):
        slot = slots.get(depth[i], 0)
        pos[i] = (depth[i], slot)
        slots[depth[i]] = slot + 1
    return pos


#: Most states drawn in the chain graph; the rarer ones become one "other states" node (all are in the tables).
MAX_GRAPH_STATES = 14
#: Most states stacked in one column of the graph; a layer with more is wrapped into several columns.
MAX_PER_COLUMN = 5
#: Most transitions drawn out of one state (its most likely ones); exits to success/failure are always drawn.
MAX_EDGES_PER_STATE = 3


def collapse_rare_states(chain: dict[str, Any], visits: list[float] | None,
                         max_states: int = MAX_GRAPH_STATES) -> tuple[dict[str, Any], list[float] | None, int]:
    """The chain with its least visited states merged into one node, for drawing: (chain document, visits, number
    of states merged). The merged node's rows are the visit-weighted mean of the merged rows (so each row still
    sums to 1) and the transitions into it are summed; nothing is merged when the chain has at most ``max_states``
    states or no visit counts."""
    Q, rs, rf, pi0, names = _arrays(chain)
    m = len(names)
    if m <= max_states or visits is None:
        return chain, visits, 0
    v = np.asarray(visits, float)
    keep = sorted(np.argsort(-v, kind="stable")[: max_states - 1].tolist())
    rest = [i for i in range(m) if i not in set(keep)]
    w = v[rest] / v[rest].sum() if v[rest].sum() > 0 else np.full(len(rest), 1 / len(rest))
    k = len(keep)
    Q2 = np.zeros((k + 1, k + 1))
    Q2[:k, :k] = Q[np.ix_(keep, keep)]
    Q2[:k, k] = Q[np.ix_(keep, rest)].sum(axis=1)
    Q2[k, :k] = w @ Q[np.ix_(rest, keep)]
    Q2[k, k] = w @ Q[np.ix_(rest, rest)].sum(axis=1)
    doc = {**chain, "Q": Q2.tolist(), "R_success": [*rs[keep].tolist(), float(w @ rs[rest])],
           "R_failure": [*rf[keep].tolist(), float(w @ rf[rest])],
           "pi0": [*pi0[keep].tolist(), float(pi0[rest].sum())],
           "state_names": [*(names[i] for i in keep), f"{len(rest)} other states"]}
    return doc, [*v[keep].tolist(), float(v[rest].sum())], len(rest)


def graph_note(chain: dict[str, Any], max_states: int = MAX_GRAPH_STATES) -> str:
    """What the drawn graph leaves out, in one sentence for the page."""
    m = len(chain["state_names"])
    shown = f"the {max_states - 1} most visited of the {m} states, the other {m - max_states + 1} merged into one " \
        "node; " if m > max_states else ""
    return (f"The graph shows {shown}each state's {MAX_EDGES_PER_STATE} most likely transitions of at least 0.05 "
            "and every exit of at least 0.05; the tables below list every state and every transition.")


def top_edges(row: np.ndarray, min_prob: float, limit: int = MAX_EDGES_PER_STATE) -> list[int]:
    """Targets of the ``limit`` most likely transitions of a row that reach ``min_prob``."""
    order = np.argsort(-row, kind="stable")
    return [int(j) for j in order[:limit] if row[j] >= min_prob]


def chain_svg(chain: dict[str, Any], visits: list[float] | None = None, *, min_prob: float = 0.05,
              width: int = 900, max_states: int = MAX_GRAPH_STATES) -> str:
    """Inline SVG: states sized by expected visits, edges by probability, exits to success/failure on the right.

    Readable for large chains: past ``max_states`` states the least visited are merged into one node
    (:func:`collapse_rare_states`), and each state shows only its most likely transitions (:func:`top_edges`).
    """
    chain, visits, _ = collapse_rare_states(chain, visits, max_states)
    Q, rs, rf, _, names = _arrays(chain)
    names = [shorten(n) for n in names]  # a name is repeated on every edge: keep the page size bounded
    m = len(names)
    pos = layered_layout(chain, min_prob)
    # Columns: each layer in order, a layer of many states wrapped into columns of at most MAX_PER_COLUMN.
    columns: list[list[int]] = []
    for layer in sorted({p[0] for p in pos.values()}):
        members = sorted((i for i in range(m) if pos[i][0] == layer), key=lambda i: pos[i][1])
        columns += [members[k:k + MAX_PER_COLUMN] for k in range(0, len(members), MAX_PER_COLUMN)]
    column_of = {i: (c, slot) for c, members in enumerate(columns) for slot, i in enumerate(members)}
    per_column = max(len(c) for c in columns) if columns else 1
    left, right = 20, 130  # room for the exits on the right
    col_w = (width - left - right) / max(len(columns), 1)
    row_h = 90
    height = max(3, per_column) * row_h + 40
    label_chars = max(10, min(32, int(col_w / 6.5)))  # a label may not run into the next column
    v = np.asarray(visits if visits is not None else np.ones(m), float)
    vmax = float(v.max()) if v.size and v.max() > 0 else 1.0

    def xy(i: int) -> tuple[float, float]:
        c, slot = column_of[i]
        count = len(columns[c])
        top = (height - count * row_h) / 2
        return left + (c + 0.5) * col_w, top + slot * row_h + row_h / 2

    sx, sy = width - 70, height * 0.3
    fx, fy = width - 70, height * 0.7
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
             f'height="{height}" role="img" aria-label="state graph" class="chain-graph">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" '
             'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#57606a"/></marker></defs>']

    def edge(x1: float, y1: float, x2: float, y2: float, p: float, color: str, title: str) -> None:
        w = 0.6 + 5.0 * p
        if abs(x1 - x2) < 1 and abs(y1 - y2) < 1:  # self-loop
            path = f"M {x1 - 8:.1f} {y1 - 18:.1f} C {x1 - 40:.1f} {y1 - 70:.1f}, {x1 + 40:.1f} {y1 - 70:.1f}, " \
                   f"{x1 + 8:.1f} {y1 - 18:.1f}"
        else:
            bend = 0.15 * (y2 - y1 + x2 - x1)
            mx, my = (x1 + x2) / 2 - bend * 0.2, (y1 + y2) / 2 - bend * 0.2
            path = f"M {x1:.1f} {y1:.1f} Q {mx:.1f} {my:.1f} {x2:.1f} {y2:.1f}"
        parts.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-opacity="{0.25 + 0.75 * p:.2f}" '
                     f'stroke-width="{w:.2f}" marker-end="url(#arrow)"><title>{html.escape(title)}</title></path>')

    for i in range(m):
        x1, y1 = xy(i)
        for j in top_edges(Q[i], min_prob):
            if Q[i, j] >= min_prob:
                x2, y2 = xy(j)
                edge(x1, y1, x2, y2, float(Q[i, j]), "#57606a", f"{names[i]} → {names[j]}: {Q[i, j]:.3f}")
        if rs[i] >= min_prob:
            edge(x1, y1, sx - 22, sy, float(rs[i]), SUCCESS_COLOR, f"{names[i]} → success: {rs[i]:.3f}")
        if rf[i] >= min_prob:
            edge(x1, y1, fx - 22, fy, float(rf[i]), FAILURE_COLOR, f"{names[i]} → failure: {rf[i]:.3f}")
    for i in range(m):
        x, y = xy(i)
        r = 10 + 16 * math.sqrt(v[i] / vmax)
        label = names[i] if len(names[i]) <= label_chars else names[i][: label_chars - 1] + "…"
        parts.append(f'<g class="node"><circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{STATE_COLOR}" '
                     f'fill-opacity="0.18" stroke="{STATE_COLOR}"><title>{html.escape(names[i])}: '
                     f'{v[i]:.2f} expected visits</title></circle>'
                     f'<text x="{x:.1f}" y="{y + r + 13:.1f}" text-anchor="middle" font-size="11">'
                     f'{html.escape(label)}</text></g>')
    for x, y, text, color in ((sx, sy, "success", SUCCESS_COLOR), (fx, fy, "failure", FAILURE_COLOR)):
        parts.append(f'<g class="node absorbing"><rect x="{x - 22}" y="{y - 16}" width="60" height="32" rx="6" '
                     f'fill="{color}" fill-opacity="0.15" stroke="{color}"/><text x="{x + 8}" y="{y + 4}" '
                     f'text-anchor="middle" font-size="12">{text}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _dot_label(text: str) -> str:
    return dot_label(text)


def to_dot(chain: dict[str, Any], min_prob: float = 0.0) -> str:
    """Graphviz DOT with safe ids (a ``:`` in a node id would be parsed as a port)."""
    Q, rs, rf, pi0, names = _arrays(chain)
    lines = ["digraph chain {", "  rankdir=LR;", '  node [shape=ellipse, fontname="Helvetica"];',
             '  success [shape=box, color="#1a7f37", label="success"];',
             '  failure [shape=box, color="#cf222e", label="failure"];']
    for i, n in enumerate(names):
        extra = ", penwidth=2" if pi0[i] > 0 else ""
        lines.append(f'  s{i} [label="{_dot_label(n)}"{extra}];')
    for i in range(len(names)):
        for j in range(len(names)):
            if Q[i, j] > min_prob:
                lines.append(f'  s{i} -> s{j} [label="{Q[i, j]:.3f}"];')
        if rs[i] > min_prob:
            lines.append(f'  s{i} -> success [label="{rs[i]:.3f}", color="#1a7f37"];')
        if rf[i] > min_prob:
            lines.append(f'  s{i} -> failure [label="{rf[i]:.3f}", color="#cf222e"];')
    s0, f0 = _start_exits(chain)
    if s0 or f0:  # episodes that end before any step: a start node with π0 and its direct exits
        lines.append('  start [shape=circle, label="start"];')
        lines += [f'  start -> s{j} [label="{pi0[j]:.3f}", style=dashed];' for j in range(len(names)) if pi0[j] > 0]
        if s0 > min_prob:
            lines.append(f'  start -> success [label="{s0:.3f}", color="#1a7f37", style=dashed];')
        if f0 > min_prob:
            lines.append(f'  start -> failure [label="{f0:.3f}", color="#cf222e", style=dashed];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(chain: dict[str, Any], min_prob: float = 0.0) -> str:
    """Mermaid flowchart (renders in GitHub Markdown)."""
    Q, rs, rf, pi0, names = _arrays(chain)

    def lab(text: str) -> str:
        return mermaid_label(text)

    lines = ["flowchart LR", '  success(["success"])', '  failure(["failure"])']
    lines += [f'  s{i}["{lab(n)}"]' for i, n in enumerate(names)]
    for i in range(len(names)):
        for j in range(len(names)):
            if Q[i, j] > min_prob:
                lines.append(f"  s{i} -->|{Q[i, j]:.3f}| s{j}")
        if rs[i] > min_prob:
            lines.append(f"  s{i} -->|{rs[i]:.3f}| success")
        if rf[i] > min_prob:
            lines.append(f"  s{i} -->|{rf[i]:.3f}| failure")
    s0, f0 = _start_exits(chain)
    if s0 or f0:  # episodes that end before any step: a start node with π0 and its direct exits
        lines.append("  start((start))")
        lines += [f"  start -.->|{pi0[j]:.3f}| s{j}" for j in range(len(names)) if pi0[j] > 0]
        if s0 > min_prob:
            lines.append(f"  start -.->|{s0:.3f}| success")
        if f0 > min_prob:
            lines.append(f"  start -.->|{f0:.3f}| failure")
    return "\n".join(lines) + "\n"


def to_prism(chain: dict[str, Any]) -> str:
    """PRISM DTMC model: s = 0..m−1 transient, m = success, m+1 = failure; labels "succ", "fail", "absorb".

    The initial distribution becomes a first step from an extra state m+2 (PRISM has one initial state), so
    properties should be read with one extra step: P=? [F<=d+1 "succ"] equals R(d). Episodes that end before any step
    (the start exits) go from m+2 straight to m or m+1, so P=? [F<=1 "succ"] equals R(0) = s. Floats are written with
    ``repr(float(x))`` (PRISM's parser rejects numpy's ``np.float64(...)`` reprs).
    """
    Q, rs, rf, pi0, names = _arrays(chain)
    m = len(names)
    lines = ["// tracetochain absorbing chain; states:"]
    lines += [f"//   {i}: {one_line(' '.join(n.split()))}" for i, n in enumerate(names)]
    lines += ["dtmc", "", "module agent", f"  s : [0..{m + 2}] init {m + 2};"]

    def update(probs: list[tuple[float, int]]) -> str:
        return " + ".join(f"{float(p)!r}:(s'={t})" for p, t in probs if p > 0)

    s0, f0 = _start_exits(chain)
    start = [(float(pi0[j]), j) for j in range(m)] + [(s0, m), (f0, m + 1)]
    lines.append(f"  [] s={m + 2} -> {update(start)};")
    for i in range(m):
        probs = [(float(Q[i, j]), j) for j in range(m)] + [(float(rs[i]), m), (float(rf[i]), m + 1)]
        lines.append(f"  [] s={i} -> {update(probs)};")
    lines += [f"  [] s={m} -> (s'={m});", f"  [] s={m + 1} -> (s'={m + 1});", "endmodule", "",
              f'label "succ" = s={m};', f'label "fail" = s={m + 1};', f'label "absorb" = s>={m} & s<={m + 1};', ""]
    return "\n".join(lines)
