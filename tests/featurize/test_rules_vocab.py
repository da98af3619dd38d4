"""Rule features, vocabularies (the paper's studies SS10 and SS15), text features."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.featurize import (
    ActionVocabulary,
    RuleFeaturizer,
    TextFeaturizer,
    get_vocabulary,
    register_vocabulary,
    unique_rows,
)
from tracetochain.featurize.vocab import categorize_chat, categorize_shell, categorize_shell_paper, shell_token


@pytest.mark.parametrize(("command", "token", "category"), [
    ("cd /testbed && grep -rn foo .", "grep", "SEARCH"),
    ("PYTHONPATH=/testbed python reproduce.py", "python", "EXECUTE"),
    ("str_replace_editor view /testbed/a.py", "edit:view", "VIEW"),
    ("str_replace_editor str_replace /a --old x --new y", "edit:str_replace", "EDIT"),
    ("sudo rm -rf build", "rm", "FILEOP"),
    ("git diff", "git", "VCS"),
    ("submit", "submit", "SUBMIT"),
    ("cat setup.py | head", "cat", "VIEW"),
    ("cat <<'EOF' > fix.py\nprint(1)\nEOF\npython fix.py", "cat", "EDIT"),
    ("sed -i 's/a/b/' x.py", "sed", "EDIT"),
    ("sed -n '1,20p' x.py", "sed", "VIEW"),
    ("nl -ba x.py | sed -n '1,20p'", "nl", "VIEW"),
    ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", "echo", "SUBMIT"),
    ("rm -rf build && sphinx-build . build", "rm", "EXECUTE"),
    ("", "none", "NONE"),
    ("echo hello", "echo", "OTHER"),
    ("\n\n  pytest -x tests/\nmore", "pytest", "EXECUTE"),
])
def test_shell_vocabulary(command: str, token: str, category: str) -> None:
    assert shell_token(command) == token
    assert categorize_shell("tool", None, command) == category


@pytest.mark.parametrize(("token", "category"), [
    ("cat", "INSPECT"), ("nl", "INSPECT"), ("sed", "OTHER"), ("edit:view", "VIEW"), ("edit:insert", "EDIT"),
    ("PYTHONPATH=/testbed", "NONE"), ("python3", "EXECUTE"), ("none", "NONE"), ("submit", "SUBMIT"),
])
def test_paper_vocabulary_keeps_the_artifacts_map(token: str, category: str) -> None:
    assert categorize_shell_paper(None, token, None) == category


@pytest.mark.parametrize(("kind", "tool", "category"), [
    ("llm", None, "respond"), ("tool", "get_user_details", "lookup"), ("tool", "search_direct_flight", "lookup"),
    ("tool", "book_reservation", "write"), ("tool", "cancel_reservation", "write"),
    ("tool", "transfer_to_human_agents", "handoff"), ("tool", "think", "think"), ("tool", "frobnicate", "other"),
    ("tool", "can_send_mms", "lookup"), ("tool", "toggle_roaming", "write"), ("tool", "run_speed_test", "lookup"),
    ("tool", "getUserDetails", "lookup"), ("user", "reboot_device", "write"), ("user", None, "other"),
])
def test_chat_vocabulary(kind: str, tool: str | None, category: str) -> None:
    assert categorize_chat(kind, tool, None) == category


def test_vocabulary_apply_is_vectorised_and_handles_nulls() -> None:
    v = get_vocabulary("chat")
    codes = v.apply(pa.array(["llm", "tool", None]), pa.array([None, "get_x", None]), None)
    assert [v.categories[c] for c in codes] == ["respond", "lookup", "respond"]


def test_register_custom_vocabulary() -> None:
    vocab = ActionVocabulary("demo-io", ("read", "write"), lambda k, t, x: "read" if t == "get" else "write")
    register_vocabulary(vocab, replace=True)
    assert get_vocabulary("demo-io") is vocab
    with pytest.raises(ValueError, match="exists"):
        register_vocabulary(vocab)
    with pytest.raises(ValueError, match="unknown vocabulary"):
        get_vocabulary("nope")


def test_rule_features_switches_and_codes() -> None:
    t = tt.datasets.load_example()
    full = RuleFeaturizer(retry=True, depth="hindsight-bucket", n_depth_buckets=3).fit(t).fetch_model().transform(t)
    assert "retry" in full.feature_names and "depth_bucket=2" in full.feature_names
    U, w, inverse = unique_rows(full)
    np.testing.assert_array_equal(U[inverse], full.X)
    assert w.sum() == t.n_steps
    bare = RuleFeaturizer(kind=False, tool=False, error=True).fit(t).fetch_model().transform(t)
    assert bare.feature_names == ("error",)
    top = RuleFeaturizer(top_tools=3).fit(t).fetch_model()
    assert len(top.tools) == 4 and top.tools[-1] == "other"


def test_retry_flag_and_depth_fraction() -> None:
    t = tt.TraceTable.from_records([
        {"trace_id": "a", "step_idx": i, "step_kind": "tool", "tool_name": n, "outcome": "success"}
        for i, n in enumerate(["x", "x", "y", "x"])] + [
        {"trace_id": "b", "step_idx": 0, "step_kind": "tool", "tool_name": "x", "outcome": "failure"}])
    f = RuleFeaturizer(retry=True, depth="hindsight-fraction").fit(t).fetch_model().transform(t)
    retry = f.X[:, f.feature_names.index("retry")]
    depth = f.X[:, f.feature_names.index("depth")]
    assert retry.tolist() == [0, 1, 0, 0, 0]  # never across trace boundaries
    np.testing.assert_allclose(depth, [0, 1 / 3, 2 / 3, 1, 0])


def test_text_features_dedupe_and_shape() -> None:
    recs = [{"trace_id": f"t{i}", "step_idx": 0, "step_kind": "llm", "text": ["hello world", "goodbye"][i % 2],
             "outcome": "success"} for i in range(10)]
    t = tt.TraceTable.from_records(recs)
    f = TextFeaturizer(n_components=4).fit(t).fetch_model().transform(t)
    assert f.X.shape[0] == 10
    assert len(np.unique(f.X, axis=0)) == 2


def test_embedding_featurizer_install_hint(tmp_path) -> None:
    pytest.importorskip("tracetochain")
    try:
        import model2vec  # noqa: F401
    except ImportError:
        with pytest.raises(tt.exceptions.TraceToChainError, match=r"pip install 'tracetochain\[embed\]'"):
            tt.featurize.EmbeddingFeaturizer(model_path=tmp_path).fit(tt.datasets.load_example())
    else:
        with pytest.raises(tt.exceptions.TraceToChainError, match="no such model folder"):
            tt.featurize.EmbeddingFeaturizer(model_path=tmp_path / "missing").fit(tt.datasets.load_example())


def test_old_depth_spellings_warn_and_mean_the_hindsight_features() -> None:
    t = tt.TraceTable.from_records([
        {"trace_id": "a", "step_idx": j, "step_kind": "tool", "tool_name": "x", "outcome": "success"}
        for j in range(4)] + [{"trace_id": "b", "step_idx": 0, "step_kind": "llm", "outcome": "failure"}])
    with pytest.warns(FutureWarning, match="final length"):
        old = RuleFeaturizer(depth="fraction").fit(t).fetch_model()
    new = RuleFeaturizer(depth="hindsight-fraction").fit(t).fetch_model()
    assert old == new and not new.causal and new.to_dict()["causal"] is False
    np.testing.assert_array_equal(old.transform(t).X, new.transform(t).X)
    with pytest.warns(FutureWarning):
        assert RuleFeaturizer(depth="bucket").fit(t).fetch_model().depth == "hindsight-bucket"
    with pytest.raises(ValueError, match="depth must be"):
        RuleFeaturizer(depth="later").fit(t)  # type: ignore[arg-type]


def test_step_buckets_are_causal() -> None:
    """The causal depth uses the step index only: cutting a trace short leaves the features of its kept steps
    unchanged (the hindsight depth moves)."""
    recs = [{"trace_id": "a", "step_idx": j, "step_kind": "tool", "tool_name": "x", "outcome": "success"}
            for j in range(8)]
    full = tt.TraceTable.from_records(recs)
    cut = tt.TraceTable.from_records([dict(r, outcome="censored") for r in recs[:3]])
    step = RuleFeaturizer(depth="step", n_depth_buckets=4).fit(full).fetch_model()
    assert step.causal and step.step_edges == (2, 4, 6)
    np.testing.assert_array_equal(step.transform(full).X[:3], step.transform(cut).X)
    assert [n for n in step.transform(full).feature_names if n.startswith("step_bucket")] == [
        "step_bucket=0", "step_bucket=1", "step_bucket=2", "step_bucket=3"]
    hind = RuleFeaturizer(depth="hindsight-fraction").fit(full).fetch_model()
    assert not np.array_equal(hind.transform(full).X[:3], hind.transform(cut).X)


@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(steps=st.lists(st.tuples(st.sampled_from([None, "tool", "llm", "bash"]),
                                st.sampled_from([None, "bash", "python", "str_replace_editor", "grep"]),
                                st.sampled_from([None, "", "cat a.py", "  sed -i s/a/b/ f\n", "git diff", "python t.py",
                                                 "cd x && pytest -q", "submit", "ls\t"])),
                      min_size=1, max_size=60),
       chunks=st.integers(1, 4), vocabulary=st.sampled_from(["shell", "shell-paper"]))
def test_vocabulary_apply_equals_categorising_every_step(steps: list[tuple[str | None, str | None, str | None]],
                                                         chunks: int, vocabulary: str) -> None:
    """Categorising each distinct (kind, tool, text) once and mapping back is categorising every step (nulls and
    chunked columns included)."""
    import pyarrow as pa

    from tracetochain.featurize import get_vocabulary

    vocab = get_vocabulary(vocabulary)
    kinds, tools, texts = (list(col) for col in zip(*steps, strict=True))
    cut = max(1, len(steps) // chunks)

    def chunked(values: list[str | None]) -> pa.ChunkedArray:
        return pa.chunked_array([pa.array(values[i:i + cut], pa.string()) for i in range(0, len(values), cut)])

    got = vocab.apply(chunked(kinds), chunked(tools), chunked(texts))
    index = {c: i for i, c in enumerate(vocab.categories)}
    want = [index[vocab.categorize(k, t, (x or "").strip("\n\r\t ") if vocab.uses_text else None)]
            for k, t, x in steps]
    assert got.tolist() == want


def test_mixed_radix_refuses_a_key_that_could_overflow() -> None:
    """Codes combined into one integer only while the bases' product stays below 2⁶²: beyond, callers compare the
    columns themselves (an overflowing key would merge distinct rows)."""
    from tracetochain.featurize._base import mixed_radix

    a, b = np.array([0, 1, 1, 0]), np.array([3, 0, 3, 3])
    key = mixed_radix([(a, 2), (b, 4)], 4)
    assert key is not None and key.tolist() == [3, 4, 7, 3]
    assert mixed_radix([(a, 1 << 31), (b, 1 << 31)], 4) is None
