"""A line's text recovered from what a paste or a collector did to it, beyond prefixes.

docker's json-file driver keeps each line as a JSON record (`cat *-json.log`); a page scraped
as text keeps HTML entities (`&quot;`); a log dumped as a JSON string (a notebook's cell, an
API's error body) joins its lines with a literal `\\n` and escapes its quotes. Each is undone
by its shape, before the prefixes are peeled (normalize.py).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable

_ENTITY = re.compile(r"&(?:quot|amp|lt|gt|apos|#\d{1,5}|#x[0-9a-fA-F]{1,4});")
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)")


def unescape_entities(text: str) -> str:
    """HTML entities read as their characters; a bare `&` (a URL's query) is kept."""
    return _ENTITY.sub(lambda match: html.unescape(match.group()), text)


def docker_record(text: str) -> str:
    """docker's json-file record (`{"log":"...\\n","stream":"stderr","time":"..."}`) as the
    line it holds behind its time, as `docker logs --timestamps` shows it; a redrawn bar is
    its last redraw, what a terminal shows."""
    try:
        record = json.loads(text)
    except ValueError:
        return text
    if not isinstance(record, dict) or not isinstance(record.get("log"), str):
        return text
    line = record["log"].rstrip("\r\n").rsplit("\r", 1)[-1]
    time = record.get("time")
    return f"{time} {line}" if isinstance(time, str) and _RFC3339.fullmatch(time) else line


def json_dumped(
    text: str, record: Callable[[str], bool], plain: Callable[[str], bool]
) -> list[str] | None:
    """A log dumped as a JSON string (lines joined by a literal `\\n`, quotes escaped), as
    its lines; None unless a line after the first is an engine record (`record`), or the first
    is none and a later one is plainly the engine's (a traceback line): a record's own string
    (a prompt logged with its newlines, even one holding a traceback) is not a log."""
    pieces = text.split("\\n")
    lines = [_unescaped(piece) for piece in pieces if piece.strip()]
    if len(lines) < 2:
        return None
    later = lines[1:]
    if any(map(record, later)) or (not record(lines[0]) and any(map(plain, later))):
        return lines
    return None


def _unescaped(piece: str) -> str:
    try:
        return str(json.loads(f'"{piece}"'))
    except ValueError:
        return piece


# Where a traceback glued onto one line (a comment box, a chat that dropped newlines) had its
# lines: its header, each frame, its exception line.
_GLUED = re.compile(
    r" +(?=Traceback \(most recent call last\):|File \"[^\"]+\", line \d+"
    r"|(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure|Timeout): )"
)


def glued_traceback(text: str) -> list[str] | None:
    """A traceback glued onto one line, as its lines; None when the line holds none."""
    if text.count('File "') < 2 and "Traceback (most recent call last):" not in text[1:]:
        return None
    lines = [piece for piece in _GLUED.split(text) if piece]
    return lines if len(lines) > 1 else None
