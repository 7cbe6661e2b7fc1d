"""Issue 28 §4: every read of a log is bounded. A log that became a link to /dev/zero or a
FIFO is refused within seconds, with its type named, and leaves no reader behind; one huge
line costs the operator a bounded amount of memory."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.reliability.helpers import Host, strays

pytestmark = [pytest.mark.ssh]

MEASURE = (  # the peak RSS (KiB) of the command it runs, and nothing else's
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def _available_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    raise AssertionError("no MemAvailable in /proc/meminfo")


def _stopped_run(make_host: Callable[..., Host]) -> tuple[Host, Path]:
    host = make_host()
    started = host.cli("start")  # a run and its log; its readiness is not under test
    assert started.returncode == 0, started.stdout + started.stderr
    stopped = host.cli("stop", "--grace", "1")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    current = host.current()
    assert current is not None
    return host, host.workdir / "runs" / current / "server.log"


def test_a_log_linked_to_dev_zero_is_refused_quickly_with_memory_flat(
    make_host: Callable[..., Host],
) -> None:
    host, log = _stopped_run(make_host)
    log.unlink()
    log.symlink_to("/dev/zero")
    lowest = [_available_kib()]
    before = lowest[0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            lowest[0] = min(lowest[0], _available_kib())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        for args in (("logs",), ("logs", "--follow"), ("logs", "--lines", "1")):
            started = time.monotonic()
            result = host.cli(*args, timeout_s=30)
            took = time.monotonic() - started
            err = result.stderr
            assert result.returncode == 4, (args, result.stdout, err)
            assert "is not a regular file (character special file): not read" in err, err
            assert took < 10, f"{args}: {took:.1f}s"
    finally:
        done.set()
        sampler.join()
    # Nothing read the device: the node's memory (this machine's) did not move by more than
    # other tests' noise (the old `tail` took gigabytes per second until the OOM killer came).
    assert before - lowest[0] < 512 * 1024, f"MemAvailable fell {(before - lowest[0]) >> 10} MiB"
    assert not strays(str(log), set()), "a reader of the log is left"


def test_a_fifo_as_the_log_leaves_no_blocked_reader(make_host: Callable[..., Host]) -> None:
    host, log = _stopped_run(make_host)
    log.unlink()
    os.mkfifo(log, 0o600)
    for args in (("logs",), ("logs", "--follow")):
        result = host.cli(*args, timeout_s=30)
        assert result.returncode == 4, (args, result.stdout, result.stderr)
        assert "is not a regular file (fifo): not read" in result.stderr, result.stderr
    assert not strays(str(log), set()), "a blocked reader of the FIFO is left"


def test_one_huge_line_costs_the_operator_bounded_memory(make_host: Callable[..., Host]) -> None:
    host, log = _stopped_run(make_host)
    with log.open("ab") as fh:  # one 200 MB line, no newline in it
        block = b"x" * (1 << 20)
        for _ in range(200):
            fh.write(block)
        fh.write(b"\n")
    argv = [sys.executable, "-c", MEASURE, *host.cli_argv("logs", "--lines", "1")]
    peak_kib = int(subprocess.run(argv, capture_output=True, text=True, timeout=90).stdout)
    assert peak_kib < 200 * 1024, f"fab logs --lines 1 peaked at {peak_kib >> 10} MiB"


def test_a_history_linked_to_dev_zero_is_refused(make_host: Callable[..., Host]) -> None:
    host, _ = _stopped_run(make_host)
    history = host.workdir / "history.jsonl"
    history.unlink()
    history.symlink_to("/dev/zero")
    started = time.monotonic()
    result = host.cli("history", timeout_s=30)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "is not a regular file (character special file)" in result.stderr, result.stderr
    assert time.monotonic() - started < 10
