"""Host keys like OpenSSH, over real sshds: the default ~/.ssh/known_hosts, fingerprints and
the ssh-keyscan command in every refusal, accept-new appending one line to a file full of
things paramiko cannot read, @revoked refused, and every ProxyJump bastion checked."""

from __future__ import annotations

import base64
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from firedup.config.inventory import parse_inventory
from firedup.errors import ConnectError
from firedup.node import known_hosts as kh
from firedup.node.ssh import SshNode
from tests.conftest import fab
from tests.sshreal.conftest import Keys, NodeSshd, Operator, keygen

pytestmark = pytest.mark.ssh


def fingerprint(pub: Path) -> str:
    """What `ssh-keygen -lf` prints as the fingerprint."""
    out = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True)
    return out.stdout.split()[1]


def node(**extra: Any) -> SshNode:
    data = {
        "hosts": {"n": {"address": "gpu", "workdir": "/tmp/unused", "deployment": "d", **extra}},
        "deployments": {"d": {"engine": "sglang", "model": "/m"}},
    }
    spec = parse_inventory(data, Path("hosts.yaml")).hosts["n"]
    return SshNode(spec)


def whoami(n: SshNode) -> str:
    try:
        return n.run(["id", "-un"]).out.strip()
    finally:
        n.close()


def alias(
    op: Operator, sshd: NodeSshd, user: str, key: Path, extra: str = "", hashed: str = "no"
) -> None:
    """~/.ssh/config naming the node `gpu`; HashKnownHosts is set here, so that the
    machine's /etc/ssh/ssh_config (read after it) does not decide how new lines look."""
    op.ssh_config(
        f"Host gpu\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {user}\n"
        f"  IdentityFile ~/.ssh/{key.name}\n{extra}Host *\n  HashKnownHosts {hashed}\n"
    )


def sk_line(host: str) -> str:
    """An `sk-ssh-ed25519@openssh.com` known_hosts line (a FIDO key: paramiko cannot read it)."""
    kind = b"sk-ssh-ed25519@openssh.com"
    blob = b"".join(struct.pack(">I", len(p)) + p for p in (kind, b"\x01" * 32, b"ssh:"))
    return f"{host} {kind.decode()} {base64.b64encode(blob).decode()}"


