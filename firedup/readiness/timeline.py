"""A run's startup timeline: each phase it walked through and how long it took (pure).

Two sources give the same value. A wait sees each phase arrive on the stream and times it on
the operator's clock (`PhaseClock`: sub-second, works for logs without timestamps). `fab
status` and history were not watching and read the phases off the log's own timestamps
(`from_spans`). Either way the result is a `Timeline`, rendered the same everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from firedup.logscan import Phase, PhaseSpan


@dataclass(frozen=True)
class Step:
    """One phase; `duration_s` is None when unknown (no timestamps) and `open` while current."""

    phase: Phase
    duration_s: float | None
    open: bool = False

    def to_json(self) -> dict[str, Any]:
        seconds = None if self.duration_s is None else round(self.duration_s, 2)
        return {"phase": self.phase.value, "duration_s": seconds, "open": self.open}


@dataclass(frozen=True)
class Timeline:
    steps: tuple[Step, ...]
    total_s: float | None

    @property
    def slowest(self) -> Step | None:
        """The phase that took longest (the one to look at first); None when nothing is timed."""
        timed = [s for s in self.steps if s.duration_s is not None and s.phase is not Phase.READY]
        return max(timed, key=lambda s: s.duration_s or 0.0, default=None)

    def to_json(self) -> dict[str, Any]:
        slowest = self.slowest
        return {
            "phases": [step.to_json() for step in self.steps],
            "total_s": None if self.total_s is None else round(self.total_s, 2),
            "slowest": slowest.phase.value if slowest else None,
        }


def from_spans(spans: Sequence[PhaseSpan]) -> Timeline:
    """The timeline the log's timestamps tell (status, history): the last phase stays open."""
    steps = tuple(
        Step(span.phase, span.duration_s, open=span.end is None)
        for span in spans
        if span.phase is not Phase.READY
    )
    moments = [m for span in spans for m in (span.start, span.end) if m is not None]
    total = (max(moments) - min(moments)).total_seconds() if moments else None
    return Timeline(steps, total)


class PhaseClock:
    """Times phases as a watcher sees them arrive (monotonic seconds from the caller)."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.entered: list[tuple[Phase, float]] = []

    @property
    def phase(self) -> Phase | None:
        return self.entered[-1][0] if self.entered else None

    @property
    def since(self) -> float:
        """When the current phase was entered (the start before any phase was seen)."""
        return self.entered[-1][1] if self.entered else self.started

    def enter(self, phase: Phase, now: float) -> Step | None:
        """Record a phase change; returns the phase it closed, with its duration."""
        if phase is self.phase:
            return None
        closed = None
        if self.entered:
            last, since = self.entered[-1]
            closed = Step(last, now - since)
        self.entered.append((phase, now))
        return closed

    def move_back(self, phase: Phase, at: float) -> bool:
        """An entered phase began earlier than it was seen (the log says `at`): move its
        start back, never before the phase ahead of it. False when it was never entered."""
        for index, (seen, since) in enumerate(self.entered):
            if seen is phase:
                floor = self.entered[index - 1][1] if index else float("-inf")
                self.entered[index] = (phase, max(floor, min(since, at)))
                return True
        return False

    def timeline(self, now: float, *, done: bool = False) -> Timeline:
        """The phases so far; the current one is open unless the wait is `done`."""
        steps = []
        for index, (phase, since) in enumerate(self.entered):
            last = index == len(self.entered) - 1
            end = now if last else self.entered[index + 1][1]
            if phase is Phase.READY:
                continue
            steps.append(Step(phase, end - since, open=last and not done))
        return Timeline(tuple(steps), now - self.started)


def duration_text(seconds: float | None) -> str:
    """`0.4s`, `12s`, `6m12s`, `1h02m`: short, and precise where it matters."""
    if seconds is None:
        return "?"
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f}s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def summary_line(timeline: Timeline) -> str:
    slowest = timeline.slowest
    text = f"  total {duration_text(timeline.total_s)}"
    if slowest is not None:
        text += f", slowest {slowest.phase.value} {duration_text(slowest.duration_s)}"
    return text


def inline_text(timeline: Timeline, *, ended: str = "") -> str:
    """One line (plain output, status): `a 1.2s, b 3.0s (slowest), c 0.4s; total 4.6s`;
    `ended` notes how the last phase ended when it was not a success (failed, interrupted)."""
    slowest = timeline.slowest
    parts = []
    for index, step in enumerate(timeline.steps):
        last = index == len(timeline.steps) - 1
        note = f" ({ended})" if ended and last else (" (slowest)" if step is slowest else "")
        parts.append(f"{step.phase.value} {duration_text(step.duration_s)}{note}")
    return f"{', '.join(parts)}; total {duration_text(timeline.total_s)}"
