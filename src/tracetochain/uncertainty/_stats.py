"""Result objects of the uncertainty layer: :class:`QuantityStats` (one quantity over an ensemble) and
:class:`EntryIntervals` (per-entry intervals of Q, R⊕, R⊖).

Both are frozen, print as one readable line (or a short block for arrays), render as HTML in notebooks and turn into
JSON-safe dicts (no NaN: an undefined value is ``None`` and the reason is recorded beside it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table, fmt_interval, fmt_number

Value = float | NDArray[np.float64]


def equal_tailed(confidence: float) -> tuple[float, float]:
    """Lower and upper quantile levels of an equal-tailed interval: ((1 − c)/2, (1 + c)/2)."""
    c = check_confidence(confidence)
    return (1.0 - c) / 2.0, (1.0 + c) / 2.0


#: Most pairs of draws :func:`difference_interval` takes per column (beyond it, a balanced subset of them).
MAX_DIFFERENCE_PAIRS = 4_000_000


def difference_interval(a: NDArray[np.float64], b: NDArray[np.float64], confidence: float
                        ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Equal-tailed interval of B − A from independent draws of A (``a``) and of B (``b``), per column.

    The draws of two independent sets are exchangeable within each set, so every pair (a_i, b_j) is a draw of the
    difference: the interval is taken over all n_a·n_b of them, not over the n pairs (a_i, b_i). The quantiles of
    the convolution then carry far less Monte Carlo noise than those of n paired differences (whose 2.5 % tail rests
    on about five draws at n = 200 and made compare's ΔR∞ interval call two samples of one agent different too often).
    Beyond :data:`MAX_DIFFERENCE_PAIRS` pairs the cyclic shifts b_{(i+s) mod n} − a_i for the first shifts s are used
    (each draw of either side used equally often). ``a`` and ``b`` are (n,) or (n, k); returns (lower, upper) of
    shape () or (k,).
    """
    lo_q, hi_q = equal_tailed(confidence)
    A, B = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scalar = A.ndim == 1
    A, B = (A[:, None], B[:, None]) if scalar else (A, B)
    A, B = A[np.isfinite(A).all(axis=1)], B[np.isfinite(B).all(axis=1)]
    if A.shape[0] == 0 or B.shape[0] == 0:
        raise ValueError("difference_interval needs at least one finite draw on each side; every draw of one side "
                         "is NaN or infinite (an undefined quantity on every draw): draw more samples or compare a "
                         "quantity that is defined on both sides")
    if A.shape[0] * B.shape[0] <= MAX_DIFFERENCE_PAIRS:
        def column(j: int) -> NDArray[np.float64]:
            out: NDArray[np.float64] = (B[None, :, j] - A[:, None, j]).ravel()
            return out
    else:
        n = min(A.shape[0], B.shape[0])
        shifts = max(1, MAX_DIFFERENCE_PAIRS // n)
        idx = (np.arange(n)[None, :] + np.arange(shifts)[:, None]) % n

        def column(j: int) -> NDArray[np.float64]:
            out: NDArray[np.float64] = (B[idx, j] - A[None, :n, j]).ravel()
            return out
    bounds = np.array([np.quantile(column(j), [lo_q, hi_q]) for j in range(A.shape[1])])
    lower, upper = bounds[:, 0], bounds[:, 1]
    return (lower[0], upper[0]) if scalar else (lower, upper)


def check_confidence(confidence: float) -> float:
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95 for a 95% interval; got {confidence!r}")
    return c


def _frozen(a: Any) -> Any:
    if a is None:
        return None
    if isinstance(a, (float, int, np.floating, np.integer)):
        return float(a)
    arr = np.array(a, dtype=np.float64, copy=True)
    if arr.ndim == 0:
        return float(arr)
    arr.setflags(write=False)
    return arr


def json_safe(x: Any) -> Any:
    """Floats, lists and dicts with every NaN/±inf replaced by ``None`` (JSON has no NaN)."""
    if x is None:
        return None
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, np.ndarray):
        return json_safe(x.tolist())
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return f if math.isfinite(f) else None
    return x


