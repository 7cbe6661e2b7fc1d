"""The per-node lock over a real sshd (and on the local transport): issue 7 §4."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from firedup.config.inventory import HostSpec, parse_inventory
from firedup.errors import LockedError
from firedup.node.base import Node
from firedup.node.lock import LockState, force_unlock, lock_status, node_lock
from firedup.node.ssh import LocalNode, SshNode
from tests.conftest import REPO, Sshd, ssh_host, wait_until

pytestmark = pytest.mark.ssh


def holders(workdir: Path) -> list[int]:
    """Live lock-holder processes for `workdir`, read from /proc (the test's own view). A
    holder's own fork (its heartbeat `sleep ... &` before the exec) shows the holder's argv
    for an instant: a child of a holder is not a second holder."""
    found: dict[int, int] = {}  # pid -> ppid
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
            stat = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        marker = b"firedup-lock_hold"
        ours = marker in args and args[args.index(marker) + 1] == str(workdir).encode()
        if ours and stat[0] != "Z":
            found[int(cmdline.parent.name)] = int(stat[1])
    return sorted(pid for pid, ppid in found.items() if ppid not in found)


@pytest.fixture(params=["ssh", "local"])
def make_node(
    request: pytest.FixtureRequest, sshd: Sshd, tmp_path: Path
) -> Iterator[tuple[HostSpec, Callable[[], Node]]]:
    workdir = tmp_path / "node"
    if request.param == "ssh":
        entry: dict[str, Any] = ssh_host(sshd, workdir, "d")
    else:
        entry = {"transport": "local", "workdir": str(workdir), "deployment": "d"}
    inv = parse_inventory(
        {"hosts": {"n": entry}, "deployments": {"d": {"engine": "sglang", "model": "/m"}}},
        tmp_path / "hosts.yaml",
    )
    spec = inv.host("n")
    opened: list[Node] = []

    def make() -> Node:
        node: Node = SshNode(spec) if spec.transport == "ssh" else LocalNode("n")
        opened.append(node)
        return node

    yield spec, make
    for node in opened:
        node.close()
    wait_until(lambda: holders(workdir) == [], 5, "every lock holder to end")


def test_two_at_once_one_proceeds_one_is_refused_naming_the_other(
    make_node: tuple[HostSpec, Callable[[], Node]],
) -> None:
    spec, make = make_node
    barrier = threading.Barrier(2)
    loser_done = threading.Event()
    outcomes: dict[str, Any] = {}

    def attempt(label: str) -> None:
        node = make()
        barrier.wait()
        try:
            with node_lock(node, spec, "deploy", detail=f"attempt {label}") as lock:
                outcomes[label] = lock
                loser_done.wait(20)  # hold it until the other one has been answered
        except LockedError as exc:
            outcomes[label] = exc
            loser_done.set()

    threads = [threading.Thread(target=attempt, args=(x,)) for x in "AB"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    errors = {k: v for k, v in outcomes.items() if isinstance(v, LockedError)}
    assert len(outcomes) == 2 and len(errors) == 1, outcomes
    error, winner = next(iter(errors.values())), ({"A", "B"} - set(errors)).pop()
    message = str(error)
    assert f"attempt {winner}" in message  # names the other operation...
    assert "deploy by " in message and f"local pid {os.getpid()}" in message  # ...and its owner
    assert f"holder pid {outcomes[winner].holder_pid}" in message
    assert error.exit_code == 11 and "fab unlock --host n" in message
    assert lock_status(make(), spec) is None  # released on the way out, record gone


def test_status_names_the_holder_and_release_is_immediate(
    make_node: tuple[HostSpec, Callable[[], Node]],
) -> None:
    spec, make = make_node
    node = make()
    assert lock_status(node, spec) is None
    with node_lock(node, spec, "stop") as lock:
        info = lock_status(node, spec)
        assert info is not None and info.state is LockState.HELD
        assert info.holder_pid == lock.holder_pid and info.owner is not None
        assert info.owner.operation == "stop" and info.owner.local_pid == os.getpid()
        assert info.age_s is not None and 0 <= info.age_s < 30
        assert holders(Path(spec.workdir)) == [lock.holder_pid]
        with node_lock(node, spec, "restart") as inner:  # re-entrant in one thread
            assert inner is lock
    assert lock_status(node, spec) is None  # no waiting for a heartbeat to fail
    assert holders(Path(spec.workdir)) == []
    assert not lock.lost


def test_a_killed_holder_leaves_a_stale_record_that_blocks_nobody(
    make_node: tuple[HostSpec, Callable[[], Node]],
) -> None:
    spec, make = make_node
    node = make()
    with node_lock(node, spec, "deploy") as lock:
        os.kill(lock.holder_pid, signal.SIGKILL)  # as if the node's OOM killer chose it
        stale = wait_until(
            lambda: (i := lock_status(node, spec)) and i.state is LockState.STALE and i,
            5,
            "the lock to read as stale",
        )
        assert stale.owner is not None and stale.owner.operation == "deploy"
        assert stale.holder_pid == lock.holder_pid
        seen: list[Any] = []

        def second() -> None:  # another thread: the same thread would re-enter the first lock
            with node_lock(make(), spec, "deploy", detail="second") as again:
                seen.extend([again, lock_status(make(), spec)])

        thread = threading.Thread(target=second)
        thread.start()
        thread.join(20)
        again, info = seen  # nobody was blocked by the stale record
        assert info.state is LockState.HELD and info.holder_pid == again.holder_pid
        assert info.owner is not None and info.owner.detail == "second"
    assert lock.lost
    assert lock_status(node, spec) is None  # the second one cleared its record on release


def test_force_unlock_ends_a_live_holder_and_takes_over(
    make_node: tuple[HostSpec, Callable[[], Node]],
) -> None:
    spec, make = make_node
    taken, finish = threading.Event(), threading.Event()
    first: list[Any] = []

    def hold() -> None:
        with node_lock(make(), spec, "deploy", detail="stuck") as lock:
            first.append(lock)
            taken.set()
            finish.wait(20)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert taken.wait(20)
        with pytest.raises(LockedError, match="stuck"), node_lock(make(), spec, "deploy"):
            pass
        said: list[str] = []
        with node_lock(make(), spec, "deploy", force=True, on_progress=said.append) as mine:
            assert first[0].holder_pid not in holders(Path(spec.workdir))
            assert holders(Path(spec.workdir)) == [mine.holder_pid]
            assert said and "force-unlock" in said[0] and "stuck" in said[0]
    finally:
        finish.set()
        thread.join(20)
    assert first[0].lost  # the forced-out operation learns it on release


def test_force_unlock_never_kills_a_process_that_is_not_a_lock_holder(
    make_node: tuple[HostSpec, Callable[[], Node]],
) -> None:
    spec, make = make_node
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        Path(spec.workdir).mkdir(parents=True)
        (Path(spec.workdir) / "lock.json").write_text(
            f'{{"holder_pid": {bystander.pid}, "acquired_at": 1, "owner": null}}\n'
        )
        with pytest.raises(LockedError, match="not a firedup lock holder"):
            force_unlock(make(), spec)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_a_dropped_connection_ends_the_lock_and_refresh_takes_it_again(
    sshd: Sshd, tmp_path: Path
) -> None:
    workdir = tmp_path / "node"
    inv = parse_inventory(
        {
            "hosts": {"n": ssh_host(sshd, workdir, "d")},
            "deployments": {"d": {"engine": "sglang", "model": "/m"}},
        },
        tmp_path / "hosts.yaml",
    )
    spec = inv.host("n")
    node, observer = SshNode(spec), SshNode(spec)
    try:
        with node_lock(node, spec, "deploy") as lock:
            first = lock.holder_pid
            node.close()  # the link drops mid-operation: no release is sent
            wait_until(lambda: first not in holders(workdir), 5, "the holder to notice")
            assert lock_status(observer, spec) is None
            assert lock.refresh() is True  # the operation's own reconnect takes it back
            assert lock.holder_pid != first and holders(workdir) == [lock.holder_pid]
            assert lock.refresh() is False
        assert holders(workdir) == [] and lock.lost
    finally:
        node.close()
        observer.close()


HOLD_AND_SIGNAL = """
import sys
from firedup.config.inventory import parse_inventory
from firedup.node.lock import node_lock
from firedup.node.ssh import SshNode
from pathlib import Path
import json
inv = parse_inventory(json.loads(sys.argv[1]), Path("hosts.yaml"))
spec = inv.host("n")
with node_lock(SshNode(spec), spec, "deploy", detail="doomed") as lock:
    print(lock.holder_pid, flush=True)
    sys.stdin.read()  # until killed
"""


def test_a_killed_operator_never_leaves_a_lock_behind(sshd: Sshd, tmp_path: Path) -> None:
    workdir = tmp_path / "node"
    data = {
        "hosts": {"n": ssh_host(sshd, workdir, "d")},
        "deployments": {"d": {"engine": "sglang", "model": "/m"}},
    }
    operator = subprocess.Popen(
        [sys.executable, "-c", HOLD_AND_SIGNAL, json.dumps(data)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert operator.stdout is not None
        holder = int(operator.stdout.readline())
        assert holders(workdir) == [holder]
        operator.kill()  # no release, no finally: the process is just gone
        operator.wait()
        wait_until(lambda: holders(workdir) == [], 5, "the holder to end with its operator")
        spec = parse_inventory(data, tmp_path / "hosts.yaml").host("n")
        node = SshNode(spec)
        try:
            info = lock_status(node, spec)
            assert info is None  # the holder noticed, and cleared its own record on the way out
            with node_lock(node, spec, "deploy") as lock:
                assert lock.holder_pid != holder
        finally:
            node.close()
    finally:
        if operator.poll() is None:
            operator.kill()
            operator.wait()
