"""How estimators and results show themselves: one number formatter, one table, one parameter repr, two bases.

Every result object (the reliability summary, the certificate, interval tables, per-state metrics, the analysis,
comparisons, costs) describes itself once, as a :class:`Display` — a title, a few sentences, labelled fields and
:class:`Table` s of *raw* values — and that one description is rendered three ways:

* ``str(result)`` — aligned plain text (numbers by :func:`fmt_number`);
* ``result._repr_html_()`` — the same content as HTML for notebooks, every piece of text escaped with
  :func:`html.escape` (state names, tool names and file names come from untrusted traces);
* ``result.to_frame(table)`` — the same table as a pandas (or polars) DataFrame of the raw, unrounded values,
  imported on first use with an install hint when missing.

So what a notebook shows, what the terminal prints and what a DataFrame holds cannot drift apart: they are one table.
Estimators (objects configured by their constructor and then ``fit``) get :class:`EstimatorDisplay`: ``get_params`` /
``set_params`` read the constructor's signature and ``repr`` prints every parameter.

How this compares with the libraries we studied, and why we differ where we do:

* **scikit-learn** (``BaseEstimator.get_params`` from the ``__init__`` signature; since 0.23 the repr prints only the
  parameters that differ from their defaults). We keep the signature-driven ``get_params``/``set_params`` but print
  *every* parameter: a reliability figure depends on the prior, the unvisited-row policy, the start rule and the seed,
  and defaults change between versions (this release moved the default prior from Laplace α = 1 to the episode
  prior). A changed-only repr of a notebook run under one version would read the same under another while meaning a
  different method; the full repr records the method. Long values are shortened with :mod:`reprlib` (a 60-state
  vocabulary does not flood the screen) and the repr wraps at 100 columns.
* **lifelines** (``fitter.summary`` is a DataFrame; ``print_summary`` formats it as text, HTML or LaTeX). We take the
  idea that one table feeds every format, and keep the raw values in the table: the DataFrame is not parsed back from
  rounded text, and printing never changes a number's meaning (a non-zero p-value is never shown as ``0.000``).
* **deeptime** (estimators ``fit`` and ``fetch_model``; models are plain objects with properties). We follow its
  estimator/model split (``ChainEstimator().fit(traces).fetch_model()``) and give the models and results the display
  layer deeptime leaves to the user.

The number rule (:func:`fmt_number`): undefined values (None, NaN, ±inf) print as ``—``, never ``nan``; numbers print
with ``digits`` decimals; a non-zero number below one unit of the last decimal prints in scientific notation
(p = 3.1e-05, not 0.000); magnitudes of 10⁶ and more use significant digits. Signed differences, intervals
(:func:`fmt_interval`) and amounts with a unit (:func:`fmt_amount`) are variants of the same rule.
"""

from __future__ import annotations

import html
import inspect
import math
import numbers
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

MISSING = "—"
#: Width at which a parameter repr wraps onto more lines.
REPR_WIDTH = 100
#: Rows of a table shown in text and HTML before the rest is summarised (the DataFrame always has every row).
MAX_ROWS = 60


# ---------------------------------------------------------------------------------------------------- numbers
def _finite(x: Any) -> float | None:
    if x is None or isinstance(x, bool) or not isinstance(x, numbers.Real):
        return None
    v = float(x)
    return v if math.isfinite(v) else None


def fmt_number(x: Any, digits: int = 3, *, signed: bool = False, missing: str = MISSING) -> str:
    """One number for a person to read (module docstring): ``digits`` decimals, ``missing`` when undefined.

    >>> fmt_number(0.625), fmt_number(0.625, 4), fmt_number(None), fmt_number(float("nan"))
    ('0.625', '0.6250', '—', '—')
    >>> fmt_number(3.1e-5), fmt_number(0.0), fmt_number(-0.0123, signed=True), fmt_number(0.0009)
    ('3.1e-05', '0.000', '-0.012', '9.0e-04')
    >>> fmt_number(2.5e7), fmt_number(12345.678, 1)
    ('2.500e+07', '12345.7')
    """
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, numbers.Integral):
        return f"{int(x):+d}" if signed else str(int(x))
    v = _finite(x)
    if v is None:
        return missing
    sign = "+" if signed else ""
    if v != 0.0 and abs(v) < 10.0 ** (-digits):
        return f"{v:{sign}.1e}"
    if abs(v) >= 1e6:
        return f"{v:{sign}.{max(digits, 3)}e}"
    return f"{v:{sign}.{digits}f}"


