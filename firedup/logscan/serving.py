"""Proofs that the server was serving, and phase lines a paste hard-wrapped.

The serving half of LogScanner (scanner.py owns the state):
- A log that starts in the middle of serving (requests answered, batches decoded, no startup
  line before them) shows a server that was ready; so does a vLLM server answering once its
  HTTP side is up. SGLang serves its own warmup requests first: its startup needs its ready
  line.
- vLLM's own proof of a request served (harmless.serves_requests: its stats, its request log,
  a handler's error or frame) shows a ready server whatever the log kept of its startup.
- A long line and a bare one after it may be one line a paste hard-wrapped: a phase or ready
  line cut in two is read joined, for a marker only when its words straddle the cut, so a
  line is never counted twice (failures join theirs: failures.py).
"""

from __future__ import annotations

from datetime import datetime

from firedup.engine import Engine
from firedup.logscan.evidence import Tracebacks
from firedup.logscan.harmless import SERVING, request_frame, serves_requests
from firedup.logscan.model import Event, Phase, Verdict
from firedup.logscan.normalize import Line
from firedup.logscan.phases import PhaseRules
from firedup.logscan.rules import MARKERS

WRAP_MIN_CHARS = 60  # a line a paste hard-wrapped is at least this long (80 columns, less a tag)
_HTTP_UP = Phase.HTTP_UP.order


def continues(piece: Line, line: Line) -> bool:
    """Whether a line may be the rest of the long line before it: bare text, not indented,
    and not starting the way that line did (a flood of one tool's lines is not one line)."""
    return (
        line.message is line.text
        and line.text[:1] not in " \t"
        and line.text[:8] != piece.text[:8]
        and not line.stamp
    )


def _straddles(message: str, needle: str, cut: int) -> bool:
    """Whether `needle` is in `message` only across position `cut` (the wrap)."""
    at = message.find(needle, max(cut - len(needle) + 1, 0))
    return 0 <= at < cut < at + len(needle)


class ServingRules(PhaseRules):
    """Mixed into LogScanner, which owns the state these rules read and write."""

    _tracebacks: Tracebacks

    def _in_handler(self, message: str) -> bool:
        """Whether the frame just seen runs in a vLLM request handler while starting, or in
        uvicorn's per-request coroutine when requests served count (_serving_counts)."""
        if self._verdict is not Verdict.STARTING:
            return False
        frame, sglang = self._tracebacks.frame or message, self.engine is Engine.SGLANG
        return request_frame(frame, sglang=sglang, serving_counts=self._serving_counts)

    def _continued(self, piece: Line, line: Line, now: datetime | None, out: list[Event]) -> None:
        """A phase or ready line a paste cut in two, read joined."""
        cut = len(piece.message)
        for glue in ("", " "):
            message = piece.message + glue + line.message
            joined = piece._replace(text=piece.text + glue + line.text, message=message)
            before = self._phase
            serving = SERVING.search(message) if self._serving_counts() else None
            if serving is not None and serving.start() < cut < serving.end():
                self._advance(Phase.READY, joined.text, now, out)
            elif any(_straddles(message, m.needle, cut) for m in MARKERS):
                self._phase_marker(joined, now, out)
            if self._phase is not before:
                return

    def _serving(self, line: Line) -> bool:
        """Whether the line proves the server ready by serving: traffic when it counts, or
        vLLM's own proof of a request served whatever came before."""
        if self._serving_counts() and SERVING.search(line.message) is not None:
            return True
        if self._story and self.engine is Engine.SGLANG:
            return False
        return serves_requests(line.text, line.message, line.level)

    def _serving_counts(self) -> bool:
        """Whether requests being served would prove the server ready: in an excerpt that
        starts mid-serving, or from vLLM once its HTTP side is up."""
        if not self._story:
            return True
        return self.engine is not Engine.SGLANG and self._phase.order >= _HTTP_UP
