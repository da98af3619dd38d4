"""Perturbation analysis of R∞: first-order terms, Prop. 2's bound, and exact single-row edits.

References: Tran-Truong & Le (2026), Prop. 2 (a Neumann-series bound after Stewart); Caswell (2013) for
dN = N dQ N; Sherman–Morrison for one-row edits (verified against a full re-solve). See docs/numerics.md §5.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def first_order_delta(z: NDArray[np.float64], h: NDArray[np.float64], dQ: NDArray[np.float64],
                      dr_success: NDArray[np.float64]) -> float:
    """dR∞ ≈ zᵀ (ΔQ h + Δr⊕): the directional derivative of R∞ = π0 N r⊕ along a change of the rows
    (dN = N dQ N). With Δr⊕ = 0 and ΔQ = εΔ this is the paper's ε e_{s0}ᵀ N0 Δ N0 R⊕ (Prop. 2)."""
    return float(z @ (dQ @ h + dr_success))


def prop2_bound(N_inf_norm: float, dQ: NDArray[np.float64], r_success: NDArray[np.float64]) -> float | None:
    """Prop. 2: |R∞(ε) − R∞(0)| ≤ ε‖N0‖∞²‖Δ‖∞‖R⊕‖∞ + C ε², C = ‖N0‖∞³‖Δ‖∞²‖R⊕‖∞ / (1 − ε_max‖N0‖∞‖Δ‖∞),
    evaluated at ε = ε_max = 1 with Δ = ΔQ. ``None`` when its assumption ε_max‖N0‖∞‖Δ‖∞ < 1 fails."""
    d = float(np.max(np.abs(dQ).sum(axis=1))) if dQ.size else 0.0
    rs = float(np.max(np.abs(r_success))) if r_success.size else 0.0
    if N_inf_norm * d >= 1.0:
        return None
    return N_inf_norm**2 * d * rs + N_inf_norm**3 * d**2 * rs / (1.0 - N_inf_norm * d)


def single_row_r_inf(r_inf: float, z_i: float, h: NDArray[np.float64], N_col: NDArray[np.float64],
                     dq: NDArray[np.float64], dr: float) -> float:
    """Exact R∞ after changing only row i (Sherman–Morrison; docs/numerics.md §5):

    R∞' = R∞ + z_i (dqᵀ h + dr) / (1 − dqᵀ N e_i),

    with dq the change of row i of Q, dr the change of r⊕_i, z_i = π0·N e_i and ``N_col`` = N e_i (one extra
    solve). The first-order term is the numerator alone.
    """
    return r_inf + z_i * (float(dq @ h) + dr) / (1.0 - float(dq @ N_col))
