"""The streaming classifier: bytes in, events and a state snapshot out. Pure, one pass.

Rules it keeps (engines.md §10, issue 4):
- Phases only move forward: ranks interleave, and a rank that is late must not drag the
  phase back. A repeat of a per-rank marker from the same rank is the EAGLE draft's pass.
- Ready means ready: SGLang's fired-up line, vLLM's "Application startup complete.". An open
  port ("Uvicorn running on") only means http_up, warmup pending.
- A strong failure signature fails the run at any time, after ready too. An exception at the
  end of a traceback fails a starting run; after ready it is one request's error (a warning).
- Once failed, the verdict stays failed and later lines may only sharpen the reason.
"""

from __future__ import annotations

from datetime import datetime

from firedup.engine import Engine
from firedup.logscan.evidence import Excerpt, LineKind, Tracebacks
from firedup.logscan.model import (
    Event,
    EventKind,
    Phase,
    PhaseSpan,
    Progress,
    Reason,
    ScanState,
    Verdict,
)
from firedup.logscan.normalize import Clock, Line, clean, parse_line
from firedup.logscan.rules import (
    BAR_LABELS,
    LAUNCH_BANNERS,
    MARKERS,
    Marker,
    bar_phase,
    detect_engine,
    parse_bar,
)
from firedup.logscan.segments import Segmenter
from firedup.logscan.signatures import HINTS, ROUTINE, is_harmless, match_signature

MAX_LAST_LINE_CHARS = 400


