"""The wait loop (firedup.readiness.wait) driven by a scripted node and a fake clock.

Recorded SGLang logs play out line by line in script time, read by the real node-side reader
(run in process on the fake clock, see scripted_node); the loop must call ready within a tick
of the last signal, report a crash within the grace of its fatal line, give up at the deadline
naming the phase, and after a dropped connection pick the log up where it was, never starting
anything. The same holds on a node without a usable python3 (the plain log streams and is
classified here). tests/ssh covers the same over a real sshd and real servers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firedup.engine import Engine
from firedup.errors import NotReadyError, ServerCrashedError, TransientConnectError
from firedup.launch.runs import RunMeta
from firedup.logscan import Phase
from firedup.readiness.wait import WaitHooks, WaitOptions, wait_ready
from firedup.readiness.watch import FAIL_GRACE_S, WaitStatus
from tests.unit.scripted_node import PID, FakeClock, ScriptedNode, Step, log_steps

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "sglang"
READY_LOG = (LOGS / "kimi_v5_ready_slow_draft_capture.log").read_bytes()
OOM_LOG = (LOGS / "capture_failed_cuda_oom.log").read_bytes()
TICK_S = 1.0

RUN = RunMeta(
    run_id="20260222T235000Z-abcdef",
    host="fake",
    deployment="kimi",
    engine=Engine.SGLANG,
    port=30000,
    workdir="/srv/firedup",
    script_sha256="0" * 64,
    started_at=0.0,
    started_by="alice@laptop",
    pid=PID,
)


def ready_script(every_s: float = 0.25) -> tuple[list[Step], float]:
    """The v5 log; the port opens at Uvicorn's line, /health 200 with the ready line."""
    steps = log_steps(READY_LOG, every_s=every_s)
    opened = next(s.at for s in steps if b"Uvicorn running" in s.log)
    ready_at = next(s.at for s in steps if b"fired up and ready" in s.log)
    return [
        *steps,
        Step(at=opened, listening=True, health=503),
        Step(at=ready_at, health=200),
    ], ready_at


def waited(
    node: ScriptedNode, clock: FakeClock, timeout_s: float = 600, hooks: WaitHooks | None = None
) -> WaitStatus:
    options = WaitOptions(timeout_s=timeout_s, tick_s=TICK_S)
    return wait_ready(node, RUN, options, hooks or WaitHooks(), sleep=clock.sleep, clock=clock)


def test_ready_within_a_tick_of_the_last_signal_with_few_looks() -> None:
    clock = FakeClock()
    steps, ready_at = ready_script()
    node = ScriptedNode(clock, steps)
    status = waited(node, clock)
    assert status.ready and status.phase is Phase.READY
    assert ready_at <= node.elapsed() <= ready_at + TICK_S
    assert node.streams == [("reader", 0)]  # one stream for the whole wait
    # Looks on phase changes and ticks, not on every chunk: far fewer than the 162 lines;
    # the node takes them itself, a round trip is only the fallback.
    assert len(node.probes) < 40, node.probes
    assert len(node.argvs) <= 1, node.argvs


def test_a_crash_is_reported_within_the_grace_of_its_fatal_line() -> None:
    clock = FakeClock()
    steps = log_steps(OOM_LOG)
    fatal_at = next(s.at for s in steps if b"out of memory" in s.log.lower())
    node = ScriptedNode(clock, [*steps, Step(at=steps[-1].at + 1.0, dies=True)])
    with pytest.raises(ServerCrashedError) as caught:
        waited(node, clock)
    message = str(caught.value)
    assert "oom" in message and "cuda_graph" in message and RUN.log_path in message
    assert node.elapsed() - fatal_at <= FAIL_GRACE_S + TICK_S


def test_a_server_that_exits_silently_is_reported_with_its_last_lines() -> None:
    clock = FakeClock()
    head = b"".join(READY_LOG.splitlines(keepends=True)[:20])
    steps = log_steps(head)
    node = ScriptedNode(clock, [*steps, Step(at=steps[-1].at + 2.0, dies=True)])
    with pytest.raises(ServerCrashedError) as caught:
        waited(node, clock)
    assert "exited without a known error" in str(caught.value)
    assert head.splitlines()[-1].decode()[:60] in str(caught.value)
    assert node.elapsed() <= steps[-1].at + 2.0 + TICK_S


