"""Side experiment for issue 30's item 6 (selection and certification on different data): is the model that
``--model auto`` chooses on all traces also the one it would choose inside each fit half of the certificate?

The certificate of a chosen family runs its held-out layers on the analysis's halves, and the choice scored every
candidate's held-out likelihood on those same halves. A certificate that never saw the choice would choose *inside*
each fit half (nested cross-validation: the fit half's own splits) and check that choice on the held-out half. This
measures what that would change on the shared real corpora, before building it: for each corpus and split seed, the
choice on all traces (the analysis's unit splits, ``choose_model`` on the traces' labels) and, for each of the five
splits, the choice made on its fit half alone, scored on the other splits' held-out units that fall inside it.

Not a study of the runner (no archive test): it backs the paragraph on selection in ``docs/statistics.md``.
``python -m studies.nested_choice [--seeds 0 1 2] [--corpus NAME]`` writes ``studies/results/side/NESTED_CHOICE.json``
(about 2 minutes per corpus and seed on one core).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
CORPORA: dict[str, Path] = {
    "τ-bench airline (gpt-4o, 50 tasks × 4)": SHARED / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json",
    "mini-swe-agent Gemini 3 Pro (250)": SHARED / "swebench-verified-mini-swe-agent-gemini-3-pro",
}
OUT = REPO / "studies" / "results" / "side" / "NESTED_CHOICE.json"
N_SPLITS = 5
TEST_FRACTION = 0.5


def nested(path: Path, seed: int) -> dict[str, Any]:
    from tracetochain import read_traces
    from tracetochain._outcome import OutcomeCode
    from tracetochain.analysis._models import split_hashes
    from tracetochain.models import choose_model
    from tracetochain.models.shared import encode_traces
    from tracetochain.traces.shared import holdout_mask

    traces = read_traces(path)
    usable = traces.select_traces(traces.outcomes() != OutcomeCode.INVALID)
    enc = encode_traces(usable, group="auto")
    hashes = split_hashes(usable, enc.grouped_by)
    held = [np.unique(enc.unit[holdout_mask(hashes, TEST_FRACTION, seed, s)]) for s in range(N_SPLITS)]
    t0 = time.perf_counter()
    whole = choose_model(enc, splits=held, test_fraction=TEST_FRACTION, checks=False, group=enc.grouped_by, seed=seed,
                         stability=False, refit=False)
    seconds_whole = time.perf_counter() - t0
    splits = []
    for s in range(N_SPLITS):
        t0 = time.perf_counter()
        keep = np.setdiff1d(np.arange(enc.n_units), held[s])
        sub = enc.select(np.flatnonzero(np.isin(enc.unit, keep)))
        renumber = np.full(enc.n_units, -1)
        renumber[keep] = np.arange(keep.size)  # select() numbers the kept units in order
        inner = [renumber[np.intersect1d(held[t], keep)] for t in range(N_SPLITS) if t != s]
        inner = [x for x in inner if 0 < x.size < keep.size]
        choice = choose_model(sub, splits=inner, test_fraction=TEST_FRACTION, checks=False, group=enc.grouped_by,
                              seed=seed, stability=False, refit=False)
        splits.append({"split": s + 1, "fit_half_units": int(keep.size), "chosen": choice.chosen,
                       "same_as_whole": choice.chosen == whole.chosen,
                       "same_family": choice.chosen.split("(")[0] == whole.chosen.split("(")[0],
                       "seconds": round(time.perf_counter() - t0, 1)})
    return {"seed": seed, "units": enc.grouped_by, "n_units": int(enc.n_units), "chosen_on_all": whole.chosen,
            "seconds_on_all": round(seconds_whole, 1), "splits": splits,
            "agree": sum(x["same_as_whole"] for x in splits)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--corpus", action="append", help="only these corpora (names as above; repeatable)")
    args = ap.parse_args(argv)
    doc: dict[str, Any] = {"n_splits": N_SPLITS, "test_fraction": TEST_FRACTION, "corpora": {}}
    for name, path in CORPORA.items():
        if args.corpus and name not in args.corpus:
            continue
        if not path.exists():
            doc["corpora"][name] = {"skipped": f"{path} is absent"}
            continue
        runs = []
        for seed in args.seeds:
            r = nested(path, seed)
            runs.append(r)
            print(f"{name} seed {seed}: all traces {r['chosen_on_all']}; fit halves "
                  + ", ".join(x["chosen"] for x in r["splits"]), flush=True)
        doc["corpora"][name] = {"runs": runs}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
