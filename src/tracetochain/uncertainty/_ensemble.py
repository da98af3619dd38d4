"""ChainEnsemble: many plausible chains (posterior draws or bootstrap refits) and one statistics call for all of them.

``ensemble.stats(quantity, **kwargs)`` evaluates a quantity on every draw and returns a :class:`QuantityStats`
(mean, std, equal-tailed percentile interval, the value on the reference chain, optionally the samples) — the
deeptime ``gather_stats`` pattern. Intervals are percentiles of the *propagated* draws, never combinations of
per-entry endpoints: the row constraints couple the entries.

Built-in quantity names are computed for all draws at once by batched numpy (:mod:`._batched`); any callable
``chain -> float | array`` also works (evaluated on one :class:`~tracetochain.AbsorbingChain` per draw), which is how
what-if deltas plug in: ``ensemble.stats(lambda c: fallback(c).r_inf - c.r_inf)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table
from tracetochain.chain import AbsorbingChain
from tracetochain.exceptions import ChainValidationError, UndefinedMetricError
from tracetochain.numerics.batched import ChainBatch
from tracetochain.numerics.shared import ROW_SUM_ATOL
from tracetochain.quantities import HEADLINE_QUANTITIES, QUANTITIES, Quantity
from tracetochain.uncertainty._stats import EntryIntervals, QuantityStats, check_confidence, equal_tailed

#: The built-in quantities: the registry (:mod:`tracetochain.quantities`), one table for every consumer.
BUILTINS: dict[str, Quantity] = QUANTITIES


# ---------------------------------------------------------------------------------------------------- ensemble
def _frozen(a: Any) -> NDArray[np.float64]:
    """A read-only C-contiguous copy with the (already checked, ≥ −1e-9) negative rounding noise clipped to 0."""
    arr = np.array(a, dtype=np.float64, copy=True, order="C")
    np.clip(arr, 0.0, None, out=arr)
    arr.setflags(write=False)
    return arr


def _describe_estimator(chain: AbsorbingChain) -> str:
    md = chain.metadata
    if "estimator" not in md:
        return "the reference chain as given"
    parts = [f"{k}={md[k]!r}" for k in ("pseudocount", "unvisited_policy", "initial") if k in md]
    return f"{md['estimator']}({', '.join(parts)}) on all the data"


@dataclass(frozen=True, eq=False)
class ChainEnsemble(ResultDisplay):
    """B chains over the same states as ``reference``: posterior draws or bootstrap refits.

    Parameters
    ----------
    reference : AbsorbingChain
        The point estimate (every :class:`QuantityStats` reports the quantity on it as ``point``).
    samples : list of AbsorbingChain, or a mapping of stacked arrays
        Either chains with the reference's state names, or ``{"Q": (B, m, m), "R_success": (B, m),
        "R_failure": (B, m), "pi0": (B, m) or (m,), "start_exits": (B, 2) or (2,)}`` (``pi0`` and ``start_exits``
        default to the reference's; ``start_exits`` to none when ``pi0`` is given). Every row must sum to 1, and π0
        with the start exits too (to 1e-9); draws need not be absorbing — those that are not are excluded from
        derived quantities and counted.
    method : str
        How the samples were made ("posterior", "bootstrap", "bootstrap-full", …), printed with every interval.
    confidence : float, default 0.95
        Default level of the equal-tailed percentile intervals of :meth:`stats`.
    seed : int, optional
        The seed the samples were drawn with (recorded, for reproduction).
    info : dict, optional
        Provenance (settings of the posterior or bootstrap). ``info["point_estimator"]`` overrides the description of
        how the reference was estimated.

    Examples
    --------
    >>> import tracetochain as tt
    >>> from tracetochain.uncertainty import DirichletPosterior
    >>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 200, seed=1)
    >>> chain = tt.ChainEstimator().fit(traces).fetch_model()
    >>> ens = DirichletPosterior(samples=500, seed=0).fit(chain).fetch_model().ensemble
    >>> s = ens.stats("r_inf")
    >>> s.lower < s.point < s.upper
    True
    >>> ens.stats("reliability", horizon=10).upper.shape
    (11,)
    """

    reference: AbsorbingChain
    Q: NDArray[np.float64]
    R_success: NDArray[np.float64]
    R_failure: NDArray[np.float64]
    pi0: NDArray[np.float64]
    start_exits: NDArray[np.float64]
    method: str
    confidence: float
    seed: int | None
    info: dict[str, Any]
    #: Per-quantity design effects (``uncertainty._design``): draws of R∞, pass^k, R(d) and mean steps are stretched
    #: by √(d_θ / d₀) in :meth:`stats`; None: every quantity keeps the draws' own spread.
    design: Any = None

    def __init__(self, reference: AbsorbingChain, samples: Sequence[AbsorbingChain] | Mapping[str, Any], *,
                 method: str = "custom", confidence: float = 0.95, seed: int | None = None,
                 info: dict[str, Any] | None = None) -> None:
        if not isinstance(reference, AbsorbingChain):
            raise TypeError(f"reference must be an AbsorbingChain, got {type(reference).__name__}")
        m = reference.n_states
        if isinstance(samples, Mapping):
            try:
                Q = np.asarray(samples["Q"], dtype=np.float64)
                rs = np.asarray(samples["R_success"], dtype=np.float64)
                rf = np.asarray(samples["R_failure"], dtype=np.float64)
            except KeyError as exc:
                raise ValueError(f"stacked samples need the key {exc.args[0]!r} (Q, R_success, R_failure and "
                                 "optionally pi0)") from None
            pi = np.asarray(samples.get("pi0", reference.pi0), dtype=np.float64)
            default_exits = reference.start_exits if "pi0" not in samples else np.zeros(2)
            exits = np.asarray(samples.get("start_exits", default_exits), dtype=np.float64)
        else:
            chains = list(samples)
            for i, c in enumerate(chains):
                if not isinstance(c, AbsorbingChain):
                    raise TypeError(f"sample {i} is a {type(c).__name__}, not an AbsorbingChain")
                if c.state_names != reference.state_names:
                    raise ChainValidationError(f"sample {i} has states {list(c.state_names)}, the reference "
                                               f"{list(reference.state_names)}; align the states first")
            Q = np.stack([c.Q for c in chains]) if chains else np.zeros((0, m, m))
            rs = np.stack([c.R_success for c in chains]) if chains else np.zeros((0, m))
            rf = np.stack([c.R_failure for c in chains]) if chains else np.zeros((0, m))
            pi = np.stack([c.pi0 for c in chains]) if chains else np.zeros((0, m))
            exits = np.stack([c.start_exits for c in chains]) if chains else np.zeros((0, 2))
        B = Q.shape[0] if Q.ndim == 3 else -1
        if Q.shape != (B, m, m) or rs.shape != (B, m) or rf.shape != (B, m):
            raise ChainValidationError(f"stacked samples must have shapes Q (B, {m}, {m}), R_success and R_failure "
                                       f"(B, {m}); got {Q.shape}, {rs.shape}, {rf.shape}")
        if B == 0:
            raise ValueError("an ensemble needs at least one sample")
        if pi.shape == (m,):
            pi = np.broadcast_to(pi, (B, m))
        if pi.shape != (B, m):
            raise ChainValidationError(f"pi0 must have shape ({m},) or ({B}, {m}), got {pi.shape}")
        if exits.shape == (2,):
            exits = np.broadcast_to(exits, (B, 2))
        if exits.shape != (B, 2):
            raise ChainValidationError(f"start_exits must have shape (2,) or ({B}, 2), got {exits.shape}")
        _check_stacked(Q, rs, rf, pi, exits)
        object.__setattr__(self, "reference", reference)
        object.__setattr__(self, "Q", _frozen(Q))
        object.__setattr__(self, "R_success", _frozen(rs))
        object.__setattr__(self, "R_failure", _frozen(rf))
        object.__setattr__(self, "pi0", _frozen(pi))
        object.__setattr__(self, "start_exits", _frozen(exits))
        object.__setattr__(self, "method", str(method))
        object.__setattr__(self, "confidence", check_confidence(confidence))
        object.__setattr__(self, "seed", seed)
        object.__setattr__(self, "info", dict(info or {}))

    # ------------------------------------------------------------------ basics
    @property
    def n_samples(self) -> int:
        """Number of draws B."""
        return int(self.Q.shape[0])

    def __len__(self) -> int:
        return self.n_samples

    @property
    def n_states(self) -> int:
        return self.reference.n_states

    @property
    def state_names(self) -> tuple[str, ...]:
        return self.reference.state_names

    @property
    def point_estimator(self) -> str:
        """How the reference (point) chain was estimated, e.g. ``ChainEstimator(pseudocount=1.0, …) on all the
        data``."""
        return str(self.info.get("point_estimator") or _describe_estimator(self.reference))

    @staticmethod
    def quantities() -> dict[str, str]:
        """Built-in quantity names → what they are (any callable ``chain -> value`` works too)."""
        return {name: spec.doc + (f" [{', '.join(spec.params)}]" if spec.params else "")
                for name, spec in BUILTINS.items()}

    def chain(self, i: int) -> AbsorbingChain:
        """Draw ``i`` as an :class:`AbsorbingChain` (raises ``NonAbsorbingError`` if it is not one)."""
        if not -self.n_samples <= i < self.n_samples:
            raise IndexError(f"draw {i} out of range for {self.n_samples} draws")
        return AbsorbingChain(self.Q[i], self.R_success[i], self.R_failure[i], self.pi0[i], self.state_names,
                              {"ensemble_method": self.method, "draw": int(i) % self.n_samples}, self.start_exits[i])

    @cached_property
    def _batch(self) -> ChainBatch:
        return ChainBatch(self.Q, self.R_success, self.R_failure, self.pi0,
                          self.start_exits if self.start_exits.any() else None)

    @property
    def batch(self) -> ChainBatch:
        """The draws as one :class:`~tracetochain.numerics.batched.ChainBatch` (stacked arrays with cached
        batched solves: ``h``, ``g``, ``z``, ``valid``), for quantities computed outside :meth:`stats` (e.g.
        costs, which need per-draw cost vectors besides the chains)."""
        return self._batch

    # ------------------------------------------------------------------ statistics
    def stats(self, quantity: str | Callable[..., Any], *, confidence: float | None = None,
              return_samples: bool = False, **kwargs: Any) -> QuantityStats:
        """Mean, std and equal-tailed percentile interval of ``quantity`` over the draws, plus its point value.

        Parameters
        ----------
        quantity : str or callable
            A built-in name (see :meth:`quantities`: ``"r_inf"``, ``"reliability"`` with ``horizon=``,
            ``"pass_hat_k"`` with ``k=``, ``"mean_steps_given_success"``, ``"failure_attribution"``, …) computed for
            all draws at once, or any function ``chain -> float | array`` evaluated on each draw's
            :class:`AbsorbingChain` (``kwargs`` are passed to it).
        confidence : float, optional
            Interval level (default: the ensemble's).
        return_samples : bool, default False
            Keep the per-draw values (of the draws used) in ``QuantityStats.samples``.

        Draws on which the quantity is undefined — not an absorbing chain, success unreachable for a
        success-conditional quantity, a callable raising ``UndefinedMetricError`` — are excluded and counted by
        reason; the result never contains NaN.
        """
        level = self.confidence if confidence is None else check_confidence(confidence)
        reasons: dict[str, int] = {}
        if isinstance(quantity, str):
            if quantity not in BUILTINS:
                raise ValueError(f"unknown quantity {quantity!r}; built-in quantities are {sorted(BUILTINS)} "
                                 "(or pass a function chain -> value)")
            spec = BUILTINS[quantity]
            params = spec.bind(kwargs)
            batch = self._batch
            values, defined, why = spec.batched(batch, params)
            keep = np.ones(self.n_samples, dtype=bool)
            if spec.chain_only:
                keep &= batch.valid if spec.needs_solve else batch.absorbing
                for reason, n in (batch.invalid_reasons if spec.needs_solve else batch.structure_reasons).items():
                    reasons[reason] = reasons.get(reason, 0) + n
            if defined is not None:
                lost = keep & ~defined
                if lost.any():
                    reasons[why] = reasons.get(why, 0) + int(lost.sum())
                keep &= defined
            values = np.asarray(values, dtype=np.float64)
            if self.design is not None:
                values = self._stretched(quantity, params, values, keep)
            point, point_why = _point(lambda: spec.on_chain(self.reference, params))
            name = quantity
        elif callable(quantity):
            params = dict(kwargs)
            values, keep, reasons = self._evaluate_callable(quantity, params)
            point, point_why = _point(lambda: quantity(self.reference, **params))
            name = getattr(quantity, "__name__", "quantity")
        else:
            raise TypeError(f"quantity must be a name or a callable chain -> value, got {type(quantity).__name__}")
        finite = np.isfinite(values.reshape(values.shape[0], -1)).all(axis=1) if values.size else keep
        bad = keep & ~finite
        if bad.any():
            reasons["non-finite value"] = reasons.get("non-finite value", 0) + int(bad.sum())
            keep &= finite
        used = values[keep]
        lo_q, hi_q = equal_tailed(level)
        n = int(used.shape[0])
        if n:
            mean = used.mean(axis=0)
            std = used.std(axis=0, ddof=1) if n > 1 else np.zeros_like(mean)
            lower, upper = np.quantile(used, [lo_q, hi_q], axis=0)
        else:
            mean = std = lower = upper = None
        shown = {k: (list(v) if isinstance(v, (list, tuple, np.ndarray)) else v) for k, v in params.items()}
        return QuantityStats(name, mean, std, lower, upper, point, level, self.method, n,
                             self.n_samples - n, reasons, self.point_estimator, point_why, shown,
                             used if return_samples else None)

    def with_design(self, design: Any) -> ChainEnsemble:
        """This ensemble with per-quantity design effects (a :class:`~tracetochain.uncertainty._design.
        QuantityDesign`, or None to drop them); the design effects are recorded in ``info``."""
        out = ChainEnsemble(self.reference, {"Q": self.Q, "R_success": self.R_success, "R_failure": self.R_failure,
                                             "pi0": self.pi0, "start_exits": self.start_exits},
                            method=self.method, confidence=self.confidence, seed=self.seed, info=dict(self.info))
        object.__setattr__(out, "design", design)
        if design is not None:
            out.info["design_effect_per_quantity"] = design.to_dict()
        return out

    def _stretched(self, quantity: str, params: dict[str, Any], values: NDArray[np.float64],
                   keep: NDArray[np.bool_]) -> NDArray[np.float64]:
        from tracetochain.uncertainty._design import PROBABILITY_QUANTITIES, stretch_draws

        factor = self.design.stretch(quantity, params)
        if factor is None or not keep.any():
            return values
        out = values.copy()
        scale = "probability" if quantity in PROBABILITY_QUANTITIES else "positive"
        out[keep] = stretch_draws(values[keep], factor, scale)
        return out

    def _evaluate_callable(self, fn: Callable[..., Any], params: dict[str, Any]
                           ) -> tuple[NDArray[np.float64], NDArray[np.bool_], dict[str, int]]:
        reasons: dict[str, int] = {}
        results: list[NDArray[np.float64] | None] = []
        shape: tuple[int, ...] | None = None
        for i in range(self.n_samples):
            try:
                c = self.chain(i)
            except ChainValidationError:
                key = "non-absorbing (a closed loop with no exit; I − Q singular)"
                reasons[key] = reasons.get(key, 0) + 1
                results.append(None)
                continue
            try:
                v = np.asarray(fn(c, **params), dtype=np.float64)
            except UndefinedMetricError as exc:
                key = str(exc)[:160]
                reasons[key] = reasons.get(key, 0) + 1
                results.append(None)
                continue
            if shape is None:
                shape = v.shape
            elif v.shape != shape:
                raise ValueError(f"the quantity returned shape {v.shape} on draw {i} but {shape} before; "
                                 "it must return the same shape on every chain")
            results.append(v)
        shape = shape if shape is not None else ()
        keep = np.array([r is not None for r in results], dtype=bool)
        values = np.zeros((self.n_samples, *shape))
        for i, r in enumerate(results):
            if r is not None:
                values[i] = r
        return values, keep, reasons

    def entry_intervals(self, confidence: float | None = None) -> EntryIntervals:
        """Per-entry percentile intervals of Q, R⊕, R⊖ over the draws (what the paper's bootstrap reports)."""
        level = self.confidence if confidence is None else check_confidence(confidence)
        lo_q, hi_q = equal_tailed(level)
        qQ = np.quantile(self.Q, [lo_q, hi_q], axis=0)
        qs = np.quantile(self.R_success, [lo_q, hi_q], axis=0)
        qf = np.quantile(self.R_failure, [lo_q, hi_q], axis=0)
        return EntryIntervals(self.state_names, qQ[0], qQ[1], qs[0], qs[1], qf[0], qf[1], self.Q.mean(axis=0),
                              self.R_success.mean(axis=0), self.R_failure.mean(axis=0), level, "percentile",
                              self.method)

    # ------------------------------------------------------------------ output
    def to_dict(self, *, include_samples: bool = False) -> dict[str, Any]:
        """Provenance and size (and, on request, every draw as nested lists)."""
        from tracetochain.uncertainty._stats import json_safe

        out: dict[str, Any] = {
            "kind": "tracetochain.chain_ensemble",
            "method": self.method,
            "confidence": self.confidence,
            "seed": self.seed,
            "n_samples": self.n_samples,
            "state_names": list(self.state_names),
            "point_estimator": self.point_estimator,
            "info": json_safe(self.info),
        }
        if include_samples:
            out["samples"] = {"Q": self.Q.tolist(), "R_success": self.R_success.tolist(),
                              "R_failure": self.R_failure.tolist(), "pi0": self.pi0.tolist()}
            if self.start_exits.any():
                out["samples"]["start_exits"] = self.start_exits.tolist()
        return out

    def __repr__(self) -> str:
        return (f"ChainEnsemble(method={self.method!r}, n_samples={self.n_samples}, n_states={self.n_states}, "
                f"confidence={self.confidence})")

    def __str__(self) -> str:
        r = self.stats("r_inf")
        return f"{self.n_samples} chains ({self.method}, {self.n_states} states): R∞ {r}"

    def _display(self) -> Display:
        rows = []
        for name in HEADLINE_QUANTITIES:
            q = self.stats(name)
            rows.append((name, q.point, q.mean, q.std, q.lower, q.upper, q.n_excluded))
        return Display(f"ChainEnsemble: {self.n_samples} chains ({self.method}, {self.n_states} states), "
                       f"{self.confidence:.0%} intervals",
                       tables=(Table("metrics", ("quantity", "point", "mean", "std", "lower", "upper", "n_excluded"),
                                     tuple(rows)),))


def _point(compute: Callable[[], Any]) -> tuple[Any, str | None]:
    try:
        v = compute()
    except UndefinedMetricError as exc:
        return None, str(exc)
    arr = np.asarray(v, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        return None, "non-finite value on the reference chain"
    return (float(arr) if arr.ndim == 0 else arr), None


def _check_stacked(Q: NDArray[np.float64], rs: NDArray[np.float64], rf: NDArray[np.float64],
                   pi: NDArray[np.float64], exits: NDArray[np.float64]) -> None:
    """Shapes are checked by the caller; here: finite, non-negative, rows summing to 1, π0 with the start exits
    summing to 1 (first offending draw named)."""
    for arr, what in ((Q, "Q"), (rs, "R_success"), (rf, "R_failure"), (pi, "pi0"), (exits, "start_exits")):
        flat = arr.reshape(arr.shape[0], -1)
        bad = ~np.isfinite(flat).all(axis=1) | (flat.min(axis=1) < -ROW_SUM_ATOL)
        if bad.any():
            raise ChainValidationError(f"{what} of draw {int(np.flatnonzero(bad)[0])} has a NaN, infinite or "
                                       f"negative entry ({int(bad.sum())} draw(s) affected)")
    rows = Q.sum(axis=2) + rs + rf
    off = np.abs(rows - 1.0) > ROW_SUM_ATOL
    if off.any():
        b, i = (int(x[0]) for x in np.nonzero(off))
        raise ChainValidationError(f"row {i} of draw {b} sums to {rows[b, i]:.12g}, not 1 "
                                   f"({int(off.any(axis=1).sum())} draw(s) affected)")
    total = pi.sum(axis=1)
    if exits.any():
        start = exits.sum(axis=1)
        off_pi = np.abs(total + start - 1.0) > ROW_SUM_ATOL
        if off_pi.any():
            b = int(np.flatnonzero(off_pi)[0])
            raise ChainValidationError(f"pi0 of draw {b} sums to {total[b]:.12g} and its start exits to "
                                       f"{start[b]:.12g}: together they must be 1")
        return
    off_pi = np.abs(total - 1.0) > ROW_SUM_ATOL
    if off_pi.any():
        b = int(np.flatnonzero(off_pi)[0])
        raise ChainValidationError(f"pi0 of draw {b} sums to {total[b]:.12g}, not 1")
