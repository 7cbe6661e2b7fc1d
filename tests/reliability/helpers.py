"""Hosts on a private sshd, fault injection, and the three checks every scenario ends with:
the server state is what the user was told, nothing of the user's was lost, and no process
of ours was left behind. Every view of the node here is the test's own (/proc, files, HTTP),
not firedup's."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from firedup.config.inventory import Deployment, HostSpec, Inventory, parse_inventory
from firedup.errors import DeployError
from firedup.node.ssh import SshNode
from firedup.ops.apply import apply_deploy
from firedup.ops.deploy import DeployOptions, plan_deploy, wait_options
from firedup.readiness.wait import NO_HOOKS, WaitHooks
from firedup.readiness.watch import WaitStatus
from tests.conftest import (
    FAB,
    REPO,
    SIM_MODELS,
    Sshd,
    free_port,
    session_members,
    ssh_host,
    start_sshd,
    wait_until,
)
from tests.reliability import tally

FAST = "20"  # FIREDUP_SIM_SPEED: a tiny-llama startup is process start-up and little else


def start_private_sshd(root: Path, *extra: str, **env: str) -> tuple[subprocess.Popen[bytes], Sshd]:
    """tests/conftest.start_sshd's sshd (quiet home) with `env` set in every session and
    `extra` sshd_config lines."""
    return start_sshd(root, session_env=env, extra=extra)


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def kill_connections(sshd: Sshd) -> list[int]:
    """Drop every connection of our sshd: SIGKILL its per-connection processes (ours, by pid)."""
    victims = _children(sshd.pid)
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not set(victims) & set(_children(sshd.pid)), 5, "connections to drop")
    tally.fault("ssh connection dropped")
    return victims


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def freeze_connections(sshd: Sshd) -> list[int]:
    """Freeze every link of our sshd (SIGSTOP its per-connection sshd processes: no reset, no
    data, as a peer that stopped answering); the commands they run are left alone."""
    frozen = []
    for conn in _children(sshd.pid):
        for pid in [conn, *_children(conn)]:
            if _comm(pid) == "sshd":
                os.kill(pid, signal.SIGSTOP)
                frozen.append(pid)
    tally.fault("frozen link")
    return frozen


def thaw(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def health(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=3) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def strays(marker: str, allowed_sids: set[int]) -> list[tuple[int, str]]:
    """Live processes whose command line names `marker` (a workdir) outside `allowed_sids`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes()
            stat = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if marker.encode() in args and stat[0] != "Z" and int(stat[3]) not in allowed_sids:
            found.append((int(cmdline.parent.name), args.replace(b"\0", b" ")[:120].decode()))
    return found


@dataclass
class Outcome:
    status: WaitStatus | None = None
    error: BaseException | None = None

    @property
    def ready(self) -> bool:
        return self.status is not None and self.status.ready

    @property
    def message(self) -> str:
        return str(self.error) if self.error is not None else "READY"


@dataclass
class UserData:
    """What a user would hate to lose: run logs, history, patch record and backups."""

    files: dict[str, bytes]

    @classmethod
    def of(cls, workdir: Path) -> UserData:
        files = {}
        for pattern in ("runs/*/server.log", "runs/*/meta.json", "history.jsonl", "patches/**/*"):
            for path in workdir.glob(pattern):
                if path.is_file():
                    files[str(path.relative_to(workdir))] = path.read_bytes()
        return cls(files)

    def lost_in(self, after: UserData, may_change: tuple[str, ...] = ()) -> list[str]:
        """Files gone or rewritten (logs and history may only grow)."""
        problems = []
        for name, data in self.files.items():
            now = after.files.get(name)
            if now is None:
                problems.append(f"{name} is gone")
            elif name.startswith(may_change):
                continue
            elif name.endswith((".log", ".jsonl")):
                if not now.startswith(data):
                    problems.append(f"{name} was rewritten, not appended to")
            elif now != data:
                problems.append(f"{name} changed")
        return problems


