"""`fab status` of a READY server whose log grew to 2 GB (days of request logging): bounded
in time and in node CPU, because status reads what the wait already learned (the reader's
summary in the run directory) and only a bounded tail, never the log from byte 0. The 2 GB
are a sparse file (a hole after the real startup log, real lines at its end): no disk is
used, and the file is removed at the end whatever happens. A log that is not a regular file
is refused without being read."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench.rig import node_cpu_s
from tests.reliability.helpers import Host

pytestmark = [pytest.mark.reliability, pytest.mark.ssh]

BIG = 2 * 1024**3
DECODE = (
    b"[2026-12-01 10:00:00] Decode batch, #running-req: 1, #token: 90, token usage: 0.00, "
    b"gen throughput (token/s): 133.22, #queue-req: 0\n"
)


@pytest.fixture
def ready_host(make_host: Callable[..., Host]) -> Iterator[Host]:
    host = make_host()
    outcome = host.deploy()
    assert outcome.status is not None and outcome.status.ready, outcome
    yield host


def grow_sparse(log: Path) -> None:
    """2 GB: the real log, a hole, then decode lines at the end (as the server appends)."""
    with log.open("r+b") as fh:
        fh.truncate(BIG)
        fh.seek(BIG)
        fh.write(DECODE * 50)


def test_status_of_a_ready_server_with_a_2_gb_log(ready_host: Host) -> None:
    log = ready_host.workdir / "current" / "server.log"
    try:
        grow_sparse(log)
        assert log.stat().st_size > BIG
        sshd = ready_host.sshd.pid
        cpu0, t0 = node_cpu_s(sshd), time.monotonic()
        done = ready_host.cli("status", "--json", timeout_s=60)
        wall, cpu = time.monotonic() - t0, node_cpu_s(sshd) - cpu0
        assert done.returncode == 0, done.stdout + done.stderr
        assert '"state": "ready"' in done.stdout, done.stdout
        assert "133.22" in done.stdout  # the decode stats come from the log's real end
        assert wall < 5.0, f"status took {wall:.1f} s"
        assert cpu < 2.0, f"status cost the node {cpu:.2f} s of CPU"
    finally:
        with open(log, "r+b") as fh:  # the server still holds it open: cut, never unlink
            fh.truncate(0)


def test_status_without_the_readers_summary_is_bounded_too(ready_host: Host) -> None:
    """A run no wait has read (`fab start` alone, an older firedup): the log is read in order
    up to a bound, then only its end."""
    rundir = ready_host.workdir / "current"
    (rundir / "reader.json").unlink()
    log = rundir / "server.log"
    try:
        grow_sparse(log)
        t0 = time.monotonic()
        done = ready_host.cli("status", "--json", timeout_s=60)
        assert done.returncode == 0, done.stdout + done.stderr
        assert '"state": "ready"' in done.stdout, done.stdout
        assert time.monotonic() - t0 < 8.0
    finally:
        with open(log, "r+b") as fh:
            fh.truncate(0)


def test_a_log_that_is_not_a_regular_file_is_refused(ready_host: Host) -> None:
    log = ready_host.workdir / "current" / "server.log"
    log.rename(log.with_name("server.log.real"))
    os.mkfifo(log)  # a reader that opened it would block for ever
    try:
        done = ready_host.cli("status", "--json", timeout_s=30)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "not a regular file" in done.stdout, done.stdout
    finally:
        log.unlink()
        log.with_name("server.log.real").rename(log)
