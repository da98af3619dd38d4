"""Reproductions of the paper's studies SS1–SS15 (Tran-Truong & Le 2026, §VII–§VIII), side by side with its numbers.

Not part of the installed library: these scripts use only the public API of :mod:`tracetochain`. Run
``python -m studies SS1 [--quick]`` or ``python -m studies all [--quick]`` from the repository root (also
``make studies`` / ``make studies-quick``). Full runs are archived in ``studies/results/``; quick runs go to
``studies/results/quick/`` and never overwrite them.
"""

from __future__ import annotations

#: Study id → module (each exposes ``run(quick: bool, seed: int) -> dict``). Add later studies here.
STUDIES: dict[str, str] = {
    "SS1": "studies.ss01_closed_form_vs_mc",
    "SS2": "studies.ss02_perturbation_bound",
    "SS3": "studies.ss03_correlated_trials",
    "SS4": "studies.ss04_goel_okumoto_limit",
    "SS5": "studies.ss05_stormpy_cross_check",
    "SS6": "studies.ss06_illustrative_ranking",
    "SS7": "studies.ss07_audit_size_power",
    "SS8": "studies.ss08_uq_widths",
    "SS9": "studies.ss09_heldout_mast",
    "SS10": "studies.ss10_swebench_certificate",
    "SS11": "studies.ss11_clustering_ablation",
    "SS12": "studies.ss12_censoring",
    "SS13": "studies.ss13_bootstrap_paths",
    "SS14": "studies.ss14_higher_order",
    "SS15": "studies.ss15_tau_bench",
    # Ours (not the paper's): studies of what the library adds beyond the paper.
    "FAMILIES": "studies.our_model_families",
}


def study_order(study: str) -> tuple[int, int, str]:
    """The paper's SS1 … SS15 in number order, then our own studies by name."""
    if study.startswith("SS") and study[2:].isdigit():
        return (0, int(study[2:]), "")
    return (1, 0, study)