def busy_known_hosts(tmp: Path, sshd: NodeSshd) -> str:
    """A known_hosts as people have one, with no line for this node."""
    other = keygen(tmp / "other").with_suffix(".pub").read_text().split()[:2]
    hashed = tmp / "hashed"
    hashed.write_text(f"build-box.example {' '.join(other)}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(hashed)], capture_output=True, check=True)
    return (
        "# managed by hand; do not sort\n"
        + hashed.read_text()
        + f"host1,10.0.0.5 {' '.join(other)} old laptop\n"
        + sk_line("[127.0.0.1]:*")
        + "\n\n"
        + f"@cert-authority *.example.org {' '.join(other)}\n"
        + f"@revoked * {' '.join(other)}\n"
        + f"*.example.org,!bad.example.org {' '.join(other)}"  # no final newline
    )


def test_default_known_hosts_is_the_home_one(
    login_users: dict[str, str], node_sshd: NodeSshd, operator: Operator, keys: Keys
) -> None:
    alias(operator, node_sshd, login_users["bash"], keys.plain)
    operator.known_hosts(node_sshd.known_line())
    assert whoami(node()) == login_users["bash"]


def test_unknown_and_changed_keys_name_fingerprints_and_keyscan(
    login_users: dict[str, str],
    node_sshd: NodeSshd,
    operator: Operator,
    keys: Keys,
    tmp_path: Path,
) -> None:
    alias(operator, node_sshd, login_users["bash"], keys.plain)
    real = fingerprint(node_sshd.hostkey.with_suffix(".pub"))
    scan = f"ssh-keyscan -p {node_sshd.port} 127.0.0.1"
    operator.known_hosts("")
    with pytest.raises(ConnectError) as unknown:
        whoami(node())
    assert "host key unknown" in str(unknown.value) and real in str(unknown.value)
    assert scan in str(unknown.value)

    stale = keygen(tmp_path / "stale").with_suffix(".pub")
    operator.known_hosts(
        f"[127.0.0.1]:{node_sshd.port} {' '.join(stale.read_text().split()[:2])}\n"
    )
    result = fab("status", "--host", "n", "--inventory", str(inventory(operator)), env=operator.env)
    said = result.stdout + result.stderr  # status: one row per host, the error in it
    assert result.returncode == 3, said
    assert "host key CHANGED" in said and real in said
    assert fingerprint(stale) in said and scan in said
    assert "Traceback" not in said


def inventory(op: Operator, **extra: Any) -> Path:

    host = {"address": "gpu", "workdir": "/tmp/unused-firedup", "deployment": "d", **extra}
    op.inventory.write_text(
        yaml.safe_dump(
            {"hosts": {"n": host}, "deployments": {"d": {"engine": "sglang", "model": "/m"}}}
        )
    )
    return op.inventory


@pytest.mark.parametrize("hashed", ["no", "yes"])
def test_accept_new_appends_one_line_and_keeps_every_byte(
    login_users: dict[str, str],
    node_sshd: NodeSshd,
    operator: Operator,
    keys: Keys,
    tmp_path: Path,
    hashed: str,
) -> None:
    alias(operator, node_sshd, login_users["bash"], keys.plain, hashed=hashed)
    before = busy_known_hosts(tmp_path, node_sshd)
    path = operator.known_hosts(before)
    assert whoami(node(host_key_policy="accept-new")) == "fdop"
    after = path.read_text()
    assert after.startswith(before)
    added = after[len(before) :]
    if hashed == "no":
        assert added == "\n" + node_sshd.known_line()  # the missing final newline, one line
    else:  # HashKnownHosts yes: the name is hashed, as OpenSSH would file it
        name, kind, blob = added.removeprefix("\n").removesuffix("\n").split(" ")
        assert added.count("\n") == 2 and name.startswith("|1|")
        assert f"{kind} {blob}" == node_sshd.host_pub
        assert kh.matches(kh.parse(added)[0], f"[127.0.0.1]:{node_sshd.port}")
    # Known now: a second connection adds nothing, and so does OpenSSH agree.
    assert whoami(node(host_key_policy="accept-new")) == "fdop"
    assert path.read_text() == after
    check = subprocess.run(
        [
            "ssh",
            "-F",
            "/dev/null",
            "-o",
            f"UserKnownHostsFile={path}",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-i",
            str(keys.plain),
            "-p",
            str(node_sshd.port),
            f"{login_users['bash']}@127.0.0.1",
            "true",
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert check.returncode == 0, check.stderr


def test_revoked_key_is_refused_without_traceback(
    login_users: dict[str, str],
    node_sshd: NodeSshd,
    operator: Operator,
    keys: Keys,
    tmp_path: Path,
) -> None:
    alias(operator, node_sshd, login_users["bash"], keys.plain)
    text = busy_known_hosts(tmp_path, node_sshd) + "\n"
    text += node_sshd.known_line() + f"@revoked [127.0.0.1]:* {node_sshd.host_pub}\n"
    path = operator.known_hosts(text)
    for policy in ("strict", "accept-new"):
        result = fab(
            "status",
            "--host",
            "n",
            "--inventory",
            str(inventory(operator, host_key_policy=policy)),
            env=operator.env,
        )
        said = result.stdout + result.stderr
        assert result.returncode == 3, said
        assert "REVOKED" in said and "Traceback" not in said
    assert path.read_text() == text


def test_proxyjump_bastion_key_checked(
    login_users: dict[str, str],
    node_sshd: NodeSshd,
    bastion_sshd: NodeSshd,
    operator: Operator,
    keys: Keys,
) -> None:
    user = login_users["bash"]
    alias(
        operator,
        node_sshd,
        user,
        keys.plain,
        f"  ProxyJump {user}@jump\nHost jump\n  HostName 127.0.0.1\n  Port {bastion_sshd.port}\n"
        f"  IdentityFile ~/.ssh/{keys.plain.name}\n",
    )
    # Strict, the node's key known, the bastion's not: refused at the bastion.
    path = operator.known_hosts(node_sshd.known_line())
    with pytest.raises(ConnectError) as refused:
        whoami(node())
    message = str(refused.value)
    assert "bastion jump" in message and "host key unknown" in message
    assert fingerprint(bastion_sshd.hostkey.with_suffix(".pub")) in message
    assert f"ssh-keyscan -p {bastion_sshd.port} 127.0.0.1" in message
    # Once known, the node is reached through it.
    path.write_text(node_sshd.known_line() + bastion_sshd.known_line())
    accepted_before = bastion_sshd.log.read_text().count(f"Accepted publickey for {user}")
    assert whoami(node()) == user
    assert bastion_sshd.log.read_text().count(f"Accepted publickey for {user}") > accepted_before
    # accept-new from nothing records both hops, bastion first.
    path.write_text("")
    assert whoami(node(host_key_policy="accept-new")) == user
    assert path.read_text() == bastion_sshd.known_line() + node_sshd.known_line()


def test_encrypted_key_in_agent_with_identity_file(
    login_users: dict[str, str],
    node_sshd: NodeSshd,
    operator: Operator,
    keys: Keys,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ssh_agent: Callable[[Path, str], str],
) -> None:
    user = login_users["bash"]
    operator.ssh_config("")
    operator.known_hosts(node_sshd.known_line())
    locked = operator.home / ".ssh" / keys.locked.name
    where = {"address": "127.0.0.1", "port": node_sshd.port, "user": user}
    # No agent: says the key is passphrase-protected and how to load it.
    with pytest.raises(ConnectError) as no_agent:
        whoami(node(**where, identity_file=str(locked)))
    assert "passphrase" in str(no_agent.value) and f"ssh-add {locked}" in str(no_agent.value)
    # The same key loaded in an agent: works, identity_file or not.
    monkeypatch.setenv("SSH_AUTH_SOCK", ssh_agent(locked, keys.passphrase))
    assert whoami(node(**where, identity_file=str(locked))) == user


def test_proxycommand_from_ssh_config(
    login_users: dict[str, str],
    node_sshd: NodeSshd,
    bastion_sshd: NodeSshd,
    operator: Operator,
    keys: Keys,
) -> None:
    """A ProxyCommand (here OpenSSH's own `ssh -W` through the bastion) carries the
    connection; the node's key is still checked by firedup."""
    user = login_users["bash"]
    key = operator.home / ".ssh" / keys.plain.name
    known = operator.known_hosts(node_sshd.known_line() + bastion_sshd.known_line())
    alias(
        operator,
        node_sshd,
        user,
        keys.plain,
        f"  ProxyCommand ssh -F /dev/null -i {key} -o BatchMode=yes "
        f"-o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes "
        f"-p {bastion_sshd.port} -W %h:%p {user}@127.0.0.1\n",
    )
    accepted_before = bastion_sshd.log.read_text().count(f"Accepted publickey for {user}")
    assert whoami(node()) == user
    assert bastion_sshd.log.read_text().count(f"Accepted publickey for {user}") > accepted_before
    known.write_text(bastion_sshd.known_line())  # the node's key unknown: refused
    with pytest.raises(ConnectError, match="host key unknown"):
        whoami(node())


def test_identities_only_offers_only_the_configured_key_from_a_full_agent(
    login_users: dict[str, str],
    node_sshd: NodeSshd,
    operator: Operator,
    keys: Keys,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ssh_agent: Callable[..., str],
) -> None:
    """Seven other keys first in the agent: offering them all hits sshd's MaxAuthTries (6),
    as with OpenSSH; IdentitiesOnly makes firedup offer the configured key's agent copy only."""
    user = login_users["bash"]
    locked = operator.home / ".ssh" / keys.locked.name
    others = tuple(keygen(tmp_path / f"other{i}") for i in range(7))
    monkeypatch.setenv("SSH_AUTH_SOCK", ssh_agent(locked, keys.passphrase, others))
    operator.known_hosts(node_sshd.known_line())
    alias(operator, node_sshd, user, locked)
    with pytest.raises(ConnectError) as too_many:
        whoami(node())
    assert "MaxAuthTries" in str(too_many.value) and "IdentitiesOnly yes" in str(too_many.value)
    alias(operator, node_sshd, user, locked, "  IdentitiesOnly yes\n")
    assert whoami(node()) == user
