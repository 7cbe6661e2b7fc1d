"""The streaming classifier: bytes in, events and a state snapshot out. Pure, one pass.

LogScanner owns the state and reads each segment: bars, flattened records, wrappers learned,
a launch banner starting a new story. What a line means is decided by its mixins:
- phases.py: how a startup moves forward (markers, bars; phases only move forward);
- serving.py: proofs that the server was serving (ready means ready: SGLang's fired-up line,
  vLLM's "Application startup complete.", or requests served where they count);
- failures.py: which lines fail a run, and why. Once failed, the verdict stays failed and
  later lines may only sharpen the reason.
"""

from __future__ import annotations

from datetime import datetime

from firedup.engine import Engine
from firedup.logscan.context import HOLE, is_stop
from firedup.logscan.evidence import Excerpt, LineKind, Tracebacks
from firedup.logscan.failures import FailureRules
from firedup.logscan.harmless import is_routine
from firedup.logscan.hints import HINTS
from firedup.logscan.model import (
    EarlierLaunch,
    Event,
    EventKind,
    Phase,
    PhaseSpan,
    Progress,
    Reason,
    ScanState,
    Verdict,
)
from firedup.logscan.normalize import (
    FLATTENED_MIN_CHARS,
    Clock,
    Line,
    clean,
    engine_says,
    parse_line,
    split_records,
)
from firedup.logscan.phases import MAX_LAST_LINE_CHARS
from firedup.logscan.rules import (
    BANNER_STARTS,
    BAR_LABELS,
    detect_engine,
    launch_banner,
    parse_bar,
)
from firedup.logscan.segments import Segmenter
from firedup.logscan.serving import WRAP_MIN_CHARS, ServingRules, continues
from firedup.logscan.unwrap import Unwrapper
from firedup.logscan.wrappers import Wrappers

_MAX_HELD = 4  # lines held while no line has taught the log's wrapper yet
_MOVED_ON = ("INFO", "WARNING", "DEBUG")  # levels a process logs while it lives
_HTTP_UP = Phase.HTTP_UP.order


