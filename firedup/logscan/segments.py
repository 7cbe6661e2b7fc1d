"""Cut a byte stream into segments on `\\r` and `\\n`, the same way however it is chunked.

tqdm redraws a bar with `\\r` and no newline, so in a redirected log one physical line can hold
megabytes of redraws: every `\\r` ends a segment, and each is handled as it arrives. Splitting
bytes (not text) keeps a UTF-8 sequence cut between two chunks intact, because `\\r` and `\\n`
never occur inside one. A segment longer than MAX_SEGMENT_BYTES keeps only its first
MAX_SEGMENT_BYTES bytes, so the unfinished tail held between chunks stays bounded.
"""

from __future__ import annotations

import re

MAX_SEGMENT_BYTES = 64 * 1024
_TERMINATOR = re.compile(rb"[\r\n]")


class Segmenter:
    def __init__(self, limit: int = MAX_SEGMENT_BYTES) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self.newlines = 0
        self.line_open = False  # bytes seen since the last newline

    def feed(self, chunk: bytes) -> list[bytes]:
        """Segments this chunk completes; empty ones (from `\\r\\n`) are dropped."""
        if not chunk:
            return []
        self.newlines += chunk.count(b"\n")
        last_newline = chunk.rfind(b"\n")
        self.line_open = self.line_open if last_newline < 0 else False
        self.line_open = self.line_open or last_newline < len(chunk) - 1
        pieces = _TERMINATOR.split(chunk)
        if len(pieces) == 1:
            self._keep(chunk)
            return []
        done = [self._take(pieces[0])]
        limit = self._limit
        done.extend(piece[:limit] for piece in pieces[1:-1])
        self._keep(pieces[-1])
        return [segment for segment in done if segment]

    def finish(self) -> list[bytes]:
        tail = self._take(b"")
        return [tail] if tail else []

    def pending(self) -> bytes:
        return b"".join(self._parts)

    def _keep(self, piece: bytes) -> None:
        room = self._limit - self._size
        if room > 0 and piece:
            kept = piece[:room]
            self._parts.append(kept)
            self._size += len(kept)

    def _take(self, piece: bytes) -> bytes:
        self._keep(piece)
        segment = b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        return segment
