"""Which lines fail a startup and which reason they name: the judging half of LogScanner.

Rules (engines.md §10, issue 4, issue 15):
- A strong signature fails the run at any time, after ready too.
- An exception line fails a starting run: inside a traceback, after frames pasted without
  their header, or alone when it names a known cause (`ValueError: Bfloat16 is only ...`).
  After ready it is one request's error, a warning. So is a weak signature on a line the
  engine logged at ERROR level (vLLM prints a dying process's last words so).
- A log that ends inside a traceback (`finish`: the process is gone, or the paste was cut)
  fails a run that was not ready: nothing survived to print the rest. Where its frames ran
  names the cause (a compiler call, NCCL, the CUDA graph capture), else it is a crash (unless
  the run already failed: then it is that failure's traceback, cut, and names nothing). A
  traceback the log went on past is not evidence: healthy vLLM startups log some at ERROR.
- The first cause wins and the aftermath stays context: a named cause is never replaced, a
  generic one (crash, killed, engine_init) gives way to a named one. A cause named by a
  warning just before a generic failure (`invalid repository id`, then `Error executing
  method 'load_model'`) is taken as that failure's cause, until the failure's own exception
  names one: SGLang prints the context-length warning even when the override allows the
  length, and a traceback starting within 30 lines of it ended in an AttributeError.
- A process announcing the traceback it dies of (`Process EngineCore_0:`) fails the run where
  that traceback ends, unless it ends in a stop (Ctrl-C's `KeyboardInterrupt`): the end says
  how it died. A stop's own exception names no cause, even after a failure.
- A message hard-wrapped over two lines is read joined when its second half starts in
  lower case after a long first half.
"""

from __future__ import annotations

import re
from datetime import datetime

from firedup.logscan.context import is_stop, probe_error, quoted, signalled
from firedup.logscan.evidence import Excerpt, LineKind, Tracebacks
from firedup.logscan.frames import EXCEPTION_LINE
from firedup.logscan.harmless import (
    engine_loop_died,
    handler_log,
    harmless_across,
    is_harmless,
    is_routine,
)
from firedup.logscan.model import Event, EventKind, Reason, Verdict
from firedup.logscan.normalize import Line
from firedup.logscan.phases import PhaseRules
from firedup.logscan.signatures import Match, match_signature, signature_starts

# pydantic's line for one failed validator under its ValidationError: the exception's message
# (`  Value error, User-specified max_model_len (131072) is greater than ... [type=value_error`).
VALIDATION_ERROR = re.compile(r"\s*(?:Value error|Assertion failed), \S")
CANDIDATE_LINES = 30  # how far back a warning's named cause explains a generic failure
_JOIN_MIN_CHARS = 60  # a shorter line was not hard-wrapped
_JOIN_CHARS = 200
_LOOP_DIED = Match(Reason.CRASH, strong=True)  # harmless.engine_loop_died


_IN_TRACEBACK = (LineKind.HEADER, LineKind.FRAME)


def _exception_text(text: str) -> bool:
    """An exception's own line, or pydantic's line for the validator that raised."""
    return EXCEPTION_LINE.match(text) is not None or VALIDATION_ERROR.match(text) is not None


