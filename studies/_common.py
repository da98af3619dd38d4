"""Shared machinery for the studies: seeds, the artifact's reference data, result documents and their tables.

A study module exposes ``run(quick: bool, seed: int) -> dict`` returning :meth:`StudyResult.to_dict`. The runner
(``python -m studies``) adds the runtime and the environment, writes ``<id>.json`` (the source of truth) and renders
``<id>.md`` from that JSON alone: one row per figure with the paper's value, ours, the difference and — where they
differ — a sentence saying why.

Seeds follow the authors' artifact (lexuanbach/TraceToChain): one master seed per study; chain seeds are drawn
sequentially with ``numpy.random.default_rng(master).integers(0, 2**32)``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import tracetochain as tt

STUDIES_DIR = Path(__file__).resolve().parent
REPO = STUDIES_DIR.parent
RESULTS_DIR = STUDIES_DIR / "results"
QUICK_DIR = RESULTS_DIR / "quick"
#: The authors' reference data (their artifact's result files); override with ``TRACETOCHAIN_ARTIFACT=/path``.
ARTIFACT_DIR = Path(os.environ.get("TRACETOCHAIN_ARTIFACT", REPO.parent / "shared" / "data" / "tracetochain-artifact"))

#: Master seeds of the artifact's scripts (SS4 uses its script constant 2026042204).
MASTER_SEEDS: dict[str, int] = {
    "SS1": 2026042001, "SS2": 2026042002, "SS3": 2026042003, "SS4": 2026042204, "SS5": 2026042005,
    "SS6": 2026042006, "SS7": 20260420, "SS8": 2026042208, "SS9": 2026042217, "SS10": 20260606,
    "SS11": 20260606, "SS12": 20260606, "SS13": 20260606, "SS14": 20260606, "SS15": 20260606,
    "FAMILIES": 20260415,
}

#: The paper's bootstrap: Laplace α = 1, n of n traces resampled, the prior refitted at its mean (the library's default
#: is the episode prior with Poisson weights by id and the prior's pseudo-counts drawn per replicate).
PAPER_BOOTSTRAP: dict[str, Any] = {"pseudocount": 1.0, "weights": "multinomial", "draw_prior": False, "by": "trace"}

#: Verdicts, from best to worst; the index shows them as given.
VERDICTS = ("reproduced", "reproduced within tolerance", "differs, explained", "corrected", "acceptance met", "partial",
            "skipped")


# ------------------------------------------------------------------------------------------------ seeds
def chain_seeds(master: int, n: int) -> list[int]:
    """The artifact's chain seeds: ``default_rng(master).integers(0, 2**32)`` drawn ``n`` times in order."""
    rng = np.random.default_rng(master)
    return [int(rng.integers(0, 2**32)) for _ in range(n)]


# ------------------------------------------------------------------------------------------------ artifact data
def artifact_path(relpath: str) -> Path:
    return ARTIFACT_DIR / relpath


def artifact_json(relpath: str) -> Any | None:
    """A reference JSON of the artifact (``synthetic/SS1_summary.json`` …), or ``None`` when the data is absent."""
    path = artifact_path(relpath)
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def artifact_substochastic(rng: np.random.Generator, m: int, rho: float, density: float,
                           success_rate: float) -> tt.AbsorbingChain:
    """The artifact's ``random_substochastic`` with its exact draw order (study SS1).

    Draws the support mask ``rng.random((m, m)) < density`` first (skipped when ``density >= 1``), then the values
    ``rng.random((m, m))``; rows are normalised to transient mass ``rho`` (an all-zero row stays zero) and each
    row's remaining mass is split ``success_rate`` : ``1 − success_rate`` between success and failure. Verified
    against the artifact: it regenerates the SS5 PRISM models from seed 2026042005 (to their 8-decimal rounding)
    and the SS6 chains from seed 2026042006. :func:`tracetochain.datasets.random_chain` samples the same
    distribution but draws values before the mask (and gives an empty row one random edge), so it does not
    reproduce the artifact's chains draw for draw.
    """
    mask = rng.random((m, m)) < density if density < 1.0 else np.ones((m, m), dtype=bool)
    Q = rng.random((m, m)) * mask
    sums = Q.sum(axis=1, keepdims=True)
    Q = Q / np.where(sums > 0, sums, 1.0) * rho
    rest = 1.0 - Q.sum(axis=1)
    return tt.AbsorbingChain(Q, rest * success_rate, rest - rest * success_rate, pi0=0)


