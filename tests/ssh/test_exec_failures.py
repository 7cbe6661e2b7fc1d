"""A command the node's sshd does not run as asked ends in a typed error, never a hang or a
paramiko exception: a session refused (MaxSessions), a forced command in place of ours
(ForceCommand: our framing never runs), a session killed before its exit status."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from firedup.config.inventory import parse_inventory
from firedup.errors import ConnectionLostError, RemoteCommandError, TransientConnectError
from firedup.node.framing import NO_WRAPPER_EXIT
from firedup.node.ssh import SshNode
from tests.conftest import sim_deployment, ssh_host, start_sshd, stop_process

pytestmark = pytest.mark.ssh


@pytest.fixture
def node_with(tmp_path: Path) -> Iterator[Callable[..., SshNode]]:
    """A node behind its own sshd with these lines in a `Match all` block."""
    started: list[tuple[subprocess.Popen[bytes], SshNode]] = []

    def make(*lines: str) -> SshNode:
        proc, sshd = start_sshd(tmp_path / f"sshd{len(started)}", extra=("Match all", *lines))
        host = ssh_host(sshd, tmp_path / "w", "d")
        inv = parse_inventory(
            {"hosts": {"n": host}, "deployments": {"d": sim_deployment()}}, tmp_path / "h.yaml"
        )
        node = SshNode(inv.host("n"))
        started.append((proc, node))
        return node

    yield make
    for proc, node in started:
        node.close()
        stop_process(proc)


def test_a_refused_session_is_a_connect_error_that_says_so(
    node_with: Callable[..., SshNode],
) -> None:
    node = node_with("MaxSessions 0")
    with pytest.raises(TransientConnectError, match=r"refused a session.*MaxSessions") as info:
        node.run(["true"])
    assert info.value.exit_code == 3


def test_a_forced_command_in_place_of_ours_is_a_failed_command(
    node_with: Callable[..., SshNode],
) -> None:
    node = node_with("ForceCommand /bin/false")
    result = node.run(["echo", "hi"], check=False)
    assert result.exit_code == 1 and result.stdout == b""
    assert b"did not run the command" in result.stderr
    node = node_with("ForceCommand /bin/true")
    assert node.run(["echo", "hi"], check=False).exit_code == NO_WRAPPER_EXIT
    with pytest.raises(RemoteCommandError, match="did not run the command") as info:
        node.run(["echo", "hi"])
    assert info.value.exit_code == 4


def test_a_session_killed_before_its_exit_status_is_a_lost_connection(
    node_with: Callable[..., SshNode],
) -> None:
    node = node_with("ForceCommand kill -9 $PPID")
    with pytest.raises(ConnectionLostError, match="connection lost during echo"):
        node.run(["echo", "hi"])