def test_a_silent_hang_ends_at_the_deadline_naming_the_phase() -> None:
    clock = FakeClock()
    head = b"".join(READY_LOG.splitlines(keepends=True)[:30])
    node = ScriptedNode(clock, log_steps(head))
    with pytest.raises(NotReadyError) as caught:
        waited(node, clock, timeout_s=60)
    message = str(caught.value)
    assert "not ready after" in message and "stuck in phase" in message
    assert "log silent for" in message and "the server is still running" in message
    # Given up at the deadline, not a look-interval later (loading looks are 6 s apart here).
    assert 60 <= node.elapsed() <= 60 + TICK_S
    assert node.alive  # the wait never touches the server


def test_a_dropped_connection_picks_the_log_up_where_it_was_never_relaunching() -> None:
    clock = FakeClock()
    steps, ready_at = ready_script()
    node = ScriptedNode(clock, [*steps, Step(at=10.0, drop=True)])
    said: list[str] = []
    status = waited(node, clock, hooks=WaitHooks(on_reconnect=said.append))
    assert status.ready
    # The reader starts again at the top of the log, on the node (its classifier must see
    # the whole story): the link carries states, not the bytes read again.
    assert node.streams == [("reader", 0), ("reader", 0)]
    reached = node.drop_offsets[0]
    assert reached > 0
    assert said == [f"fake: connection dropped; reconnecting, resuming the log at byte {reached}"]
    assert status.log_offset == len(READY_LOG)
    assert all(argv[3] == "firedup-probe" for argv in node.argvs)  # nothing relaunched
    assert node.elapsed() <= ready_at + TICK_S + 1.0  # the reconnect backoff is short


def test_a_link_that_keeps_dropping_gives_up_at_the_deadline_never_relaunching() -> None:
    clock = FakeClock()
    drops = [Step(at=float(t), drop=True) for t in range(5, 200, 3)]
    node = ScriptedNode(clock, [*log_steps(READY_LOG[:2000]), *drops])
    with pytest.raises(TransientConnectError) as caught:
        waited(node, clock, timeout_s=30)
    assert "gave up reconnecting at the deadline" in str(caught.value)
    assert "`fab wait --host fake` re-attaches" in str(caught.value)
    assert 30 <= node.elapsed() <= 30 + 1.0  # the backoff is cut at the deadline
    assert len(node.streams) >= 5 and set(node.streams) == {("reader", 0)}
    assert all(argv[3] == "firedup-probe" for argv in node.argvs) and node.alive


@pytest.mark.parametrize("python", ["none", "old"])
def test_without_a_usable_python3_the_plain_log_is_read_here(python: str) -> None:
    clock = FakeClock()
    steps, ready_at = ready_script()
    node = ScriptedNode(clock, steps, python=python)
    status = waited(node, clock)
    assert status.ready and status.phase is Phase.READY
    assert status.log_offset == len(READY_LOG)
    assert node.elapsed() <= ready_at + TICK_S + 1.0
    # No python3: the reader's stream ends with no marker and the next follow tails the log;
    # too old a python3: the boot script execs tail itself. Either way one tail from byte 0.
    assert node.streams == [("tail", 0)]


def test_raw_mode_resumes_the_log_at_the_same_byte_after_drops() -> None:
    clock = FakeClock()
    steps, ready_at = ready_script()
    drops = [Step(at=10.0, drop=True), Step(at=20.0, drop=True)]
    node = ScriptedNode(clock, [*steps, *drops], python="none")
    said: list[str] = []
    status = waited(node, clock, hooks=WaitHooks(on_reconnect=said.append))
    assert status.ready
    offsets = node.stream_offsets
    assert offsets[0] == 0 and len(offsets) == 3
    assert offsets[1:] == node.drop_offsets and 0 < offsets[1] < offsets[2]
    assert said == [
        f"fake: connection dropped; reconnecting, resuming the log at byte {at}"
        for at in node.drop_offsets
    ]
    assert status.log_offset == len(READY_LOG)  # every byte read once: no gap, no repeat
    assert all(argv[3] == "firedup-probe" for argv in node.argvs)  # nothing relaunched
    assert node.elapsed() <= ready_at + TICK_S + 2.0