class LogScanner(FailureRules, ServingRules):
    def __init__(self, engine: Engine | None = None, *, year: int | None = None) -> None:
        """`year` completes timestamps that omit it (vLLM's `MM-DD`); None means unknown."""
        self._given = engine
        self._detect = engine is None
        self._segments = Segmenter()
        self._unwrap = Unwrapper()
        self._clock = Clock(year)
        self._bytes = 0
        self._last_line = ""
        self._snapshot: ScanState | None = None
        self._wrappers = Wrappers(plain=engine_says)
        self._lines = 0
        self._held: list[str] = []  # the first lines offered to the wrappers (wrappers.py)
        self._hole = False  # a file hole was read: what follows is a later write
        self._nul_tail = False  # the segment still being read holds NULs
        self._launches = 0
        self._earlier: EarlierLaunch | None = None
        self._new_launch(None)

    def _new_launch(self, now: datetime | None) -> None:
        """Forget the story so far: a log appended to (`>>`) can hold several launches."""
        if self._launches:
            stopped = self._stopping
            self._earlier = EarlierLaunch(self._verdict, self._phase, self._reason, stopped)
        self._launches += 1
        self.engine = self._given
        self._tracebacks = Tracebacks()
        self._excerpt = Excerpt()
        self._verdict = Verdict.STARTING
        self._phase = Phase.LAUNCHING
        self._reason: Reason | None = None
        self._progress: Progress | None = None
        self._spans: list[PhaseSpan] = [PhaseSpan(Phase.LAUNCHING, now, None)]
        self._rank_markers: set[tuple[str, str]] = set()
        self._story = False  # a launch banner or a phase seen: the log shows the startup
        self._candidate: tuple[Reason, int] | None = None
        self._borrowed = False
        self._wrapped_tail = ""
        self._stopping = False  # the server was told to stop (context.is_stop)
        self._announced: Line | None = None  # failures.py: a dying process's announcement
        self._echo_from = -1  # an exception line no record has followed: bare lines continue it
        self._undecided: Line | None = None  # an engine-dependent line read before the engine
        self._piece: Line | None = None  # the last line, when long enough to have been wrapped

    def feed(self, chunk: bytes) -> list[Event]:
        """Events completed by this chunk; a line still being written waits for its end."""
        self._bytes += len(chunk)
        self._snapshot = None
        events: list[Event] = []
        nul = self._nul_tail or self._hole or b"\0" in chunk  # one look per chunk: cheap
        self._nul_tail = nul and chunk[-1:] not in b"\r\n"  # NULs in the unfinished segment
        for segment in self._segments.feed(chunk):
            self._read(segment, events, nul=nul)
        return events

    def finish(self) -> list[Event]:
        """At end of file: the trailing unterminated line counts too."""
        self._snapshot = None
        events: list[Event] = []
        for segment in self._segments.finish():
            self._read(segment, events, nul=self._nul_tail or self._hole)
        self._flush_unwrapped(events)
        self._release_held(events)
        self._finish_failures(events)
        return events

    @property
    def state(self) -> ScanState:
        if self._snapshot is None:
            self._snapshot = self._build_state()
        return self._snapshot

    # -- one segment -------------------------------------------------------------------------

    def _read(self, segment: bytes, events: list[Event], *, nul: bool) -> None:
        """One segment: a file hole first (`nul`: NULs were seen), then its text, joined with
        the next when a terminal hard-wrapped it (unwrap.py)."""
        if nul:
            self._later_write(segment, events)
        for text in self._unwrap.feed(clean(segment)):
            self._segment(text, events)

    def _flush_unwrapped(self, events: list[Event]) -> None:
        for text in self._unwrap.finish():
            self._segment(text, events)

    def _later_write(self, segment: bytes, events: list[Event]) -> None:
        """What follows a file hole (context.HOLE) is a later write: a new story."""
        self._hole = self._hole or (b"\0" in segment and HOLE in segment)
        if self._hole and segment.strip(b"\0 \t"):
            self._hole = False
            self._flush_unwrapped(events)  # the earlier writer's lines end at the hole
            self._release_held(events)
            self._new_launch(self._clock.last)

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
        if len(text) >= FLATTENED_MIN_CHARS:
            records = split_records(text)
            if len(records) > 1:  # a flattened log: each record is a line of its own
                for record in records:
                    self._segment(record, events)
                return
        offers = self._wrappers.offers
        wrappers = self._wrappers
        line = parse_line(text, wrappers.peel, wrappers.saw)
        if self._held:  # this line has taught whether the held ones wear a wrapper
            untaught = wrappers.offers > offers and not wrappers.learned
            if untaught and not wrappers.teaches(text) and len(self._held) < _MAX_HELD:
                self._held.append(text)  # a tag on a blank line: wait for one that teaches
                return
            self._release_held(events)
        elif offers == 0 and wrappers.offers:
            self._held = [text]  # the first line with no prefix known waits for the next
            return
        self._parsed(line, events)

    def _release_held(self, events: list[Event]) -> None:
        held, self._held = self._held, []
        for text in held:
            self._parsed(parse_line(text, self._wrappers.strip), events)

    def _parsed(self, line: Line, events: list[Event]) -> None:
        now = self._clock.resolve(line.stamp) or self._clock.last
        if now is not None and self._spans[0].start is None:
            self._spans[0] = PhaseSpan(Phase.LAUNCHING, now, None)
        bar = parse_bar(line.message)
        if bar is None:
            if "%|" in line.message and self._verdict is Verdict.STARTING:
                self._cut_bar(line.message, now, events)
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

    def _line(self, line: Line, now: datetime | None, out: list[Event]) -> None:
        piece, self._piece = self._piece, line if len(line.text) >= WRAP_MIN_CHARS else None
        if piece is not None and self._verdict is Verdict.STARTING and continues(piece, line):
            self._continued(piece, line, now, out)
        self._last_line = line.text[:MAX_LAST_LINE_CHARS]
        self._lines += 1
        if self._echo_from >= 0 and (line.level or line.stamp is not None):
            self._echo_from = -1  # a record: the exception's message has ended
        if line.message.startswith(BANNER_STARTS) and self._banner(line):
            if self._story_begun():  # a launch banner after anything: a new story
                self._new_launch(now)
                out.append(Event(EventKind.PHASE, Phase.LAUNCHING, line.text, None, now))
            self._story = True
        if self._detect and self.engine is None:
            self._detect_engine(line, now, out)
        if self._verdict is Verdict.STARTING and self._serving(line):
            self._advance(Phase.READY, line.text, now, out)
        if self._tracebacks.open:
            if line.level in _MOVED_ON:
                self._tracebacks.open = 0  # the process logs on: it survived that traceback
        elif is_routine(line.message):  # the bulk of a long log: serving traffic
            if self._wrapped_tail:
                self._wrapped_tail = ""  # a wrapped message continues on the very next line
            if self._verdict is Verdict.STARTING:
                self._phase_marker(line, now, out)
            self._excerpt.note(line.text, just_set=False)
            return
        if not self._stopping and self._verdict is not Verdict.FAILED:  # never serving traffic
            ready, up = self._verdict is Verdict.READY, self._phase.order >= _HTTP_UP
            self._stopping = is_stop(line.message, ready=ready, http_up=up)
        kind = self._tracebacks.see(line.text, line.message)
        if kind is LineKind.EXCEPTION:
            self._echo_from = self._lines
        if kind is LineKind.FRAME and self._in_handler(line.message):
            self._advance(Phase.READY, line.text, now, out)
        fatal = self._judge(line, kind, now, out)
        if self._verdict is Verdict.STARTING:
            self._phase_marker(line, now, out)
        self._excerpt.note(line.text, just_set=fatal)

    def _detect_engine(self, line: Line, now: datetime | None, out: list[Event]) -> None:
        self.engine = detect_engine(line.message, line.ranks)
        if self.engine is not None and self._undecided is not None:
            undecided, self._undecided = self._undecided, None
            if self._verdict is Verdict.STARTING:
                self._phase_marker(undecided, now, out)  # what it meant for this engine

    def _story_begun(self) -> bool:
        """Whether a banner now starts a new story: the run got anywhere, failed or stopped."""
        return (
            self._phase is not Phase.LAUNCHING
            or self._verdict is not Verdict.STARTING
            or self._stopping
        )

    def _banner(self, line: Line) -> bool:
        """Whether the line is the engine's first line of a run. A bare one (no record's
        prefix) inside a traceback or continuing its exception's message, in a log whose
        records carry stamps, is the traceback's text."""
        if not launch_banner(line.message):
            return False
        if line.level or line.stamp is not None or self._clock.last is None:
            return True  # the engine's record, or a log whose lines carry no stamp
        return not self._tracebacks.open and self._echo_from < 0

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
            launches=self._launches,
            earlier=self._earlier,
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
