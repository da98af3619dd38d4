"""Benchmark: stream a large OTLP JSON Lines file through the ``otlp`` reader; wall time, MB/s and peak RSS.

The file imitates what a collector's file exporter writes for a busy agent service: ``--concurrency`` agents run
episodes at the same time; their spans are exported in end order (children before parents, as a batch span
processor sees them) in batches of ``--batch-spans`` spans, one ``{"resourceSpans": [...]}`` document per line, so
the spans of one trace are spread over a few consecutive lines. Each episode is an ``invoke_agent`` span with
2–12 ``chat`` turns; a turn makes 0–3 ``execute_tool`` calls (children of the chat span or siblings after it), 8 % of
tool calls fail with ``error.type`` (handled), 30 % of chat spans carry ~1 KB of opt-in ``gen_ai.input.messages``
content that the reader does not keep, and the root carries a ``gen_ai.evaluation.result`` event (pass/fail) or, in
3 % of episodes, ``gen_ai.agent.finish_reason = max_iterations`` (censored). The generator is seeded and writes to
``benchmarks/_data/`` (git-ignored) once per (size, seed, version); it also counts the traces and leaf steps the
reader must find, and the child run is checked against them.

The read runs in a fresh subprocess (``OTLP.read_with_stats``: both passes, episode building and the final
validated ``TraceTable``), so its peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``, cross-checked with
``VmHWM``) is its own; the file is in the page cache (it was just written or read), so the figures are CPU-bound
parse rates, not disk rates.

Usage::

    python benchmarks/bench_otlp_stream.py                  # 1 GB (1024 MB), 1 repeat, text kept and not
    python benchmarks/bench_otlp_stream.py --size-mb 64 --repeats 3 --text on
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DATA_DIR, machine_info, markdown_table, median, write_results

DATA_VERSION = 1  # bump when the generator changes, so stale cached files are not reused
TOOLS = ("lookup_order", "search_kb", "issue_refund", "get_weather", "book_flight", "run_sql", "read_file",
         "send_email")
WORDS = ("the", "order", "refund", "customer", "policy", "flight", "weather", "please", "check", "status",
         "account", "invoice", "delivery", "return", "item", "price", "booking", "seat", "date", "city")


# ---------------------------------------------------------------------------------------------------- data
def data_path(size_mb: int, seed: int) -> Path:
    return DATA_DIR / f"otlp_v{DATA_VERSION}_{size_mb}mb_seed{seed}.jsonl"


def _s(v: str) -> dict[str, Any]:
    return {"stringValue": v}


def _i(v: int) -> dict[str, Any]:
    return {"intValue": str(v)}


class _Agent:
    """One agent worker: yields the spans of its episodes in end order (children before parents)."""

    def __init__(self, rng: random.Random, worker: int, clock_ns: int) -> None:
        self.rng = rng
        self.worker = worker
        self.clock = clock_ns
        self.queue: list[dict[str, Any]] = []
        self.episodes = 0
        self.steps = 0
        self.outcomes = {"success": 0, "failure": 0, "censored": 0}

    def next_span(self) -> dict[str, Any]:
        if not self.queue:
            self._episode()
        return self.queue.pop()

    def _text(self, n_words: int) -> str:
        rng = self.rng
        return " ".join(rng.choice(WORDS) for _ in range(n_words))

    def _episode(self) -> None:
        rng = self.rng
        tid = f"{rng.getrandbits(128):032x}"
        sid_counter = rng.getrandbits(48) << 16

        def sid() -> str:
            nonlocal sid_counter
            sid_counter += 1
            return f"{sid_counter & ((1 << 64) - 1):016x}"

        def span(span_id: str, parent: str, name: str, t0: int, t1: int, attrs: list[dict[str, Any]],
                 status: dict[str, Any] | None = None, events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
            d: dict[str, Any] = {"traceId": tid, "spanId": span_id, "parentSpanId": parent, "name": name,
                                 "kind": 1, "startTimeUnixNano": str(t0), "endTimeUnixNano": str(t1),
                                 "attributes": attrs, "status": status or {}}
            if events:
                d["events"] = events
            return d

        root = sid()
        t = self.clock
        start = t
        out: list[dict[str, Any]] = []  # in end order
        n_turns = rng.randint(2, 12)
        steps = 0
        for turn in range(n_turns):
            chat_id = sid()
            c0 = t + rng.randint(1_000_000, 50_000_000)
            c1 = c0 + rng.randint(200_000_000, 3_000_000_000)
            n_tools = 0 if turn == n_turns - 1 else rng.choice((0, 1, 1, 1, 2, 2, 3))
            nested = rng.random() < 0.5
            tool_spans: list[dict[str, Any]] = []
            tt = c1
            for _ in range(n_tools):
                tool = rng.choice(TOOLS)
                t0 = tt + rng.randint(1_000_000, 20_000_000)
                t1 = t0 + rng.randint(10_000_000, 900_000_000)
                attrs = [{"key": "gen_ai.operation.name", "value": _s("execute_tool")},
                         {"key": "gen_ai.tool.name", "value": _s(tool)},
                         {"key": "gen_ai.tool.call.id", "value": _s(f"call_{rng.getrandbits(40):010x}")},
                         {"key": "gen_ai.tool.type", "value": _s("function")},
                         {"key": "gen_ai.tool.call.arguments",
                          "value": _s(json.dumps({"query": self._text(rng.randint(3, 12)),
                                                  "id": rng.randint(1, 99999)}))}]
                status = None
                if rng.random() < 0.08:
                    attrs.append({"key": "error.type", "value": _s(rng.choice(("timeout", "http_503", "denied")))})
                    status = {"code": 2, "message": "tool call failed"}
                tool_spans.append(span(sid(), chat_id if nested else root, f"execute_tool {tool}", t0, t1, attrs,
                                       status))
                tt = t1
            chat_attrs = [{"key": "gen_ai.operation.name", "value": _s("chat")},
                          {"key": "gen_ai.provider.name", "value": _s("openai")},
                          {"key": "gen_ai.request.model", "value": _s("gpt-x-2026-01-01")},
                          {"key": "gen_ai.response.model", "value": _s("gpt-x-2026-01-01")},
                          {"key": "gen_ai.response.id", "value": _s(f"chatcmpl-{rng.getrandbits(64):016x}")},
                          {"key": "gen_ai.usage.input_tokens", "value": _i(rng.randint(300, 9000))},
                          {"key": "gen_ai.usage.output_tokens", "value": _i(rng.randint(5, 600))},
                          {"key": "gen_ai.response.finish_reasons",
                           "value": {"arrayValue": {"values": [_s("tool_calls" if n_tools else "stop")]}}}]
            if rng.random() < 0.3:
                msgs = [{"role": "user", "parts": [{"type": "text", "content": self._text(rng.randint(60, 200))}]}]
                chat_attrs.append({"key": "gen_ai.input.messages", "value": _s(json.dumps(msgs))})
            if turn == n_turns - 1:
                msg = [{"role": "assistant", "parts": [{"type": "text", "content": self._text(30)}]}]
                chat_attrs.append({"key": "gen_ai.output.messages", "value": _s(json.dumps(msg))})
            chat = span(chat_id, root, "chat gpt-x-2026-01-01", c0, c1 if not nested else max(c1, tt), chat_attrs)
            if nested:
                out.extend(tool_spans)  # children end before their chat span
                out.append(chat)
                steps += n_tools if n_tools else 1
            else:
                out.append(chat)
                out.extend(tool_spans)
                steps += 1 + n_tools
            t = max(c1, tt)
        end = t + rng.randint(1_000_000, 10_000_000)
        root_attrs = [{"key": "gen_ai.operation.name", "value": _s("invoke_agent")},
                      {"key": "gen_ai.agent.name", "value": _s(f"agent-{self.worker % 4}")},
                      {"key": "gen_ai.conversation.id", "value": _s(f"conv_{rng.getrandbits(32):08x}")},
                      {"key": "task.id", "value": _s(f"task-{rng.randint(0, 499)}")},
                      {"key": "trial", "value": _i(rng.randint(0, 3))}]
        events = None
        if rng.random() < 0.03:
            root_attrs.append({"key": "gen_ai.agent.finish_reason", "value": _s("max_iterations")})
            self.outcomes["censored"] += 1
        else:
            ok = rng.random() < 0.6
            self.outcomes["success" if ok else "failure"] += 1
            events = [{"timeUnixNano": str(end), "name": "gen_ai.evaluation.result",
                       "attributes": [{"key": "gen_ai.evaluation.name", "value": _s("task_success")},
                                      {"key": "gen_ai.evaluation.score.label", "value": _s("pass" if ok else "fail")},
                                      {"key": "gen_ai.evaluation.score.value", "value": {"doubleValue": float(ok)}}]}]
        out.append(span(root, "", f"invoke_agent agent-{self.worker % 4}", start, end, root_attrs, None, events))
        self.queue = out[::-1]  # pop() from the end gives end order
        self.clock = end
        self.episodes += 1
        self.steps += steps


def generate(size_mb: int, seed: int, concurrency: int, batch_spans: int) -> dict[str, Any]:
    """Write the cached file (unless it exists) and return its description."""
    path = data_path(size_mb, seed)
    meta_path = path.with_suffix(".json")
    if path.exists() and meta_path.exists():
        meta = dict(json.loads(meta_path.read_text()))
        if meta.get("concurrency") == concurrency and meta.get("batch_spans") == batch_spans:
            return meta
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    rng = random.Random(seed)
    target = size_mb * 1_000_000
    agents = [_Agent(random.Random(rng.getrandbits(64)), w, 1_767_000_000_000_000_000 + w * 7_000_000_000)
              for w in range(concurrency)]
    resource = {"attributes": [{"key": "service.name", "value": _s("support-bot")},
                               {"key": "service.version", "value": _s("2.3.1")},
                               {"key": "telemetry.sdk.language", "value": _s("python")}]}
    scope = {"name": "opentelemetry.instrumentation.genai", "version": "0.9b0"}
    written = n_lines = n_spans = 0
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        while written < target:
            batch = [agents[rng.randrange(concurrency)].next_span() for _ in range(batch_spans)]
            line = json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [
                {"scope": scope, "spans": batch}]}]}, separators=(",", ":")) + "\n"
            fh.write(line)
            written += len(line.encode("utf-8")) if not line.isascii() else len(line)
            n_lines += 1
            n_spans += batch_spans
        # Finish every episode still running so that no trace is cut off (as a flush at shutdown would).
        rest = [s for a in agents for s in a.queue[::-1]]
        for a in agents:
            a.queue.clear()
        for i in range(0, len(rest), batch_spans):
            line = json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [
                {"scope": scope, "spans": rest[i:i + batch_spans]}]}]}, separators=(",", ":")) + "\n"
            fh.write(line)
            n_lines += 1
        n_spans += len(rest)
    os.replace(tmp, path)
    outcomes = {k: sum(a.outcomes[k] for a in agents) for k in ("success", "failure", "censored")}
    meta = {
        "path": str(path.name),
        "size_mb_target": size_mb,
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "lines": n_lines,
        "spans": n_spans,
        "traces": sum(a.episodes for a in agents),
        "steps": sum(a.steps for a in agents),
        "outcomes": outcomes,
        "seed": seed,
        "concurrency": concurrency,
        "batch_spans": batch_spans,
        "data_version": DATA_VERSION,
        "generate_s": round(time.perf_counter() - t_start, 1),
    }
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return meta


# ---------------------------------------------------------------------------------------------------- child
def _vm_hwm_mb() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def child(path: str, include_text: bool) -> None:
    """One measurement in a fresh process; prints one JSON line."""
    import resource

    from tracetochain.readers.otlp import OTLP

    rss_base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    size = Path(path).stat().st_size
    t0 = time.perf_counter()
    table, stats = OTLP.read_with_stats(Path(path), include_text=include_text)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({
        "wall_s": wall,
        "mb_per_s": size / 1e6 / wall,
        "rss_base_mb": rss_base / 1024,
        "rss_peak_mb": ru.ru_maxrss / 1024,
        "vm_hwm_mb": _vm_hwm_mb(),
        "cpu_user_s": ru.ru_utime,
        "cpu_sys_s": ru.ru_stime,
        "n_traces": table.n_traces,
        "n_steps": table.n_steps,
        "n_traces_skipped": table.report.n_traces_skipped,
        "outcomes": table.outcome_counts(),
        "table_mb": table.to_arrow().nbytes / 1e6,
        "stream": {"values": stats.n_values, "spans": stats.n_spans, "traces": stats.n_traces,
                   "max_open_traces": stats.max_open_traces, "max_open_spans": stats.max_open_spans},
    }))


def _run(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed ({proc.returncode}):\n{proc.stderr}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


# ---------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the generated file in MB (default 1024)")
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--concurrency", type=int, default=16, help="agents running at once in the generated file")
    ap.add_argument("--batch-spans", type=int, default=512, help="spans per exported line")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/bench_otlp_stream.json")
    ap.add_argument("--text", choices=("both", "on", "off"), default="both",
                    help="measure with include_text=True, False or both (default both)")
    ap.add_argument("--child", metavar="JSONL", help=argparse.SUPPRESS)
    ap.add_argument("--no-include-text", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, not args.no_include_text)
        return 0
    if args.generate:
        print(json.dumps(generate(args.size_mb, args.seed, args.concurrency, args.batch_spans)))
        return 0

    print(f"# generating (or reusing) a {args.size_mb} MB OTLP JSONL file …", file=sys.stderr, flush=True)
    meta = _run(["--generate", "--size-mb", str(args.size_mb), "--seed", str(args.seed),
                 "--concurrency", str(args.concurrency), "--batch-spans", str(args.batch_spans)])
    path = DATA_DIR / meta["path"]
    print(f"#   {meta['file_mb']} MB, {meta['lines']:,} lines, {meta['spans']:,} spans, {meta['traces']:,} traces, "
          f"{meta['steps']:,} steps; reading it in {args.repeats} fresh process(es) …", file=sys.stderr, flush=True)
    results = []
    for include_text in {"both": (True, False), "on": (True,), "off": (False,)}[args.text]:
        flag = [] if include_text else ["--no-include-text"]
        runs = [_run(["--child", str(path), *flag]) for _ in range(args.repeats)]
        r0 = runs[0]
        if r0["n_traces"] != meta["traces"] or r0["n_steps"] != meta["steps"] or r0["n_traces_skipped"]:
            raise RuntimeError(f"read {r0['n_traces']} traces / {r0['n_steps']} steps ({r0['n_traces_skipped']} "
                               f"skipped), generated {meta['traces']} / {meta['steps']}")
        for k in ("success", "failure", "censored"):
            if r0["outcomes"][k] != meta["outcomes"][k]:
                raise RuntimeError(f"outcome {k}: read {r0['outcomes'][k]}, generated {meta['outcomes'][k]}")
        res = {
            "include_text": include_text,
            "file_mb": meta["file_mb"],
            "lines": meta["lines"],
            "spans": meta["spans"],
            "traces": meta["traces"],
            "steps": meta["steps"],
            "wall_s": median([r["wall_s"] for r in runs]),
            "mb_per_s": median([r["mb_per_s"] for r in runs]),
            "rss_base_mb": median([r["rss_base_mb"] for r in runs]),
            "rss_peak_mb": median([r["rss_peak_mb"] for r in runs]),
            "vm_hwm_mb": median([r["vm_hwm_mb"] or 0.0 for r in runs]),
            "table_mb": r0["table_mb"],
            "max_open_traces": r0["stream"]["max_open_traces"],
            "max_open_spans": r0["stream"]["max_open_spans"],
            "runs": runs,
        }
        results.append(res)
        print(f"#   include_text={include_text}: {res['wall_s']:.1f} s, {res['mb_per_s']:.1f} MB/s, peak RSS "
              f"{res['rss_peak_mb']:.0f} MB", file=sys.stderr, flush=True)
    header = ["file MB", "spans", "traces", "steps", "text", "wall s", "MB/s", "peak RSS MB", "RSS after import MB",
              "table MB", "max open traces"]
    rows = [[f"{r['file_mb']:,.0f}", f"{r['spans']:,}", f"{r['traces']:,}", f"{r['steps']:,}",
             "yes" if r["include_text"] else "no", f"{r['wall_s']:.1f}", f"{r['mb_per_s']:.1f}",
             f"{r['rss_peak_mb']:.0f}", f"{r['rss_base_mb']:.0f}", f"{r['table_mb']:.0f}",
             f"{r['max_open_traces']:,}"] for r in results]
    print(markdown_table(header, rows))
    for r in results:
        print(f"\ninclude_text={r['include_text']}: peak RSS is {r['rss_peak_mb'] / r['file_mb']:.1%} of the file "
              f"size; {r['rss_peak_mb'] - r['rss_base_mb']:.0f} MB above the RSS after imports")
    if not args.no_save:
        out = write_results("bench_otlp_stream", {
            "benchmark": "bench_otlp_stream",
            "description": "OTLP JSONL (collector file-exporter layout) -> OTLP.read_with_stats (two streaming "
                           "passes, episodes, validated TraceTable) in a fresh subprocess; file in page cache; "
                           "peak RSS = ru_maxrss of the child (imports included)",
            "repeats": args.repeats,
            "generator": {k: meta[k] for k in ("seed", "concurrency", "batch_spans", "data_version",
                                               "size_mb_target", "outcomes", "generate_s")},
            "machine": machine_info(),
            "results": results,
        })
        print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
