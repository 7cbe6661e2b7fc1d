"""Tracebacks and excerpts: which lines prove a failure, and which exceptions to ignore.

An exception line (`ValueError: ...`) counts inside a traceback, so prose that happens to
start with `Error:` stays prose. A traceback is open from its header, or from its first frame
line when the header was not pasted or was cut off (`File "...", line N` is evidence enough).
Several ranks can print their tracebacks at once, so open tracebacks are counted, not flagged.
Where the frames run (a compiler call, NCCL, the CUDA graph capture) is kept as the
traceback's hint: it names the cause when the exception line does not, or never came.
A frame line hard-wrapped by a paste (`File "/usr/lib/python3.10/dist-p` then
`ackages/x.py", line 1, in f`) is read joined with its continuation.
`Exception ignored in:` announces a traceback Python prints and survives (usually at
interpreter shutdown); its exception never fails a run. Nor does the exception of the
traceback vLLM's chat-template helper logs before raising to a caller that catches it
(frames.TEMPLATE_CAUGHT). Nor does a `CancelledError`: a task that was cancelled (a stop,
a client gone) names no failure.
"""

from __future__ import annotations

import re
from collections import deque
from enum import Enum

from firedup.logscan.frames import (
    EXCEPTION_IGNORED,
    EXCEPTION_LINE,
    FRAME_LINE,
    TEMPLATE_CAUGHT,
    closing_hint,
    frame_hint,
    is_traceback_header,
)
from firedup.logscan.model import Reason

FRAME_LINES = 5  # lines kept before the exception line: about two frames and their code
FOLLOW_LINES = 2  # lines kept after a fatal line that is not an exception (e.g. "Exit code: -9")
RECENT_LINES = 2
MAX_EXCERPT_LINES = 9
MAX_LINE_CHARS = 400
_MAX_OPEN = 64
_STALE_AFTER_LINES = 400  # a traceback cut off mid-print must not stay open forever
_CANCELLED = "CancelledError"  # asyncio's and concurrent.futures': what a cancelled task gets
_DANGLING_LINES = 3  # a log that ends this close to a frame line ends in its traceback
_JOIN_CHARS = 400  # a wrapped frame line is joined from at most this much of each piece


# Frames of other printers: IPython's (`/x/llm.py in __init__(self, ...)`, Colab's
# `[/x/llm.py](https://...) in __init__(`, IPython 8's `File /x/llm.py:247, in __init__(`,
# `Cell In[3], line 1`) and the Ascend runtime's native error stack (`rtGetDeviceCount
# execution failed, ...[FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:65]`, and
# under CANN's `TraceBack (most recent call last):` the checks that failed on the way,
# `Check NnopbaseExecutorDoTiling(executor) failed`).
# A native backtrace's frame, as c10/torch print it (`frame #3: sym + 0x1c (0x7f.. in
# /x/libtorch.so)`; a paste may turn `#3` into a Markdown link; `frame #3:` may be peeled).
OTHER_FRAME = re.compile(
    r"\s*(?:\[(?:/|[A-Za-z]:\\)[^\s\]]*\.py\]\(\S"  # Colab's link alone: the rest may wrap
    r"|(?:(?:/|[A-Za-z]:\\)[^\s\]]*\.py|<ipython-input-[\w-]+>) in [\w<>.]+\("
    r"|File [^\s\"]+\.py:\d+, in [\w<>.]+|Cell In\[\d*\], line \d+)"
    r"|.*\[FUNC:\w+\]\[FILE:[\w.]+\]\[LINE:\d+\]\s*$|\s*Check \w+\([^()]*\) failed\s*$"
)

NATIVE_FRAME = re.compile(
    r"\s*(?:frame (?:#\d+|\[#\d+\]\(\S+\)): \S.*? \+ 0x[0-9a-f]+\b"  # a wrap may cut its end
    r"|.*\+ 0x[0-9a-f]+ \(0x[0-9a-f]+ in [^\s()]+\)\s*$)"
)


def _template_caught(message: str) -> bool:
    """The line announcing a chat template's traceback that its caller catches (or its start,
    when a paste hard-wrapped it)."""
    start, tails = TEMPLATE_CAUGHT
    rest = message[len(start) :] if message.startswith(start) else None
    return rest is not None and any(tail.startswith(rest) for tail in tails)


def is_frame(message: str) -> bool:
    """A traceback's frame line, whoever printed the traceback."""
    if 'File "' in message:
        return FRAME_LINE.match(message) is not None
    if "+ 0x" in message and " in " in message and NATIVE_FRAME.match(message) is not None:
        return True
    if ".py" in message or "[FUNC:" in message or "In[" in message or "<ipython" in message:
        return OTHER_FRAME.match(message) is not None
    if message.endswith(" failed") and "Check " in message:  # CANN's failed checks
        return OTHER_FRAME.match(message) is not None
    return False


