"""The run state `fab status` reports, from one look at the node and the log read so far."""

from __future__ import annotations

from firedup.engine import Engine
from firedup.logscan import LogScanner, ScanState
from firedup.node.probe import Listener, Probe
from firedup.ops.status import RunState, state_of

READY_LOG = (
    b"[2026-02-23 00:41:56] INFO:     Uvicorn running on http://0.0.0.0:30000\n"
    b"[2026-02-23 00:42:10] The server is fired up and ready to roll!\n"
)
STARTING_LOG = b"[2026-02-23 00:30:09 TP0] Load weight begin. avail mem=138.21 GB\n"


def look(*, alive: bool = True, listening: bool = True, health: int | None = 200) -> Probe:
    procs = frozenset({100, 101}) if alive else frozenset()
    listeners = (Listener("0.0.0.0:30000", frozenset({101})),) if listening else ()
    return Probe(1.0, 100, procs, listeners, True, 0, b"", health)


def scanned(text: bytes) -> ScanState:
    scanner = LogScanner(Engine.SGLANG)
    scanner.feed(text)
    return scanner.state


def test_all_four_signals_agree_is_ready() -> None:
    assert state_of(look(), scanned(READY_LOG)) is RunState.READY


def test_still_loading_is_starting() -> None:
    assert state_of(look(listening=False, health=None), scanned(STARTING_LOG)) is RunState.STARTING


def test_a_server_that_was_ready_and_stops_answering_is_unhealthy_not_starting() -> None:
    # Seen in the suite under load: a crash after ready, looked at while the process was going
    # down, was reported as `starting`, as if the server had never come up.
    ready = scanned(READY_LOG)
    assert state_of(look(health=0), ready) is RunState.UNHEALTHY
    assert state_of(look(listening=False, health=0), ready) is RunState.UNHEALTHY


def test_gone_after_ready_is_exited() -> None:
    assert state_of(look(alive=False), scanned(READY_LOG)) is RunState.EXITED


CRASH_LINE = b"[2026-02-23 00:43:00] Received sigquit from a child process.\n"


def test_a_fatal_looking_line_after_ready_loses_to_a_server_that_serves() -> None:
    # Issue 28: log text is evidence, the live signals are the server. Only while all agree.
    failed_after = scanned(READY_LOG + CRASH_LINE)
    assert failed_after.verdict.value == "failed"
    assert state_of(look(), failed_after) is RunState.READY
    assert state_of(look(health=503), failed_after) is RunState.FAILED
    assert state_of(look(alive=False), failed_after) is RunState.FAILED


def test_a_failure_before_ready_is_failed_whatever_answers() -> None:
    failed = scanned(STARTING_LOG + CRASH_LINE)
    assert state_of(look(), failed) is RunState.FAILED
