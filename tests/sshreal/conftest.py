"""SSH as people have it: non-root login users with chatty shells, behind ssh_config aliases.

Session fixtures create (idempotently) three unprivileged login users, one per login shell
(bash, zsh, fish), whose startup files print a banner as cluster nodes do, and start an sshd
set up like a stock node: keys in ~/.ssh/authorized_keys, the external sftp-server (which sshd
starts through the login shell, so a banner corrupts it), no environment forced on sessions.
The users cannot enter a checkout under /root: what the node needs (the simulated engines and
models) is copied into a world-readable temp dir. The operator side gets its own HOME per test
(`~/.ssh/config`, `~/.ssh/known_hosts`, keys), so nothing of the real ~/.ssh is read.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import (
    NODE_PYTHON,
    REPO,
    SSHD,
    accepts_ssh,
    free_port,
    stop_process,
    stop_runs,
    wait_until,
)

BANNER = "*** gpu-cluster: quota 2 TB, be nice ***"
SHELLS = {"bash": "fdop", "zsh": "fdopz", "fish": "fdopf"}
STARTUP = {  # what each shell reads for `ssh node CMD` (non-interactive), printing the banner
    "bash": (".bashrc", f'echo "{BANNER}"\necho "conda: base activated" >&2\n'),
    "zsh": (".zshenv", f'echo "{BANNER}"\n'),
    "fish": (".config/fish/config.fish", f'echo "{BANNER}"\n'),
}
SFTP_SERVER = "/usr/lib/openssh/sftp-server"


def keygen(path: Path, passphrase: str = "") -> Path:
    if not path.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-f", str(path)], check=True
        )
    return path


@dataclass(frozen=True)
class Keys:
    plain: Path  # the operator's key (no passphrase)
    locked: Path  # passphrase-protected: usable only through an agent
    passphrase: str


@pytest.fixture(scope="session")
def shared_dir() -> Iterator[Path]:
    """A world-readable dir outside the checkout: what an unprivileged node user may read."""
    root = Path(tempfile.mkdtemp(prefix="firedup-sshreal-", dir="/tmp"))
    root.chmod(0o755)
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "sim" / "python", root / "python", ignore=ignore)
    shutil.copytree(REPO / "sim" / "bin", root / "bin", ignore=ignore)
    shutil.copytree(REPO / "sim" / "models" / "tiny-llama", root / "models" / "tiny-llama")
    for path in root.rglob("*"):
        mode = path.stat().st_mode
        path.chmod(mode | stat.S_IROTH | (stat.S_IXOTH if mode & stat.S_IXUSR else 0))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    root = tmp_path_factory.mktemp("operator-keys")
    passphrase = "correct horse " + secrets.token_hex(4)
    return Keys(keygen(root / "id_plain"), keygen(root / "id_locked", passphrase), passphrase)


def _ensure_user(name: str, shell: str) -> Path:
    if shutil.which(shell) is None:
        pytest.fail(f"{shell} not installed: scripts/test.sh installs it")
    if subprocess.run(["id", "-u", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-m", "-s", shutil.which(shell) or shell, name], check=True)
    # '*': no password, but not a locked account (sshd without PAM refuses locked ones).
    subprocess.run(["usermod", "-s", shutil.which(shell) or shell, "-p", "*", name], check=True)
    return Path(os.path.expanduser(f"~{name}"))


@contextmanager
def users_lock() -> Iterator[None]:
    """The login users are machine-wide: pytest-xdist workers set them up one at a time."""
    with open("/tmp/firedup-sshreal-users.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _replace(path: Path, text: str, owner: str) -> None:
    """Write atomically, and only when different: another worker's sshd or login shell may
    be reading the file at this very moment."""
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    shutil.chown(tmp, owner)
    os.replace(tmp, path)


def _authorize(home: Path, owner: str, pubs: list[str], add: bool) -> None:
    path = home / ".ssh" / "authorized_keys"
    lines = path.read_text().splitlines() if path.exists() else []
    lines = [ln for ln in lines if ln not in pubs] + (pubs if add else [])
    _replace(path, "".join(f"{ln}\n" for ln in lines), owner)


@pytest.fixture(scope="session")
def login_users(keys: Keys) -> Iterator[dict[str, str]]:
    """shell -> user name; each user's startup file prints the banner. This session's keys
    are added to their authorized_keys (kept beside other sessions' keys) and removed after."""
    pubs = [p.with_suffix(".pub").read_text().strip() for p in (keys.plain, keys.locked)]
    homes = []
    with users_lock():
        for shell, name in SHELLS.items():
            home = _ensure_user(name, shell)
            homes.append((home, name))
            rc, text = STARTUP[shell]
            rc_dirs = [home / d for d in reversed(Path(rc).parents) if str(d) != "."]
            for folder in (home / ".ssh", *rc_dirs):  # ~/.config, then ~/.config/fish
                folder.mkdir(mode=0o700, exist_ok=True)
                shutil.chown(folder, name)
            _authorize(home, name, pubs, add=True)
            _replace(home / rc, text, name)
    try:
        yield dict(SHELLS)
    finally:
        with users_lock():
            for home, name in homes:
                _authorize(home, name, pubs, add=False)


@dataclass(frozen=True)
class NodeSshd:
    port: int
    host_pub: str  # "type base64"
    hostkey: Path
    log: Path

    def known_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_pub}\n"


