"""Model families beyond the plain first-order chain, each compiled to one absorbing chain.

A first-order chain on the observed states makes two assumptions that real agents break: the next step depends only
on the current state (no memory, no clock), and every trial of every task is an independent draw from one chain.
The families here relax them; each is fitted by maximum likelihood (with empirical-Bayes shrinkage) and compiles to
an :class:`~tracetochain.AbsorbingChain` on an expanded state space, so every metric, interval and what-if works on
it unchanged.

=====================  ===============================================================  ==========================
family                 what it adds                                                     expanded states
=====================  ===============================================================  ==========================
:class:`MarkovModel`   nothing: the baseline (rows shrunk toward the pooled row)         the observed states
:class:`LiftedModel`   memory: the last k states (variable order, backoff)               the contexts seen
:class:`DurationModel` a clock: rows per step bucket, shrunk toward the homogeneous row  (state, step) pairs
:class:`HiddenMarkovModel`  hidden states that emit the observed labels                 the hidden states
:class:`MixtureModel`  latent classes of tasks (or traces), each with its own chain     the classes' union
:class:`TaskClassModel`  task classes on top of any family (success / row tilts)        C copies of the family
=====================  ===============================================================  ==========================

Every feature is *causal*: the context of a step is known when the step happens (no final length), so R(d) is a
forecast for a running trace.

Common interface (:class:`TraceModel`): ``fit(traces)``, ``trace_loglik(traces)`` (held-out scores),
``n_parameters``, ``to_chain()`` → :class:`CompiledModel` (the chain, the map back to observed states, the classes),
``pass_hat_k(k)`` / ``pass_at_k(k)`` (Σ_c w_c R_c^k when trials of a task share a class; R∞^k otherwise) and
``sample(n)``.

Families are registered (:func:`register_family`, :mod:`~tracetochain.families`): ``--model``, ``auto``'s
candidates and the docs table read the registry, so a new family is its module plus one registration.

Model choice: :func:`choose_model` fits every candidate on repeated held-out splits and picks by held-out
log-likelihood against the first-order baseline (:mod:`~tracetochain.models.selection`). pass^k when tasks differ:
:mod:`~tracetochain.models.passk` (per-task estimates, beta-binomial over tasks, a model's own value with intervals).
Held-out checks of a fitted family: :mod:`~tracetochain.models.evaluation`.

>>> import tracetochain as tt
>>> from tracetochain.models import choose_model
>>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 400, seed=1)
>>> choice = choose_model(traces, candidates=("markov", "lifted", "duration"), checks=False)
>>> choice.chosen
'markov'
"""

from tracetochain._compat import moved_attribute
from tracetochain.families import Candidate, Family, register_family
from tracetochain.models._base import CompiledModel, TraceModel
from tracetochain.models.duration import DurationModel
from tracetochain.models.evaluation import evaluate_heldout
from tracetochain.models.hmm import HiddenMarkovModel
from tracetochain.models.lifted import LiftedModel
from tracetochain.models.markov import MarkovModel
from tracetochain.models.mixture import MixtureModel
from tracetochain.models.passk import beta_binomial_pass_k, empirical_pass_k, model_pass_k, pass_k_test
from tracetochain.models.selection import ModelChoice, ModelFit, choose_model, fit_model, make_candidate
from tracetochain.models.tasks import TaskClassModel


def __getattr__(name: str) -> object:
    if name == "MODEL_CHOICES":  # a view of the family registry, read when asked (families registered later count)
        from tracetochain.families import model_choices

        return model_choices()
    return moved_attribute(__name__, name, _MOVED)


#: What users import. The building blocks other packages share (encoded traces, the choice rule's steps, the
#: checks' result types …) stay importable from their modules (``tracetochain.models.selection``, ``.passk``,
#: ``.evaluation``, ``tracetochain.models.shared``) but are not the package's API.
__all__ = [
    "Candidate",
    "CompiledModel",
    "DurationModel",
    "Family",
    "HiddenMarkovModel",
    "LiftedModel",
    "MarkovModel",
    "MixtureModel",
    "ModelChoice",
    "ModelFit",
    "TaskClassModel",
    "TraceModel",
    "beta_binomial_pass_k",
    "choose_model",
    "empirical_pass_k",
    "evaluate_heldout",
    "fit_model",
    "make_candidate",
    "model_pass_k",
    "pass_k_test",
    "register_family",
]


#: Names this package exported before its ``__all__`` was trimmed to what users import → the module that defines
#: them (still importable from here, with a warning naming that module, for one release).
_MOVED: dict[str, str] = {
    "BetaBinomial": "tracetochain.models.passk",
    "CandidateScore": "tracetochain.models.selection",
    "EncodedTraces": "tracetochain.models._encoded",
    "HeldoutEvaluation": "tracetochain.models.evaluation",
    "LastStep": "tracetochain.models._base",
    "PassKCheck": "tracetochain.models.passk",
    "PassKEstimate": "tracetochain.models.passk",
    "PassKTest": "tracetochain.models.passk",
    "decide": "tracetochain.models.selection",
    "encode_traces": "tracetochain.models._encoded",
    "families": "tracetochain.families",
    "pass_k_check": "tracetochain.models.passk",
    "sample_compiled": "tracetochain.models._base",
    "simulate_runs": "tracetochain.models._base",
    "task_trials": "tracetochain.models.passk",
    "timing_check": "tracetochain.models.evaluation",
    "unit_splits": "tracetochain.models.selection",
}
