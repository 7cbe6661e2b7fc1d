"""One run as the watch follows it: its identity, its log after ready, what the checks found.
Stdlib and firedup.logscan, Python 3.8 (shipped with the watch: firedup.readiness.nodewatch).
"""

from __future__ import annotations

import os
import time
from typing import Any

from firedup.engine import Engine
from firedup.logscan import HINTS, LogScanner, Reason, Verdict
from firedup.logscan.harmless import SERVING, is_routine
from firedup.logscan.normalize import clean, parse_line
from firedup.readiness import keep_policy as policy
from firedup.readiness import nodewatch_checks as checks

READ_BYTES = 1024 * 1024  # log read per check: a burst is worked through over a few checks
EXCERPT_LINES = 8  # of the lines that prove a death's reason, in its event and watch.json
WATCH_HINTS = {
    policy.HANG: "the server stopped answering /health; the log's last lines say what it did",
    policy.HEALTH_LOST: "/health answers with an error; the log says why",
    policy.WORKER_DIED: "a process of the server (a worker, a rank) died while the server lived",
    policy.PORT_LOST: "no process of the run holds the port any more",
    policy.GENERATE_FAILED: "a real one-token generation failed twice in a row",
    policy.NOT_READY: "the restarted run did not become ready within its ready timeout",
    "killed": "the server's process ended without a word in its log (SIGKILL, the OOM killer)",
}


def hint(reason: str) -> str:
    """The classifier's hint for its reasons, the watch's own for the rest."""
    try:
        return HINTS.get(Reason(reason)) or ""
    except ValueError:
        return WATCH_HINTS.get(reason, "")


class AfterReady:
    """The classifier over a ready server's log without its serving traffic.

    A ready server's own classifier takes an exception for one request's error (the server
    lives on), and a fresh one takes the traffic for proof of readiness: either way a death's
    cause would read as a warning. Without the traffic, the lines a dying server writes are
    classified as they would be at start-up: the cause (nccl, oom, a crash) is named."""

    def __init__(self, engine: str) -> None:
        self.scanner = LogScanner(engine=Engine(engine) if engine else None)
        self.rest = b""

    def feed(self, data: bytes) -> None:
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        kept = [ln for ln in lines if not self._traffic(ln)]
        if kept:
            self.scanner.feed(b"\n".join(kept) + b"\n")

    def finish(self) -> None:
        if self.rest and not self._traffic(self.rest):
            self.scanner.feed(self.rest + b"\n")
        self.rest = b""
        self.scanner.finish()

    @staticmethod
    def _traffic(raw: bytes) -> bool:
        message = parse_line(clean(raw)).message
        return is_routine(message) or SERVING.search(message) is not None

    def fatal(self) -> str | None:
        state = self.scanner.state
        if state.verdict is Verdict.FAILED and state.reason is not None:
            return state.reason.value
        return None


class Run:
    """A run of the slot: `offset` is where the watch's reading of its log starts (the log's
    end when the run was already ready, 0 for a run the watch started itself)."""

    def __init__(self, workdir: str, run_id: str, engine: str, from_end: bool) -> None:
        self.run_id = run_id
        self.dir = os.path.join(workdir, "runs", run_id)
        self.pid, self.start = checks.read_identity(os.path.join(self.dir, "identity"))
        self.scanner = LogScanner(engine=Engine(engine) if engine else None)
        self.after = AfterReady(engine)  # fed once the run is ready
        self.offset = self._log_size() if from_end else 0
        self.members0: set[int] = set()  # the session at the first check after ready
        self.lost_checks = 0
        self.health_fails = 0
        self.health_told = False  # health lost was said (notified) and not back since
        self.problem_told = ""  # a problem said once while restart is off
        self.gen_fails = 0
        self.gen_at = time.monotonic()
        self.started_at = time.monotonic()
        self.ready_at: float | None = time.time() if from_end else None
        self.checks: dict[str, Any] = {}

    def alive(self) -> bool:
        return self.pid is not None and checks.leader_alive(self.pid, self.start)

    def read_log(self, limit: int = READ_BYTES) -> None:
        try:
            with open(os.path.join(self.dir, "server.log"), "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(limit)
        except OSError:
            return
        self.offset += len(data)
        if self.ready_at is not None:
            self.after.feed(data)
        else:
            self.scanner.feed(data)

    def read_to_end(self) -> None:
        before = -1
        while self.offset != before:
            before = self.offset
            self.read_log()
        self.scanner.finish()
        self.after.finish()

    def fatal(self) -> str | None:
        """The reason the log names: after ready, the traffic-free reading's."""
        if self.ready_at is not None:
            return self.after.fatal()
        state = self.scanner.state
        if state.verdict is Verdict.FAILED and state.reason is not None:
            return state.reason.value
        return None

    def ready_line(self) -> bool:
        return self.scanner.state.verdict is Verdict.READY

    def excerpt(self) -> list[str]:
        scanner = self.after.scanner if self.ready_at is not None else self.scanner
        return list(scanner.state.excerpt[-EXCERPT_LINES:])

    def _log_size(self) -> int:
        try:
            return os.path.getsize(os.path.join(self.dir, "server.log"))
        except OSError:
            return 0
