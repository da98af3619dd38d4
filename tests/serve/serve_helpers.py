"""Helpers for the live-service tests: `tracetochain serve` as a real process on a free local port."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServeProcess:
    """A `tracetochain serve` child process; `stop()` sends SIGTERM (graceful), `kill()` SIGKILL."""

    def __init__(self, store: Path, *args: str, port: int | None = None, env: dict[str, str] | None = None,
                 log: Path | None = None) -> None:
        self.store = store
        self.port = port or free_port()
        self.args = args
        self.env = {**os.environ, **(env or {})}
        self.log = log or store.with_suffix(".log")
        self.out = store.with_suffix(".alerts.jsonl")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ServeProcess:
        cmd = [sys.executable, "-m", "tracetochain", "serve", "--store", str(self.store), "--port", str(self.port),
               *self.args]
        self._out = self.out.open("ab")
        self._err = self.log.open("ab")
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=self._err, env=self.env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        raise RuntimeError(f"serve did not come up: {self.log.read_text()[-2000:]}")

    def get_json(self, path: str, token: str | None = None) -> dict:
        req = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {token}"} if token else {})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def wait_for(self, predicate, timeout: float = 60.0, token: str | None = None) -> dict:
        deadline = time.time() + timeout
        doc: dict = {}
        while time.time() < deadline:
            doc = self.get_json("/api/live", token)
            if predicate(doc):
                return doc
            time.sleep(0.3)
        raise AssertionError(f"condition not met in {timeout} s; last status {doc.get('status')}")

    def stop(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close()
        return self.proc.returncode

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._close()

    def _close(self) -> None:
        self._out.close()
        self._err.close()


def run_agent(endpoint: str, n: int, spans_file: Path, *extra: str, timeout: float = 120.0) -> None:
    """Run the instrumented agent script (tests/serve/agent.py) against ``endpoint``."""
    subprocess.run([sys.executable, str(HERE / "agent.py"), endpoint, str(n), "--spans-file", str(spans_file),
                    *extra], check=True, timeout=timeout)
