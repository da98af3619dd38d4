"""Langfuse reader: trace downloads, export folders, nesting, errors, trace-level scores, sniffing.

The producer cannot be installed here: Langfuse exports come from a running Langfuse server (its UI download or
public API), which needs a database and network services this test environment does not have, and no real export
is among the shared data. The fixtures follow the export schema of the Langfuse API reference field by field.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

import tracetochain as tt
from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._registry import detect_format
from tracetochain.readers.langfuse import LANGFUSE

DATA = Path(__file__).resolve().parents[1] / "data" / "readers" / "langfuse"
OTLP_DATA = Path(__file__).resolve().parents[1] / "data" / "readers" / "otlp"
EXPORT = DATA / "export"


def rows(table: tt.TraceTable, trace_id: str) -> list[dict[str, Any]]:
    return [r for r in table.to_arrow().to_pylist() if r["trace_id"] == trace_id]


def obs(oid: str, tid: str, typ: str, t0: float, parent: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": oid, "traceId": tid, "type": typ, "name": extra.pop("name", typ.lower()),
            "startTime": f"2026-01-01T10:00:{t0:06.3f}Z", "parentObservationId": parent, **extra}


def score(tid: str, value: Any, name: str = "ok", dtype: str = "NUMERIC", **extra: Any) -> dict[str, Any]:
    return {"traceId": tid, "name": name, "value": value, "dataType": dtype, **extra}


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# ------------------------------------------------------------------------------------------- trace download
def test_trace_download_nesting_and_tool_calls() -> None:
    t = LANGFUSE.read(DATA / "trace_download.json", task_attribute="metadata.task_id",
                      trial_attribute="metadata.trial")
    r = rows(t, "tr_5d2")
    # ob_2 (GENERATION) has two TOOL children → two tool steps, no llm step for it; ob_7 (EVENT) sits inside the
    # generation ob_6 → not a step; ob_8 is a plain SPAN leaf → "other"; the AGENT ob_1 is a wrapper.
    assert [(x["step_kind"], x.get("tool_name")) for x in r] == [
        ("tool", "lookup_order"), ("tool", "check_policy"), ("tool", "lookup_order"), ("llm", None),
        ("other", "format_reply")]
    assert [x["error"] for x in r] == [True, False, False, False, False]  # handled: only the failing call
    # The generation that made the two calls is no step: its usage lands on its first step.
    assert (r[0]["tokens_in"], r[0]["tokens_out"], r[0]["cost_usd"]) == (812, 64, pytest.approx(0.0031))
    assert (r[3]["tokens_in"], r[3]["tokens_out"], r[3]["cost_usd"]) == (990, 40, pytest.approx(0.004))
    assert r[0]["text"] == '{"order_id": "A7"}' and r[3]["text"] == "Your refund is on its way."
    assert r[0]["t_start"] == r[1]["t_start"]  # same start: ordered by observation id
    # BOOLEAN trace-level score; the observation-level "helpfulness" score is not a verdict (and not a 2nd name).
    assert {(x["outcome"], x["reward"], x["task_id"], x["trial"]) for x in r} == {("success", 1.0, "retail-17", 2)}
    assert t.report.format == "langfuse" and t.report.location_kind == "row"


# ------------------------------------------------------------------------------------------- export folder
def test_export_folder_errors_and_scores() -> None:
    t = LANGFUSE.read(EXPORT, score_name="task_success", on_error="skip", task_attribute="metadata.task_id",
                      trial_attribute="metadata.trial")
    a = rows(t, "tr_a")
    assert [(x["step_kind"], x.get("tool_name"), x["error"]) for x in a] == [
        ("tool", "web_search", True), ("tool", "web_search", False), ("llm", None, False)]
    assert {x["outcome"] for x in a} == {"success"} and a[0]["tokens_in"] == 100
    # Unhandled: the AGENT observation is ERROR as well, which marks no step; the outcome is the latest score (0.4),
    # not the observation level.
    b = rows(t, "tr_b")
    assert [(x["step_kind"], x.get("tool_name"), x["error"]) for x in b] == [("tool", "calculator", True)]
    assert {(x["outcome"], x["reward"], x["task_id"], x["trial"]) for x in b} == {("failure", 0.4, "q-2", 1)}
    # Older SDK layout: tools as plain SPAN leaves → "other" steps named after the span; CATEGORICAL verdict.
    c = rows(t, "tr_c")
    assert [(x["step_kind"], x.get("tool_name")) for x in c] == [("llm", None), ("other", "fetch_docs"), ("llm", None)]
    assert {x["outcome"] for x in c} == {"success"} and c[0].get("reward") is None
    # tr_d has only an observation-level score: dropped and counted.
    assert t.trace_ids == ["tr_a", "tr_b", "tr_c"] and t.report.n_traces_skipped == 1
    assert t.report.location_kind == "line"


def test_several_score_names_need_score_name() -> None:
    for on_error in ("raise", "skip"):
        with pytest.raises(TraceValidationError, match="several trace-level scores") as info:
            LANGFUSE.read(EXPORT, on_error=on_error)
        assert "helpfulness, task_success" in str(info.value) and info.value.field == "score_name"


def test_missing_score_names_the_trace_and_file() -> None:
    with pytest.raises(TraceValidationError, match="no trace-level score named 'task_success'") as info:
        LANGFUSE.read(EXPORT, score_name="task_success")
    assert "tr_d" in str(info.value) and info.value.source.endswith("traces.json") and info.value.row == 3


def test_threshold_and_success_values() -> None:
    t = LANGFUSE.read(EXPORT, score_name="task_success", on_error="skip", success_threshold=0.3)
    assert {x["outcome"] for x in rows(t, "tr_b")} == {"success"}
    t = LANGFUSE.read(EXPORT, score_name="task_success", on_error="skip", success_values=["excellent"])
    assert {x["outcome"] for x in rows(t, "tr_c")} == {"failure"}
    t = LANGFUSE.read(EXPORT, score_name="helpfulness", on_error="skip", success_threshold=0.5)
    assert t.trace_ids == ["tr_a"] and t.report.n_traces_skipped == 3


def test_untyped_leaves_option() -> None:
    t = LANGFUSE.read(EXPORT, score_name="task_success", on_error="skip", untyped_leaves=False)
    assert [x["step_kind"] for x in rows(t, "tr_c")] == ["llm", "llm"]
    t = LANGFUSE.read(DATA / "trace_download.json", untyped_leaves=False)
    assert "other" not in t.to_arrow().column("step_kind").to_pylist()


def test_folder_with_subfolders(tmp_path: Path) -> None:
    for kind, name in (("traces", "traces.json"), ("observations", "observations.jsonl"), ("scores", "scores.json")):
        (tmp_path / kind).mkdir()
        shutil.copy(EXPORT / name, tmp_path / kind / f"2026-01-01_{name}")
    t = LANGFUSE.read(tmp_path, score_name="task_success", on_error="skip")
    assert t.trace_ids == ["tr_a", "tr_b", "tr_c"]
    assert LANGFUSE.sniff(tmp_path)


def test_folder_without_export_files(tmp_path: Path) -> None:
    with pytest.raises(TraceValidationError, match="no Langfuse export files"):
        LANGFUSE.read(tmp_path)
    assert not LANGFUSE.sniff(tmp_path)
    shutil.copy(OTLP_DATA / "collector.jsonl", tmp_path / "traces.jsonl")  # named like an export, but OTLP
    assert not LANGFUSE.sniff(tmp_path)


# ------------------------------------------------------------------------------------------- other shapes
def test_mixed_jsonl_and_bundle_and_api_page(tmp_path: Path) -> None:
    records = [obs("o1", "t1", "GENERATION", 1), obs("o2", "t1", "TOOL", 2, name="grep", level="ERROR"),
               obs("o3", "t1", "GENERATION", 3), score("t1", True, dtype="BOOLEAN")]
    t = LANGFUSE.read(write_jsonl(tmp_path / "mixed.jsonl", records))
    assert [(x["step_kind"], x["error"]) for x in t.to_arrow().to_pylist()] == [
        ("llm", False), ("tool", True), ("llm", False)]
    assert t.outcome_counts()["success"] == 1 and t.report.location_kind == "line"
    bundle = {"traces": [{"id": "t1", "metadata": '{"task_id": "x"}'}], "observations": records[:3],
              "scores": records[3:]}
    (tmp_path / "bundle.json").write_text(json.dumps(bundle))
    t2 = LANGFUSE.read(tmp_path / "bundle.json", task_attribute="metadata.task_id")
    assert t2.n_steps == 3 and t2.to_arrow().column("task_id")[0].as_py() == "x"
    (tmp_path / "page.json").write_text(json.dumps({"data": [{"id": "t1", "observations": records[:3],
                                                              "scores": records[3:]}], "meta": {"page": 1}}))
    assert LANGFUSE.read(tmp_path / "page.json").n_steps == 3


def test_task_from_root_observation_when_no_trace_record(tmp_path: Path) -> None:
    records = [obs("o1", "t1", "AGENT", 0, metadata={"task_id": "k-1", "trial": "3"}),
               obs("o2", "t1", "GENERATION", 1, "o1"), score("t1", 1.0)]
    t = LANGFUSE.read(write_jsonl(tmp_path / "o.jsonl", records), task_attribute="metadata.task_id",
                      trial_attribute="metadata.trial")
    r = t.to_arrow().to_pylist()
    assert (r[0]["task_id"], r[0]["trial"]) == ("k-1", 3)


def test_boolean_and_categorical_scores(tmp_path: Path) -> None:
    cases = [({"stringValue": "False", "dataType": "BOOLEAN", "value": None}, "failure"),
             ({"value": 0, "dataType": "BOOLEAN"}, "failure"),
             ({"value": True, "dataType": "BOOLEAN"}, "success"),
             ({"stringValue": "pass", "value": 3, "dataType": "CATEGORICAL"}, "success"),
             ({"stringValue": "incorrect"}, "failure"),
             ({"value": "1.0"}, "success")]
    for i, (fields, expected) in enumerate(cases):
        path = write_jsonl(tmp_path / f"s{i}.jsonl", [obs("o1", "t1", "GENERATION", 1),
                                                      {"traceId": "t1", "name": "v", **fields}])
        assert LANGFUSE.read(path).outcome_counts()[expected] == 1, fields
    path = write_jsonl(tmp_path / "bad.jsonl", [obs("o1", "t1", "GENERATION", 1),
                                                {"traceId": "t1", "name": "v", "value": 0.5, "dataType": "BOOLEAN"}])
    with pytest.raises(TraceValidationError, match="neither 0/1"):
        LANGFUSE.read(path)
    path = write_jsonl(tmp_path / "cat.jsonl", [obs("o1", "t1", "GENERATION", 1),
                                                {"traceId": "t1", "name": "v", "stringValue": "meh",
                                                 "dataType": "CATEGORICAL"}])
    with pytest.raises(TraceValidationError, match="success_values"):
        LANGFUSE.read(path)


def test_trace_without_steps_is_kept_as_a_zero_step_trial(tmp_path: Path) -> None:
    records = [obs("o1", "t1", "GENERATION", 1), score("t1", 1.0),
               obs("p1", "t2", "AGENT", 1), obs("p2", "t2", "EVALUATOR", 2, "p1"), score("t2", 1.0)]
    t = LANGFUSE.read(write_jsonl(tmp_path / "o.jsonl", records))
    assert t.trace_ids == ["t1"] and t.report.n_traces_skipped == 0
    assert t.report.zero_step == [{"trace_id": "t2", "outcome": "success", "reward": 1.0}]


# ------------------------------------------------------------------------------------------- malformed input
@pytest.mark.parametrize(("bad", "field", "message"), [
    ({"type": None}, "type", "has no type"),
    ({"startTime": "yesterday"}, "startTime", "not a time"),
    ({"traceId": None}, "traceId", "has no traceId"),
    ({"id": ""}, "id", "has no id"),
    ({"parentObservationId": {"x": 1}}, "parentObservationId", "not an id"),
])
def test_bad_observation_names_file_line_and_field(tmp_path: Path, bad: dict[str, Any], field: str,
                                                   message: str) -> None:
    o2 = obs("o2", "t1", "TOOL", 2, "o1")  # a child of o1: even without its traceId it is known to be t1's
    o2.update(bad)
    records = [obs("q1", "t2", "GENERATION", 1), score("t2", 1.0), obs("o1", "t1", "GENERATION", 1), o2,
               score("t1", 1.0)]
    path = write_jsonl(tmp_path / "o.jsonl", records)
    with pytest.raises(TraceValidationError, match=message) as info:
        LANGFUSE.read(path)
    assert info.value.line == 4 and info.value.field == field and info.value.source == str(path)
    t = LANGFUSE.read(path, on_error="skip")
    assert "t2" in t.trace_ids and "t1" not in t.trace_ids


def test_invalid_json_line_and_cycle(tmp_path: Path) -> None:
    path = tmp_path / "o.jsonl"
    path.write_text(json.dumps(obs("o1", "t1", "GENERATION", 1)) + "\n{not json\n" + json.dumps(score("t1", 1)))
    with pytest.raises(TraceValidationError, match="not valid JSON") as info:
        LANGFUSE.read(path)
    assert info.value.line == 2
    assert LANGFUSE.read(path, on_error="skip").n_traces == 1
    cyc = [obs("o1", "t1", "GENERATION", 1), obs("o2", "t1", "TOOL", 2, "o3"), obs("o3", "t1", "TOOL", 3, "o2"),
           score("t1", 1.0)]
    with pytest.raises(TraceValidationError, match="cycle"):
        LANGFUSE.read(write_jsonl(tmp_path / "c.jsonl", cyc))


@pytest.mark.slow
def test_random_corruption_never_escapes_as_a_bare_error(tmp_path: Path) -> None:
    rng = random.Random(7)
    base = json.loads((DATA / "trace_download.json").read_text())
    junk: list[Any] = [None, 0, -1, 2.5, "", "x", [], {}, [1], {"a": 1}, True]
    for i in range(300):
        d = json.loads(json.dumps(base))
        for _ in range(rng.randint(1, 3)):
            node: Any = d
            path: list[Any] = []
            while isinstance(node, (dict, list)) and node and rng.random() < 0.85:
                key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
                path.append((node, key))
                node = node[key]
            if path:
                parent, key = path[-1]
                parent[key] = json.loads(json.dumps(rng.choice(junk)))
        p = tmp_path / f"c{i}.json"
        p.write_text(json.dumps(d))
        try:
            LANGFUSE.read(p)
        except TraceValidationError:
            pass
        try:
            LANGFUSE.read(p, on_error="skip")
        except TraceValidationError as exc:  # only input-wide problems may raise in skip mode
            assert "expected a trace object" in str(exc) or "several trace-level scores" in str(exc)


def test_unknown_options() -> None:
    with pytest.raises(TypeError, match="unknown options"):
        LANGFUSE.read(DATA / "trace_download.json", verdicts="x.json")
    with pytest.raises(TypeError):
        LANGFUSE.read(DATA / "trace_download.json", score_name="")
    with pytest.raises(TraceValidationError, match="no such file"):
        LANGFUSE.read(DATA / "nope.json")


# ------------------------------------------------------------------------------------------- sniffing
def test_sniff() -> None:
    for p in (DATA / "trace_download.json", EXPORT, EXPORT / "observations.jsonl"):
        assert LANGFUSE.sniff(p), p
        assert detect_format(p) == "langfuse", p
    for p in sorted(OTLP_DATA.iterdir()):
        assert not LANGFUSE.sniff(p), p
    assert LANGFUSE.sniff(DATA)  # a folder holding a trace download is a valid input too


def test_sniff_rejects_canonical_table(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "c.jsonl", [{"trace_id": "t", "step_idx": 0, "state": "a", "outcome": "success"}])
    assert not LANGFUSE.sniff(p)
    assert detect_format(p) == "canonical"


def test_read_traces_entry_point() -> None:
    t = tt.read_traces(DATA / "trace_download.json")
    assert t.report.format == "langfuse" and t.n_traces == 1
    assert LANGFUSE.name == "langfuse" and LANGFUSE.needs and LANGFUSE.description