def fmt_interval(lower: Any, upper: Any, digits: int = 3, *, signed: bool = False) -> str:
    """``[lower, upper]``, or ``[no interval]`` when either end is undefined.

    >>> fmt_interval(0.5612, 0.6621), fmt_interval(None, 0.3), fmt_interval(-0.02, 0.05, signed=True)
    ('[0.561, 0.662]', '[no interval]', '[-0.020, +0.050]')
    """
    if _finite(lower) is None or _finite(upper) is None:
        return "[no interval]"
    return f"[{fmt_number(lower, digits, signed=signed)}, {fmt_number(upper, digits, signed=signed)}]"


def fmt_amount(x: Any, unit: str) -> str:
    """A cost with its unit: dollars to 4 significant digits, token and call counts whole, others 3 digits.

    >>> fmt_amount(0.45563, "USD"), fmt_amount(12345.4, "tokens"), fmt_amount(61.23, "s"), fmt_amount(None, "USD")
    ('$0.4556', '12,345 tokens', '61.2 s', '—')
    """
    v = _finite(x)
    if v is None:
        return MISSING
    if unit == "USD":
        return f"${v:.4g}" if abs(v) < 1000 else f"${v:,.0f}"
    if unit in ("tokens", "calls"):
        return f"{v:,.0f} {unit}" if abs(v) >= 100 else f"{v:.3g} {unit}"
    return f"{v:.3g} {unit}"


def fmt_cell(value: Any, digits: int = 3) -> str:
    """A table cell as text: numbers by :func:`fmt_number`, booleans as yes/no, sequences joined, None as ``—``."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Real):
        return fmt_number(value, digits)
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt_cell(v, digits) for v in value)
    return str(value)


# ---------------------------------------------------------------------------------------------------- tables
@dataclass(frozen=True)
class Table:
    """A table of raw values: rendered as text or HTML (rounded) or converted to a DataFrame (exact).

    ``name`` is what :meth:`ResultDisplay.to_frame` selects it by; ``digits`` the decimals shown per column (default
    3; a column missing from it uses ``default_digits``); a table with ``shown=False`` (say R(d) for d = 0..200) is
    left out of the text and HTML and only converted.
    """

    name: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    title: str = ""
    digits: Mapping[str, int] = field(default_factory=dict)
    default_digits: int = 3
    shown: bool = True

    def __post_init__(self) -> None:
        width = len(self.columns)
        for i, row in enumerate(self.rows):
            if len(row) != width:
                raise ValueError(f"table {self.name!r}: row {i} has {len(row)} cells for {width} columns")

    def cells(self, limit: int | None = MAX_ROWS) -> tuple[list[list[str]], int]:
        """Formatted cells of the first ``limit`` rows, and how many rows were left out."""
        shown = self.rows if limit is None else self.rows[:limit]
        d = [self.digits.get(c, self.default_digits) for c in self.columns]
        return [[fmt_cell(v, d[j]) for j, v in enumerate(row)] for row in shown], len(self.rows) - len(shown)

    def records(self) -> list[dict[str, Any]]:
        """One dict per row, raw values (what a DataFrame is built from)."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def text(self, indent: str = "  ", limit: int | None = MAX_ROWS) -> str:
        cells, more = self.cells(limit)
        width = [max([len(c), *(len(r[j]) for r in cells)]) for j, c in enumerate(self.columns)]
        numeric = [all(_finite(row[j]) is not None or row[j] is None for row in self.rows) and bool(self.rows)
                   for j in range(len(self.columns))]

        def line(values: Sequence[str]) -> str:
            return indent + "  ".join(v.rjust(w) if num else v.ljust(w)
                                      for v, w, num in zip(values, width, numeric, strict=True)).rstrip()

        out = [indent + self.title] if self.title else []
        out += [line(self.columns), *(line(r) for r in cells)]
        if more:
            out.append(f"{indent}… {more} more row{'s' if more != 1 else ''} (to_frame({self.name!r}) has them all)")
        return "\n".join(out)

    def html(self, limit: int | None = MAX_ROWS) -> str:
        cells, more = self.cells(limit)
        return html_table(self.columns, cells, title=self.title or None, more=more)