class LogScanner:
    def __init__(self, engine: Engine | None = None, *, year: int | None = None) -> None:
        """`year` completes timestamps that omit it (vLLM's `MM-DD`); None means unknown."""
        self._given = engine
        self._detect = engine is None
        self._segments = Segmenter()
        self._clock = Clock(year)
        self._bytes = 0
        self._last_line = ""
        self._snapshot: ScanState | None = None
        self._new_launch(None)

    def _new_launch(self, now: datetime | None) -> None:
        """Forget the story so far: a log appended to (`>>`) can hold several launches."""
        self.engine = self._given
        self._tracebacks = Tracebacks()
        self._excerpt = Excerpt()
        self._verdict = Verdict.STARTING
        self._phase = Phase.LAUNCHING
        self._reason: Reason | None = None
        self._progress: Progress | None = None
        self._spans: list[PhaseSpan] = [PhaseSpan(Phase.LAUNCHING, now, None)]
        self._rank_markers: set[tuple[str, str]] = set()

    def feed(self, chunk: bytes) -> list[Event]:
        """Events completed by this chunk; a line still being written waits for its end."""
        self._bytes += len(chunk)
        self._snapshot = None
        events: list[Event] = []
        for segment in self._segments.feed(chunk):
            self._segment(clean(segment), events)
        return events

    def finish(self) -> list[Event]:
        """At end of file: the trailing unterminated line counts too."""
        self._snapshot = None
        events: list[Event] = []
        for segment in self._segments.finish():
            self._segment(clean(segment), events)
        return events

    @property
    def state(self) -> ScanState:
        if self._snapshot is None:
            self._snapshot = self._build_state()
        return self._snapshot

    # -- one segment -------------------------------------------------------------------------

    def _segment(self, text: str, events: list[Event]) -> None:
        if not text or text.isspace():
            return
        if "^M" in text:  # a log pasted from `cat -v` or a terminal shows \r as caret text
            for part in text.split("^M"):
                self._segment(part, events)
            return
        # The bulk of a long log is bar redraws with no prefix: recognise them first.
        bar = parse_bar(text) if text.startswith(BAR_LABELS) else None
        if bar is not None:
            self._bar_segment(bar, text, self._clock.last, events)
            return
        line = parse_line(text)
        now = self._clock.resolve(line.stamp) or self._clock.last
        if now is not None and self._spans[0].start is None:
            self._spans[0] = PhaseSpan(Phase.LAUNCHING, now, None)
        bar = parse_bar(line.message)
        if bar is None:
            self._line(line, now, events)
        else:  # another bar, or one behind a prefix (docker stamps a bar's first redraw)
            self._bar_segment(bar, line.message, now, events)

    def _bar_segment(
        self, bar: tuple[Progress, int, bool], text: str, now: datetime | None, out: list[Event]
    ) -> None:
        progress, end, complete = bar
        self._bar(progress, text[:end], now, out)
        rest = text[end:]
        if complete and rest and not rest.isspace():  # a log line written while the bar waited
            self._segment(rest, out)

    def _bar(self, progress: Progress, text: str, now: datetime | None, out: list[Event]) -> None:
        self._last_line = text[:MAX_LAST_LINE_CHARS]
        if self._verdict is not Verdict.STARTING:
            return
        floor = bar_phase(progress.label)
        if floor is Phase.CUDA_GRAPH and self._phase.order >= Phase.DRAFT_LOADING.order:
            floor = Phase.DRAFT_CUDA_GRAPH
        if floor is not None and floor.order > self._phase.order:
            self._advance(floor, text, now, out)
        if progress != self._progress:
            self._progress = progress
            out.append(Event(EventKind.PROGRESS, self._phase, text, progress, now))

    def _line(self, line: Line, now: datetime | None, out: list[Event]) -> None:
        self._last_line = line.text[:MAX_LAST_LINE_CHARS]
        if line.message.startswith(LAUNCH_BANNERS) and self._story_begun():
            self._new_launch(now)
            out.append(Event(EventKind.PHASE, Phase.LAUNCHING, line.text, None, now))
        if self._detect and self.engine is None:
            self.engine = detect_engine(line.message, line.ranks)
        kind = self._tracebacks.see(line.text, line.message)
        fatal = self._judge(line, kind, now, out)
        if self._verdict is Verdict.STARTING:
            self._phase_marker(line, now, out)
        self._excerpt.note(line.text, just_set=fatal)

    def _story_begun(self) -> bool:
        return self._phase is not Phase.LAUNCHING or self._verdict is not Verdict.STARTING

    # -- failures ----------------------------------------------------------------------------

    def _judge(self, line: Line, kind: LineKind, now: datetime | None, out: list[Event]) -> bool:
        """Decide whether the line fails the run; True when it set or sharpened the failure."""
        message = line.message
        exception = kind is LineKind.EXCEPTION
        if not exception and (message.startswith(ROUTINE) or " NCCL INFO " in message):
            return False
        match = match_signature(message)
        if kind is LineKind.IGNORED_EXCEPTION:
            self._warn(line, now, out)
            return False
        if match is None and not exception:
            return False
        if not exception and is_harmless(message):
            self._warn(line, now, out)
            return False
        reason = match.reason if match else Reason.CRASH
        if match is not None and match.strong:
            return self._fail(reason, line, now, out, exception=exception)
        if exception:
            if self._verdict is Verdict.READY:
                self._warn(line, now, out)  # one request's error, the server lives on
                return False
            return self._fail(reason, line, now, out, exception=True)
        if self._verdict is Verdict.FAILED and not self._tracebacks.open:
            return self._fail(reason, line, now, out, exception=False)
        self._warn(line, now, out)
        return False

    def _fail(
        self, reason: Reason, line: Line, now: datetime | None, out: list[Event], *, exception: bool
    ) -> bool:
        if self._verdict is not Verdict.FAILED:
            self._verdict = Verdict.FAILED
            self._close_span(now)
        elif self._reason is not None and reason.rank <= self._reason.rank:
            same = reason.rank == self._reason.rank
            if same and exception and not self._excerpt.has_exception:
                self._excerpt.from_exception(self._tracebacks.frames, line.text, keep_trigger=True)
                return True
            return False
        self._reason = reason
        if exception:
            keep = not self._excerpt.has_exception
            self._excerpt.from_exception(self._tracebacks.frames, line.text, keep_trigger=keep)
        else:
            self._excerpt.from_line(line.text)
        out.append(Event(EventKind.FATAL, self._phase, line.text, self._progress, now, reason))
        return True

    def _warn(self, line: Line, now: datetime | None, out: list[Event]) -> None:
        if self._verdict is not Verdict.FAILED:
            out.append(Event(EventKind.WARNING, self._phase, line.text, None, now))

    # -- phases ------------------------------------------------------------------------------

    def _phase_marker(self, line: Line, now: datetime | None, out: list[Event]) -> None:
        message = line.message
        for marker in MARKERS:
            if marker.needle in message and self._applies(marker, message):
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
            return
        self._close_span(now)
        self._spans.append(PhaseSpan(phase, now, None))
        self._phase = phase
        self._progress = None
        out.append(Event(EventKind.PHASE, phase, text, None, now))
        if phase is Phase.READY:
            self._verdict = Verdict.READY
            out.append(Event(EventKind.READY, phase, text, None, now))

    def _close_span(self, now: datetime | None) -> None:
        last = self._spans[-1]
        self._spans[-1] = PhaseSpan(last.phase, last.start, now)

    # -- snapshot ----------------------------------------------------------------------------

    def _build_state(self) -> ScanState:
        return ScanState(
            verdict=self._verdict,
            phase=self._phase,
            reason=self._reason,
            hint=HINTS.get(self._reason) if self._reason else None,
            excerpt=self._excerpt.lines if self._reason else (),
            progress=self._pending_progress() or self._progress,
            engine=self.engine,
            phases=tuple(self._spans),
            bytes_seen=self._bytes,
            lines_seen=self._segments.newlines + (1 if self._segments.line_open else 0),
            last_line=self._last_line,
            last_timestamp=self._clock.last,
        )

    def _pending_progress(self) -> Progress | None:
        """A bar still waiting for its next redraw (e.g. stuck at 0/23) is already news."""
        if self._verdict is not Verdict.STARTING:
            return None
        pending = self._segments.pending()
        if b"%" not in pending:
            return None
        bar = parse_bar(parse_line(clean(pending)).message)
        return bar[0] if bar is not None and bar[2] else None
