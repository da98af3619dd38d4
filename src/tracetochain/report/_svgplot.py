"""A small, dependency-free SVG chart: the report's figures when matplotlib (the ``plots`` extra) is not installed.

Lines, post-steps, bars, shaded bands, horizontal reference lines and hollow markers on linear axes with "nice"
ticks (steps of 1, 2 or 5 × 10^k) and a legend. Every piece of text is XML-escaped, and non-finite values are
skipped, so the output can be inlined in HTML as it is. Coordinates are rounded to 0.1 px, which keeps the output
deterministic and small.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

_W, _H = 720, 360
_LEFT, _RIGHT, _TOP, _BOTTOM = 60, 16, 28, 44
_FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12"'


def nice_ticks(lo: float, hi: float, target: int = 6, *, integer: bool = False) -> list[float]:
    """Round tick values covering [lo, hi]: a step of 1, 2 or 5 × 10^k giving about ``target`` ticks; with
    ``integer`` the step is at least 1 (an axis of counts or steps has no ticks between whole numbers)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else [0.0]
    raw = (hi - lo) / max(target - 1, 1)
    if integer:
        raw = max(raw, 1.0)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks, t = [], first
    while t <= hi + step * 1e-9:
        ticks.append(0.0 if abs(t) < step * 1e-9 else t)
        t += step
    return ticks


def _fmt(v: float) -> str:
    return f"{v:.1f}"


def _label(v: float) -> str:
    return f"{v:g}"


