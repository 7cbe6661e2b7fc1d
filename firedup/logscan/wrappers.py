"""Wrappers learned from the log itself: a prefix repeated across lines is not the engine's.

Launchers, collectors and terminals put their own tag in front of every line the engine
prints (`[rank0]: ` from torch elastic, `2024-02-20 21:46:23 | ERROR | stderr | ` from a log
shipper, `stderr: `, `> ` from a pasted quote). normalize.py peels the shapes it knows; any
other prefix that two consecutive lines share, up to a separator and its space, is taken as a
wrapper and peeled from every line that starts with it. Its digits are free, since a stamp,
a pid or a rank number changes from line to line; its other characters must match exactly.
Only lines with no engine prefix of their own are offered (normalize decides), so the
engine's own prefixes and messages are never learned as wrappers.

A prefix found before an engine record further in a line (normalize's record search) is a
wrapper too (`saw`): it is peeled from the lines that carry it and no record (`[rank0]:
Killed`), even when no two of those lines tell it pairwise. It ends at a separator, or is one
word and a space (`kserve-container `: a container's or a pod's name).

A short lower-case, numeric or bracketed tag (`srun --label`'s `0: `, `stderr: `,
`[rank0]: `) in front of what is plainly the engine's (a record, a traceback line, an
exception) is learned from that one line: a log of one line, or whose lines all differ only
in numbers, teaches nothing pairwise.

The first line offered can only be told a wrapper by the line after it, so the scanner holds
it until then (and the lines too short to teach anything, such as a tag on a blank line, up
to a few; `offers` counts the lines offered), then reads it again with `strip`, which peels
what was learned and learns nothing: a two-line log whose cause is in its first line
(`[rank0]: Extension modules: ...`) is read whole. A learned wrapper is peeled once or
repeated (`[rank0]: [rank0]: `).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from firedup.logscan.frames import EXCEPTION_LINE, TRACEBACK_HEADER

_DIGITS = str.maketrans("0123456789", "0000000000")
_SEPARATOR = re.compile(r"[\])|>:-] |\]:(?=\S)")  # `]:` unspaced: torchrun --tee
_NUMBERS = re.compile(r"0+")  # a shape's numbers, whatever their width
_LOOK_CHARS = 160  # a wrapper is a prefix: never look further into a line
_MIN_REST = 10  # a wrapper leaves the engine's message behind it
_MAX_DEPTH = 2  # learned wrappers nest this deep at most
# Or the stream's name and a space (LocalAI's `GRPC(model-addr): stderr ` around a backend's
# lines: the outer part is learned pairwise, this one from what it leaves). A bracketed tag
# may be followed by `:`, `: ` or a space (torchrun --tee's `[default0]:`, `[pod-name] `).
_TAG = re.compile(
    r"(?:(?:\d{1,4}|[a-z][\w.-]{0,30}): |\[[\w.-]{1,40}\](?:: ?| )|std(?:err|out) )"
    r"(?=\S| +File \")"
)
# A container's or a pod's name and a space (no separator), maybe inside another wrapper.
_WORD = re.compile(r"(?:.*[\])|>:-] )?[A-Za-z][\w.-]{1,40} ")
_ENDS_AT_SEPARATOR = re.compile(r".*(?:[\])|>:-] |\]:)$")
# What a progress bar's label leaves: tqdm's `{desc}: {percentage}%|`, the engines' own
# `{desc}: 98% Completed | n/total`. The label two redraws share is the bar's, not a wrapper.
_BAR_REST = re.compile(r"\s*\d{1,3}%")
_IN_BAR = re.compile(r"\d{1,3}%(?: Completed)? ?\|")
_BAR = re.compile(r"[^|:]{1,80}:\s*\d{1,3}%")  # a bar: label and percentage, the engine's own


class Wrappers:
    def __init__(self, plain: Callable[[str], bool] | None = None, depth: int = 0) -> None:
        """`plain(text)`: whether text is plainly the engine's (normalize.engine_says)."""
        self._plain = plain
        self._previous = ""  # the last line offered, as its shape (digits made 0)
        self._pattern: re.Pattern[str] | None = None
        self.offers = 0  # lines offered to peel so far
        self._depth = depth
        self._inner: Wrappers | None = None  # learns the wrapper inside this one

    @property
    def learned(self) -> bool:
        return self._pattern is not None

    @staticmethod
    def teaches(text: str) -> bool:
        """Whether a line is long enough to show a wrapper and a message behind it."""
        return len(text.strip()) >= _MIN_REST

    def strip(self, text: str) -> str:
        """`text` without the wrappers learned so far; learns nothing."""
        pattern = self._pattern
        match = pattern.match(text) if pattern is not None else None
        if match is None or match.end() >= len(text):
            return text
        rest = text[match.end() :]
        return self._inner.strip(rest) if self._inner is not None else rest

    def peel(self, text: str) -> str:
        """`text` without the learned wrappers (nested: one inside another is learned from
        what the outer one leaves); `text` itself when it carries none."""
        rest = self._peel(text)
        if rest is text or self._plain is None or self._depth >= _MAX_DEPTH:
            return rest
        if self._plain(rest):
            return rest
        if self._inner is None:
            self._inner = Wrappers(self._plain, self._depth + 1)
        return self._inner.peel(rest)

    def _peel(self, text: str) -> str:
        self.offers += 1
        pattern = self._pattern
        if pattern is not None:
            match = pattern.match(text)
            if match is not None and match.end() < len(text):
                self._previous = ""
                return text[match.end() :]
        previous = self._previous
        shape = text[:_LOOK_CHARS].translate(_DIGITS)
        if not self.teaches(text):
            return text  # a wrapper alone (`srun: ` on a blank line) teaches nothing
        self._previous = shape
        learned = _learn(previous, shape, text, self._plain) or self._tag(text)
        if learned is None:
            return text
        self._pattern = learned
        match = learned.match(text)
        return text[match.end() :] if match is not None else text

    def saw(self, wrapper: str) -> None:
        """`wrapper` stood before an engine record further in the line: peel it everywhere."""
        pattern = self._pattern
        if pattern is not None and pattern.fullmatch(wrapper):
            return
        if (
            len(wrapper) <= _LOOK_CHARS
            and (_ENDS_AT_SEPARATOR.match(wrapper) or _WORD.fullmatch(wrapper))
            and not EXCEPTION_LINE.match(wrapper)
            and TRACEBACK_HEADER not in wrapper
        ):
            self._pattern = _free_digits(wrapper)

    def _tag(self, text: str) -> re.Pattern[str] | None:
        tag = _TAG.match(text)
        if tag is None or self._plain is None:
            return None
        rest = text[tag.end() :]
        if not self._plain(rest) and _BAR.search(rest, 0, _LOOK_CHARS) is None:
            return None
        return _free_digits(tag.group())


