"""The bench's test rig: its own sshd, inventories that reach it, and the meters.

Meters, each measured where it happens:
- `node_cpu_s`: CPU time of every process under our sshd (the per-connection sshd processes
  and every command they run, dead ones included through cutime/cstime), read from /proc;
  the server is not counted (it leaves the tree when its launching shell exits).
- `SshdLog`: connections accepted by our sshd ("Accepted publickey", LogLevel VERBOSE).
- the wire meter is tests/slowlink.SlowLink with no rate and no delay: a loopback TCP relay in
  front of the sshd that counts the bytes each way.
- `CountingNode`: a Node that counts what firedup asks of the node and the bytes it moves.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from firedup.config.inventory import Inventory, parse_inventory
from firedup.errors import CommandResult
from tests.conftest import (
    Sshd,
    sim_env,
    ssh_host,
    start_sshd,
    stop_process,
)

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> tuple[int, int] | None:
    """(ppid, utime+stime+cutime+cstime in ticks) of a process, None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[1]), sum(int(f) for f in fields[11:15])


def node_cpu_s(root_pid: int) -> float:
    """CPU seconds used so far by `root_pid` and every live descendant (and their dead ones)."""
    stats = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(p))}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
        todo.extend(children.get(pid, []))
    return total / CLK_TCK


def descendants(root_pid: int) -> list[int]:
    stats = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(p))}
    out, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        kids = [c for c, (ppid, _) in stats.items() if ppid == pid]
        out.extend(kids)
        todo.extend(kids)
    return out


class SshdLog:
    """Counts connections our sshd accepted after a mark."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def accepted_since(self, mark: int) -> int:
        with self.path.open("rb") as fh:
            fh.seek(mark)
            return fh.read().count(b"Accepted publickey")


@dataclass
class CountingNode:
    """Wraps a Node: counts commands, uploads, streams, and the payload bytes each way."""

    inner: Any
    calls: Counter[str] = field(default_factory=Counter)
    bytes_up: int = 0  # uploaded file contents
    bytes_down: int = 0  # stdout/stderr and streamed bytes that came back

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def generation(self) -> int:
        return int(self.inner.generation)

    def run(self, argv: Sequence[str], **kw: Any) -> CommandResult:
        self.calls["run"] += 1
        result: CommandResult = self.inner.run(argv, **kw)
        self.bytes_down += len(result.stdout) + len(result.stderr)
        return result

    def put(self, data: bytes, path: str, *, mode: int = 0o644) -> None:
        self.calls["put"] += 1
        self.bytes_up += len(data)
        self.inner.put(data, path, mode=mode)

    def get(self, path: str) -> bytes:
        self.calls["get"] += 1
        data: bytes = self.inner.get(path)
        self.bytes_down += len(data)
        return data

    def stream(self, argv: Sequence[str], *, timeout_s: float) -> Iterator[bytes]:
        self.calls["stream"] += 1
        for chunk in self.inner.stream(argv, timeout_s=timeout_s):
            self.bytes_down += len(chunk)
            yield chunk

    def close(self) -> None:
        self.inner.close()


def read_event(path: Path, name: str, pid: int | None, timeout_s: float = 5.0) -> float | None:
    """Wall-clock time the simulator recorded for `name` (by the launcher `pid` if given)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if path.exists():
            for line in path.read_text().splitlines():
                event = json.loads(line)
                if event["event"] == name and (pid is None or event["pid"] == pid):
                    return float(event["t"])
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def start_quiet_sshd(root: Path) -> tuple[subprocess.Popen[bytes], Sshd]:
    """The test sshd (tests/conftest.start_sshd) with its quiet home: Debian's bash sources
    ~/.bashrc for every ssh command, and this machine's root .bashrc runs `pyenv init`
    (hundreds of ms of CPU), which would swamp every tool's own cost on the node. A GPU node's
    skeleton .bashrc returns at once when not interactive."""
    return start_sshd(root)


def start_login_sshd(root: Path) -> tuple[subprocess.Popen[bytes], Sshd]:
    """The same sshd keeping this machine's own login environment (its ~/.bashrc)."""
    return start_sshd(root, quiet_home=False)


class Rig:
    """One sshd of our own on loopback, and a scratch root for node workdirs.

    `quiet_home`: run the ssh user's commands with an empty ~/.bashrc (see start_quiet_sshd);
    False keeps this machine's own login environment.
    """

    def __init__(self, root: Path, *, quiet_home: bool = True) -> None:
        self.root = root
        self.quiet_home = quiet_home
        start = start_quiet_sshd if quiet_home else start_login_sshd
        self.proc, self.sshd = start(root / "sshd")
        self.log = SshdLog(root / "sshd" / "sshd.log")
        self.counter = 0

    @property
    def sshd_pid(self) -> int:
        return self.proc.pid

    def fresh_dir(self, label: str) -> Path:
        self.counter += 1
        path = self.root / f"{label}-{self.counter:03d}"
        path.mkdir(parents=True)
        return path

    def host_entry(self, workdir: Path, deployment: str, **env: str) -> dict[str, Any]:
        entry = ssh_host(self.sshd, workdir, deployment)
        entry["env"] = {**sim_env(FIREDUP_SIM_STATE=str(workdir / "sim-state")), **env}
        return entry

    def inventory(
        self, where: Path, hosts: dict[str, Any], deployments: dict[str, Any]
    ) -> tuple[Inventory, Path]:
        """Write the inventory file (for the CLI) and parse it (for the core API)."""
        data = {"hosts": hosts, "deployments": deployments}
        path = where / "hosts.yaml"
        path.write_text(yaml.safe_dump(data))
        return parse_inventory(data, path), path

    def ssh_argv(self, port: int | None = None) -> list[str]:
        """OpenSSH client argv (up to the remote command) for the hand-written scripts."""
        s: Sshd = self.sshd
        return [
            "ssh",
            "-p",
            str(port or s.port),
            "-i",
            str(s.client_key),
            "-o",
            f"UserKnownHostsFile={s.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            f"{s.user}@{s.host}",
        ]

    def trust_port(self, port: int) -> None:
        """Let clients that go through a relay on `port` accept the sshd's host key."""
        line = f"[127.0.0.1]:{port} {self.sshd.host_pub}\n"
        with self.sshd.known_hosts.open("a") as fh:
            fh.write(line)

    def close(self) -> None:
        """Stop the sshd and what is left under it (ours by ancestry, ended by pid): the
        sessions of Ansible's ControlPersist masters, which would otherwise linger 60 s."""
        for pid in descendants(self.sshd_pid):
            subprocess.run(["kill", "-TERM", str(pid)], check=False, capture_output=True)
        stop_process(self.proc)
