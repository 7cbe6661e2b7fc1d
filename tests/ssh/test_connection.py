"""The operator's side of one SSH connection, as the kernel sees it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from firedup.config.inventory import parse_inventory
from firedup.node.ssh import SshNode
from tests.conftest import Sshd, ssh_host
from tests.slowlink import SlowLink

pytestmark = pytest.mark.ssh


def test_the_connection_sends_small_packets_at_once(sshd: Sshd, tmp_path: Path) -> None:
    """Found measuring deploy overhead: every command cost ~45 ms on loopback, raw paramiko
    exec too, and 3 ms with TCP_NODELAY. A command is a few small SSH packets in a row (channel
    open, exec, EOF); Nagle held each behind the ACK the peer delays by 40 ms. Fourteen
    commands in a deploy paid it fourteen times."""
    inv = parse_inventory(
        {
            "hosts": {"n": ssh_host(sshd, tmp_path / "node", "d")},
            "deployments": {"d": {"engine": "sglang", "model": "/m"}},
        },
        tmp_path / "hosts.yaml",
    )
    node = SshNode(inv.host("n"))
    try:
        assert node.run(["true"]).exit_code == 0
        sock = node._conn.client.get_transport().sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        node.close()


def test_a_connection_dropped_before_the_banner_is_tried_again(sshd: Sshd, tmp_path: Path) -> None:
    """Found in CI: behind sshd's MaxStartups (a bastion's default drops 30% past 10 pending
    connections), `fab status --max-parallel 2` still lost hosts to "Error reading SSH
    protocol banner": the sshd counts a connection as pending for a moment after its client
    has authenticated. A drop before the banner is what a full sshd does; it is tried again."""
    link = SlowLink(sshd.port)
    try:
        known = tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:{link.port} {sshd.host_pub}\n")
        host = ssh_host(sshd, tmp_path / "node", "d", port=link.port, known_hosts=str(known))
        inv = parse_inventory(
            {"hosts": {"n": host}, "deployments": {"d": {"engine": "sglang", "model": "/m"}}},
            tmp_path / "hosts.yaml",
        )
        link.drop_next(2)
        node = SshNode(inv.host("n"))
        try:
            assert node.run(["true"]).exit_code == 0
        finally:
            node.close()
        assert link.accepted == 3
    finally:
        link.close()
