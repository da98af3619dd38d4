"""CategoricalStates, MilestoneStates (and their file validation), states_from_spec, fit --states."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_runner import run_cli

import tracetochain as tt
from tracetochain.states import CategoricalStates, MilestoneFileError, MilestoneStates, states_from_spec

EXAMPLE = tt.datasets.example_path()


def test_categorical_with_chat_vocabulary() -> None:
    t = tt.datasets.load_example()
    model = CategoricalStates(vocabulary="chat").fit(t).fetch_model()
    assert model.state_names == ("respond", "lookup", "write", "handoff", "think")
    assert [s.n_steps for s in model.taxonomy] == [1290, 774, 250, 48, 92]
    full = CategoricalStates(vocabulary="chat", keep_unobserved=True).fit(t).fetch_model()
    assert full.state_names[-1] == "other" and full.taxonomy[-1].n_steps == 0
    np.testing.assert_array_equal(model.predict(t), model.fit_labels)


def test_categorical_without_vocabulary_is_the_traces_own_labels() -> None:
    t = tt.datasets.load_example()
    model = CategoricalStates().fit(t).fetch_model()
    assert model.state_names == tuple(t.state_labels()[1])


MILESTONES = """\
catch_all = "talk"
vocabulary = "chat"

[[state]]
name = "tool error"
error = true

[[state]]
name = "look up"
category = "lookup"

[[state]]
name = "booking"
tool_name = ["book_*", "update_reservation_*"]
"""


def test_milestones_first_rule_wins_and_catch_all(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(MILESTONES)
    t = tt.datasets.load_example()
    model = MilestoneStates(path).fit(t).fetch_model()
    assert model.state_names == ("tool error", "look up", "booking", "talk")
    table = t.to_arrow()
    err = np.asarray(table.column("error"))
    labels = model.predict(t)
    assert (labels[err] == 0).all()  # errors win over any later rule
    tools = np.asarray(table.column("tool_name").fill_null(""), dtype=object)
    booking = np.array([x.startswith(("book_", "update_reservation_")) for x in tools]) & ~err
    assert (labels[booking] == 2).all()
    assert model.settings["catch_all"] == "talk"


def test_milestone_typo_names_file_line_and_valid_fields(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(MILESTONES.replace('tool_name = ["book_*"', 'toolname = ["book_*"'))
    with pytest.raises(MilestoneFileError) as info:
        MilestoneStates(path).fit(tt.datasets.load_example())
    msg = str(info.value)
    assert f"{path}:14:" in msg and "unknown field 'toolname'" in msg
    assert "valid fields are name, step_kind, tool_name, error" in msg


@pytest.mark.parametrize(("text", "needle"), [
    ("[[state]]\nname = 'x'\n", "has no condition"),
    ("[[state]]\nname = 'x'\nerror = 'yes'\n", "error must be true or false"),
    ("[[state]]\nname = 'x'\ntext = '(unclosed'\n", "invalid regular expression"),
    ("[[state]]\nname = 'x'\ncategory = 'lookup'\n", "category conditions need vocabulary"),
    ("colour = 'red'\n[[state]]\nname = 'x'\nerror = true\n", "unknown setting 'colour'"),
    ("[[state]]\nname = 'x'\nerror = true\n[[state]]\nname = 'x'\nerror = false\n", "used twice"),
    ("this is = = not toml", "not valid TOML"),
])
def test_milestone_file_errors(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "m.toml"
    path.write_text(text)
    with pytest.raises(MilestoneFileError, match=needle):
        MilestoneStates(path).fit(tt.datasets.load_example())


def test_states_from_spec() -> None:
    assert isinstance(states_from_spec("label"), CategoricalStates)
    assert states_from_spec("label", vocabulary="chat").vocabulary == "chat"
    assert isinstance(states_from_spec("milestones:x.toml"), MilestoneStates)
    with pytest.raises(ValueError, match="needs --vocabulary"):
        states_from_spec("categorical")
    with pytest.raises(ValueError, match="unknown feature"):
        states_from_spec("ward", features="kind,colour")
    with pytest.raises(ValueError, match="unknown --states"):
        states_from_spec("kmeans")


def test_fit_cli_records_state_settings(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    r = run_cli("fit", str(EXAMPLE), "--states", "ward",
                "--vocabulary", "chat", "--features", "kind,tool,error,retry", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "states (ward)" in r.stdout
    doc = json.loads(out.read_text())
    st = doc["metadata"]["states"]
    assert st["method"] == "ward" and st["settings"]["featurizer"]["vocabulary"] == "chat"
    assert len(st["taxonomy"]) == len(doc["state_names"]) == st["settings"]["k"]
    r = run_cli("fit", str(EXAMPLE), "--states", "ward", "--features", "colour")
    assert r.returncode == 2 and "unknown feature" in r.stderr and "Traceback" not in r.stderr