@dataclass
class Host:
    """One inventory host on the private sshd, with its own workdir, port and sim state."""

    sshd: Sshd
    root: Path
    inventory_path: Path
    inventory: Inventory
    nodes: list[SshNode] = field(default_factory=list)

    @classmethod
    def create(
        cls,
        sshd: Sshd,
        root: Path,
        deployment: dict[str, Any] | None,
        env: dict[str, str],
        workdir: Path | None = None,
    ) -> Host:
        """`workdir`: share another host's node directory (one node, several launches)."""
        root.mkdir(parents=True)
        workdir = workdir or root / "node"
        entry = ssh_host(sshd, workdir, "d")
        entry["env"] = {**entry["env"], "FIREDUP_SIM_SPEED": FAST, **env}
        entry["env"]["FIREDUP_SIM_EVENTS"] = str(root / "sim-events.jsonl")
        entry["keep_runs"] = 1000  # pruning is by design; here every old run's log must stay
        dep = {"engine": "sglang", "model": str(SIM_MODELS / "tiny-llama"), "port": free_port()}
        data = {"hosts": {"n": entry}, "deployments": {"d": {**dep, **(deployment or {})}}}
        path = root / "hosts.yaml"
        path.write_text(yaml.safe_dump(data))
        return cls(sshd, root, path, parse_inventory(data, path))

    @property
    def spec(self) -> HostSpec:
        return self.inventory.host("n")

    @property
    def deployment(self) -> Deployment:
        return self.inventory.deployment_for(self.spec)

    @property
    def workdir(self) -> Path:
        return Path(self.spec.workdir)

    def node(self) -> SshNode:
        node = SshNode(self.spec)
        self.nodes.append(node)
        return node

    def deploy(
        self, node: Any = None, *, timeout_s: float = 30, hooks: WaitHooks = NO_HOOKS, **how: Any
    ) -> Outcome:
        """A deploy through the core API, as `fab deploy` runs it; the outcome, not a raise."""
        node = node if node is not None else self.node()
        plan = plan_deploy(self.spec, self.deployment)
        options = wait_options(self.deployment, timeout_s, 0.5)
        try:
            status = apply_deploy(node, plan, options, hooks, how=DeployOptions(**how))
        except DeployError as exc:
            return Outcome(error=exc)
        return Outcome(status=status)

    def cli_argv(self, *args: str) -> list[str]:
        return [FAB, args[0], "--host", "n", "--inventory", str(self.inventory_path), *args[1:]]

    def cli(self, *args: str, timeout_s: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.cli_argv(*args),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )

    def runs(self) -> dict[str, int | None]:
        """run id -> the pid in its pid file (None: never started)."""
        out: dict[str, int | None] = {}
        for rundir in sorted((self.workdir / "runs").glob("*")):
            pid_file = rundir / "pid"
            text = pid_file.read_text().strip() if pid_file.exists() else ""
            out[rundir.name] = int(text) if text.isdigit() else None
        return out

    def live_runs(self) -> dict[str, list[int]]:
        """Runs whose session still has live processes: run id -> members."""
        return {
            run_id: members
            for run_id, pid in self.runs().items()
            if pid is not None and (members := session_members(pid))
        }

    def current(self) -> str | None:
        link = self.workdir / "current"
        return os.readlink(link).rsplit("/", 1)[-1] if link.is_symlink() else None

    def data(self) -> UserData:
        return UserData.of(self.workdir)

    def close_nodes(self) -> None:
        for node in self.nodes:
            node.close()
        self.nodes.clear()

    def cleanup(self) -> None:
        """Close our connections and end every server this host started (ours, by pid)."""
        self.close_nodes()
        killed = [pid for members in self.live_runs().values() for pid in members]
        for pid in killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # Until they are reaped: the simulated GPUs (like real ones) hold memory till then.
        wait_until(lambda: not any(Path(f"/proc/{p}").exists() for p in killed), 10, "reaping")

    def history(self) -> list[dict[str, Any]]:
        path = self.workdir / "history.jsonl"
        if not path.exists():
            return []
        return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def told_state_problems(host: Host, outcome: Outcome, runs_before: set[str]) -> list[str]:
    """Is the node's state what the outcome told the user? Returns what disagrees."""
    live = host.live_runs()
    new = [r for r in host.runs() if r not in runs_before]
    problems = []
    if len(live) > 1:
        problems.append(f"more than one server is running: {sorted(live)}")
    if outcome.ready:
        run = outcome.status.run if outcome.status else None
        if run is None or run.run_id not in live:
            problems.append("told READY but its server is not running")
        elif health(run.port) != 200:
            problems.append(f"told READY but /health on {run.port} is not 200")
        return problems
    message = outcome.message
    started_alive = [r for r in new if r in live]
    said = any(w in message for w in ("still running", "still alive", *started_alive))
    if started_alive and not said:
        problems.append(
            f"failed ({type(outcome.error).__name__}) while its new server {started_alive} runs, "
            f"and the message does not say so: {message[:300]!r}"
        )
    if "still running" in message and not live:
        problems.append("told the server is still running but nothing runs")
    return problems


def leftover_problems(
    host: Host, allowed_sids: set[int] | None = None, timeout_s: float = 5
) -> list[str]:
    """After our connections are closed: processes of ours that outlived them (anything naming
    the workdir outside the live server sessions) and a lock nobody holds on to."""
    host.close_nodes()
    if allowed_sids is None:
        allowed_sids = {pid for pid in host.runs().values() if pid and session_members(pid)}
    marker, record = str(host.workdir), host.workdir / "lock.json"
    deadline = time.monotonic() + timeout_s
    while True:
        left = strays(marker, allowed_sids)
        locked = record.exists()
        if not (left or locked) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    problems = [f"left behind: pid {pid}: {cmd}" for pid, cmd in left]
    if locked:
        problems.append(f"a lock record is left: {record.read_text()[:200]}")
    return problems
