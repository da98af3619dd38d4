"""What "the same analysis" means across inputs and engines (shared by the engine tests; imported as a module, not a
conftest, so its names cannot collide with another folder's fixtures).

``fingerprint`` keeps everything that must not depend on where or how the traces were read — the chain without its
metadata, the sufficient statistics, the certificate and the intervals (without their ``settings``, which name the
engine and the partitioning) — and ``same`` compares two results on it, key by key, as JSON text (bit for bit:
floats are written in full).
"""

from __future__ import annotations

import json
from typing import Any

from tracetochain.analysis import AnalysisResult

#: Small replicate counts: parity is exact at any count, and small ones keep the tests fast.
FAST: dict[str, int] = {"n_bootstrap": 19, "n_permutations": 19, "trials_permutations": 99}


def fingerprint(res: AnalysisResult, *, intervals: bool = True) -> dict[str, Any]:
    """Everything that must not depend on where the traces were read."""
    cert = res.certificate.to_dict() if res.certificate is not None else None
    if cert is not None:
        cert.pop("settings", None)
    out: dict[str, Any] = {"chain": {k: v for k, v in res.chain.to_dict().items() if k != "metadata"},
                           "counts": res.summary.counts.to_dict(), "certificate": cert}
    if intervals and res.ensemble is not None:
        out["intervals"] = res.intervals(horizon=20, ks=(1, 3))
        out["intervals"].pop("settings", None)
    return out


def same(a: AnalysisResult, b: AnalysisResult) -> None:
    fa, fb = fingerprint(a), fingerprint(b)
    assert fa.keys() == fb.keys()
    for key in fa:
        assert json.dumps(fa[key], sort_keys=True) == json.dumps(fb[key], sort_keys=True), key


def without_settings(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "settings"}
