"""Functional core: pure functions on arrays for absorbing-chain reliability.

No I/O, no logging, no hidden randomness (simulation takes a ``numpy.random.Generator``). Everything a model
method reports is computed here; ``AbsorbingChain`` methods are one-line delegates. Notation follows
docs/numerics.md §1: ``Q`` (m×m transient block), ``r_success``/``r_failure`` (exit vectors),
``pi0`` (initial distribution), ``N = (I − Q)^{-1}`` (never formed), ``h = N r_success``, ``z = Nᵀ pi0``.
"""

from tracetochain.numerics.absorbing import (
    ChainSolver,
    absorbing_reachability,
    conditional_mean_steps,
    failure_attribution,
    mean_steps,
    steps_variance,
)
from tracetochain.numerics.horizon import HorizonSweep, forward_sweep, spectral_radius, step_budget
from tracetochain.numerics.passk import pass_at_k, pass_hat_k
from tracetochain.numerics.rewards import (
    RewardMoments,
    accumulated_reward,
    budget_reliability,
    capped_mean_cost,
    lattice_pmf,
    retry_cost,
)
from tracetochain.numerics.simulate import SimulatedTraces, simulate_traces

__all__ = [
    "ChainSolver",
    "HorizonSweep",
    "RewardMoments",
    "SimulatedTraces",
    "absorbing_reachability",
    "accumulated_reward",
    "budget_reliability",
    "capped_mean_cost",
    "conditional_mean_steps",
    "failure_attribution",
    "forward_sweep",
    "lattice_pmf",
    "mean_steps",
    "pass_at_k",
    "pass_hat_k",
    "retry_cost",
    "simulate_traces",
    "spectral_radius",
    "step_budget",
    "steps_variance",
]
