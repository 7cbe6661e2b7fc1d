"""SSH dropped at every point of a deploy, and at random moments: the outcome is one clear
result, the node's state matches it, nothing of the user's is lost, nothing of ours is left."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from firedup.errors import ConnectError, TransientConnectError
from firedup.node.lock import LockState, lock_status
from firedup.readiness.wait import WaitHooks
from firedup.readiness.watch import WaitStatus
from tests.conftest import Sshd, stop_process, wait_until
from tests.reliability import tally
from tests.reliability.faultnode import FaultNode
from tests.reliability.helpers import (
    Host,
    Outcome,
    kill_connections,
    leftover_problems,
    start_private_sshd,
    strays,
    thaw,
    told_state_problems,
)

pytestmark = [pytest.mark.reliability, pytest.mark.ssh]


def check_deploy(
    host: Host, run: Callable[[], Outcome], label: str, *, connect_errors_only: bool = False
) -> Outcome:
    """Run one deploy and apply the three checks; the failure message names `label`.

    Every failure is an expected one (a DeployError: one message, an exit code, no
    traceback); `connect_errors_only` also asks that a dropped link is reported as one.
    """
    before, data = set(host.runs()), host.data()
    outcome = run()
    if outcome.error is not None and connect_errors_only:
        assert isinstance(outcome.error, ConnectError), (label, outcome.message)
    problems = told_state_problems(host, outcome, before)
    problems += data.lost_in(host.data())
    problems += leftover_problems(host)
    assert not problems, (label, outcome.message[:300], problems)
    return outcome


def test_a_drop_before_each_remote_call(pool_hosts: list[Host]) -> None:
    """A drop just before the first remote call of each kind in a deploy: three links at a
    time (one sshd each), the previous run killed between deploys."""
    first = pool_hosts[0]
    baseline = FaultNode(first.node(), first.sshd)
    assert first.deploy(baseline).ready
    first.cleanup()
    # The first call of each kind (lock, reads, preflight, uploads, start, stream, probe,
    # history, unlock): the later ones of a kind meet the same code paths.
    points = sorted({op: k for k, op in reversed(list(enumerate(baseline.ops)))}.values())
    tally.COUNTS["drop points in a deploy"] = len(points)

    def sweep(host: Host) -> list[tuple[str, str]]:
        seen = []
        for k in points[pool_hosts.index(host) :: len(pool_hosts)]:
            node = FaultNode(host.node(), host.sshd, drop_before={k})
            outcome = check_deploy(host, lambda n=node: host.deploy(n), f"op {k}")
            seen.append((node.ops[k] if k < len(node.ops) else "-", outcome.message[:80]))
            host.cleanup()
        return seen

    with ThreadPoolExecutor(len(pool_hosts)) as pool:
        results = [r for part in pool.map(sweep, pool_hosts) for r in part]
    print("\n".join(f"drop before {op}: {message}" for op, message in results))
    # Whatever the drops did, the node still deploys cleanly afterwards.
    assert check_deploy(first, first.deploy, "clean").ready


@pytest.mark.parametrize("seed", range(4))
def test_a_drop_at_a_random_moment(make_host: Callable[..., Host], seed: int) -> None:
    host = make_host()
    delay = random.Random(seed).uniform(0.0, 1.5)

    def deploy() -> Outcome:
        timer = threading.Timer(delay, kill_connections, args=(host.sshd,))
        timer.start()
        try:
            return host.deploy()
        finally:
            timer.join()

    check_deploy(host, deploy, f"drop after {delay:.2f}s")


def test_the_answer_of_start_lost(make_host: Callable[..., Host]) -> None:
    host = make_host()
    node = FaultNode(host.node(), host.sshd, lose_answer=lambda name: name == "start")
    check_deploy(host, lambda: host.deploy(node), "start's answer lost")


def lock_holders(host: Host) -> list[int]:
    """Live lock-holder processes for the host's workdir (the test's own /proc view)."""
    return [pid for pid, _cmd in strays("firedup-lock_hold", set()) if pid_names(pid, host)]


def pid_names(pid: int, host: Host) -> bool:
    try:
        return str(host.workdir).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_the_lock_is_taken_again_after_a_reconnect_in_the_wait(
    make_host: Callable[..., Host],
) -> None:
    """The old holder is held still (SIGSTOP) and let go 1.5 s after the drop: a holder that
    is slow to notice, as one sleeping through its 1 s heartbeat is."""
    host = make_host(FIREDUP_SIM_SPEED="1")
    reconnected: list[str] = []
    old: list[int] = []
    seen: list[LockState | None] = []

    def on_status(status: WaitStatus) -> None:
        if not old and status.elapsed_s > 0.3:
            old.extend(lock_holders(host))
            for pid in old:
                os.kill(pid, signal.SIGSTOP)
            kill_connections(host.sshd)
            threading.Timer(1.5, thaw, args=(old,)).start()
        elif reconnected and not seen:
            wait_until(lambda: not set(old) & set(lock_holders(host)), 5, "the old holder")
            deadline = time.monotonic() + 3
            while True:  # a re-take may still be on its way
                state = lock_held_after_old_holders_end(host, old)
                if state is LockState.HELD or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            seen.append(state)

    hooks = WaitHooks(on_status=on_status, on_reconnect=reconnected.append)
    outcome = host.deploy(hooks=hooks)
    assert old, "no lock holder was seen before the drop"
    assert reconnected and outcome.ready, outcome.message
    assert seen == [LockState.HELD], "the node was unlocked during the rest of the deploy"


def lock_held_after_old_holders_end(host: Host, old: list[int]) -> LockState | None:
    wait_until(lambda: not set(old) & set(lock_holders(host)), 5, "the old holder to end")
    info = lock_status(host.node(), host.spec)
    return info.state if info else None


def test_the_lock_is_held_at_the_start_after_an_earlier_drop(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    inner = host.node()
    old: list[int] = []
    at_start: list[LockState | None] = []

    def before(name: str) -> None:
        if name == "current" and not old:  # the first call after the lock was taken
            old.extend(lock_holders(host))
            kill_connections(host.sshd)
            # Let the client see the drop, so the next run() reconnects instead of failing.
            wait_until(lambda: not inner._conn.is_connected, 5, "the client to see the drop")
        elif name == "start":
            at_start.append(lock_held_after_old_holders_end(host, old))

    outcome = host.deploy(FaultNode(inner, host.sshd, before_op=before))
    assert old and outcome.ready, outcome.message
    assert at_start == [LockState.HELD], "the server was started without the node's lock"


def test_a_drop_before_an_upload_reconnects_or_says_so(make_host: Callable[..., Host]) -> None:
    host = make_host()

    def drop(name: str) -> None:
        if name == "put meta.json":  # the upload after launch.sh's, on the same SFTP session
            kill_connections(host.sshd)

    node = FaultNode(host.node(), host.sshd, before_op=drop)
    label = "drop before the second upload"
    check_deploy(host, lambda: host.deploy(node), label, connect_errors_only=True)


@pytest.fixture
def sshd_dropping_at_auth(tmp_path: Path) -> Iterator[Sshd]:
    """An sshd whose every connection drops in the middle of public-key authentication."""
    command = Path(__file__).with_name("drop_during_auth.sh")
    # A Match block overrides the AuthorizedKeysFile of the base config: only the command.
    lines = ("Match all", "AuthorizedKeysFile none", f"AuthorizedKeysCommand {command}")
    proc, sshd = start_private_sshd(tmp_path / "sshd", *lines, "AuthorizedKeysCommandUser root")
    try:
        yield sshd
    finally:
        stop_process(proc)


def test_a_drop_during_authentication_is_called_a_drop(
    sshd_dropping_at_auth: Sshd, tmp_path: Path
) -> None:
    host = Host.create(sshd_dropping_at_auth, tmp_path / "h", None, {})
    result = host.cli("status")
    tally.fault("drop during authentication")
    output = result.stdout + result.stderr
    assert result.returncode == ConnectError.exit_code and "Traceback" not in output, output
    log = (tmp_path / "sshd" / "sshd.log").read_text()
    if "Unsafe AuthorizedKeysCommand" in log:  # sshd wants root-owned, non-writable parents
        pytest.skip("sshd refuses the AuthorizedKeysCommand in this checkout's directory")
    assert "Accepted publickey" not in log, "the drop was not in effect: " + log[-500:]
    assert "authentication failed" not in output, output
    with pytest.raises(TransientConnectError):
        host.node().run(["true"])
