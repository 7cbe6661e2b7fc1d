"""Hosts in their own network namespaces (tests/netns.py): their own addresses and port spaces,
reachable from the test and from each other over firedup's SSH transport, and nothing of them
left once torn down, even when the test body fails or the test process died."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from firedup.config.inventory import parse_inventory
from firedup.node.ssh import SshNode
from tests.conftest import NODE_PYTHON, REPO, Sshd, free_port, sim_deployment, ssh_host
from tests.netns import NetnsHost, NetnsNetwork, members, sweep_stale, unavailable_reason

pytestmark = pytest.mark.ssh

# Binds the wildcard address (so a second bind of the port in the same namespace fails), forks a
# detached server answering every connection with argv[2], and prints the server's pid.
SERVE = """
import os, signal, socket, sys
s = socket.socket()
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen()
pid = os.fork()
if pid:
    print(pid, flush=True)
    os._exit(0)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
if sys.argv[3] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    conn, _ = s.accept()
    with conn:
        conn.sendall(sys.argv[2].encode())
"""

# Prints what the server at argv[1]:argv[2] says.
FETCH = """
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5) as s:
    print(s.recv(100).decode())
"""


def _nodes(hosts: Sequence[Sshd], tmp: Path) -> list[SshNode]:
    entries = {f"h{i}": ssh_host(host, tmp / f"h{i}", "d") for i, host in enumerate(hosts)}
    data = {"hosts": entries, "deployments": {"d": sim_deployment()}}
    inventory = parse_inventory(data, tmp / "hosts.yaml")
    return [SshNode(inventory.host(name)) for name in entries]


def _serve(node: SshNode, port: int, reply: str, *, ignore_term: bool = False) -> int:
    argv = [NODE_PYTHON, "-c", SERVE, str(port), reply, "ignore-term" if ignore_term else "-"]
    return int(node.run(argv, timeout_s=15, what="start a server").out)


def _fetch_from_root(ip: str, port: int) -> str:
    with socket.create_connection((ip, port), timeout=5) as s:
        return s.recv(100).decode()


@pytest.fixture
def pair(
    netns_hosts: Callable[..., list[NetnsHost]], tmp_path: Path
) -> Iterator[tuple[list[NetnsHost], list[SshNode]]]:
    hosts = netns_hosts(2)
    nodes = _nodes(hosts, tmp_path)
    try:
        yield hosts, nodes
    finally:
        for node in nodes:
            node.close()


def test_each_host_has_its_own_address(pair: tuple[list[NetnsHost], list[SshNode]]) -> None:
    hosts, nodes = pair
    ips = [host.host for host in hosts]
    assert len(set(ips)) == 2 and all(host.port == 22 for host in hosts)
    for host, node in zip(hosts, nodes, strict=True):
        assert node.run(["hostname", "-I"]).out.split() == [host.host]
        addresses = node.run(["ip", "-4", "-o", "addr", "show"]).out
        assert f"inet {host.host}/24" in addresses
        assert [ip for ip in ips if f"inet {ip}/" in addresses] == [host.host]


def test_both_hosts_bind_the_same_port_at_once(
    pair: tuple[list[NetnsHost], list[SshNode]],
) -> None:
    hosts, nodes = pair
    port = free_port()
    with socket.socket() as mine:  # and the test's own namespace holds it too
        mine.bind(("0.0.0.0", port))
        mine.listen()
        for host, node in zip(hosts, nodes, strict=True):
            _serve(node, port, f"served by {host.host}")
        # The control: within one namespace the same wildcard bind is refused.
        again = nodes[0].run([NODE_PYTHON, "-c", SERVE, str(port), "x", "-"], check=False)
        assert not again.ok and "Address already in use" in again.err
        for host in hosts:
            assert _fetch_from_root(host.host, port) == f"served by {host.host}"


def test_hosts_reach_each_other(pair: tuple[list[NetnsHost], list[SshNode]]) -> None:
    hosts, nodes = pair
    port = free_port()
    for host, node in zip(hosts, nodes, strict=True):
        _serve(node, port, f"served by {host.host}")
    for node, peer in zip(nodes, reversed(hosts), strict=True):
        fetched = node.run([NODE_PYTHON, "-c", FETCH, peer.host, str(port)], timeout_s=15)
        assert fetched.out.strip() == f"served by {peer.host}"


class _Boom(Exception):
    pass


def _start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _running(pid: int, start: int | None) -> bool:
    """Still the same, live (non-zombie) process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and int(fields[19]) == start


