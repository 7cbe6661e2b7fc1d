"""Human-readable text for progress and status (pure: returns strings, prints nothing)."""

from __future__ import annotations

from collections.abc import Sequence

from firedup.readiness.watch import Signals, WaitStatus


def _mark(ok: bool) -> str:
    return "yes" if ok else "no"


def signals_text(signals: Signals) -> str:
    health = "-" if signals.health is None else str(signals.health or "none")
    text = (
        f"alive={_mark(signals.alive)} ready-line={_mark(signals.log_ready)} "
        f"listening={_mark(signals.listening)} health={health}"
    )
    if signals.foreign_listeners:
        text += f" NOT-OURS-ON-PORT={';'.join(signals.foreign_listeners)}"
    return text


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _bar_text(status: WaitStatus) -> str:
    """` label done/total` for the engine's current bar, or nothing."""
    progress = status.scan.progress
    if progress is None:
        return ""
    label = f" {progress.label}" if progress.label else ""
    return f"{label} {progress.done}/{progress.total}"


def progress_text(status: WaitStatus) -> str:
    """One line: phase, bar, time in phase, time since the log last grew, each signal."""
    bar = _bar_text(status)
    return (
        f"{status.phase.value}{bar} ({_duration(status.in_phase_s)} in phase, "
        f"{_duration(status.elapsed_s)} total, log quiet {_duration(status.silent_s)}) "
        f"{signals_text(status.signals)}"
    )


def change_text(status: WaitStatus) -> str:
    """One line for a change (off a terminal): at a change the time in the new phase and the
    log's quiet time are always 0s, so only the total is said."""
    bar = _bar_text(status)
    return (
        f"{status.phase.value}{bar} (at {_duration(status.elapsed_s)}) "
        f"{signals_text(status.signals)}"
    )


def progress_key(status: WaitStatus) -> tuple[object, ...]:
    """What must change for a new plain progress line (off a terminal: one per change)."""
    return (status.phase, status.signals)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]
    return "\n".join(lines)
