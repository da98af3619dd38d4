"""The family registry: one table that ``--model``, ``auto``, candidate names and the docs read (issue 28).

A family defined and registered here, in the test — its module plus one ``register_family`` call, the two files a
new family touches — is a ``--model`` choice on the command line, an ``analyze(model=...)`` value and one of
``auto``'s candidates, without editing any other source file.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import tracetochain as tt
from tests.cli_runner import run_cli
from tracetochain.families import (
    default_candidates,
    default_sizes,
    families,
    family_table,
    first_order_family,
    is_first_order,
    model_choices,
    register_family,
    unregister_family,
)
from tracetochain.models import LiftedModel, choose_model, fit_model, make_candidate

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "tracetochain"
QUICK = {"n_bootstrap": 49, "n_permutations": 49, "trials_permutations": 199}


class ToyModel(LiftedModel):
    """A toy family: a chain on contexts of the last ``depth`` states under its own name."""

    family = "toy"

    def like(self) -> ToyModel:
        return ToyModel(self.order, group=self.group)


def _toy(size: int, *, seed: int = 0, group: str = "auto") -> ToyModel:
    return ToyModel(size, group=group)  # type: ignore[arg-type]


@pytest.fixture
def toy() -> Iterator[str]:
    register_family("toy", _toy, (2, 3), "memory of the last d states, under another name", size_symbol="d",
                    model_class="ToyModel(d)", compiled="one state per context", help="a toy family",
                    conditions_on="the toy's contexts")
    try:
        yield "toy"
    finally:
        unregister_family("toy")


@pytest.fixture(scope="module")
def traces() -> tt.TraceTable:
    return tt.datasets.simulate_traces(tt.datasets.notation_chain(), 200, seed=3)


def test_the_built_in_families_are_the_registry() -> None:
    import tracetochain.analysis._models as am
    import tracetochain.models as models
    import tracetochain.models.selection as sel

    assert list(families()) == ["markov", "mixture", "lifted", "hmm", "duration"]
    assert model_choices() == ("markov", "auto", "mixture", "lifted", "hmm", "duration")
    assert models.MODEL_CHOICES == sel.MODEL_CHOICES == am.MODEL_CHOICES == model_choices()
    assert sel.FAMILIES == tuple(families()) and sel.DEFAULT_CANDIDATES == default_candidates()
    assert sel.DEFAULT_SIZES == default_sizes() and default_sizes()["tasks"] == (2, 3)
    assert first_order_family().name == "markov" and is_first_order("markov")
    assert not is_first_order("lifted(k=2)") and not is_first_order("markov+tasks(C=2)")
    for name in ("markov", "duration", "lifted(k=3)", "hmm(K=4)", "mixture(C=2)", "duration+tasks(C=2)"):
        assert make_candidate(name).name == name
    for bad in ("lifted(K=3)", "hmm", "nope", "markov(k=2)"):
        with pytest.raises(ValueError, match="not a candidate name"):
            make_candidate(bad)


def test_registration_is_checked() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_family("lifted", _toy, (2,), "x", size_symbol="k")
    with pytest.raises(ValueError, match="size_symbol"):
        register_family("toy2", _toy, (2, 3), "x")
    with pytest.raises(ValueError, match="not 'auto'"):
        register_family("auto", _toy, (), "x")
    with pytest.raises(ValueError, match="first-order family"):
        register_family("toy3", _toy, (), "x", first_order=True)
    with pytest.raises(ValueError, match="cannot be removed"):
        unregister_family("markov")
    assert "toy2" not in families() and "toy3" not in families()


def test_the_docs_table_is_the_registry() -> None:
    page = (ROOT / "docs" / "model-families.md").read_text(encoding="utf-8")
    assert family_table() in page, "regenerate the table of docs/model-families.md from families.family_table()"


def test_the_cli_help_lists_the_families() -> None:
    out = run_cli("fit", "--help").stdout
    flat = re.sub(r"\s+", " ", out)
    assert "[markov|auto|mixture|lifted|hmm|duration]" in flat
    for fam in families().values():
        if not fam.first_order:
            assert f"{fam.name} ({fam.help})" in flat


@pytest.mark.slow
def test_a_new_family_needs_no_other_source_file(toy: str, traces: tt.TraceTable, tmp_path: Path) -> None:
    # The library: a --model value, auto's candidate, a candidate name, fit_model and analyze.
    assert "toy" in model_choices() and "toy" in default_candidates() and default_sizes()["toy"] == (2, 3)
    assert make_candidate("toy(d=2)").make().family == "toy"
    choice = choose_model(traces, checks=False, sizes={"hmm": (2,), "mixture": (2,), "lifted": (2,)})
    assert {"toy(d=2)", "toy(d=3)"} <= {c.name for c in choice.candidates}
    fitted = fit_model(traces, "toy", checks=False)
    assert fitted.model.family == "toy" and fitted.name in ("toy(d=2)", "toy(d=3)")
    res = tt.analyze(traces, model="toy", intervals=None, **QUICK)
    mc = res.model_choice
    assert mc is not None and mc.family == "toy" and mc.chosen in ("toy(d=2)", "toy(d=3)")
    assert "toy family was asked for" in mc.reason
    assert res.certificate is not None and "toy's contexts" in res.certificate.layers["order"].message
    assert "| toy | `ToyModel(d)` |" in family_table()
    # The command line: `fit --model toy` (validated against the registry when parsed).
    path = tmp_path / "runs.jsonl"
    traces.write(path)
    r = run_cli("fit", str(path), "--model", "toy", "--uncertainty", "none", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model_choice"]["family"] == "toy"
    assert "no such" not in r.stderr
    bad = run_cli("fit", str(path), "--model", "nope")
    assert bad.returncode != 0 and "markov, auto" in bad.stderr and "toy" in bad.stderr


def _code_strings(tree: ast.AST) -> set[str]:
    """String constants of a module's code (docstrings and their doctests left out)."""
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs}


@pytest.mark.slow
def test_family_names_appear_only_in_the_registry_and_their_module() -> None:
    """The enumeration points are gone: outside ``families.py`` and the family's own module, no source file's code
    names a family other than the first-order one (whose name is the default of ``model=``)."""
    own = {"mixture": "models/mixture.py", "lifted": "models/lifted.py", "hmm": "models/hmm.py",
           "duration": "models/duration.py"}
    # A mixture's components are chains of these families; task classes cannot go on a mixture; in serve,
    # "duration" is a span's field.
    allowed = {"families.py", "models/mixture.py", "models/tasks.py"}
    offenders: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel in allowed:
            continue
        strings = _code_strings(ast.parse(path.read_text(encoding="utf-8")))
        for fam, module in own.items():
            if rel != module and fam in strings and not (fam == "duration" and rel.startswith("serve/")):
                offenders.setdefault(fam, []).append(rel)
    assert not offenders, offenders
