"""A node as people have one: a non-root user whose login shell prints a banner, reached
through an ssh_config alias, its host key only in ~/.ssh/known_hosts, nothing of that in the
inventory. deploy -> ready -> status -> logs (no banner) -> stop, for bash, zsh and fish."""

from __future__ import annotations

import json
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from firedup.config.inventory import parse_inventory
from firedup.node.ssh import SshNode
from tests.conftest import NODE_PYTHON, fab
from tests.sshreal.conftest import (
    BANNER,
    Keys,
    NodeSshd,
    Operator,
    node_host,
    tiny_deployment,
)

pytestmark = pytest.mark.ssh

STARTUP_FILE = {"bash": "~/.bashrc", "zsh": "~/.zshenv", "fish": "config.fish"}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_alias_non_root_chatty_shell_deploy_to_stop(
    shell: str,
    login_users: dict[str, str],
    node_sshd: NodeSshd,
    operator: Operator,
    keys: Keys,
    shared_dir: Path,
    write_node_inventory: Callable[..., Path],
) -> None:
    user = login_users[shell]
    operator.ssh_config(
        f"Host gpu\n  HostName 127.0.0.1\n  Port {node_sshd.port}\n  User {user}\n"
        f"  IdentityFile ~/.ssh/{keys.plain.name}\n"
    )
    operator.known_hosts(node_sshd.known_line())
    host = node_host(user, shared_dir)
    inv = write_node_inventory({"gpu": host}, {"tiny": tiny_deployment(shared_dir)})
    assert set(host) == {"address", "python", "workdir", "env", "deployment"}

    deploy = fab("deploy", "--host", "gpu", "--inventory", str(inv), env=operator.env)
    output = deploy.stdout + deploy.stderr
    assert deploy.returncode == 0, output
    assert "gpu: READY" in deploy.stdout
    assert "Traceback" not in output
    # SFTP is broken by the banner (sshd starts sftp-server through the login shell): the
    # upload went another way, and the operator was told which file to fix.
    assert "breaks SFTP" in deploy.stderr and STARTUP_FILE[shell] in deploy.stderr

    status = fab("status", "--host", "gpu", "--inventory", str(inv), env=operator.env)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "ready" in status.stdout
    assert "damaged" not in status.stdout + status.stderr

    logs = fab("logs", "--host", "gpu", "--inventory", str(inv), env=operator.env)
    assert logs.returncode == 0, logs.stderr
    assert "fired up and ready to roll" in logs.stdout
    assert BANNER not in logs.stdout and "conda" not in logs.stdout

    stop = fab("stop", "--host", "gpu", "--inventory", str(inv), env=operator.env)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert "stopped" in stop.stdout
    # The files on the node belong to the login user: it was really them.
    workdir = Path(host["workdir"])
    assert workdir.owner() == user


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_chatty_shell_bytes_round_trip_exactly(
    shell: str,
    login_users: dict[str, str],
    node_sshd: NodeSshd,
    operator: Operator,
    keys: Keys,
) -> None:
    """What firedup parses (JSON from the node's python, files read back, a streamed
    command) is the command's output byte for byte, whatever the login shell printed; an
    upload lands with its mode although SFTP is unusable."""
    user = login_users[shell]
    operator.ssh_config(
        f"Host gpu\n  HostName 127.0.0.1\n  Port {node_sshd.port}\n  User {user}\n"
        f"  IdentityFile ~/.ssh/{keys.plain.name}\n"
    )
    operator.known_hosts(node_sshd.known_line())
    spec = parse_inventory(
        {
            "hosts": {"n": {"address": "gpu", "workdir": "/tmp/unused", "deployment": "d"}},
            "deployments": {"d": {"engine": "sglang", "model": "/m"}},
        },
        Path("hosts.yaml"),
    ).hosts["n"]
    node = SshNode(spec)
    home = Path(os.path.expanduser(f"~{user}"))
    target = home / f"fd-bytes-{secrets.token_hex(3)}" / "secret.bin"
    operator.workdirs.append(str(target.parent))
    try:
        shown = node.run([NODE_PYTHON, "-c", "import json; print(json.dumps({'a': 1}))"])
        assert json.loads(shown.stdout) == {"a": 1} and shown.stderr == b""
        payload = bytes(range(256)) * 64 + BANNER.encode()
        node.put(payload, str(target), mode=0o600)
        assert node.get(str(target)) == payload
        assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.owner() == user
        streamed = b"".join(node.stream(["printf", "%s\\n", "one", "two"], timeout_s=5))
        assert streamed == b"one\ntwo\n"
    finally:
        node.close()
