"""Family registry: the one list of model families that ``--model``, ``auto``, the docs and the checks read.

A family is a named way to build an unfitted :class:`~tracetochain.models.TraceModel` at a size (classes, hidden
states, order …): ``register_family(name, factory, sizes, label)``. Everything that names families derives from
this table — the CLI's ``--model`` choices and help, :data:`~tracetochain.models.selection.MODEL_CHOICES`, the
candidates ``auto`` tries and their default sizes, the candidate names (``lifted(k=3)``, ``hmm(K=4)`` …) that
:func:`~tracetochain.models.make_candidate` parses, and the table of ``docs/model-families.md``
(:func:`family_table`, kept in step by a test). "Is this the first-order chain?" is the entry's ``first_order``
flag (:func:`is_first_order`), never a string comparison in a consumer.

Adding a family therefore touches two files: the module that defines the model, and one
:func:`register_family` call (here for a built-in family, or in the third party's own module).

>>> from tracetochain.families import families, is_first_order
>>> list(families())[:2]
['markov', 'mixture']
>>> is_first_order("markov"), is_first_order("lifted(k=2)")
(True, False)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracetochain.models import TraceModel
    from tracetochain.models.shared import Grouping

#: ``factory(size, seed=..., group=...)`` → an unfitted model (``size`` is 0 for a family without a size).
Factory = Callable[..., "TraceModel"]
#: What ``model=`` accepts besides a family name: choose among the families.
AUTO = "auto"
#: Sizes of the task classes tried on the best structure when task ids repeat (not a family: a wrapper on one).
TASK_CLASS_SIZES: tuple[int, ...] = (2, 3)


@dataclass(frozen=True)
class Candidate:
    """A named way to build an unfitted model."""

    name: str
    family: str
    size: int | None
    make: Callable[[], TraceModel] = field(repr=False, compare=False)


@dataclass(frozen=True)
class Family:
    """One registered model family.

    ``sizes`` are the sizes ``auto`` tries (empty: the family has no size); ``size_symbol`` names the size in a
    candidate's name (``"k"`` → ``lifted(k=3)``). ``first_order`` marks the baseline every candidate is scored
    against (exactly one family); ``candidate`` puts it among ``auto``'s candidates; ``title``, ``model_class`` and
    ``compiled`` fill the docs table, ``help`` the CLI's ``--model`` help. ``conditions_on`` says what the family
    conditions on beyond the current observed state (why the first-order test does not apply to it);
    ``task_classes`` whether task classes may be put on top of it (not on a mixture: it has classes of its own).
    """

    name: str
    factory: Factory = field(repr=False, compare=False)
    sizes: tuple[int, ...]
    label: str
    size_symbol: str | None = None
    title: str = ""
    model_class: str = ""
    compiled: str = ""
    help: str = ""
    first_order: bool = False
    candidate: bool = True
    conditions_on: str = "more than the state"
    task_classes: bool = True

    def candidate_name(self, size: int | None) -> str:
        """``"lifted(k=3)"`` for a sized family, the family's name otherwise."""
        if self.size_symbol is None or size is None:
            return self.name
        return f"{self.name}({self.size_symbol}={int(size)})"

    def candidate_at(self, size: int, *, seed: int = 0, group: Grouping = "auto") -> Candidate:
        """The candidate of this family at ``size`` (built lazily, as :func:`~tracetochain.models.choose_model`
        builds it)."""
        sized = self.size_symbol is not None
        factory = self.factory
        return Candidate(self.candidate_name(size if sized else None), self.name, int(size) if sized else None,
                         lambda: factory(int(size), seed=seed, group=group))


_FAMILIES: dict[str, Family] = {}