def html_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None,
               more: int = 0) -> str:
    """An HTML table with every header and cell escaped (cells that are not strings go through :func:`fmt_cell`).

    >>> html_table(["state", "p"], [["<script>", 0.5]])
    '<table><tr><th>state</th><th>p</th></tr><tr><td>&lt;script&gt;</td><td>0.500</td></tr></table>'
    """
    def esc(v: Any) -> str:
        return html.escape(v if isinstance(v, str) else fmt_cell(v))

    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>" for row in rows)
    cap = f"<b>{html.escape(title)}</b>" if title else ""
    tail = f"<p>… {more} more rows</p>" if more else ""
    return f"{cap}<table><tr>{head}</tr>{body}</table>{tail}"


# ---------------------------------------------------------------------------------------------------- display
@dataclass(frozen=True)
class Display:
    """What a result shows: a one-line ``title`` (after the ``kind`` of result, if given), ``lines`` of prose,
    labelled ``fields`` and ``tables``. The repr of a result is ``<ClassName: title>``."""

    title: str
    lines: tuple[str, ...] = ()
    fields: tuple[tuple[str, Any], ...] = ()
    tables: tuple[Table, ...] = ()
    #: Decimals of the fields' numbers.
    digits: int = 4
    kind: str = ""

    @property
    def heading(self) -> str:
        return f"{self.kind}: {self.title}" if self.kind else self.title

    def text(self) -> str:
        out = [self.heading, *self.lines]
        if self.fields:
            width = max(len(k) for k, _ in self.fields)
            out += [f"  {k.ljust(width)}  {fmt_cell(v, self.digits)}" for k, v in self.fields]
        for t in self.tables:
            if t.shown:
                out += ["", t.text()]
        return "\n".join(out)

    def html(self) -> str:
        parts = [f"<b>{html.escape(self.heading)}</b>"]
        parts += [f"<p>{html.escape(line)}</p>" for line in self.lines if line]
        if self.fields:
            body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(fmt_cell(v, self.digits))}</td></tr>"
                           for k, v in self.fields)
            parts.append(f"<table>{body}</table>")
        parts += [t.html() for t in self.tables if t.shown]
        return '<div class="tracetochain">' + "".join(parts) + "</div>"

    def all_tables(self) -> tuple[Table, ...]:
        """The tables, then the fields as a two-column table named ``"summary"`` (so every result converts)."""
        summary = Table("summary", ("quantity", "value"), self.fields, shown=False) if self.fields else None
        return self.tables + ((summary,) if summary is not None else ())

    def table(self, name: str | None) -> Table:
        tables = self.all_tables()
        if not tables:
            raise ValueError(f"{self.title!r} has no table to convert")
        if name is None:
            return tables[0]
        for t in tables:
            if t.name == name:
                return t
        raise ValueError(f"no table {name!r}; this result has {', '.join(repr(t.name) for t in tables)}")


def to_frame(records: list[dict[str, Any]], columns: Sequence[str], backend: str = "pandas") -> Any:
    """A pandas or polars DataFrame of ``records`` (imported on first use, with the extra to install if missing)."""
    from tracetochain._optional import require

    if backend == "pandas":
        pd = require("pandas", "to_frame (or pass backend='polars')")
        return pd.DataFrame.from_records(records, columns=list(columns))
    if backend == "polars":
        pl = require("polars", "to_frame(backend='polars')")
        return pl.DataFrame({c: [r[c] for r in records] for c in columns}, strict=False)
    raise ValueError(f"backend must be 'pandas' or 'polars', got {backend!r}")


