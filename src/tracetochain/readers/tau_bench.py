"""τ-bench and τ²-bench results (Sierra Research): the origin of pass^k, with task ids, trials and rewards.

τ-bench (``tau-bench``; github.com/sierra-research/tau-bench, MIT; Yao et al. 2024)
    One JSON file per run: a list of ``EnvRunResult{task_id: int, reward: float, info: dict, traj: [message],
    trial: int}``, where ``traj`` is an OpenAI-style chat (``system``, ``user``, ``assistant`` with
    ``tool_calls[].function{name, arguments: JSON string}``, ``tool`` with ``tool_call_id``/``name``/``content``).
    τ-bench keeps only the first tool call of each assistant turn in its logs; the reader reads what is there.
    Mapping:

    * ``trace_id`` = ``"<file stem>/task<task_id>/trial<trial>"`` (unique per (task, trial); a repeated pair is an
      error); ``task_id`` = ``task_id`` as text; ``trial`` = ``trial`` (when absent: the episode's position among
      the file's episodes of the same task, 0-based); ``reward`` = ``reward``.
    * steps: :func:`~tracetochain.readers.openai_messages.steps_from_messages` over ``traj`` — each tool call a
      ``tool`` step (``tool_name``; ``text`` = the arguments string), a plain assistant reply an ``llm`` step, user
      turns only with ``include_user=True``; ``error`` when the tool's reply starts with ``"Error"`` (τ-bench's
      convention: its tools return ``"Error: …"`` on failure and there is no flag).
    * ``outcome``: ``invalid`` when ``info`` holds ``error``/``traceback`` (an exception during ``solve``; τ-bench
      then writes reward 0), with ``termination_reason`` ``"error"``; else success when reward ≥
      ``success_threshold`` (τ-bench: 1 − 1e−6), failure below. τ-bench records no step-budget flag (its agents stop
      after 30 steps silently), so no episode is marked censored.

τ²-bench (``tau2-bench``; github.com/sierra-research/tau2-bench, MIT; Barres et al. 2025)
    A ``Results`` JSON ``{timestamp, info{num_trials, max_steps, agent_info, user_info, environment_info, …},
    tasks, simulations[SimulationRun]}`` — also accepted: the directory form (``results.json`` + ``simulations/``
    with one ``SimulationRun`` per file; pass the folder or its ``results.json``) and a bare list of simulations.
    ``SimulationRun{id, task_id, trial, termination_reason, reward_info{reward, …}, messages[…]}``; messages carry
    ``tool_calls[{id, name, arguments: dict, requestor}]``, ``turn_idx``, ``timestamp``, ``usage``, ``cost``; tool
    results are ``{role: "tool", id, content, requestor, error: bool}``. Mapping:

    * ``trace_id`` = the simulation ``id`` (else ``"<file stem>/task<task_id>/trial<trial>"``); ``task_id``,
      ``trial``, ``termination_reason`` as recorded; ``reward`` = ``reward_info.reward``.
    * steps: the same message walk over ``messages`` (ordered by ``turn_idx``), ``error`` = the tool message's
      ``error`` flag (missing → false, the τ² default); ``t_start`` from the message timestamp (naive ISO → UTC),
      ``t_end`` from the tool result's; ``usage``/``cost`` on the turn's first step. In telecom the simulated user
      also calls tools (``requestor: "user"``); those become ``user`` steps with ``include_user=True`` and are
      dropped otherwise. An assistant message's ``errors`` list (τ²'s record of a repaired malformed message) is not
      a step error.
    * ``outcome`` from ``termination_reason``: ``max_steps``, ``timeout`` and ``context_window_exceeded`` (budget
      limits) → ``censored``; ``infrastructure_error``, ``user_error`` (the user simulator failed) and
      ``unexpected_error`` → ``invalid``; every other reason (``user_stop``, ``agent_stop``, ``too_many_errors``,
      ``agent_error``, …) → success when ``reward_info.reward`` ≥ ``success_threshold``, failure below. The sets can
      be replaced with ``censored_reasons=`` / ``invalid_reasons=``. A simulation that needs its reward but has none
      is an error (or skipped and counted with ``on_error="skip"``).

Episodes without any agent step cannot be represented in the long table; they are dropped and counted in the
ingest report without raising, even with ``on_error="raise"``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._common import (
    DEFAULT_SUCCESS_THRESHOLD,
    Refusal,
    Sniffed,
    TraceBuilder,
    head_text,
    keys_text,
    load_json,
    outcome_from_reward,
    read_record_head,
    wrong_suffix,
)
from tracetochain.readers.openai_messages import (
    EpisodeFormatError,
    ToolErrorRule,
    add_trace,
    check_threshold,
    parse_reward,
    parse_task_id,
    parse_trial,
    steps_from_messages,
    tool_error_rule,
)
from tracetochain.traces import TraceTable

__all__ = ["TAU2_BENCH", "TAU2_CENSORED_REASONS", "TAU2_INVALID_REASONS", "TAU_BENCH", "Tau2BenchReader",
           "TauBenchReader"]

#: τ² termination reasons that are budget limits: the run was cut off, not finished (censored).
TAU2_CENSORED_REASONS = frozenset({"max_steps", "timeout", "context_window_exceeded"})
#: τ² termination reasons that are failures of the harness, not of the agent (invalid, excluded).
TAU2_INVALID_REASONS = frozenset({"infrastructure_error", "user_error", "unexpected_error"})

_TAU_TOOL_ERROR: ToolErrorRule = tool_error_rule(flag=False, prefix="Error")
_TAU2_TOOL_ERROR: ToolErrorRule = tool_error_rule(flag=True, prefix=None)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# ================================================================================================ τ-bench
class TauBenchReader:
    name = "tau-bench"
    description = "τ-bench results: a JSON list of EnvRunResult {task_id, trial, reward, info, traj}"
    needs = "nothing else"

    def sniff(self, path: Path) -> Sniffed:
        if not path.is_file() or path.suffix.lower() != ".json":
            return wrong_suffix(path, (".json",))
        head = read_record_head(head_text(path))
        if head is None or head.container != "list":
            return Refusal("not a JSON list of results")
        if head.keys.get("traj") == "[" and {"task_id", "reward"} <= set(head.keys):
            return True
        missing = [k for k in ("traj", "task_id", "reward") if k not in head.keys]
        if missing:
            return Refusal(f"the first result lacks {', '.join(missing)}; its keys: {keys_text(head.keys)}")
        shown = {"{": "an object", '"': "a string"}.get(head.keys.get("traj", ""), "a number or null")
        return Refusal(f"the first result's traj is {shown}, not a list of messages; its keys: "
                       f"{keys_text(head.keys)}")

    def read(self, path: Path, *, on_error: str = "raise", success_threshold: float = DEFAULT_SUCCESS_THRESHOLD,
             include_user: bool = False) -> TraceTable:
        """Read a τ-bench results file (options: ``success_threshold``, ``include_user``)."""
        path = Path(path)
        threshold = check_threshold(success_threshold)
        if not path.is_file():
            raise TraceValidationError("no such file", source=str(path))
        data = load_json(path)
        if not isinstance(data, list):
            raise TraceValidationError(
                f"expected a JSON list of τ-bench results, got {_type_name(data)}", source=str(path),
                hint="a τ-bench results file is a list of {task_id, trial, reward, info, traj} objects",
            )
        builder = TraceBuilder(str(path), self.name, on_error, "row")
        per_task: Counter[str] = Counter()
        seen: set[str] = set()
        for index, ep in enumerate(data):
            try:
                trace, steps = self._episode(ep, path.stem, threshold, bool(include_user), per_task)
            except EpisodeFormatError as exc:
                builder.skip_trace(exc.message, location=index, field=exc.field, hint=exc.hint)
                continue
            if trace["trace_id"] in seen:
                builder.skip_trace(
                    f"task {trace['task_id']} trial {trace['trial']} appears twice", location=index,
                    field="trial", hint="each (task_id, trial) pair must be one independent episode; "
                    "remove the duplicate (concatenated or resumed runs repeat episodes)",
                )
                continue
            seen.add(trace["trace_id"])
            add_trace(builder, steps, trace, index, empty_field="traj")
        return builder.build()

    @staticmethod
    def _episode(ep: Any, stem: str, threshold: float, include_user: bool,
                 per_task: Counter[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        if not isinstance(ep, dict):
            raise EpisodeFormatError(f"expected a result object, got {_type_name(ep)}", None,
                                     "each element must be {task_id, trial, reward, info, traj}")
        task_id = parse_task_id(ep.get("task_id"), "task_id")
        if task_id is None:
            raise EpisodeFormatError("result has no task_id", "task_id", "every τ-bench result names its task")
        trial = parse_trial(ep.get("trial"), "trial")
        if trial is None:
            trial = per_task[task_id]
        per_task[task_id] += 1
        reward = parse_reward(ep.get("reward"), "reward")
        info = ep.get("info")
        if info is not None and not isinstance(info, dict):
            raise EpisodeFormatError(f"expected an object, got {_type_name(info)}", "info")
        crashed = isinstance(info, dict) and ("error" in info or "traceback" in info)
        outcome: str | None
        termination: str | None
        if crashed:
            outcome, termination = "invalid", "error"
        else:
            outcome, termination = outcome_from_reward(reward, threshold), None
            if outcome is None:
                raise EpisodeFormatError("result has no reward", "reward",
                                         "τ-bench writes the episode's reward (1.0 = task solved); without it the "
                                         "outcome is unknown")
        if "traj" not in ep:
            raise EpisodeFormatError("result has no 'traj' message list", "traj")
        steps = steps_from_messages(ep["traj"], include_user=include_user, tool_error=_TAU_TOOL_ERROR,
                                    field="traj")
        trace = {"trace_id": f"{stem}/task{task_id}/trial{trial}", "outcome": outcome, "task_id": task_id,
                 "trial": trial, "reward": reward, "termination_reason": termination}
        return trace, steps


# ================================================================================================ τ²-bench
def _looks_like_tau2(text: str) -> Sniffed:
    head = read_record_head(text)
    if head is None:
        return Refusal("does not start with a JSON object or list")
    keys = set(head.keys)
    if head.container == "list":  # a bare list of SimulationRun objects
        if {"task_id", "termination_reason"} <= keys:
            return True
        return Refusal(f"a list whose first record lacks task_id or termination_reason; its keys: "
                       f"{keys_text(head.keys)}")
    if head.keys.get("simulations") == "[":
        return True
    info = head.nested.get("info", set())
    if {"agent_info", "user_info"} <= info or ({"num_trials", "max_steps"} <= info and "agent_info" in info):
        return True
    return Refusal(f"no 'simulations' list or τ² 'info' block; its keys: {keys_text(head.keys)}")


class Tau2BenchReader:
    name = "tau2-bench"
    description = ("τ²-bench results: {info, tasks, simulations[{id, task_id, trial, termination_reason, "
                   "reward_info, messages}]} (file or results.json + simulations/ folder)")
    needs = "nothing else"

    def sniff(self, path: Path) -> Sniffed:
        if path.is_dir():
            meta = path / "results.json"
            if not (meta.is_file() and (path / "simulations").is_dir()):
                return Refusal("a folder without results.json and simulations/")
            return _looks_like_tau2(head_text(meta))
        if not path.is_file() or path.suffix.lower() != ".json":
            return wrong_suffix(path, (".json",))
        return _looks_like_tau2(head_text(path))

    def read(self, path: Path, *, on_error: str = "raise", success_threshold: float = DEFAULT_SUCCESS_THRESHOLD,
             include_user: bool = False, censored_reasons: Iterable[str] | None = None,
             invalid_reasons: Iterable[str] | None = None) -> TraceTable:
        """Read a τ²-bench ``Results`` file or folder (options: ``success_threshold``, ``include_user``,
        ``censored_reasons``, ``invalid_reasons``)."""
        path = Path(path)
        threshold = check_threshold(success_threshold)
        censored = _reason_set(censored_reasons, TAU2_CENSORED_REASONS, "censored_reasons")
        invalid = _reason_set(invalid_reasons, TAU2_INVALID_REASONS, "invalid_reasons")
        if censored & invalid:
            raise ValueError(f"termination reasons {sorted(censored & invalid)} are both censored and invalid")
        if not path.exists():
            raise TraceValidationError("no such file or folder", source=str(path))
        builder = TraceBuilder(str(path), self.name, on_error, "row")
        stem = path.name if path.is_dir() else path.stem
        seen: set[str] = set()
        for index, sim_file, sim in _simulations(path, builder):
            # directory form: the simulation's own file is named (a row index into a file of one would mislead)
            loc = index if sim_file is None else None
            try:
                trace, steps = _simulation(sim, stem, threshold, bool(include_user), censored, invalid)
            except EpisodeFormatError as exc:
                builder.skip_trace(exc.message, location=loc, field=exc.field, hint=exc.hint, source=sim_file)
                continue
            if trace["trace_id"] in seen:
                builder.skip_trace(f"simulation id {trace['trace_id']!r} appears twice", location=loc, field="id",
                                   hint="each simulation must be one independent episode; remove the duplicate",
                                   source=sim_file)
                continue
            seen.add(trace["trace_id"])
            add_trace(builder, steps, trace, index, empty_field="messages")
        return builder.build()


def _reason_set(value: Iterable[str] | None, default: frozenset[str], option: str) -> frozenset[str]:
    if value is None:
        return default
    if isinstance(value, str):
        value = [value]
    try:
        reasons = frozenset(value)
    except TypeError:
        raise TypeError(f"{option} must be a collection of termination reasons, got {value!r}") from None
    if not all(isinstance(r, str) for r in reasons):
        raise TypeError(f"{option} must hold strings, got {sorted(map(repr, reasons))}")
    return reasons


def _simulations(path: Path, builder: TraceBuilder) -> Iterator[tuple[int, Path | None, Any]]:
    """(index, simulation file for the directory form or None, simulation) for every simulation of a results
    file/folder."""
    if path.is_dir():
        meta_path, sims_dir = path / "results.json", path / "simulations"
    else:
        meta_path, sims_dir = path, path.parent / "simulations"
    embedded: list[Any] | None = None
    if meta_path.is_file():
        data = load_json(meta_path)
        if isinstance(data, list):
            embedded = data
        elif isinstance(data, dict):
            sims = data.get("simulations")
            if sims is not None and not isinstance(sims, list):
                raise TraceValidationError(f"expected a list of simulations, got {_type_name(sims)}",
                                           source=str(meta_path), field="simulations")
            embedded = sims
        else:
            raise TraceValidationError(f"expected a τ²-bench Results object, got {_type_name(data)}",
                                       source=str(meta_path),
                                       hint="a τ² results file is {timestamp, info, tasks, simulations}")
    elif path.is_dir():
        raise TraceValidationError("folder has no results.json", source=str(path),
                                   hint="pass a τ²-bench results file, or a folder with results.json + simulations/")
    if embedded:  # the monolithic form (a non-empty list wins over a stray simulations/ folder)
        for index, sim in enumerate(embedded):
            yield index, None, sim
        return
    if not sims_dir.is_dir():
        if embedded is None:
            raise TraceValidationError("no simulations: the file has no 'simulations' list and there is no "
                                       "simulations/ folder beside it", source=str(path), field="simulations")
        return  # an empty run
    for index, sim_file in enumerate(sorted(sims_dir.glob("*.json"))):
        try:
            sim = load_json(sim_file)
        except TraceValidationError as exc:
            if builder.on_error == "raise":
                raise  # names the file and the line
            builder.skip_trace(f"unreadable simulation file ({exc})", hint="fix or remove the file", source=sim_file)
            continue
        yield index, sim_file, sim


def _simulation(sim: Any, stem: str, threshold: float, include_user: bool, censored: frozenset[str],
                invalid: frozenset[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if not isinstance(sim, dict):
        raise EpisodeFormatError(f"expected a simulation object, got {_type_name(sim)}", None)
    task_id = parse_task_id(sim.get("task_id"), "task_id")
    if task_id is None:
        raise EpisodeFormatError("simulation has no task_id", "task_id",
                                 "per-task metrics need the task of every simulation")
    trial = parse_trial(sim.get("trial"), "trial")
    reason = sim.get("termination_reason")
    if reason is not None and not isinstance(reason, str):
        raise EpisodeFormatError(f"expected text, got {_type_name(reason)}", "termination_reason")
    reward_info = sim.get("reward_info")
    if reward_info is not None and not isinstance(reward_info, dict):
        raise EpisodeFormatError(f"expected an object, got {_type_name(reward_info)}", "reward_info")
    reward = parse_reward(reward_info.get("reward") if reward_info else None, "reward_info.reward")
    if reason in censored:
        outcome: str | None = "censored"
    elif reason in invalid:
        outcome = "invalid"
    else:
        outcome = outcome_from_reward(reward, threshold)
        if outcome is None:
            raise EpisodeFormatError(
                f"simulation ended with {reason!r} but has no reward_info.reward", "reward_info.reward",
                "τ² evaluates every finished simulation; re-run the evaluation, or pass on_error='skip'",
            )
    messages = sim.get("messages")
    if messages is None and sim.get("ticks") is not None:
        raise EpisodeFormatError("full-duplex simulation stores ticks, not messages", "messages",
                                 "export it with its messages (τ² SimulationRun.get_messages())")
    steps = steps_from_messages(_by_turn(messages), include_user=include_user, tool_error=_TAU2_TOOL_ERROR)
    raw_id = sim.get("id")
    if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or raw_id == ""):
        raise EpisodeFormatError(f"expected a simulation id (text), got {raw_id!r}", "id")
    trace_id = str(raw_id) if raw_id is not None else f"{stem}/task{task_id}/trial{trial}"
    trace = {"trace_id": trace_id, "outcome": outcome, "task_id": task_id, "trial": trial, "reward": reward,
             "termination_reason": reason}
    return trace, steps


def _by_turn(messages: Any) -> Any:
    """Messages ordered by ``turn_idx`` (stable) when every message has an integer one; else as stored."""
    if not isinstance(messages, list) or not all(
        isinstance(m, Mapping) and isinstance(m.get("turn_idx"), int) and not isinstance(m.get("turn_idx"), bool)
        for m in messages
    ):
        return messages
    return sorted(messages, key=lambda m: m["turn_idx"])


TAU_BENCH = TauBenchReader()
TAU2_BENCH = Tau2BenchReader()