def _assert_nothing_left(net: NetnsNetwork, pinned: dict[str, int], pids: dict[int, Any]) -> None:
    assert net.plan is not None
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [ns for ns in net.plan.netns if ns in listed], listed
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert not [
        n for n in (net.plan.bridge, *net.plan.veths) if f" {n}:" in links or f" {n}@" in links
    ]
    # The pinned namespaces cannot be reused, so their inodes name only them.
    inos = {os.fstat(fd).st_ino for fd in pinned.values()}
    assert inos == {host.netns_ino for host in net.hosts}
    assert members(inos) == []
    assert [pid for pid, start in pids.items() if _running(pid, start)] == []
    assert not net.plan.path.exists()


@pytest.mark.parametrize("body_fails", [False, True], ids=["clean", "body-raises"])
def test_teardown_leaves_nothing(tmp_path: Path, body_fails: bool) -> None:
    if reason := unavailable_reason():
        pytest.skip(reason)
    net = NetnsNetwork(tmp_path / "net", 2, grace_s=0.5)
    pinned: dict[str, int] = {}
    pids: dict[int, Any] = {}
    nodes: list[SshNode] = []
    try:
        with contextlib.suppress(_Boom), net:
            nodes = _nodes(net.hosts, tmp_path)  # left open: teardown must end their sessions
            port = free_port()
            _serve(nodes[0], port, "a")
            _serve(nodes[1], port, "b", ignore_term=True)  # only SIGKILL ends this one
            pinned = {h.netns: os.open(f"/run/netns/{h.netns}", os.O_RDONLY) for h in net.hosts}
            inside = members({host.netns_ino for host in net.hosts})
            assert len(inside) >= 6  # 2 sshd, 2 sessions, 2 servers
            pids = {pid: _start_time(pid) for pid in inside}
            if body_fails:
                raise _Boom
        _assert_nothing_left(net, pinned, pids)
    finally:
        for fd in pinned.values():
            os.close(fd)
        for node in nodes:
            node.close()


def test_a_network_whose_owner_died_is_swept(tmp_path: Path) -> None:
    if reason := unavailable_reason():
        pytest.skip(reason)
    net = NetnsNetwork(tmp_path / "net", 1, grace_s=0.5)
    with net:
        assert net.plan is not None
        pinned = {h.netns: os.open(f"/run/netns/{h.netns}", os.O_RDONLY) for h in net.hosts}
        try:
            pids = {pid: _start_time(pid) for pid in members({net.hosts[0].netns_ino})}
            # As if the run had been killed: a record whose owner is no longer that process.
            owner = (net.plan.owner[0], (net.plan.owner[1] or 0) + 1)
            dataclasses.replace(net.plan, owner=owner).save()
            sweep_stale(grace_s=0.5)
            _assert_nothing_left(net, pinned, pids)
        finally:
            for fd in pinned.values():
                os.close(fd)


def test_without_root_the_fixture_skips_and_says_why() -> None:
    setpriv = shutil.which("setpriv")
    if setpriv is None or unavailable_reason():
        pytest.skip("needs root and setpriv to run the check as an unprivileged user")
    this = Path(__file__).relative_to(REPO)
    argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
    argv += [sys.executable, "-m", "pytest", f"{this}::test_each_host_has_its_own_address"]
    argv += ["-p", "no:cacheprovider", "-q", "-rs"]
    env = {**os.environ, "HOME": "/tmp"}
    r = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    if r.returncode in (126, 127):
        pytest.skip(f"cannot run python as an unprivileged user here: {r.stderr.strip()}")
    assert "1 skipped" in r.stdout, r.stdout + r.stderr
    assert "need CAP_SYS_ADMIN and CAP_NET_ADMIN (run the tests as root)" in r.stdout