class FailureRules(PhaseRules):
    """Mixed into LogScanner, which owns the state these rules read and write."""

    _reason: Reason | None
    _excerpt: Excerpt
    _tracebacks: Tracebacks
    _lines: int
    _candidate: tuple[Reason, int] | None
    _borrowed: bool
    _wrapped_tail: str
    _stopping: bool
    _announced: Line | None  # `Process X:` said, its traceback's end not yet seen

    def _judge(self, line: Line, kind: LineKind, now: datetime | None, out: list[Event]) -> bool:
        """Decide whether the line fails the run; True when it set or sharpened the failure."""
        message = line.message
        if self._stopping or (kind is LineKind.EXCEPTION and is_stop(message, ready=False)):
            self._announced = None  # Ctrl-C's KeyboardInterrupt names no cause, even after one
            return False  # the server was told to stop: what dies now dies of the stop
        if self._announced is not None and kind not in _IN_TRACEBACK:
            self._fail(Reason.CRASH, self._announced, now, out, exception=False)
            self._announced = None  # its traceback ended in a failure, not a stop
        exception = kind is LineKind.EXCEPTION
        if not exception and is_routine(message):
            if self._wrapped_tail:
                self._wrapped_tail = ""
            return False
        if kind is LineKind.IGNORED_EXCEPTION or (exception and probe_error(message)):
            self._warn(line, now, out)  # a task cancelled, a probe that found no server yet
            return False
        match, joined = self._signature(message)
        if match is None and engine_loop_died(line.text, line.level):
            match = _LOOP_DIED
        if match is None and not exception:
            return False  # frames only hint at a cause: see evidence.Tracebacks
        ready = self._verdict is Verdict.READY
        if match and self._verdict is not Verdict.FAILED and signalled(message, ready=ready):
            self._stopping = True  # a child dead of SIGTERM/SIGINT: the stop reached it
            return False
        if not exception and is_harmless(joined):  # a wrapped line is harmless as a whole
            self._warn(line, now, out)
            return False
        if match is not None and ready and kind is LineKind.PLAIN and self._echoed(joined):
            return False  # a logged request's text: data, not the engine's word
        reason = match.reason if match else self._tracebacks.closed_hint or Reason.CRASH
        if match is not None and match.announce and not exception:
            self._announced = line  # how it died is said where its traceback ends
            return False
        # A report of the engine's death after ready is a stop's unless a request's handler
        # logged it: then a request in flight died with the engine.
        if (
            match is not None
            and match.strong
            and not (match.report and ready and not handler_log(line.text))
        ):
            return self._fail(reason, line, now, out, exception=exception)
        bare = not exception and kind is LineKind.PLAIN and _exception_text(joined)
        if exception or bare or line.level == "ERROR":
            if self._verdict is Verdict.READY:
                self._warn(line, now, out)  # one request's error, the server lives on
                return False
            return self._fail(reason, line, now, out, exception=exception)
        if self._verdict is Verdict.FAILED and not self._tracebacks.open:
            return self._fail(reason, line, now, out, exception=False)
        if self._verdict is Verdict.STARTING:
            self._candidate = (reason, self._lines)
        self._warn(line, now, out)
        return False

    def _signature(self, message: str) -> tuple[Match | None, str]:
        """The reason the line names, read joined with the line before when it continues a
        hard-wrapped message (cut mid-word, or at a space the paste lost); and the text read."""
        match = match_signature(message)
        tail, self._wrapped_tail = self._wrapped_tail, ""
        joined = message
        if tail and message[:1].islower():
            if match is not None and EXCEPTION_LINE.match(message) is None:
                joined = tail + message  # it names a cause alone; still a wrapped line's rest
            for glue in ("", " ") if match is None else ():
                match = match_signature(tail + glue + message[:_JOIN_CHARS])
                if match is not None:
                    joined = tail + glue + message
                    break
        if match is not None and tail and harmless_across(tail, message):
            return None, message  # the rest of a harmless line cut mid-word (`NCCL WA|RN ...`)
        if match is None and len(message) >= _JOIN_MIN_CHARS:
            self._wrapped_tail = message[-_JOIN_CHARS:]
        return match, joined

    @staticmethod
    def _echoed(message: str) -> bool:
        """Whether every signature the line names is quoted data; an exception's own line
        quoting its cause (`RuntimeError('Engine process (pid 9) died.')`) is no echo."""
        if EXCEPTION_LINE.match(message) is not None:
            return False
        starts = signature_starts(message)
        return bool(starts) and all(quoted(message, start) for start in starts)

    def _finish_failures(self, out: list[Event]) -> None:
        """At end of file: a traceback the log ends in is the last thing a process printed."""
        if self._announced is not None and not self._stopping:
            self._fail(Reason.CRASH, self._announced, None, out, exception=False)
        if not self._tracebacks.dangling or self._verdict is Verdict.READY or self._stopping:
            return  # a traceback cut after a stop was asked for is the stop's
        frames = self._tracebacks.frames
        last = frames[-1] if frames else ""
        reason = self._tracebacks.hint or Reason.CRASH
        if reason is Reason.CRASH and self._verdict is Verdict.FAILED:
            return  # a cut traceback after the failure names no cause: it is that failure's
        if self._fail(reason, Line(last, last, None), None, out, exception=False):
            self._excerpt.from_exception(frames[:-1], last, keep_trigger=False)  # its frames

    def _fail(
        self, reason: Reason, line: Line, now: datetime | None, out: list[Event], *, exception: bool
    ) -> bool:
        borrowed = False  # the reason is a warning's, not this line's own
        if reason.rank < Reason.OOM.rank and self._candidate is not None:
            named, seen_at = self._candidate
            if self._lines - seen_at <= CANDIDATE_LINES:
                reason, borrowed = named, True
        # The failure's own exception names its cause: it beats a warning's guess.
        own = self._borrowed and exception and not borrowed and reason.rank >= Reason.OOM.rank
        if self._verdict is not Verdict.FAILED:
            self._verdict = Verdict.FAILED
            self._close_span(now)
        elif not own and self._reason is not None and reason.rank <= self._reason.rank:
            same = reason.rank == self._reason.rank
            if same and exception and not self._excerpt.has_exception:
                self._excerpt.from_exception(self._tracebacks.frames, line.text, keep_trigger=True)
                return True
            return False
        self._reason, self._borrowed = reason, borrowed
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