@dataclass(frozen=True, eq=False, repr=False)
class QuantityStats(ResultDisplay):
    """Summary of one quantity over an ensemble of chains (``ChainEnsemble.stats``).

    ``mean``, ``std`` (sample std, ddof = 1), ``lower`` and ``upper`` (equal-tailed percentile interval at
    ``confidence``) are taken over the ``n_samples`` draws on which the quantity is defined; ``point`` is the same
    quantity on the reference chain, produced by ``point_estimator``. Scalars are floats; array quantities (R(d) for
    d = 0..horizon, per-state vectors) are read-only arrays of equal shape, each element summarised independently
    (a band). Draws on which the quantity is undefined (e.g. success unreachable, so E[steps | success] has no value)
    are *excluded*, never NaN: ``n_excluded`` counts them and ``excluded`` gives the reasons. If every draw is
    excluded, ``mean``/``std``/``lower``/``upper`` are ``None``; if the quantity is undefined on the reference,
    ``point`` is ``None`` and ``point_undefined`` says why.
    """

    quantity: str
    mean: Value | None
    std: Value | None
    lower: Value | None
    upper: Value | None
    point: Value | None
    confidence: float
    method: str
    n_samples: int
    n_excluded: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    point_estimator: str = ""
    point_undefined: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    samples: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        for name in ("mean", "std", "lower", "upper", "point", "samples"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    # ------------------------------------------------------------------ access
    @property
    def shape(self) -> tuple[int, ...]:
        """() for a scalar quantity, else the shape of one draw."""
        ref = next((v for v in (self.point, self.mean) if v is not None), None)
        return () if ref is None or isinstance(ref, float) else tuple(np.shape(ref))

    @property
    def width(self) -> Value | None:
        """upper − lower."""
        if self.lower is None or self.upper is None:
            return None
        w = np.asarray(self.upper) - np.asarray(self.lower)
        return float(w) if w.ndim == 0 else w

    def element(self, index: int | tuple[int, ...]) -> QuantityStats:
        """The statistics of one element of an array quantity (e.g. R(d) at one d, or one state's value).

        Exact, not an approximation: every element is summarised independently over the same draws.
        """
        if self.point is None and self.mean is None:
            # Undefined on the reference and on every draw (e.g. failure attribution when no draw can fail): every
            # element is undefined too, for the same reasons.
            return QuantityStats(f"{self.quantity}[{index}]", None, None, None, None, None, self.confidence,
                                 self.method, self.n_samples, self.n_excluded, dict(self.excluded),
                                 self.point_estimator, self.point_undefined, dict(self.parameters), None)
        if self.shape == ():
            raise TypeError(f"{self.quantity} is a scalar quantity; it has no elements")

        def pick(v: Any) -> Any:
            return None if v is None else float(np.asarray(v)[index])

        samples = None if self.samples is None else np.asarray(self.samples)[(slice(None), *np.atleast_1d(index))]
        return QuantityStats(f"{self.quantity}[{index}]", pick(self.mean), pick(self.std), pick(self.lower),
                             pick(self.upper), pick(self.point), self.confidence, self.method, self.n_samples,
                             self.n_excluded, dict(self.excluded), self.point_estimator, self.point_undefined,
                             dict(self.parameters), samples)

    # ------------------------------------------------------------------ output
    def to_dict(self, *, include_samples: bool = False) -> dict[str, Any]:
        """JSON-ready: lists for arrays, ``None`` for undefined values (never NaN)."""
        out: dict[str, Any] = {
            "quantity": self.quantity,
            "parameters": json_safe(self.parameters),
            "point": json_safe(self.point),
            "mean": json_safe(self.mean),
            "std": json_safe(self.std),
            "lower": json_safe(self.lower),
            "upper": json_safe(self.upper),
            "confidence": self.confidence,
            "method": self.method,
            "n_samples": self.n_samples,
            "n_excluded": self.n_excluded,
            "excluded": dict(self.excluded),
            "point_estimator": self.point_estimator,
            "point_undefined": self.point_undefined,
        }
        if include_samples:
            out["samples"] = json_safe(self.samples)
        return out

    def _tail(self) -> str:
        extra = f", {self.n_excluded} excluded" if self.n_excluded else ""
        return f"({self.confidence:.0%}, {self.method}, {self.n_samples} draws{extra})"

    def _line(self, point: float | None, mean: float | None, lo: float | None, hi: float | None) -> str:
        return f"{fmt_number(point if point is not None else mean)} {fmt_interval(lo, hi)}"

    def __str__(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.parameters.items())
        label = f"{self.quantity}({params})" if params else self.quantity
        if self.shape == ():
            return f"{self._line(self.point, self.mean, self.lower, self.upper)} {self._tail()}"  # type: ignore[arg-type]
        n = int(np.prod(self.shape))
        lines = [f"{label}: {n} values, point [lower, upper] {self._tail()}"]
        flat = [None if v is None else np.asarray(v).reshape(-1) for v in (self.point, self.mean, self.lower,
                                                                           self.upper)]
        show = list(range(n)) if n <= 12 else [*range(6), *range(n - 3, n)]
        for j, idx in enumerate(show):
            if n > 12 and j == 6:
                lines.append("  …")
            vals = [None if v is None else float(v[idx]) for v in flat]
            where = np.unravel_index(idx, self.shape)
            key = ",".join(str(int(w)) for w in where)
            lines.append(f"  [{key}] {self._line(*vals)}")
        return "\n".join(lines)

    def _display(self) -> Display:
        params = ", ".join(f"{k}={v}" for k, v in self.parameters.items())
        title = f"{self.quantity}({params}) {self._tail()}" if params else f"{self.quantity} {self._tail()}"
        columns = ("index", "point", "mean", "std", "lower", "upper")
        if self.shape == ():
            values = (self.point, self.mean, self.std, self.lower, self.upper)
            return Display(title, fields=tuple(zip(columns[1:], values, strict=True)),
                           tables=(Table("values", columns[1:], (values,), shown=False),))
        flat = [None if v is None else np.asarray(v).reshape(-1) for v in (self.point, self.mean, self.std,
                                                                           self.lower, self.upper)]
        n = int(np.prod(self.shape))
        index: list[Any] = (list(range(n)) if len(self.shape) == 1 else
                            [",".join(str(int(w)) for w in np.unravel_index(i, self.shape)) for i in range(n)])
        rows = tuple((index[i], *(None if v is None else float(v[i]) for v in flat)) for i in range(n))
        return Display(title, tables=(Table("values", columns, rows),))

    def __repr__(self) -> str:
        return f"<QuantityStats {self._display().title}>"


@dataclass(frozen=True, eq=False, repr=False)
class EntryIntervals(ResultDisplay):
    """Per-entry intervals of Q (m × m), R⊕ and R⊖ (m each).

    ``method`` is ``"beta"`` (closed-form Beta marginals of the Dirichlet posterior: entry j of row i is
    Beta(x_ij + a_ij, c_i + Σa_i − x_ij − a_ij)) or ``"percentile"`` (percentiles of an ensemble, e.g. the trace
    bootstrap). ``*_center`` is the posterior mean (Beta) or the ensemble mean (percentile). These are marginal
    intervals: never combine their endpoints into intervals of derived quantities — the row constraints couple the
    entries; use ``ChainEnsemble.stats``, which propagates whole chains.
    """

    state_names: tuple[str, ...]
    Q_lower: NDArray[np.float64]
    Q_upper: NDArray[np.float64]
    R_success_lower: NDArray[np.float64]
    R_success_upper: NDArray[np.float64]
    R_failure_lower: NDArray[np.float64]
    R_failure_upper: NDArray[np.float64]
    Q_center: NDArray[np.float64]
    R_success_center: NDArray[np.float64]
    R_failure_center: NDArray[np.float64]
    confidence: float
    method: str
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("Q_lower", "Q_upper", "R_success_lower", "R_success_upper", "R_failure_lower",
                     "R_failure_upper", "Q_center", "R_success_center", "R_failure_center"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    @property
    def n_states(self) -> int:
        return len(self.state_names)

    def widths(self) -> dict[str, NDArray[np.float64]]:
        """upper − lower for Q, R_success and R_failure."""
        return {"Q": self.Q_upper - self.Q_lower, "R_success": self.R_success_upper - self.R_success_lower,
                "R_failure": self.R_failure_upper - self.R_failure_lower}

    def width_summary(self, which: str = "Q") -> dict[str, float]:
        """min / median / max width over the entries of ``which`` (the statistics of Tran-Truong & Le 2026, Table III).
        """
        w = self.widths()[which].reshape(-1)
        return {"min": float(w.min()), "median": float(np.median(w)), "max": float(w.max())}

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "confidence": self.confidence,
            "source": self.source,
            "state_names": list(self.state_names),
            "Q": {"center": json_safe(self.Q_center), "lower": json_safe(self.Q_lower),
                  "upper": json_safe(self.Q_upper)},
            "R_success": {"center": json_safe(self.R_success_center), "lower": json_safe(self.R_success_lower),
                          "upper": json_safe(self.R_success_upper)},
            "R_failure": {"center": json_safe(self.R_failure_center), "lower": json_safe(self.R_failure_lower),
                          "upper": json_safe(self.R_failure_upper)},
        }

    def _display(self) -> Display:
        w = self.width_summary("Q")
        title = (f"{self.confidence:.0%} {self.method} intervals ({self.source or 'per entry'}); Q widths min "
                 f"{fmt_number(w['min'])}, median {fmt_number(w['median'])}, max {fmt_number(w['max'])}")
        exits = tuple((name, float(self.R_success_center[i]), float(self.R_success_lower[i]),
                       float(self.R_success_upper[i]), float(self.R_failure_center[i]), float(self.R_failure_lower[i]),
                       float(self.R_failure_upper[i])) for i, name in enumerate(self.state_names))
        q = tuple((a, b, float(self.Q_center[i, j]), float(self.Q_lower[i, j]), float(self.Q_upper[i, j]))
                  for i, a in enumerate(self.state_names) for j, b in enumerate(self.state_names))
        return Display(title, tables=(
            Table("exits", ("state", "R⊕", "R⊕ lower", "R⊕ upper", "R⊖", "R⊖ lower", "R⊖ upper"), exits),
            Table("Q", ("from", "to", "center", "lower", "upper"), q, shown=False)))