def start_node_sshd(root: Path) -> tuple[subprocess.Popen[bytes], NodeSshd]:
    """An sshd configured like a stock node (the caller ends the process)."""
    root.mkdir(parents=True, exist_ok=True)
    hostkey = keygen(root / "hostkey")
    port = free_port()
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {hostkey}\n"
        "AuthorizedKeysFile .ssh/authorized_keys\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        f"PidFile {root / 'sshd.pid'}\nMaxSessions 50\nMaxStartups 50:30:100\n"
        f"Subsystem sftp {SFTP_SERVER}\nLogLevel VERBOSE\n"
    )
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    log = root / "sshd.log"
    proc = subprocess.Popen([SSHD, "-D", "-f", str(config), "-E", str(log)])
    try:
        wait_until(lambda: proc.poll() is not None or accepts_ssh(port), 10, "sshd to accept")
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {log.read_text()}")
    except BaseException:
        proc.kill()
        raise
    pub = " ".join(hostkey.with_suffix(".pub").read_text().split()[:2])
    return proc, NodeSshd(port, pub, hostkey, log)


@pytest.fixture(scope="session")
def node_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeSshd]:
    proc, info = start_node_sshd(tmp_path_factory.mktemp("node-sshd"))
    try:
        yield info
    finally:
        stop_process(proc)


@pytest.fixture(scope="session")
def bastion_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeSshd]:
    proc, info = start_node_sshd(tmp_path_factory.mktemp("bastion-sshd"))
    try:
        yield info
    finally:
        stop_process(proc)


@dataclass
class Operator:
    """The operator's machine: its HOME (with ~/.ssh) and an inventory that names aliases."""

    home: Path
    inventory: Path
    workdirs: list[str] = field(default_factory=list)  # removed after the test

    @property
    def env(self) -> dict[str, str]:
        return {"HOME": str(self.home)}

    def ssh_config(self, text: str) -> None:
        (self.home / ".ssh" / "config").write_text(text)

    def known_hosts(self, text: str) -> Path:
        path = self.home / ".ssh" / "known_hosts"
        path.write_text(text)
        return path


@pytest.fixture
def operator(tmp_path: Path, keys: Keys, monkeypatch: pytest.MonkeyPatch) -> Iterator[Operator]:
    """A fresh operator HOME; this process's HOME points there too (in-process nodes)."""
    home = tmp_path / "operator-home"
    ssh = home / ".ssh"
    ssh.mkdir(parents=True, mode=0o700)
    for key in (keys.plain, keys.locked):
        shutil.copy(key, ssh / key.name)
        shutil.copy(key.with_suffix(".pub"), ssh / f"{key.name}.pub")
        (ssh / key.name).chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    op = Operator(home, tmp_path / "hosts.yaml")
    yield op
    if op.inventory.exists():
        stop_runs(op.inventory)
    for path in op.workdirs:
        shutil.rmtree(path, ignore_errors=True)


def node_host(user: str, shared: Path, **extra: Any) -> dict[str, Any]:
    """An inventory host entry for a node user: the alias and where things are, nothing of
    how to reach it (that is in the operator's ~/.ssh/config)."""
    workdir = f"{os.path.expanduser(f'~{user}')}/fd-{secrets.token_hex(3)}"
    return {
        "address": "gpu",
        "python": NODE_PYTHON,
        "workdir": workdir,
        "env": {
            "PYTHONPATH": str(shared / "python"),
            "PATH": f"{shared / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "FIREDUP_SIM_STATE": f"{workdir}/sim-state",
            "FIREDUP_SIM_SPEED": "4",  # a quick startup (nominal times / 4): shells are the subject
        },
        "deployment": "tiny",
        **extra,
    }


def tiny_deployment(shared: Path) -> dict[str, Any]:
    return {
        "engine": "sglang",
        "model": str(shared / "models" / "tiny-llama"),
        "port": free_port(),
        "tp": 2,
        "ready_timeout_s": 60,
    }


@pytest.fixture
def write_node_inventory(operator: Operator) -> Callable[..., Path]:
    """Write the operator's inventory; the hosts' workdirs are removed after the test."""

    def write(hosts: dict[str, Any], deployments: dict[str, Any]) -> Path:
        operator.workdirs.extend(h["workdir"] for h in hosts.values() if "workdir" in h)
        operator.inventory.write_text(yaml.safe_dump({"hosts": hosts, "deployments": deployments}))
        return operator.inventory

    return write


@pytest.fixture
def ssh_agent(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Factory: a real ssh-agent holding the keys `first` then `key` (unlocked with
    `passphrase` through SSH_ASKPASS, no terminal); returns its socket. The agent is ended
    by its pid."""
    agents: list[subprocess.Popen[bytes]] = []

    def start(key: Path, passphrase: str, first: tuple[Path, ...] = ()) -> str:
        sock = tmp_path / f"agent-{len(agents)}.sock"
        proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
        agents.append(proc)
        wait_until(lambda: sock.exists() or proc.poll() is not None, 10, "ssh-agent socket")
        askpass = tmp_path / "askpass.sh"
        askpass.write_text('#!/bin/sh\nprintf "%s\\n" "$FIREDUP_TEST_PASSPHRASE"\n')
        askpass.chmod(0o700)
        env = {
            **os.environ,
            "SSH_AUTH_SOCK": str(sock),
            "SSH_ASKPASS": str(askpass),
            "SSH_ASKPASS_REQUIRE": "force",
            "DISPLAY": ":0",
            "FIREDUP_TEST_PASSPHRASE": passphrase,
        }
        for each in (*first, key):  # in this order: the agent offers its keys so
            subprocess.run(
                ["ssh-add", str(each)],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                check=True,
                timeout=30,
            )
        return str(sock)

    try:
        yield start
    finally:
        for proc in agents:
            stop_process(proc)
