"""Text from others shown inert: the one filter between what a node or a log says and a
terminal (docs/security.md, "What reaches your terminal").

A process name, a log line, a history field or an error that quotes one may hold control and
escape sequences (CSI, OSC 52 clipboard writes, a title change, a screen clear) or characters
that reorder what is shown (bidi overrides). `inert` shows each such character as visible
text, as `journalctl` and `less` do: ESC becomes the four characters `\\x1b`, a C1 control or a
bidi override `\\u009b` / `\\u202e` (spellings that stay valid inside a JSON string). Newlines
and tabs stay; CRLF becomes a newline, a lone CR (which could overwrite a line) is shown.
Rich markup is not parsed anywhere this text goes (rich `Text`, never markup strings), so
`[bold]` stays literal. A leaf: every layer may import it; nothing here knows of nodes.
"""

from __future__ import annotations

import re

# C0 controls but TAB and LF, DEL, C1 controls; bidi embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x20 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """`text` with every control, escape and reordering character shown as visible text."""
    if not _UNSAFE.search(text):
        return text  # the common case: one scan, no copy
    return _UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def inert_bytes(data: bytes) -> str:
    """Bytes from a node (a log chunk) as text fit for a terminal: UTF-8 with U+FFFD for what
    does not decode, then `inert`."""
    return inert(data.decode("utf-8", "replace"))


def has_unsafe(text: str) -> bool:
    """Whether `text` holds anything `inert` would change (tests and checks)."""
    return _UNSAFE.search(text) is not None
