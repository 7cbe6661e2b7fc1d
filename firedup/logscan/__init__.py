"""Reading SGLang and vLLM startup logs: phases, progress, failure reasons with hints.

Pure: bytes in, values out, no I/O. `LogScanner` reads a growing log incrementally (the
readiness wait feeds it what each poll fetched); `explain` reads a whole log at once.
See docs/log-analysis.md for the phases, the reasons and how to add a case from the field.
"""

from __future__ import annotations

from collections.abc import Iterable

from firedup.engine import Engine
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
from firedup.logscan.scanner import LogScanner

__all__ = [
    "HINTS",
    "EarlierLaunch",
    "Event",
    "EventKind",
    "LogScanner",
    "Phase",
    "PhaseSpan",
    "Progress",
    "Reason",
    "ScanState",
    "Verdict",
    "explain",
    "explain_chunks",
]


def explain(data: bytes, engine: Engine | None = None, *, year: int | None = None) -> ScanState:
    """The final state of a whole log, end of file included."""
    return explain_chunks((data,), engine, year=year)


def explain_chunks(
    chunks: Iterable[bytes], engine: Engine | None = None, *, year: int | None = None
) -> ScanState:
    """Like `explain`, for a log read piece by piece (a large file, a stream)."""
    scanner = LogScanner(engine=engine, year=year)
    for chunk in chunks:
        scanner.feed(chunk)
    scanner.finish()
    return scanner.state
