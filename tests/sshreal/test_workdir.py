"""A workdir the login user cannot create (`/opt/...` as non-root): preflight says so, and so
does deploy, naming the path and the permission problem (it was "could not take the lock:
no answer")."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import fab
from tests.sshreal.conftest import Keys, NodeSshd, Operator, node_host, tiny_deployment

pytestmark = pytest.mark.ssh


def test_unwritable_workdir_named_by_preflight_and_deploy(
    login_users: dict[str, str],
    node_sshd: NodeSshd,
    operator: Operator,
    keys: Keys,
    shared_dir: Path,
    write_node_inventory: Callable[..., Path],
) -> None:
    user = login_users["bash"]
    operator.ssh_config(
        f"Host gpu\n  HostName 127.0.0.1\n  Port {node_sshd.port}\n  User {user}\n"
        f"  IdentityFile ~/.ssh/{keys.plain.name}\n"
    )
    operator.known_hosts(node_sshd.known_line())
    workdir = f"/opt/firedup-{secrets.token_hex(3)}/work"
    usual = node_host(user, shared_dir)
    operator.workdirs.append(usual["workdir"])  # the simulated GPUs keep their state there
    host = {**usual, "workdir": workdir}
    inv = write_node_inventory({"gpu": host}, {"tiny": tiny_deployment(shared_dir)})

    preflight = fab("preflight", "--host", "gpu", "--inventory", str(inv), env=operator.env)
    said = preflight.stdout + preflight.stderr
    assert preflight.returncode == 6, said
    assert "workdir" in said and "/opt" in said and "Permission denied" in said

    deploy = fab("deploy", "--host", "gpu", "--inventory", str(inv), env=operator.env)
    said = deploy.stdout + deploy.stderr
    assert deploy.returncode != 0 and "Traceback" not in said, said
    assert workdir in said or "/opt" in said, said
    assert "Permission denied" in said and "no answer" not in said, said
    assert not Path(workdir).exists()