def _free_digits(wrapper: str) -> re.Pattern[str]:
    """The wrapper with its numbers free, once or repeated (`[rank0]: [rank0]: ` nests)."""
    return re.compile("(?:" + re.sub(r"\d+", lambda _: r"\d+", re.escape(wrapper)) + ")+")


def _learn(
    shape_a: str, shape_b: str, text: str, plain: Callable[[str], bool] | None = None
) -> re.Pattern[str] | None:
    """The wrapper two lines share (given as shapes), as a pattern with free digits; or None."""
    if shape_a == shape_b or not shape_a[:1] or shape_a[:1] != shape_b[:1]:
        return None  # one message repeated with other numbers (an NCCL flood), or no prefix
    if shape_b[:1].isspace():
        return None
    common = 0
    for char_a, char_b in zip(shape_a, shape_b):  # noqa: B905 - no strict= on 3.8
        if char_a != char_b:
            break
        common += 1
    bar = _IN_BAR.search(shape_b, 0, common)
    common = bar.start() if bar is not None else common  # a bar and its label are the bar's
    cut = 0
    for match in _SEPARATOR.finditer(shape_b, 0, common):
        if _BAR_REST.match(shape_b, match.end()) is None:  # a bar's label is the bar's own
            cut = match.end()
            if plain is not None and plain(text[cut:]):
                break  # the engine's own record starts here: its logger name is not a wrapper
    wrapper = text[:cut]
    if cut < 2 or min(len(shape_a), len(shape_b)) - cut < _MIN_REST:
        return None  # what two lines share up to their last words is a message, not a wrapper
    if shape_a[cut:] == shape_b[cut:] or _NUMBERS.sub("0", shape_a) == _NUMBERS.sub("0", shape_b):
        return None  # they differ only in numbers (of any width): one message, not a wrapper
    if EXCEPTION_LINE.match(wrapper) or TRACEBACK_HEADER in wrapper:
        return None
    return _free_digits(wrapper)