# ------------------------------------------------------------------------------------------------ results
Number = float | int


@dataclass(frozen=True)
class Figure:
    """One reported number: the paper's value, ours, and a sentence where they differ and why.

    ``key`` is stable (tests address figures by it); ``paper`` is ``None`` when the paper reports nothing for it
    (our own extra check) — then ``note`` says so. Strings are allowed for non-numeric figures (rankings).
    """

    key: str
    label: str
    paper: Number | str | None
    ours: Number | str | None
    note: str = ""
    digits: int = 4

    @property
    def diff(self) -> float | None:
        if _is_num(self.paper) and _is_num(self.ours):
            return float(self.ours) - float(self.paper)  # type: ignore[arg-type]
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "paper": self.paper, "ours": self.ours, "diff": self.diff,
                "note": self.note, "digits": self.digits}


@dataclass(frozen=True)
class StudyResult:
    """The document of one study run (``to_dict`` is what the JSON holds).

    ``verdict`` is one of :data:`VERDICTS`; ``summary`` is the one-sentence line of the index table; ``data``
    holds per-item raw numbers (per-chain errors, curves) so every figure can be recomputed from the JSON.
    """

    study: str
    title: str
    quick: bool
    seed: int
    params: dict[str, Any]
    figures: Sequence[Figure]
    verdict: str
    summary: str
    notes: Sequence[str] = ()
    data: dict[str, Any] = field(default_factory=dict)
    paper_ref: str = ""
    headline: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        keys = [f.key for f in self.figures]
        if len(set(keys)) != len(keys):
            raise ValueError(f"{self.study}: duplicate figure keys")
        if self.headline and self.headline not in keys:
            raise ValueError(f"{self.study}: headline {self.headline!r} is not a figure key")

    def to_dict(self) -> dict[str, Any]:
        doc = {
            "kind": "tracetochain.study", "schema_version": 1, "study": self.study, "title": self.title,
            "paper_ref": self.paper_ref, "quick": self.quick, "seed": self.seed, "params": self.params,
            "verdict": self.verdict, "summary": self.summary, "headline": self.headline,
            "figures": [f.to_dict() for f in self.figures],
            "notes": list(self.notes), "data": self.data,
        }
        out: dict[str, Any] = json_safe(doc)
        return out

    def __str__(self) -> str:
        return render_markdown(self.to_dict())


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(x)


def json_safe(obj: Any) -> Any:
    """numpy → Python, tuples → lists; NaN/inf → ``None`` (the caller's note gives the reason)."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else None
    return obj


def environment() -> dict[str, Any]:
    """Python, numpy, scipy, tracetochain (and stormpy when present) versions, CPU count and the date."""
    import scipy

    env: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0], "platform": platform.platform(), "cpu_count": os.cpu_count(),
        "numpy": np.__version__, "scipy": scipy.__version__, "tracetochain": tt.__version__,
    }
    try:
        import stormpy

        env["stormpy"] = getattr(stormpy, "__version__", "unknown")
    except ImportError:
        env["stormpy"] = None
    return env


# ------------------------------------------------------------------------------------------------ rendering
def fmt(x: Any, digits: int = 4) -> str:
    """Numbers with ``digits`` significant digits (exact integers as such); ``None`` → an em dash."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if x == 0:
            return "0"
        if abs(x) >= 1e5 or abs(x) < 1e-4:
            return f"{x:.{digits - 1}e}"
        return f"{x:.{digits}g}"
    return str(x)


