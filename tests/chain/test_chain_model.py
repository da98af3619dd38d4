"""AbsorbingChain's constructor: it copies what it is given unless the caller hands the arrays over."""

from __future__ import annotations

import numpy as np
import pytest

from tracetochain import AbsorbingChain
from tracetochain.exceptions import ChainValidationError

Q = [[0.5, 0.3, 0.0], [0.0, 0.4, 0.3], [0.0, 0.0, 0.6]]
RS, RF = [0.1, 0.2, 0.3], [0.1, 0.1, 0.1]


def test_the_chain_copies_by_default_and_the_callers_array_stays_writable() -> None:
    q = np.array(Q)
    chain = AbsorbingChain(q, RS, RF, pi0=0)
    assert not np.shares_memory(chain.Q, q) and q.flags.writeable
    q[0, 0] = 0.0  # the caller's later changes do not reach the chain
    assert chain.Q[0, 0] == 0.5 and chain.r_inf == pytest.approx(0.625)


def test_copy_false_hands_the_array_over_frozen_with_the_same_chain() -> None:
    q = np.array(Q)
    chain = AbsorbingChain(q, RS, RF, pi0=0, copy=False)
    assert np.shares_memory(chain.Q, q) and not q.flags.writeable
    assert chain.r_inf == AbsorbingChain(Q, RS, RF, pi0=0).r_inf


def test_copy_false_still_validates() -> None:
    with pytest.raises(ChainValidationError, match="sums to"):
        AbsorbingChain(np.array([[0.5, 0.3, 0.0], [0.0, 0.4, 0.3], [0.0, 0.0, 0.9]]), RS, RF, copy=False)
