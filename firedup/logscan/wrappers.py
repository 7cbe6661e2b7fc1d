"""Wrappers learned from the log itself: a prefix repeated across lines is not the engine's.

Launchers, collectors and terminals put their own tag in front of every line the engine
prints (`[rank0]: ` from torch elastic, `2024-02-20 21:46:23 | ERROR | stderr | ` from a log
shipper, `stderr: `, `> ` from a pasted quote). normalize.py peels the shapes it knows; any
other prefix that two consecutive lines share, up to a separator and its space, is taken as a
wrapper and peeled from every line that starts with it. Its digits are free, since a stamp,
a pid or a rank number changes from line to line; its other characters must match exactly.
Only lines with no engine prefix of their own are offered (normalize decides), so the
engine's own prefixes and messages are never learned as wrappers.
"""

from __future__ import annotations

import re

from firedup.logscan.signatures import EXCEPTION_LINE, TRACEBACK_HEADER

_DIGITS = str.maketrans("0123456789", "0000000000")
_SEPARATOR = re.compile(r"[\])|>:] ")
_LOOK_CHARS = 160  # a wrapper is a prefix: never look further into a line
_MIN_REST = 10  # a wrapper leaves the engine's message behind it


class Wrappers:
    def __init__(self) -> None:
        self._previous = ""
        self._pattern: re.Pattern[str] | None = None

    def peel(self, text: str) -> str:
        """`text` without the learned wrapper; `text` itself when it carries none."""
        previous, self._previous = self._previous, text
        for attempt in (1, 2):
            pattern = self._pattern
            if pattern is not None:
                match = pattern.match(text)
                if match is not None and match.end() < len(text):
                    return text[match.end() :]
            if attempt == 1:
                learned = _learn(previous, text)
                if learned is None:
                    return text
                self._pattern = learned
        return text


def _learn(previous: str, text: str) -> re.Pattern[str] | None:
    """The wrapper `previous` and `text` share, as a pattern with free digits; or None."""
    if not previous or not text or previous[:1].isspace() or text[:1].isspace():
        return None
    shape_a = previous[:_LOOK_CHARS].translate(_DIGITS)
    shape_b = text[:_LOOK_CHARS].translate(_DIGITS)
    common = 0
    for char_a, char_b in zip(shape_a, shape_b):  # noqa: B905 - no strict= on 3.8
        if char_a != char_b:
            break
        common += 1
    cut = 0
    for match in _SEPARATOR.finditer(shape_b, 0, common):
        cut = match.end()
    wrapper = text[:cut]
    if cut < 2 or min(len(previous), len(text)) - cut < _MIN_REST:
        return None  # what two lines share up to their last words is a message, not a wrapper
    if EXCEPTION_LINE.match(wrapper) or TRACEBACK_HEADER in wrapper:
        return None
    return re.compile(re.sub(r"\d+", lambda _: r"\d+", re.escape(wrapper)))
