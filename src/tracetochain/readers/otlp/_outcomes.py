"""One outcome rule per episode, offline and live: finish reason, verdict file, outcome attribute, evaluation events,
posted verdicts — else unlabelled (or refused); verdict and evaluation values mapped to outcomes.
"""

from __future__ import annotations

from typing import Any

from tracetochain.readers._common import MISSING as _MISSING
from tracetochain.readers._common import finite_float as _as_float
from tracetochain.readers._common import lookup, verdict_to_outcome
from tracetochain.readers.otlp._conventions import _CENSOR_REASONS, _NO_OUTCOME_HINT, NO_OUTCOME_MESSAGE
from tracetochain.readers.otlp._spans import _Episode, _Options
from tracetochain.readers.otlp._values import _as_int, _as_text


class _NoOutcome(Exception):
    def __init__(self, message: str, fieldname: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field, self.hint = message, fieldname, hint


def _find_attr(ep: _Episode, key: str) -> Any:
    """A user-named attribute: on the episode's spans nearest the root first, then on the root's ancestors (nearest
    first), then on the resource."""
    chain = [s for s, _ in ep.spans] + ep.ancestors
    for s in chain:
        v = lookup(s.user, key)
        if v is not _MISSING:
            return v
    for s in chain:
        v = lookup(s.resource, key)
        if v is not _MISSING:
            return v
    return _MISSING


#: The outcome sources, in the order :func:`_outcome` tries them (the names counted in
#: ``IngestReport.outcome_sources``).
OUTCOME_SOURCES = ("finish_reason", "verdict_file", "attribute", "evaluation", "posted", "unlabelled")


#: ``termination_reason`` of an episode kept without an outcome (``keep_unlabelled``; the live receiver after
#: ``--verdict-timeout``): canonical outcome ``censored``, told apart from a budget ending by this reason.
UNLABELLED = "unlabelled"


def _verdict_for(ep: _Episode, trace_id: str, n_episodes: int, verdicts: dict[str, Any]) -> Any:
    keys = [ep.eid]
    if ep.root is not None and ep.eid != trace_id:
        keys.append(ep.root.sid)
    if n_episodes == 1 and ep.eid != trace_id:
        keys.append(trace_id)
    return next((verdicts[k] for k in keys if k in verdicts), _MISSING)


def _outcome(ep: _Episode, trace_id: str, n_episodes: int,
             opts: _Options) -> tuple[str, float | None, str | None, str]:
    """(outcome, reward, termination reason, source) of one episode: **one rule, offline and live**.

    A budget finish reason censors the episode whatever else is said. Otherwise the first source that has a value
    for *this episode* decides: 1. the verdict file (``verdicts=``), 2. the outcome attribute
    (``outcome_attribute=``), 3. evaluation results in the episode's spans, 4. verdicts posted to the live receiver.
    An episode none of them labels is refused (:class:`_NoOutcome`), or kept as *unlabelled* with
    ``keep_unlabelled``. A source that has a value that cannot be mapped is an error, never skipped over.
    """
    finish = next((s.finish for s, _ in ep.spans if s.finish), None)
    if finish is not None and finish.lower() in _CENSOR_REASONS:
        return "censored", None, finish, "finish_reason"
    tried: list[str] = []
    if opts.verdicts is not None:
        v = _verdict_for(ep, trace_id, n_episodes, opts.verdicts)
        if v is not _MISSING:
            return (*_map_verdict(v, opts, f"verdict for episode {ep.eid}"), finish, "verdict_file")
        tried.append(f"no verdict for this episode in {opts.verdicts_path}")
    if opts.outcome_attribute is not None:
        v = _find_attr(ep, opts.outcome_attribute)
        if v is not _MISSING and v is not None:
            return (*_map_verdict(v, opts, f"{opts.outcome_attribute} of episode {ep.eid}"), finish, "attribute")
        tried.append(f"attribute {opts.outcome_attribute!r} is not set on any span of the episode")
    found: list[tuple[int, int, tuple[str | None, Any, Any]]] = []
    seq = 0
    for s, depth in ep.spans:
        for ev in s.evals or ():
            if opts.evaluation_name is None or ev[0] == opts.evaluation_name:
                found.append((depth, seq, ev))
                seq += 1
    if found:
        names = sorted({str(ev[0]) for _, _, ev in found})
        if len(names) > 1:
            raise _NoOutcome(f"the episode holds several evaluations ({', '.join(names)}) (episode {ep.eid})",
                             "gen_ai.evaluation.name", "pass evaluation_name= to choose the one that is the task "
                                                       "verdict")
        top = min(d for d, _, _ in found)
        results = [_map_eval(ev, opts, ep.eid) for d, _, ev in found if d == top]
        if len({o for o, _ in results}) > 1:
            raise _NoOutcome(f"evaluation results disagree within the episode (episode {ep.eid})", "outcome",
                             "choose a narrower episode= (agent or span:NAME) or pass verdicts=")
        outcome, reward = results[-1]  # agreeing results: the last recorded one gives the reward
        return outcome, reward, finish, "evaluation"
    if opts.posted:
        v = _verdict_for(ep, trace_id, n_episodes, opts.posted)
        if v is not _MISSING:
            return (*_map_verdict(v, opts, f"posted verdict for episode {ep.eid}"), finish, "posted")
    if opts.keep_unlabelled:
        return "censored", None, UNLABELLED, "unlabelled"
    if opts.evaluation_name is not None:
        tried.append(f"no evaluation named {opts.evaluation_name!r} in the episode")
        raise _NoOutcome(f"{'; '.join(tried)}; {NO_OUTCOME_MESSAGE} (episode {ep.eid})", "gen_ai.evaluation.name",
                         _NO_OUTCOME_HINT)
    if tried:
        field = "outcome" if opts.verdicts is not None else str(opts.outcome_attribute)
        hint = ("add a row for it (episode id, root span id or trace id), or pass on_error='skip'"
                if opts.verdicts is not None else "span status is not used as an outcome; set the attribute or "
                                                  "pass verdicts=")
        raise _NoOutcome(f"{'; '.join(tried)}, and no evaluation result (episode {ep.eid})", field, hint)
    raise _NoOutcome(f"{NO_OUTCOME_MESSAGE} (episode {ep.eid})", "outcome", _NO_OUTCOME_HINT)


def _map_verdict(v: Any, opts: _Options, what: str) -> tuple[str, float | None]:
    if isinstance(v, tuple) and v and v[0] == "pair":
        _, out, rew = v
        reward = _as_float(rew) if not isinstance(rew, bool) else float(rew)
        if out is None:
            out = rew if reward is None else reward
        r = verdict_to_outcome(_csv_scalar(out), opts.success_values, opts.threshold)
        if isinstance(r, str):
            raise _NoOutcome(f"{r} ({what})", "outcome", "pass success_values= or success_threshold=")
        return r[0], reward if reward is not None else r[1]
    r = verdict_to_outcome(_csv_scalar(v), opts.success_values, opts.threshold)
    if isinstance(r, str):
        raise _NoOutcome(f"{r} ({what})", "outcome", "pass success_values= or success_threshold=")
    return r


def _csv_scalar(v: Any) -> Any:
    return v.strip() if isinstance(v, str) else v


def _map_eval(ev: tuple[str | None, Any, Any], opts: _Options, eid: str) -> tuple[str, float | None]:
    _, label, value = ev
    reward = _as_float(value)
    if label is not None and label != "":
        r = verdict_to_outcome(label, opts.success_values, opts.threshold)
        if not isinstance(r, str):
            return r[0], reward if reward is not None else r[1]
        if reward is None:
            raise _NoOutcome(f"{r} (evaluation label of episode {eid})", "gen_ai.evaluation.score.label",
                             "pass success_values= listing the labels that mean success")
    if reward is None:
        raise _NoOutcome(f"evaluation has neither a label nor a numeric score (episode {eid})",
                         "gen_ai.evaluation.score.value")
    return ("success" if reward >= opts.threshold else "failure"), reward


def _task_trial(ep: _Episode, opts: _Options) -> tuple[str | None, int | None]:
    task = trial = None
    if opts.task_attribute is not None:
        v = _find_attr(ep, opts.task_attribute)
        if v is not _MISSING and v is not None:
            task = v if isinstance(v, str) else _as_text(v)
    if opts.trial_attribute is not None:
        v = _find_attr(ep, opts.trial_attribute)
        if v is not _MISSING and v is not None:
            trial = _as_int(v.strip() if isinstance(v, str) else v)
            if trial is None:
                raise _NoOutcome(f"trial {v!r} is not an integer (episode {ep.eid})", opts.trial_attribute,
                                 "the trial attribute must hold a repetition index such as 0, 1, 2")
    return task, trial
