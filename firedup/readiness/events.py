"""What a wait is doing, as events: the one model behind the live display and `--json`.

A `HostTracker` follows one host (or one multi-node unit) through a deploy, restart or wait.
The task adapters feed it the values the core hands out through its hooks (the run that was
started, each `ScanState` between looks, each `WaitStatus`, reconnects, the result) and it
returns `WaitEvent` values: started, message, phase, progress, signals, stall, reconnect,
verdict, timeline. It also keeps what a live display redraws on its clock (phase, bar, time in
phase, time since the log last grew). Pure: the clocks are passed in; it prints nothing.

Format 1 of the event stream is documented in docs/events.md and docs/events.schema.json;
fields are only ever added, a change of meaning gets a new version.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from firedup.errors import (
    DeployError,
    ForeignListenerError,
    NotReadyError,
    ServerCrashedError,
    WaitInterrupted,
)
from firedup.launch.runs import RunMeta
from firedup.logscan import Phase, PhaseSpan, Progress, ScanState
from firedup.readiness.timeline import PhaseClock, Timeline
from firedup.readiness.watch import Signals, WaitStatus

FORMAT = 1
PROGRESS_EVERY_S = 0.25  # a bar redraws thousands of times; a reader needs a few per second


class Kind(StrEnum):
    STARTED = "started"
    MESSAGE = "message"
    PHASE = "phase"
    PROGRESS = "progress"
    SIGNALS = "signals"
    STALL = "stall"
    RECONNECT = "reconnect"
    VERDICT = "verdict"
    TIMELINE = "timeline"


@dataclass(frozen=True)
class WaitEvent:
    kind: Kind
    host: str
    run_id: str | None
    at: datetime
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "v": FORMAT,
            "event": self.kind.value,
            "at": self.at.astimezone(UTC).isoformat(timespec="milliseconds"),
            "host": self.host,
            "run_id": self.run_id,
            **self.data,
        }


def signals_json(signals: Signals) -> dict[str, Any]:
    return {
        "alive": signals.alive,
        "ready_line": signals.log_ready,
        "listening": signals.listening,
        "health": signals.health,
        "foreign_listeners": list(signals.foreign_listeners),
    }


def progress_json(bar: Progress) -> dict[str, Any]:
    return {
        "label": bar.label,
        "done": bar.done,
        "total": bar.total,
        "rate": bar.rate or None,
        "eta": bar.eta or None,
    }


class HostTracker:
    """One host's wait as events, and the state a live display draws from."""

    def __init__(
        self,
        host: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.host = host
        self.clock = clock
        self.wall = wall
        self.run: RunMeta | None = None
        self.phases = PhaseClock(clock())
        self.waiting = False  # the run exists and is being watched: times tick
        self.bar: Progress | None = None
        self.bar_sent_at = float("-inf")
        self.bytes_seen = -1
        self.log_grew_at = clock()
        self.signals: Signals | None = None
        self.result: WaitStatus | DeployError | None = None
        self.log_timed = False  # the phases were placed by the log's timestamps once

    def _event(self, kind: Kind, **data: Any) -> WaitEvent:
        run_id = self.run.run_id if self.run else None
        return WaitEvent(kind, self.host, run_id, self.wall(), data)

    def _begin(self) -> None:
        if not self.waiting:
            self.waiting = True
            now = self.clock()
            self.phases = PhaseClock(now)
            self.log_grew_at = now

    def started(self, run: RunMeta) -> list[WaitEvent]:
        self.run = run
        self._begin()
        return [
            self._event(
                Kind.STARTED,
                engine=run.engine.value,
                engine_version=run.engine_version or None,
                pid=run.pid,
                port=run.port,
                log_path=run.log_path,
            )
        ]

    def message(self, text: str) -> list[WaitEvent]:
        return [self._event(Kind.MESSAGE, text=text)]

    def reconnect(self, text: str) -> list[WaitEvent]:
        return [self._event(Kind.RECONNECT, text=text)]

    def _phase(self, phase: Phase, at: float | None = None) -> list[WaitEvent]:
        current = self.phases.phase
        if current is not None and phase.order <= current.order:
            return []  # phases only move forward (an open port can run ahead of the log)
        now = self.clock() if at is None else at
        closed = self.phases.enter(phase, now)
        self.bar = None
        return [
            self._event(
                Kind.PHASE,
                phase=phase.value,
                previous=closed.phase.value if closed else None,
                previous_duration_s=round(closed.duration_s or 0.0, 2) if closed else None,
                elapsed_s=round(now - self.phases.started, 2),
            )
        ]

    def scan(self, scan: ScanState) -> list[WaitEvent]:
        """The classifier's state after a chunk: phase changes, bar progress, log growth."""
        self._begin()
        now = self.clock()
        if scan.bytes_seen != self.bytes_seen:
            self.bytes_seen, self.log_grew_at = scan.bytes_seen, now
        events = self._catch_up(scan)
        # Every phase the log walked through, in order: one chunk can hold several, and the
        # end of a bar in one of them with the next phase's start.
        for span in scan.phases[:-1]:
            events += self._phase(span.phase) + self._last_reading(span)
        events += self._phase(scan.phase)  # the last span's
        bar = scan.progress
        if bar is not None and bar != self.bar:
            # The first reading, a new bar and the last step always go out; the rest at a pace.
            finished = self.bar is None or bar.done < self.bar.done or bar.done == bar.total
            self.bar = bar
            if finished or now - self.bar_sent_at >= PROGRESS_EVERY_S:
                self.bar_sent_at = now
                events.append(
                    self._event(Kind.PROGRESS, phase=scan.phase.value, **progress_json(bar))
                )
        return events

    def _last_reading(self, span: PhaseSpan) -> list[WaitEvent]:
        """The last reading of a bar in the phase being left, unless it already went out."""
        bar = span.progress
        if bar is None or span.phase is not self.phases.phase or bar == self.bar:
            return []
        self.bar, self.bar_sent_at = bar, self.clock()
        return [self._event(Kind.PROGRESS, phase=span.phase.value, **progress_json(bar))]

    def _catch_up(self, scan: ScanState) -> list[WaitEvent]:
        """The first look at a run already under way (`fab wait` re-attaching): the phases it
        went through before are timed by the log's own timestamps, not all at this moment.
        Done once, at the first state that carries a timestamp: a log may begin with untimed
        lines (vLLM's warnings), and a phase entered on them moves back to where the log puts
        it, never later (a live wait keeps its sub-second clock)."""
        last = scan.last_timestamp
        if self.log_timed or last is None:
            return []
        self.log_timed = True
        now = self.clock()
        events = []
        for span in scan.phases:
            if span.start is not None:
                at = now - max(0.0, (last - span.start).total_seconds())
                if not self.phases.move_back(span.phase, at):
                    events += self._phase(span.phase, at=at)
        if self.phases.entered:
            self.phases.started = min(self.phases.started, self.phases.entered[0][1])
        return events

    def status(self, status: WaitStatus) -> list[WaitEvent]:
        """One look: the phase (an open port means http_up), each signal, a stall warning."""
        if self.run is None:
            self.run = status.run
        events = self.scan(status.scan) + self._phase(status.phase)
        if status.signals != self.signals:
            self.signals = status.signals
            events.append(self._event(Kind.SIGNALS, **signals_json(status.signals)))
        if status.warning is not None:
            w = status.warning
            events.append(
                self._event(
                    Kind.STALL,
                    phase=w.phase.value,
                    in_phase_s=round(w.in_phase_s, 1),
                    silent_s=round(w.silent_s, 1),
                    budget_s=w.budget_s,
                    hint=w.hint,
                )
            )
        return events

    # What a live display redraws on its clock.
    def in_phase_s(self) -> float:
        return self.clock() - self.phases.since

    def elapsed_s(self) -> float:
        return self.clock() - self.phases.started

    def quiet_s(self) -> float:
        return self.clock() - self.log_grew_at

    def timeline(self) -> Timeline:
        return self.phases.timeline(self.clock(), done=self.result is not None)

    def finish(self, result: WaitStatus | DeployError) -> list[WaitEvent]:
        """The verdict, then the timeline (when a wait began at all)."""
        if isinstance(result, WaitStatus):
            self._phase(result.phase)
        self.result = result
        events = [self._event(Kind.VERDICT, **verdict_json(result, self.phases.phase))]
        if self.waiting:
            events.append(self._event(Kind.TIMELINE, **self.timeline().to_json()))
        return events


def ending(result: WaitStatus | DeployError | None) -> str:
    """How the last phase of a timeline ended, in a word; empty for a success or no result."""
    if result is None or isinstance(result, WaitStatus):
        return ""
    return {"failed": "failed", "not-ready": "not ready"}.get(outcome_name(result), "interrupted")


def outcome_name(error: DeployError) -> str:
    if isinstance(error, WaitInterrupted):
        return "interrupted"
    if isinstance(error, NotReadyError):
        return "not-ready"
    return "failed"


def _reason(error: DeployError) -> str:
    """A short machine word for why: the log's reason when it named one, else the error kind."""
    if isinstance(error, ServerCrashedError) and error.reason:
        return error.reason
    if isinstance(error, ForeignListenerError):
        return "port_in_use"
    if isinstance(error, NotReadyError):
        return "deadline"
    if isinstance(error, WaitInterrupted):
        return "interrupted"
    name = type(error).__name__.removesuffix("Error")
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def verdict_json(result: WaitStatus | DeployError, phase: Phase | None) -> dict[str, Any]:
    if isinstance(result, WaitStatus):
        run = result.run
        return {
            "outcome": "ready",
            "exit_code": 0,
            "phase": Phase.READY.value,
            "reason": None,
            "message": f"ready after {result.elapsed_s:.1f}s",
            "hint": None,
            "excerpt": [],
            "log_path": run.log_path,
            "port": run.port,
            "pid": run.pid,
            "error": None,
        }
    crash = result if isinstance(result, ServerCrashedError) else None
    return {
        "outcome": outcome_name(result),
        "exit_code": result.exit_code,
        "phase": phase.value if phase else None,
        "reason": _reason(result),
        "message": result.message,
        "hint": result.hint,
        "excerpt": list(crash.excerpt) if crash else [],
        "log_path": crash.log_path if crash else None,
        "error": type(result).__name__,
    }