class LineKind(Enum):
    PLAIN = "plain"
    HEADER = "header"
    FRAME = "frame"  # any line inside an open traceback but its exception line
    EXCEPTION = "exception"
    IGNORED_EXCEPTION = "ignored_exception"


class Tracebacks:
    def __init__(self) -> None:
        self.open = 0
        self._tail: deque[str] = deque(maxlen=FRAME_LINES)
        self._ignore_next = False
        self._ignoring = False
        self._quiet_lines = 0
        self.frames: tuple[str, ...] = ()  # the lines before the last exception line
        self.hint: Reason | None = None  # where the open traceback's frames run
        self.closed_hint: Reason | None = None  # the hint of the traceback just closed
        self._since_frame = 0  # lines since the last frame or code line of a traceback
        self.frame = ""  # the line just seen if it is a frame line, joined when it was wrapped
        self._cut_frame = ""  # a frame line cut before its `", line N`: a paste's hard wrap

    @property
    def dangling(self) -> bool:
        """The log ends in a traceback Python does not survive: its last lines are frames."""
        return self.open > 0 and not self._ignoring and self._since_frame <= _DANGLING_LINES

    def see(self, text: str, message: str) -> LineKind:
        if message.startswith(EXCEPTION_IGNORED) or _template_caught(message):
            self._ignore_next = True
            return LineKind.PLAIN
        if is_traceback_header(message):
            self._begin(text, None)
            return LineKind.HEADER
        frame = is_frame(message)
        cut, self._cut_frame = self._cut_frame, ""
        if cut and not frame and FRAME_LINE.match(cut + message[:_JOIN_CHARS]) is not None:
            frame, message = True, cut + message  # the rest of a wrapped frame line
        elif not frame and 'File "' in message and '"' not in message.partition('File "')[2]:
            self._cut_frame = message[-_JOIN_CHARS:].lstrip()
        self.frame = message if frame else ""
        if not self.open:
            if frame:
                self._begin(text, frame_hint(message))  # a traceback without its header
                return LineKind.FRAME
            return LineKind.PLAIN
        self._since_frame = 0 if frame or message[:1].isspace() else self._since_frame + 1
        if EXCEPTION_LINE.match(message):
            self.open -= 1
            self.frames = tuple(self._tail)
            self._tail.clear()
            self.closed_hint, self.hint = closing_hint(self.hint, message), None
            ignored, self._ignoring = self._ignoring, False
            ignored = ignored or _CANCELLED in message  # a task cancelled: a stop, no cause
            return LineKind.IGNORED_EXCEPTION if ignored else LineKind.EXCEPTION
        self._tail.append(_short(text))
        self.hint = self.hint or frame_hint(message)
        self.frames = tuple(self._tail)
        self._quiet_lines += 1
        if self._quiet_lines > _STALE_AFTER_LINES:
            self.open = 0
        return LineKind.FRAME

    def _begin(self, text: str, hint: Reason | None) -> None:
        self.open = min(self.open + 1, _MAX_OPEN)
        self._tail.clear()
        self._tail.append(_short(text))
        self.frames = tuple(self._tail)
        self.hint = hint
        self._ignoring, self._ignore_next = self._ignore_next, False
        self._quiet_lines = 0
        self._since_frame = 0


class Excerpt:
    """The lines shown with a failure: the exception and the frames above it, or the fatal
    line with the two lines before and after it."""

    def __init__(self) -> None:
        self.lines: tuple[str, ...] = ()
        self.has_exception = False
        self._recent: deque[str] = deque(maxlen=RECENT_LINES)
        self._follow = 0
        self._trigger = ""

    def from_line(self, text: str) -> None:
        self._trigger = _short(text)
        self.lines = (*map(_short, self._recent), self._trigger)
        self.has_exception = False
        self._follow = FOLLOW_LINES

    def from_exception(self, frames: tuple[str, ...], text: str, *, keep_trigger: bool) -> None:
        keep = keep_trigger and self._trigger and self._trigger not in frames
        lead = (self._trigger,) if keep else ()
        self.lines = (*lead, *frames, _short(text))[-MAX_EXCERPT_LINES:]
        self.has_exception = True
        self._follow = 0

    def note(self, text: str, *, just_set: bool) -> None:
        """Called for every line after it was judged, so a fatal line is not its own follower."""
        if self._follow and not just_set:
            self.lines = (*self.lines, _short(text))[:MAX_EXCERPT_LINES]
            self._follow -= 1
        self._recent.append(text)


def _short(text: str) -> str:
    text = text.rstrip()
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "…"
