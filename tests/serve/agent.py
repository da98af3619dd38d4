"""A small simulated SQL agent, instrumented with tracetochain.instrument (OpenTelemetry SDK + OTLP/HTTP exporter).

Run as a script by the serve tests: ``python agent.py ENDPOINT N --spans-file F [--regress-after K] [--seed S]``.
Every span also goes to ``--spans-file`` through the SDK's ConsoleSpanExporter (console span JSON, which the
offline ``otlp`` reader reads), so the same spans can be fitted offline. From episode K on, ``sql_exec`` fails four
times as often (the injected regression).
"""

from __future__ import annotations

import argparse
import random
import sys

from opentelemetry.sdk.trace.export import ConsoleSpanExporter

import tracetochain.instrument as tt


def run_episode(rng: random.Random, regressed: bool) -> None:
    fail_sql = 0.32 if regressed else 0.08
    with tt.episode("sql-agent") as ep:
        with tt.step("plan", kind="llm") as s:
            s.usage(input_tokens=rng.randint(50, 200), output_tokens=rng.randint(5, 50))
        with tt.milestone("sql_written") as m:
            m.verify(rng.random() > 0.05)
        attempts = 0
        while True:
            attempts += 1
            with tt.step("sql_exec") as s:
                r = rng.random()
                if r < fail_sql:
                    s.fail("db_error")
                    ep.verdict(False)
                    return
                if r < fail_sql + 0.15 and attempts < 3:
                    s.fail("empty_result")
                    continue
            break
        with tt.step("analyze", kind="llm"):
            pass
        if rng.random() < 0.1:
            ep.verdict(False)
        else:
            ep.verdict(True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("endpoint")
    ap.add_argument("n", type=int)
    ap.add_argument("--spans-file", required=True)
    ap.add_argument("--regress-after", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--token", default=None)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with open(args.spans_file, "w", encoding="utf-8") as fh:
        provider = tt.configure(args.endpoint, token=args.token, service_name="sql-agent",
                                extra_exporters=[ConsoleSpanExporter(out=fh)], schedule_delay_millis=100)
        for i in range(args.n):
            run_episode(rng, args.regress_after is not None and i >= args.regress_after)
        ok = provider.force_flush(60_000)
        provider.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