def register_family(name: str, factory: Factory, sizes: tuple[int, ...] = (), label: str = "", *,
                    size_symbol: str | None = None, title: str = "", model_class: str = "", compiled: str = "",
                    help: str = "", first_order: bool = False, candidate: bool = True,
                    conditions_on: str = "more than the state", task_classes: bool = True,
                    replace: bool = False) -> Family:
    """Register a model family under ``name`` (a ``--model`` value, an ``auto`` candidate, a docs row).

    ``factory(size, seed=..., group=...)`` returns an unfitted :class:`~tracetochain.models.TraceModel` whose
    ``family`` is ``name``. A family with sizes needs a ``size_symbol`` (its candidates are named
    ``name(symbol=size)``).
    """
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name) or name == AUTO:
        raise ValueError(f"a family name is lower-case letters, digits, '-' or '_' and not 'auto', got {name!r}")
    if name in _FAMILIES and not replace:
        raise ValueError(f"a model family named {name!r} is already registered (pass replace=True)")
    if len(sizes) > 1 and size_symbol is None:
        raise ValueError(f"family {name!r} has several sizes {sizes}: give size_symbol (e.g. 'k' → {name}(k=2))")
    if size_symbol is not None and not re.fullmatch(r"[A-Za-z]\w*", size_symbol):
        raise ValueError(f"size_symbol must be an identifier, got {size_symbol!r}")
    if first_order and any(f.first_order for n, f in _FAMILIES.items() if n != name):
        raise ValueError("there is already a first-order family (the baseline); only one can be")
    fam = Family(name, factory, tuple(int(s) for s in sizes) or (0,), label, size_symbol, title or name,
                 model_class, compiled, help or label, first_order, candidate, conditions_on, task_classes)
    _FAMILIES[name] = fam
    return fam


def unregister_family(name: str) -> None:
    """Remove a registered family (tests; the first-order family cannot be removed)."""
    fam = get_family(name)
    if fam.first_order:
        raise ValueError("the first-order family is the baseline of every choice and cannot be removed")
    del _FAMILIES[name]


def families() -> dict[str, Family]:
    """The registered families, in registration order (the first-order one first)."""
    return dict(_FAMILIES)


def get_family(name: str) -> Family:
    """The family called ``name`` (a ``ValueError`` naming the choices otherwise)."""
    try:
        return _FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown model family {name!r}; use one of {', '.join(_FAMILIES)}") from None


def first_order_family() -> Family:
    """The baseline family (the first-order chain)."""
    return next(f for f in _FAMILIES.values() if f.first_order)


def is_first_order(name: str) -> bool:
    """Whether ``name`` (a family, a ``model=`` value or a candidate name) is the first-order chain."""
    fam = family_of(name)
    return fam is not None and fam.first_order and "+" not in name


def family_of(name: str) -> Family | None:
    """The registered family a family or candidate name (``"hmm(K=3)"``, ``"lifted(k=2)+tasks(C=2)"``) belongs to."""
    return _FAMILIES.get(re.split(r"[(+]", name, maxsplit=1)[0])


def model_choices() -> tuple[str, ...]:
    """What ``model=`` / ``--model`` accepts: the first-order chain (the default), ``auto``, then every family."""
    base = first_order_family().name
    return (base, AUTO, *(n for n in _FAMILIES if n != base))


def default_candidates() -> tuple[str, ...]:
    """The families ``auto`` tries (the first-order chain among them, as the baseline)."""
    return tuple(n for n, f in _FAMILIES.items() if f.candidate or f.first_order)


def default_sizes() -> dict[str, tuple[int, ...]]:
    """Sizes tried per family (and ``"tasks"``: the task classes' sizes)."""
    return {**{n: f.sizes for n, f in _FAMILIES.items()}, "tasks": TASK_CLASS_SIZES}


_CANDIDATE = re.compile(r"^([a-z][a-z0-9_-]*)(?:\(([A-Za-z]\w*)=(\d+)\))?(?:\+tasks\(C=(\d+)\))?$")


