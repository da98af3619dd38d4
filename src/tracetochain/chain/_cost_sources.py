"""What each built-in reader's source records about cost, for the sentence that says why a cost is absent."""

from __future__ import annotations

#: reader name → what its source carries (or lacks) about usage. Readers not listed fill every usage column their
#: source has (see each reader's docstring).
SOURCE_NOTES: dict[str, str] = {
    "tau-bench": "τ-bench (v1) results record only the simulated user's cost (info.user_cost), not the agent's, "
                 "and no timestamps",
    "mast-csv": "MAST-style tables carry states and outcomes only",
    "reflexion": "Reflexion text logs record no usage or timestamps",
    "swe-token-corpus": "the artifact's token corpus keeps only the action tokens",
    "swe-agent": "SWE-agent trajectories record usage only as episode totals (info.model_stats)",
}


def source_note(format_name: str | None) -> str | None:
    """The note for a reader (None when there is nothing specific to say)."""
    if format_name is None:
        return None
    return SOURCE_NOTES.get(format_name, f"the {format_name} reader found none in the source (or only zeros, taken "
                                         "as not tracked)")