def fmt_diff(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "—"
    if x == 0:
        return "0"
    return f"{x:+.{digits}e}" if abs(x) < 1e-3 else f"{x:+.{digits + 1}g}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str | None = None) -> str:
    rows = [list(map(_cell, r)) for r in rows]
    align = align or "l" + "r" * (len(header) - 1)
    sep = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    return "\n".join(["| " + " | ".join(header) + " |", sep, *("| " + " | ".join(r) + " |" for r in rows)])


def figures_table(figures: Sequence[dict[str, Any]]) -> str:
    """The three-column table: paper, ours, difference (ours − paper), and the note."""
    rows = []
    for f in figures:
        d = f.get("digits", 4)
        rows.append([f["label"], fmt(f["paper"], d), fmt(f["ours"], d), fmt_diff(f["diff"]), f.get("note", "")])
    return markdown_table(["figure", "paper", "ours", "difference", "note"], rows, "lrrrl")


def render_markdown(doc: dict[str, Any]) -> str:
    """The Markdown page of a study, rendered from its JSON document only."""
    mode = "quick run (reduced size)" if doc.get("quick") else "full run"
    lines = [f"# {doc['study']} — {doc['title']} ({mode})", ""]
    if doc.get("paper_ref"):
        lines += [f"Paper: {doc['paper_ref']}.", ""]
    lines += [f"{doc['summary']} Verdict: **{doc['verdict']}**.", ""]
    lines += [figures_table(doc["figures"]), ""]
    if doc.get("notes"):
        lines += ["Notes:", ""] + [f"- {n}" for n in doc["notes"]] + [""]
    params = ", ".join(f"{k} = {_short(v)}" for k, v in doc.get("params", {}).items())
    lines += [f"Parameters: {params}; master seed {doc['seed']}.", ""]
    if "runtime_s" in doc:
        env = doc.get("environment", {})
        lines += [f"Runtime {doc['runtime_s']:.1f} s (Python {env.get('python')}, numpy {env.get('numpy')}, "
                  f"tracetochain {env.get('tracetochain')}, {env.get('cpu_count')} CPUs, {env.get('date')}).", ""]
    return "\n".join(lines)


def _short(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "…"


def write_outputs(doc: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """Write ``<study>.json`` and ``<study>.md`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    name = doc["study"]
    jpath = out_dir / f"{name}.json"
    jpath.write_text(json.dumps(doc, indent=2, allow_nan=False, ensure_ascii=False) + "\n", encoding="utf-8")
    mpath = out_dir / f"{name}.md"
    mpath.write_text(render_markdown(doc), encoding="utf-8")
    return jpath, mpath


def write_archive(out: Path, name: str, doc: dict[str, Any], markdown: str) -> None:
    """Write one of our own studies' archive: ``name``.json (the truth) and ``name``.md (rendered from it)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    (out / f"{name}.md").write_text(markdown, encoding="utf-8")


def rate_text(e: dict[str, Any], *, digits: int = 1, interval_digits: int = 0, count: str | None = None) -> str:
    """A rate of ``rn_statistics._rate`` in %, with its Wilson 95 % interval: ``5.1 [4, 6]``, then ``(n)`` with
    ``count="n"`` or ``(k/n)`` with ``count="k/n"``; ``— (0)`` when nothing was counted."""
    if e["rate"] is None:
        return "— (0)"
    lo, hi = e["wilson"]
    text = f"{100 * e['rate']:.{digits}f} [{100 * lo:.{interval_digits}f}, {100 * hi:.{interval_digits}f}]"
    if count == "n":
        text += f" ({e['n']})"
    elif count == "k/n":
        text += f" ({e['k']}/{e['n']})"
    return text


def load_result(study: str, directory: Path = RESULTS_DIR) -> dict[str, Any] | None:
    path = directory / f"{study}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def figure_map(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Figures of a result document keyed by ``key``."""
    return {f["key"]: f for f in doc["figures"]}
