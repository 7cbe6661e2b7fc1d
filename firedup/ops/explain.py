"""Explaining a startup log to a person or a script: what `fab explain-log` shows.

`explain_file` reads the log in bounded chunks through the streaming classifier, so a
multi-gigabyte log costs one pass and little memory; the formatters are pure.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from firedup.engine import Engine
from firedup.errors import UsageError
from firedup.logscan import EarlierLaunch, LogScanner, PhaseSpan, ScanState, Verdict

CHUNK_BYTES = 1 << 20
_SNIFF_BYTES = 64 * 1024
_BINARY_SHARE = 0.10  # more than this share of undecodable or control bytes: not a text log
_WIDTH = 100


@dataclass(frozen=True)
class Explanation:
    path: str
    size_bytes: int
    state: ScanState
    notes: tuple[str, ...] = ()


def parse_engine(value: str | None) -> Engine | None:
    if value is None or value == "":
        return None
    try:
        return Engine(value.lower())
    except ValueError:
        known = ", ".join(engine.value for engine in Engine)
        raise UsageError(
            f"explain-log: unknown --engine {value!r}; choose one of: {known}"
        ) from None


def explain_file(path: str | Path, engine: Engine | None = None) -> Explanation:
    """Classify the log at `path`; a path that cannot be read is a UsageError, not a crash."""
    log = Path(path)
    if not log.exists():
        raise UsageError(f"explain-log: {log}: no such file")
    if log.is_dir():
        raise UsageError(f"explain-log: {log}: is a directory, not a log file")
    if not log.is_file():
        # A FIFO or a device (/dev/zero) would hang the read or never end it.
        raise UsageError(f"explain-log: {log}: not a regular file (a FIFO or a device)")
    try:
        # vLLM stamps carry no year; the file was last written in the year its log ends.
        year = datetime.fromtimestamp(log.stat().st_mtime).year
    except OSError as exc:
        raise UsageError(f"explain-log: {log}: cannot read ({exc.strerror or exc})") from None
    scanner = LogScanner(engine=engine, year=year)
    head = b""
    last = b""
    try:
        for chunk in _chunks(log):
            head = head or chunk[:_SNIFF_BYTES]
            last = chunk[-1:]
            scanner.feed(chunk)
    except OSError as exc:
        raise UsageError(f"explain-log: {log}: cannot read ({exc.strerror or exc})") from None
    scanner.finish()
    state = scanner.state
    return Explanation(str(log), state.bytes_seen, state, _notes(state, head, last))


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK_BYTES):
            yield chunk


def _notes(state: ScanState, head: bytes, last: bytes) -> tuple[str, ...]:
    if state.bytes_seen == 0:
        return ("the log is empty: the server has written nothing yet, or this is not its log",)
    notes = []
    if looks_binary(head):
        notes.append("this does not look like a text log (mostly binary bytes); nothing to read")
    elif state.engine is None:
        notes.append("no SGLang or vLLM line recognised; pass --engine if you know which it is")
    if last not in (b"\n", b""):
        notes.append("the log ends mid-line: still being written, or cut short")
    if state.launches > 1 and state.earlier is not None:
        notes.append(
            f"{state.launches} launches in this log: the last one is explained; the one "
            f"before it {_ended(state.earlier)}"
        )
    return tuple(notes)


def _ended(earlier: EarlierLaunch) -> str:
    """How the launch before the explained one ended, in words."""
    if earlier.verdict is Verdict.FAILED:
        reason = earlier.reason.value if earlier.reason else "failed"
        return f"failed ({reason}) in {earlier.phase.value}"
    if earlier.verdict is Verdict.READY:
        return "was ready, then stopped" if earlier.stopped else "was ready"
    if earlier.stopped:
        return f"was stopped while starting ({earlier.phase.value})"
    return f"was still starting ({earlier.phase.value}) when it ended without a word"


def looks_binary(sample: bytes) -> bool:
    sample = sample.replace(b"\x00", b"")  # logrotate copytruncate pads logs with NULs
    if not sample:
        return False
    text = sample.decode("utf-8", "replace")
    odd = sum(1 for ch in text if ch == "\ufffd" or (ch < " " and ch not in "\t\r\n\x1b"))
    return odd > _BINARY_SHARE * len(text)


# -- formatting --------------------------------------------------------------------------------


def to_json(explanation: Explanation) -> str:
    data: dict[str, Any] = {
        "path": explanation.path,
        "size_bytes": explanation.size_bytes,
        **explanation.state.to_json(),
        "notes": list(explanation.notes),
    }
    return json.dumps(data, indent=2, ensure_ascii=False)


def to_text(explanation: Explanation) -> str:
    state = explanation.state
    lines = [f"{explanation.path}  ({_size(explanation.size_bytes)}, {state.lines_seen} lines)"]
    lines += _field("verdict", state.verdict.value.upper())
    lines += _field("engine", state.engine.value if state.engine else "unknown")
    lines += _field("phase", state.phase.value)
    if state.progress is not None:
        bar = state.progress
        lines += _field("progress", f"{bar.label or 'progress'} {bar.done}/{bar.total}")
    if state.reason is not None:
        lines += _field("reason", state.reason.value)
        lines += _field("hint", state.hint or "")
    for note in explanation.notes:
        lines += _field("note", note)
    lines += ["phases", *_phase_table(state)]
    if state.excerpt:
        lines += ["excerpt", *(f"  | {line}" for line in state.excerpt)]
    return "\n".join(lines)


def _field(name: str, value: str) -> list[str]:
    wrapped = textwrap.wrap(value, _WIDTH - 10, break_on_hyphens=False, break_long_words=False)
    wrapped = wrapped or [""]
    return [f"{name:<9} {wrapped[0]}", *(f"{'':<9} {rest}" for rest in wrapped[1:])]


def _phase_table(state: ScanState) -> list[str]:
    rows = []
    last_index = len(state.phases) - 1
    for index, span in enumerate(state.phases):
        current = index == last_index
        began = span.start.strftime("%H:%M:%S") if span.start else "--:--:--"
        took, tag = _took(span, state, current=current)
        rows.append(f"  {span.phase.value:<17} {began}  {took:>9}{tag}")
    return rows


def _took(span: PhaseSpan, state: ScanState, *, current: bool) -> tuple[str, str]:
    if not current:
        return _duration(span.duration_s), ""
    if state.verdict is Verdict.FAILED:
        return _duration(span.duration_s), "  <- failed here"
    if state.verdict is Verdict.READY:
        return "", ""
    so_far = _seconds(span.start, state.last_timestamp)
    return _duration(so_far), "  (so far)"


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return (end - start).total_seconds()


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s"


def _size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
