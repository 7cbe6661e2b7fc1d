"""Issue 16 §4-§5: stop never signals a process that is not the run's own (a pid the kernel
handed to someone else after a crash), and a start whose `current` cannot be switched leaves
no server running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable

import pytest

from tests.conftest import session_members, wait_until
from tests.reliability.helpers import Host

pytestmark = [pytest.mark.ssh]

NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"


def spawn_with_pid(pid: int, timeout_s: float = 20) -> subprocess.Popen[bytes] | None:
    """A session leader (`setsid sleep`) with exactly `pid`, by setting ns_last_pid to pid-1
    just before the fork; other processes on this machine may win the race, so try again."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(NS_LAST_PID, "w") as fh:
            fh.write(str(pid - 1))
        proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


def test_a_reused_pid_is_never_signalled(make_host: Callable[..., Host]) -> None:
    if not os.access(NS_LAST_PID, os.W_OK):
        pytest.skip("ns_last_pid is not writable here (needs root in the initial pid namespace)")
    host = make_host()
    deployed = host.cli("deploy")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    (run_id, pid), *_ = ((r, p) for r, p in host.runs().items() if p)
    assert pid is not None
    # The server crashes (every process of its session dies) and is reaped.
    for member in session_members(pid):
        os.kill(member, signal.SIGKILL)
    wait_until(lambda: not os.path.exists(f"/proc/{pid}"), 10, "the crashed server to be reaped")
    stranger = spawn_with_pid(pid)
    if stranger is None:
        pytest.skip(f"could not get pid {pid} back within the deadline (a busy machine)")
    try:
        assert os.getsid(stranger.pid) == pid  # a session leader: the worst case for `ps -s`
        status = host.cli("status", "--json")
        (entry,) = json.loads(status.stdout)["hosts"]
        assert entry["state"] != "starting" and not entry["signals"]["alive"], status.stdout
        stopped = host.cli("stop", "--grace", "1")
        output = stopped.stdout + stopped.stderr
        assert stopped.returncode == 0, output
        assert stranger.poll() is None, output  # never signalled
        assert f"run {run_id} not-running" in stopped.stdout, output
        assert "another process" in stopped.stdout, output
    finally:
        stranger.kill()
        stranger.wait()


def test_current_that_cannot_be_switched_leaves_no_server(make_host: Callable[..., Host]) -> None:
    host = make_host()
    host.workdir.mkdir(mode=0o700)
    (host.workdir / "current").mkdir()  # a directory where the symlink must go
    before = set(host.runs())
    result = host.cli("deploy")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output, output
    assert output.startswith("firedup: ") or "\nfiredup: " in output, output
    assert not host.live_runs(), output
    new = set(host.runs()) - before
    # The run directory may stay (its launch script, as evidence), but nothing of it runs and
    # its secrets are gone with it.
    for run_id in new:
        assert not (host.workdir / "runs" / run_id / "secrets.env").exists()
