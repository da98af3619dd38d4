"""Settings of the two certificate layers, as small frozen objects (validated on creation, written into results)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from tracetochain.audit._common import Seed
from tracetochain.audit._order import OrderResult, order_test
from tracetochain.audit._timing import DEFAULT_MAX_SIMULATED_TRACES, Refit, TimingResult, ks_calibrated, ks_paper
from tracetochain.chain import AbsorbingChain
from tracetochain.traces import TraceTable


@dataclass(frozen=True)
class TimingSettings:
    """How the KS timing layer runs (docs/statistics.md §5; Tran-Truong & Le 2026, Algorithm 2).

    Parameters
    ----------
    mode : {"calibrated", "paper"}, default "calibrated"
        Lattice KS with a parametric-bootstrap p-value, or the paper's two-sample KS.
    level : float, default 0.05
        ``ks_level``: the timing law is retained iff p > level.
    n_bootstrap : int, default 199
        B of the calibrated mode (199 suits CI; use 999 for reported p-values).
    max_steps : int, optional
        The step cap the traces were cut at (calibrated mode; simulations apply it). Default: no cap.
    n_model, outcome, start, pvalue, paper_max_steps
        Paper mode: number of model runs (20,000 as on the real corpora), ``"success"`` (success-conditional,
        the paper's Alg. 2) or ``"any"`` (the artifact's library GoF), ``"pi0"`` or ``"modal"`` start,
        ``"scipy"`` (``ks_2samp``) or ``"asymptotic"`` (Numerical Recipes), and the model-run cap (500).
    max_simulated_traces : int or None, default 10,000
        Calibrated mode: the largest corpus a bootstrap replicate simulates; larger data are simulated at that size
        and the statistic rescaled by √(size ratio) (:func:`~tracetochain.audit.ks_calibrated`).
    """

    mode: Literal["calibrated", "paper"] = "calibrated"
    level: float = 0.05
    n_bootstrap: int = 199
    max_steps: int | None = None
    n_model: int = 20_000
    outcome: Literal["success", "any"] = "success"
    start: Literal["pi0", "modal"] = "pi0"
    pvalue: Literal["scipy", "asymptotic"] = "scipy"
    paper_max_steps: int = 500
    max_simulated_traces: int | None = DEFAULT_MAX_SIMULATED_TRACES

    def __post_init__(self) -> None:
        if self.max_simulated_traces is not None and self.max_simulated_traces < 1:
            raise ValueError(f"max_simulated_traces must be >= 1 or None, got {self.max_simulated_traces}")
        if self.mode not in ("calibrated", "paper"):
            raise ValueError(f"timing mode must be 'calibrated' or 'paper', got {self.mode!r}")
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"ks_level must be in (0, 1), got {self.level!r}")
        if self.n_bootstrap < 1:
            raise ValueError(f"n_bootstrap must be >= 1, got {self.n_bootstrap}")

    def run(self, chain: AbsorbingChain, traces: TraceTable, *, seed: Seed, refit: Refit = "same",
            fit_traces: TraceTable | None = None) -> TimingResult:
        if self.mode == "paper":
            return ks_paper(chain, traces, n_model=self.n_model, outcome=self.outcome, start=self.start,
                            pvalue=self.pvalue, max_steps=self.paper_max_steps, seed=seed)
        return ks_calibrated(chain, traces, refit=refit, fit_traces=fit_traces, n_bootstrap=self.n_bootstrap,
                             seed=seed, max_steps=self.max_steps, max_simulated_traces=self.max_simulated_traces)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class OrderSettings:
    """How the Markov-order layer runs (docs/statistics.md §5; see :func:`~tracetochain.audit.order_test`).

    Defaults: per-trace likelihoods on the same observations, outcomes included, parameters counted on the
    observed support, first order kept iff ΔAIC ≤ 0 (the paper's rule), with a 199-permutation G² test reported
    beside it (``criterion="permutation"`` makes it decide).
    """

    mode: Literal["per-trace", "artifact"] = "per-trace"
    criterion: Literal["aic", "bic", "permutation", "chi2"] = "aic"
    level: float = 0.05
    include_outcomes: bool = True
    parameter_count: Literal["observed", "full"] = "observed"
    n_permutations: int = 199

    def __post_init__(self) -> None:
        if self.mode == "artifact" and self.criterion != "aic":
            raise ValueError("the artifact order mode decides by AIC only")
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"order level must be in (0, 1), got {self.level!r}")

    def run(self, traces: TraceTable, chain: AbsorbingChain, *, seed: Seed) -> OrderResult:
        return order_test(traces, chain, mode=self.mode, include_outcomes=self.include_outcomes,
                          parameter_count=self.parameter_count, criterion=self.criterion, level=self.level,
                          n_permutations=self.n_permutations if self.mode == "per-trace" else 0, seed=seed)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
