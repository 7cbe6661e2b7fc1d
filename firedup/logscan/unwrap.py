"""Lines a terminal or a paste hard-wrapped at a fixed width, joined before they are read.

A terminal (tmux, screen, a console's copy) cuts a long line every W columns, mid-word, and a
paste keeps the cut: `... (model_max_length=None in model's conf` then `ig.json)`. The width
is learned from the log itself: the longest length seen (60+ characters), once `_SEEN` lines
of it were each followed by bare text that can only be their rest (a wrapped log has many
lines of exactly W and none longer; a line longer than W unlearns it; an access log's
repeated longest line teaches nothing, so its last line, `Killed`, stays a line). A line of
exactly W is then held, and joined with the next when that one is bare text: no prefix of
its own (normalize.parse_line), not a traceback's or an exception's line, not a bar, not
starting the way the held line did (a flood of one tool's lines, a wrapper both wear,
numbers aside). A continuation indented by a pager (`  ig.json)`) loses its indentation,
unless the held line is a frame's (its code line follows it indented).
"""

from __future__ import annotations

import re
from os.path import commonprefix

from firedup.logscan.normalize import engine_says, parse_line

_MIN_WIDTH = 60  # narrower than any terminal a log is pasted from
_SEEN = 2  # lines of exactly the width, each followed by its rest, before it is believed
_SEPARATOR = re.compile(r"[\])|>:-] ")
_DIGITS = str.maketrans("0123456789", "0000000000")


class Unwrapper:
    def __init__(self) -> None:
        self._held: str | None = None
        self._previous = ""
        self._longest = 0
        self._pairs = 0  # lines of the longest length that a bare continuation followed
        self.width = 0  # the learned wrap width; 0 while none

    def feed(self, text: str) -> list[str]:
        """The lines `text` completes: itself, the held line, or both joined."""
        held = self._held
        if held is None:
            if "%|" in text:  # a bar's redraw: never wrapped by a terminal (it redraws in place)
                return [text]
            self._learn(self._previous, text)
            self._previous = text
            if not self.width:  # the common case: no wrap learned, nothing held
                return [text]
        out: list[str] = []
        self._held = None
        if held is not None:
            if _continues(held, text):
                rest = text if held.lstrip().startswith('File "') else text.lstrip(" ")
                if len(text) == self.width:  # cut again: the line goes on
                    self._held = held + rest
                    return out
                out.append(held + rest)
                return out
            out.append(held)
            self._learn(held, text)
            self._previous = text
        if self.width and len(text) == self.width:
            self._held = text
        else:
            out.append(text)
        return out

    def finish(self) -> list[str]:
        held, self._held = self._held, None
        return [held] if held is not None else []

    def _learn(self, previous: str, text: str) -> None:
        """The width is the longest length, once `_SEEN` lines of it were followed by what
        can only be their rest: a long line repeated (an access log) teaches nothing."""
        if len(text) > self._longest:
            self._longest, self._pairs, self.width = len(text), 0, 0
        elif (
            len(previous) == self._longest >= _MIN_WIDTH
            and not self.width
            and _continues(previous, text)
        ):
            self._pairs += 1
            self.width = self._longest if self._pairs >= _SEEN else 0


def _continues(held: str, text: str) -> bool:
    body = text.lstrip(" ")
    if not body or body[:1] == "\t" or text[:8] == held[:8] or len(text) - len(body) > 2:
        return False
    shapes = (held[:40].translate(_DIGITS), text[:40].translate(_DIGITS))  # `0: ` and `1: `
    common = len(commonprefix(shapes))  # noqa: RUF071 - characters, not paths
    if common > 1 and _SEPARATOR.search(text, 0, common + 1):
        return False  # both wear one wrapper (`srun: `): two lines
    if "%|" in text or engine_says(body):
        return False
    line = parse_line(body)  # no prefix peeled: only trailing blanks may go
    return line.stamp is None and not line.level and line.message == body.rstrip()