def parse_candidate(name: str) -> tuple[Family, int, int | None]:
    """``(family, size, task classes or None)`` of a candidate name; ``ValueError`` when it names none."""
    m = _CANDIDATE.match(name)
    fam = _FAMILIES.get(m.group(1)) if m else None
    if m is None or fam is None or (m.group(2) or None) != fam.size_symbol:
        examples = ", ".join(f.candidate_name(f.sizes[0]) for f in _FAMILIES.values())
        raise ValueError(f"not a candidate name: {name!r} (e.g. {examples}, "
                         f"{first_order_family().name}+tasks(C=2))")
    return fam, int(m.group(3) or 0), int(m.group(4)) if m.group(4) else None


def model_help() -> str:
    """The ``--model`` help text, one clause per family."""
    base = first_order_family()
    others = ", ".join(f"{f.name} ({f.help})" for f in _FAMILIES.values() if not f.first_order and f.candidate)
    return (f"The model of the traces. {base.name}: {base.help} (default). auto: every family — {others}, and task "
            "classes on the best of them — fitted on the held-out splits; the one with the best held-out "
            "log-likelihood is kept only if it beats the first-order chain by enough standard errors, and the "
            "certificate then checks the choice. A family name: that family, its size chosen the same way. Needs "
            "the traces in memory (not --engine).")


def family_table() -> str:
    """The Markdown table of ``docs/model-families.md`` (a test keeps the page in step with the registry)."""
    rows = ["| family | class | what it adds | compiled chain |", "|---|---|---|---|"]
    rows += [f"| {f.title} | `{f.model_class}` | {f.label} | {f.compiled} |" for f in _FAMILIES.values()]
    rows.append("| task classes | `TaskClassModel(base, C)` | tasks of C kinds on top of any family (how likely they "
                "succeed, which actions they favour) | C copies of the family's chain |")
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------- built-in families
# Factories import their module on first use: the CLI reads this table for its --model choices without loading
# the models.
def _markov(size: int, *, seed: int = 0, group: Any = "auto") -> TraceModel:
    from tracetochain.models.markov import MarkovModel

    return MarkovModel(group=group)


def _mixture(size: int, *, seed: int = 0, group: Any = "auto") -> TraceModel:
    from tracetochain.models.mixture import MixtureModel

    return MixtureModel(size, seed=seed, group=group)


def _lifted(size: int, *, seed: int = 0, group: Any = "auto") -> TraceModel:
    from tracetochain.models.lifted import LiftedModel

    return LiftedModel(size, group=group)


def _hmm(size: int, *, seed: int = 0, group: Any = "auto") -> TraceModel:
    from tracetochain.models.hmm import HiddenMarkovModel

    return HiddenMarkovModel(size, n_init=3, seed=seed, group=group)


def _duration(size: int, *, seed: int = 0, group: Any = "auto") -> TraceModel:
    from tracetochain.models.duration import DurationModel

    return DurationModel(group=group)


register_family("markov", _markov, (), "nothing: the baseline", title="first order", model_class="MarkovModel",
                compiled="the observed states", help="the first-order chain on the states", first_order=True)
register_family("mixture", _mixture, (2, 3, 4), "C latent classes of tasks (or of traces), each with its own chain",
                size_symbol="C", model_class="MixtureModel(C)", compiled="the classes' chains side by side",
                help="latent task classes", conditions_on="latent classes of tasks", task_classes=False)
register_family("lifted", _lifted, (2, 3), "memory of the last k states, only where the data support it",
                size_symbol="k", title="order k", model_class="LiftedModel(k)", compiled="one state per context seen",
                help="memory of the last k states", conditions_on="the last few states")
register_family("hmm", _hmm, (2, 3, 4, 5, 6), "K hidden states that emit the observed labels", size_symbol="K",
                title="hidden states", model_class="HiddenMarkovModel(K)", compiled="the hidden states",
                help="hidden states", conditions_on="hidden states")
register_family("duration", _duration, (), "a clock: rows per step bucket, shrunk toward the state's homogeneous row",
                model_class="DurationModel()", compiled="(state, step) pairs", help="a step clock",
                conditions_on="the step count")