class Chart:
    """Collects series, then renders them with :meth:`svg`."""

    def __init__(self, *, xlabel: str, ylabel: str, ylim: tuple[float, float] | None = None,
                 xlim: tuple[float, float] | None = None, title: str | None = None, title_color: str = "#9a6700",
                 legend: str = "lower right", integer_x: bool = False, integer_y: bool = False,
                 note: str | None = None) -> None:
        self.xlabel, self.ylabel, self.ylim, self.xlim = xlabel, ylabel, ylim, xlim
        self.title, self.title_color, self.legend = title, title_color, legend
        self.integer_x, self.integer_y = integer_x, integer_y
        #: Said in the middle of the plot when it has nothing to show (e.g. no successful trace).
        self.note = note
        self._items: list[tuple[str, dict[str, object]]] = []

    # -------------------------------------------------------------------- series
    def band(self, x: Sequence[float], lower: Sequence[float], upper: Sequence[float], *, color: str,
             label: str | None = None) -> None:
        self._items.append(("band", {"x": list(x), "lo": list(lower), "hi": list(upper), "color": color,
                                     "label": label}))

    def line(self, x: Sequence[float], y: Sequence[float], *, color: str, label: str | None = None,
             dash: bool = False, markers: bool = False) -> None:
        self._items.append(("line", {"x": list(x), "y": list(y), "color": color, "label": label, "dash": dash,
                                     "markers": markers}))

    def step(self, x: Sequence[float], y: Sequence[float], *, color: str, label: str | None = None) -> None:
        """A post-step curve: y[i] holds from x[i] to x[i + 1]."""
        xs: list[float] = []
        ys: list[float] = []
        for i, (a, b) in enumerate(zip(x, y, strict=True)):
            if i:
                xs.append(a)
                ys.append(ys[-1])
            xs.append(a)
            ys.append(b)
        self._items.append(("line", {"x": xs, "y": ys, "color": color, "label": label, "dash": False,
                                     "markers": False}))

    def bars(self, x: Sequence[float], heights: Sequence[float], *, color: str, label: str | None = None) -> None:
        """Bars of width 1 starting at each x (matplotlib's ``align="edge"``)."""
        self._items.append(("bars", {"x": list(x), "h": list(heights), "color": color, "label": label}))

    def hline(self, y: float, *, color: str, label: str | None = None) -> None:
        self._items.append(("hline", {"y": y, "color": color, "label": label}))

    def rings(self, x: Sequence[float], y: Sequence[float], *, color: str, label: str | None = None) -> None:
        """Hollow circles, e.g. to mark alerts."""
        self._items.append(("rings", {"x": list(x), "y": list(y), "color": color, "label": label}))

    # -------------------------------------------------------------------- render
    def _extent(self) -> tuple[float, float, float, float]:
        xs: list[float] = []
        ys: list[float] = [0.0]
        for kind, it in self._items:
            if kind == "band":
                xs += it["x"]  # type: ignore[arg-type]
                ys += it["lo"] + it["hi"]  # type: ignore[operator]
            elif kind in ("line", "rings"):
                xs += it["x"]  # type: ignore[arg-type]
                ys += it["y"]  # type: ignore[arg-type]
            elif kind == "bars":
                xs += it["x"] + [v + 1 for v in it["x"]]  # type: ignore[operator, attr-defined]
                ys += it["h"]  # type: ignore[arg-type]
            elif kind == "hline":
                ys.append(it["y"])  # type: ignore[arg-type]
        xs = [float(v) for v in xs if v is not None and math.isfinite(v)] or [0.0, 1.0]
        ys = [float(v) for v in ys if v is not None and math.isfinite(v)]
        x0, x1 = self.xlim if self.xlim else (min(xs), max(xs))
        y0, y1 = self.ylim if self.ylim else (min(ys), max(ys) * 1.05 if max(ys) > 0 else 1.0)
        if x1 <= x0:
            x1 = x0 + 1
        if y1 <= y0:
            y1 = y0 + 1
        return x0, x1, y0, y1

    def svg(self) -> str:
        x0, x1, y0, y1 = self._extent()
        pw, ph = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

        def px(v: float) -> float:
            return _LEFT + (min(max(v, x0), x1) - x0) / (x1 - x0) * pw

        def py(v: float) -> float:
            return _TOP + ph - (min(max(v, y0), y1) - y0) / (y1 - y0) * ph

        def finite(*vals: object) -> bool:
            return all(isinstance(v, int | float) and math.isfinite(v) for v in vals)

        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" '
               f'role="img" {_FONT}>']
        if self.title:
            out.append(f'<text x="{_LEFT}" y="16" fill="{self.title_color}">{escape(self.title)}</text>')
        # axes, ticks and grid
        for t in nice_ticks(y0, y1, 6, integer=self.integer_y):
            y = _fmt(py(t))
            out.append(f'<line x1="{_LEFT}" y1="{y}" x2="{_W - _RIGHT}" y2="{y}" stroke="#eaeef2"/>')
            out.append(f'<text x="{_LEFT - 6}" y="{y}" text-anchor="end" dominant-baseline="middle" '
                       f'fill="#57606a">{escape(_label(t))}</text>')
        for t in nice_ticks(x0, x1, 8, integer=self.integer_x):
            x = _fmt(px(t))
            out.append(f'<line x1="{x}" y1="{_TOP + ph}" x2="{x}" y2="{_TOP + ph + 4}" stroke="#57606a"/>')
            out.append(f'<text x="{x}" y="{_TOP + ph + 16}" text-anchor="middle" fill="#57606a">'
                       f'{escape(_label(t))}</text>')
        out.append(f'<path d="M{_LEFT},{_TOP} V{_TOP + ph} H{_W - _RIGHT}" fill="none" stroke="#57606a"/>')
        if self.note:
            out.append(f'<text x="{_LEFT + pw / 2:.1f}" y="{_TOP + ph / 2:.1f}" text-anchor="middle" '
                       f'fill="#57606a" class="empty-note">{escape(self.note)}</text>')
        out.append(f'<text x="{_LEFT + pw / 2:.1f}" y="{_H - 8}" text-anchor="middle">{escape(self.xlabel)}</text>')
        out.append(f'<text transform="translate(14,{_TOP + ph / 2:.1f}) rotate(-90)" text-anchor="middle">'
                   f'{escape(self.ylabel)}</text>')
        legend: list[tuple[str, str, str]] = []
        for kind, it in self._items:
            color = str(it["color"])
            if kind == "band":
                pts = [(a, b, c) for a, b, c in zip(it["x"], it["lo"], it["hi"], strict=True)  # type: ignore[call-overload]
                       if finite(a, b, c)]
                if pts:
                    upper = " ".join(f"{_fmt(px(a))},{_fmt(py(c))}" for a, _, c in pts)
                    lower = " ".join(f"{_fmt(px(a))},{_fmt(py(b))}" for a, b, _ in reversed(pts))
                    out.append(f'<polygon points="{upper} {lower}" fill="{color}" fill-opacity="0.18"/>')
            elif kind == "line":
                pts2 = [(a, b) for a, b in zip(it["x"], it["y"], strict=True) if finite(a, b)]  # type: ignore[call-overload]
                if pts2:
                    d = " ".join(f"{_fmt(px(a))},{_fmt(py(b))}" for a, b in pts2)
                    dash = ' stroke-dasharray="2,3"' if it["dash"] else ""
                    out.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="1.6"{dash}/>')
                    if it["markers"]:
                        out += [f'<circle cx="{_fmt(px(a))}" cy="{_fmt(py(b))}" r="3" fill="{color}"/>'
                                for a, b in pts2]
            elif kind == "bars":
                for a, h in zip(it["x"], it["h"], strict=True):  # type: ignore[call-overload]
                    if finite(a, h) and h > 0:
                        top, left = py(h), px(a)
                        out.append(f'<rect x="{_fmt(left)}" y="{_fmt(top)}" width="{_fmt(px(a + 1) - left)}" '
                                   f'height="{_fmt(py(y0) - top)}" fill="{color}" fill-opacity="0.55"/>')
            elif kind == "hline":
                if finite(it["y"]):
                    y = _fmt(py(float(it["y"])))  # type: ignore[arg-type]
                    out.append(f'<line x1="{_LEFT}" y1="{y}" x2="{_W - _RIGHT}" y2="{y}" stroke="{color}" '
                               'stroke-dasharray="2,3"/>')
            elif kind == "rings":
                out += [f'<circle cx="{_fmt(px(a))}" cy="{_fmt(py(b))}" r="7" fill="none" stroke="{color}" '
                        'stroke-width="2"/>' for a, b in zip(it["x"], it["y"], strict=True) if finite(a, b)]  # type: ignore[call-overload]
            if it.get("label"):
                legend.append(("hline" if it.get("dash") else kind, color, str(it["label"])))
        if legend:
            right = self.legend.endswith("right")
            top = self.legend.startswith("upper")
            lx = _W - _RIGHT - 190 if right else _LEFT + 12
            ly = _TOP + 10 if top else _TOP + ph - 18 * len(legend) - 4
            for i, (kind, color, label) in enumerate(legend):
                row = ly + 18 * i
                if kind in ("band", "bars"):
                    out.append(f'<rect x="{lx}" y="{row - 5}" width="18" height="10" fill="{color}" '
                               'fill-opacity="0.4"/>')
                elif kind == "rings":
                    out.append(f'<circle cx="{lx + 9}" cy="{row}" r="5" fill="none" stroke="{color}" '
                               'stroke-width="2"/>')
                else:
                    dash = ' stroke-dasharray="2,3"' if kind == "hline" else ""
                    out.append(f'<line x1="{lx}" y1="{row}" x2="{lx + 18}" y2="{row}" stroke="{color}" '
                               f'stroke-width="1.6"{dash}/>')
                out.append(f'<text x="{lx + 24}" y="{row}" dominant-baseline="middle">{escape(label)}</text>')
        out.append("</svg>")
        return "".join(out)
