"""How a startup moves forward: phase markers, tqdm bars and the spans they open.

The moving half of LogScanner (scanner.py owns the state). Phases only move forward: ranks
interleave, and a rank that is late must not drag the phase back. A repeat of a per-rank
marker from the same rank is the EAGLE draft's pass. A marker found only inside a quoted
literal (an argument's value, a served model name) is an echo, not the engine's line.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from firedup.engine import Engine
from firedup.logscan.context import quoted
from firedup.logscan.model import Event, EventKind, Phase, PhaseSpan, Progress, Verdict
from firedup.logscan.normalize import Line
from firedup.logscan.rules import ENGINE_DEPENDENT, MARKERS, Marker, bar_phase, cut_bar_phase

MAX_LAST_LINE_CHARS = 400


class PhaseRules:
    """Mixed into LogScanner, which owns the state these rules read and write."""

    engine: Engine | None
    _verdict: Verdict
    _phase: Phase
    _progress: Progress | None
    _spans: list[PhaseSpan]
    _rank_markers: set[tuple[str, str]]
    _story: bool
    _undecided: Line | None
    _last_line: str

    def _bar(self, progress: Progress, text: str, now: datetime | None, out: list[Event]) -> None:
        self._last_line = text[:MAX_LAST_LINE_CHARS]
        if self._verdict is not Verdict.STARTING:
            return
        floor = self._draft_floor(bar_phase(progress.label))
        if floor is not None:
            self._advance(floor, text, now, out)
        if progress != self._progress:
            self._progress = progress
            self._spans[-1] = replace(self._spans[-1], progress=progress)
            out.append(Event(EventKind.PROGRESS, self._phase, text, progress, now))

    def _cut_bar(self, message: str, now: datetime | None, out: list[Event]) -> None:
        floor = self._draft_floor(cut_bar_phase(message))
        if floor is not None:
            self._advance(floor, message, now, out)

    def _draft_floor(self, floor: Phase | None) -> Phase | None:
        """A capture bar after the draft loaded is the draft's capture."""
        if floor is Phase.CUDA_GRAPH and self._phase.order >= Phase.DRAFT_LOADING.order:
            return Phase.DRAFT_CUDA_GRAPH
        return floor

    def _phase_marker(self, line: Line, now: datetime | None, out: list[Event]) -> None:
        message = line.message
        for marker in MARKERS:
            if marker.needle in message and self._applies(marker, message):
                if "HTTP/" not in message and quoted(message, message.find(marker.needle)):
                    continue  # an echoed argument (a served model name), not the engine's line
                if self.engine is None and marker.needle in ENGINE_DEPENDENT:
                    self._undecided = line
                phase = self._draft_aware(marker, line.ranks)
                self._advance(phase, line.text, now, out)
                return

    def _applies(self, marker: Marker, message: str) -> bool:
        if marker.engine is not None and marker.engine is not self.engine:
            return False
        if marker.after is not None and self._phase.order < marker.after.order:
            return False
        return marker.pattern is None or marker.pattern.search(message) is not None

    def _draft_aware(self, marker: Marker, ranks: str) -> Phase:
        if not marker.per_rank or self.engine is Engine.VLLM:
            return marker.phase
        key = (ranks, marker.needle)
        if key in self._rank_markers:
            return Phase.DRAFT_LOADING
        self._rank_markers.add(key)
        return marker.phase

    def _advance(self, phase: Phase, text: str, now: datetime | None, out: list[Event]) -> None:
        if phase.order <= self._phase.order:
            if not self._wrapper_http_before(phase):
                return
            self._spans.pop()  # that HTTP server was a wrapper's: the engine starts only now
        self._close_span(now)
        self._spans.append(PhaseSpan(phase, now, None))
        self._phase = phase
        self._story = True
        self._progress = None
        out.append(Event(EventKind.PHASE, phase, text, None, now))
        if phase is Phase.READY:
            self._verdict = Verdict.READY
            out.append(Event(EventKind.READY, phase, text, None, now))

    def _wrapper_http_before(self, phase: Phase) -> bool:
        """Whether the HTTP side came up before any line of the engine (a wrapper's own app,
        its engine built later: no engine line yet) and `phase` is that engine starting."""
        return (
            self.engine is None
            and self._verdict is Verdict.STARTING
            and Phase.LAUNCHING.order < phase.order < Phase.HTTP_UP.order
            and len(self._spans) == 2
            and self._spans[1].phase is Phase.HTTP_UP
        )

    def _close_span(self, now: datetime | None) -> None:
        self._spans[-1] = replace(self._spans[-1], end=now)
