"""Path patterns with inference: which recurring paths, loops and error runs go with success or failure.

* :class:`PathSequences` — the state paths of the success/failure traces as flat arrays (``_sequences``);
* :func:`enumerate_candidates` — variants, n-grams, loops, revisits and error runs, as a sparse trace × candidate
  matrix (``_candidates``);
* :func:`find_patterns` — per candidate: share, success with and without, the difference with an interval (clustered
  by task when tasks repeat), p-value and Benjamini–Yekutieli q-value (``_patterns``, ``_inference``);
* :func:`compare_patterns` — which patterns changed between two corpora;
* :func:`top_finding` — the best-supported pattern (q < 0.05), for a headline.

The entry point that reads traces (any reader, any state model, any engine) is
:func:`tracetochain.analysis.analyze_paths`. docs/statistics.md ("Path patterns") gives the method.
"""

from tracetochain.paths._candidates import Candidates, CandidateSettings, Pattern, enumerate_candidates
from tracetochain.paths._inference import by_qvalues, fisher_two_sided, newcombe
from tracetochain.paths._patterns import (
    PATHS_SCHEMA_VERSION,
    PathsResult,
    compare_patterns,
    find_patterns,
    finding_sentence,
    top_finding,
)
from tracetochain.paths._sequences import PathSequences, merge_sequences, sequences_from_lists

__all__ = ["PATHS_SCHEMA_VERSION", "CandidateSettings", "Candidates", "PathSequences", "PathsResult", "Pattern",
           "by_qvalues", "compare_patterns", "enumerate_candidates", "find_patterns", "finding_sentence",
           "fisher_two_sided", "merge_sequences", "newcombe", "sequences_from_lists", "top_finding"]