class ResultDisplay:
    """Base of result objects: implement :meth:`_display`; ``str``, ``repr``, HTML and DataFrames follow from it.

    A subclass whose plain-text form is part of the command line's output may keep its own ``__str__``; the HTML and
    the DataFrames still come from :meth:`_display`.
    """

    def _display(self) -> Display:
        raise NotImplementedError(f"{type(self).__name__} must define _display() (the tables it shows itself as)")

    def __str__(self) -> str:
        return self._display().text()

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self._display().title}>"

    def _repr_html_(self) -> str:
        return self._display().html()

    def frame_names(self) -> tuple[str, ...]:
        """The tables :meth:`to_frame` can return, the default first."""
        return tuple(t.name for t in self._display().all_tables())

    def to_frame(self, table: str | None = None, *, backend: str = "pandas") -> Any:
        """One of the result's tables (default: the first, see :meth:`frame_names`) as a pandas DataFrame, or a
        polars one with ``backend="polars"``; values are exact, not the rounded ones printed."""
        t = self._display().table(table)
        return to_frame(t.records(), t.columns, backend)


# ---------------------------------------------------------------------------------------------------- estimators
_SHORT = reprlib.Repr()
_SHORT.maxlist = _SHORT.maxtuple = 8
_SHORT.maxdict = 6
_SHORT.maxstring = _SHORT.maxother = 80


def short_repr(value: Any) -> str:
    """``repr`` with long lists, dicts and strings shortened (:mod:`reprlib`); estimators keep their own repr."""
    if isinstance(value, EstimatorDisplay):
        return repr(value)
    return _SHORT.repr(value)


def params_repr(name: str, params: Mapping[str, Any], width: int = REPR_WIDTH) -> str:
    """``Name(a=1, b='x')``, wrapped under the opening parenthesis when longer than ``width``.

    >>> params_repr("ChainEstimator", {"pseudocount": None, "unvisited": "auto"})
    "ChainEstimator(pseudocount=None, unvisited='auto')"
    """
    pad = " " * (len(name) + 1)
    # A nested estimator's own wrapped lines are indented under its parameter name.
    def param(k: str, v: Any) -> str:
        indent = len(pad) + len(k) + 1
        text = (params_repr(type(v).__name__, v.get_params(), max(40, width - indent))
                if isinstance(v, EstimatorDisplay) else short_repr(v))
        return f"{k}=" + text.replace("\n", "\n" + " " * indent)

    items = [param(k, v) for k, v in params.items()]
    one = f"{name}({', '.join(items)})"
    if len(one) <= width and "\n" not in one:
        return one
    lines: list[str] = []
    current = ""
    for item in items:
        candidate = f"{current}, {item}" if current else item
        if current and ("\n" in current or "\n" in item or len(pad) + len(candidate) + 1 > width):
            lines.append(current + ",")
            current = item
        else:
            current = candidate
    lines.append(current)
    return f"{name}(" + ("\n" + pad).join(lines) + ")"


class EstimatorDisplay:
    """Base of estimators: parameters are the keyword arguments of ``__init__``, stored under the same names.

    ``get_params()`` returns them, ``set_params(**params)`` changes them (refit afterwards), ``repr`` prints all of
    them (module docstring says why all) and the notebook shows them as a table with the non-default ones marked.
    """

    _fitted_attributes: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _param_names(cls) -> tuple[str, ...]:
        sig = inspect.signature(cls.__init__)
        return tuple(p.name for p in sig.parameters.values()
                     if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))

    @classmethod
    def _param_defaults(cls) -> dict[str, Any]:
        sig = inspect.signature(cls.__init__)
        return {p.name: p.default for p in sig.parameters.values() if p.name in cls._param_names()}

    def get_params(self) -> dict[str, Any]:
        """The constructor's parameters and their current values, in signature order."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Any:
        """Set parameters by name (an unknown name is an error listing the known ones); returns the estimator."""
        known = self._param_names()
        for name, value in params.items():
            if name not in known:
                raise ValueError(f"{type(self).__name__} has no parameter {name!r}; its parameters are "
                                 f"{', '.join(known)}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        return params_repr(type(self).__name__, self.get_params())

    def _repr_html_(self) -> str:
        defaults = self._param_defaults()
        rows = []
        for name, value in self.get_params().items():
            default = defaults.get(name, inspect.Parameter.empty)
            changed = default is inspect.Parameter.empty or not _same(value, default)
            rows.append((name, short_repr(value), "set" if changed else "default"))
        return (f'<div class="tracetochain"><b>{html.escape(type(self).__name__)}</b>'
                + html_table(("parameter", "value", ""), rows) + "</div>")


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a is b or a == b)
    except Exception:  # arrays and other objects without a boolean ==
        return False
