"""Shared fixtures: a real OpenSSH sshd on loopback, and inventories that point at it.

The sshd is started once per session with its own host key and client key, on a free port,
`UsePAM no`, `StrictModes no` and the sftp subsystem (see shared/fabric-notes.md, appendix).
We own its pid (`-D` keeps it in the foreground) and end only that process.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.reliability import tally

REPO = Path(__file__).resolve().parent.parent
SIM_PYTHONPATH = str(REPO / "sim" / "python")
SIM_BIN = str(REPO / "sim" / "bin")
SIM_MODELS = REPO / "sim" / "models"
# The node's python: a plain interpreter, as on a real node (the sim needs only the stdlib).
NODE_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or sys.executable
SSHD = shutil.which("sshd", path="/usr/sbin:/usr/local/sbin:/sbin") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(n: int) -> list[int]:
    """n distinct free ports: each socket stays bound until all are chosen (`free_port` n
    times can hand out the same port twice, and a 64-host fleet then fights over one)."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


def wait_until(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll `predicate` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


@dataclass(frozen=True)
class Sshd:
    host: str
    port: int
    user: str
    client_key: Path
    known_hosts: Path
    host_pub: str
    root: Path
    pid: int

    def ssh_argv(self, *remote: str) -> list[str]:
        """An OpenSSH client command against this sshd (for checks made outside firedup)."""
        return [
            "ssh",
            "-p",
            str(self.port),
            "-i",
            str(self.client_key),
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            f"{self.user}@{self.host}",
            *remote,
        ]


def accepts_ssh(port: int, host: str = "127.0.0.1") -> bool:
    """Something on host:port answers with an SSH banner (an sshd that is up)."""
    try:
        with socket.create_connection((host, port), timeout=1) as s:
            return s.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def start_sshd(
    root: Path,
    port: int | None = None,
    *,
    session_env: dict[str, str] | None = None,
    extra: tuple[str, ...] = (),
    quiet_home: bool = True,
) -> tuple[subprocess.Popen[bytes], Sshd]:
    """Start a private sshd under `root`; the caller owns (and must end) the process.

    Sessions get a quiet HOME: Debian's bash sources ~/.bashrc for every command sshd runs,
    and this machine's root .bashrc runs `pyenv init` (~0.2 s of CPU per command), which a
    GPU node's non-interactive shell does not. `session_env` is added to every session (sshd
    keeps only the first SetEnv line, so there is one); `extra` are more sshd_config lines."""
    root.mkdir(parents=True, exist_ok=True)
    hostkey, client_key = root / "hostkey", root / "client_key"
    for key in (hostkey, client_key):
        if not key.exists():
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True
            )
    shutil.copy(root / "client_key.pub", root / "authorized_keys")
    port = port or free_port()
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {hostkey}\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        f"PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        f"StrictModes no\nPidFile {root / 'sshd.pid'}\nMaxSessions 50\nMaxStartups 50:30:100\n"
        f"Subsystem sftp internal-sftp\nLogLevel VERBOSE\n"
    )
    home = root / "home"
    home.mkdir(exist_ok=True)
    (home / ".bashrc").write_text("# a quiet home: nothing to run per command\n")
    assignments = " ".join(
        f"{k}={v}" for k, v in {"HOME": str(home), **(session_env or {})}.items()
    )
    config.write_text(
        config.read_text() + f"SetEnv {assignments}\n" + "".join(f"{x}\n" for x in extra)
    )
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([SSHD, "-D", "-f", str(config), "-E", str(root / "sshd.log")])
    try:
        wait_until(lambda: proc.poll() is not None or accepts_ssh(port), 10, "sshd to accept")
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {(root / 'sshd.log').read_text()}")
    except BaseException:
        proc.kill()
        raise
    host_pub = (root / "hostkey.pub").read_text().split()
    known_hosts = root / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    info = Sshd(
        "127.0.0.1",
        port,
        getpass.getuser(),
        client_key,
        known_hosts,
        " ".join(host_pub[:2]),
        root,
        proc.pid,
    )
    return proc, info


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    if not os.path.exists(SSHD):
        pytest.fail(f"sshd not found at {SSHD}: the test command installs openssh-server")
    proc, info = start_sshd(tmp_path_factory.mktemp("sshd"))
    try:
        yield info
    finally:
        stop_process(proc)


def sim_env(**extra: str) -> dict[str, str]:
    """The env a node host needs so its python finds the simulated engines."""
    return {
        "PYTHONPATH": SIM_PYTHONPATH,
        "PATH": f"{SIM_BIN}:/usr/local/bin:/usr/bin:/bin",
        **extra,
    }


def ssh_host(sshd: Sshd, workdir: Path, deployment: str, **overrides: Any) -> dict[str, Any]:
    """An inventory host entry that reaches `sshd` with strict host keys."""
    return {
        "address": sshd.host,
        "port": sshd.port,
        "user": sshd.user,
        "identity_file": str(sshd.client_key),
        "known_hosts": str(sshd.known_hosts),
        "python": NODE_PYTHON,
        "workdir": str(workdir),
        "env": sim_env(FIREDUP_SIM_STATE=str(workdir / "sim-state")),
        "deployment": deployment,
        **overrides,
    }


def sim_deployment(model: str = "tiny-llama", **overrides: Any) -> dict[str, Any]:
    return {"engine": "sglang", "model": str(SIM_MODELS / model), "port": free_port(), **overrides}


@pytest.fixture
def write_inventory(tmp_path: Path) -> Callable[..., Path]:
    """Write an inventory file from dicts and return its path."""

    def write(hosts: dict[str, Any], deployments: dict[str, Any], **extra: Any) -> Path:
        path = tmp_path / "hosts.yaml"
        path.write_text(yaml.safe_dump({"hosts": hosts, "deployments": deployments, **extra}))
        return path

    return write


def mounted_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` at `mount` for a fixture to yield (skips where mounting is refused);
    unmounted lazily at teardown, after whatever was asked for later is torn down."""
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes of session `sid`, read from /proc: the test's own view."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def tree_roots(pids: list[int]) -> list[int]:
    """The members of `pids` whose parent is not among them: one root means one process tree."""
    roots = []
    for pid in pids:
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid not in pids:
            roots.append(pid)
    return roots


FAB = str(REPO / ".venv" / "bin" / "fab")


def fab(
    *args: str, env: dict[str, str] | None = None, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the real `fab` CLI from the repo, as a user would."""
    return subprocess.run(
        [FAB, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def netns_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., list[Any]]]:
    """Factory: `netns_hosts(n=2)` -> n `tests.netns.NetnsHost`, each an `Sshd` at its own IP
    (port 22) in its own network namespace, all on one bridge, reachable from the test and
    from each other. After the test, every process in those namespaces is ended and the
    namespaces, veths and bridge are removed. Skips when namespaces are unavailable."""
    from tests.netns import NetnsNetwork, NetnsUnavailable

    networks: list[NetnsNetwork] = []

    def make(count: int = 2) -> list[Any]:
        network = NetnsNetwork(tmp_path_factory.mktemp("netns"), count)
        networks.append(network)
        try:
            return list(network.start())
        except NetnsUnavailable as exc:
            pytest.skip(f"network namespaces unavailable: {exc}")

    try:
        yield make
    finally:
        failures = []
        for network in reversed(networks):
            try:
                network.close()
            except Exception as exc:  # every network is closed before the first failure is raised
                failures.append(exc)
        if failures:
            raise failures[0]


def stop_runs(inventory: Path, selector: str | None = None) -> None:
    """Teardown: stop the current run of each host, in-process and quietly (the `fab stop`
    command itself is tested where it is the subject; cleanup needs no second CLI start)."""
    from firedup.config.inventory import load_inventory
    from firedup.errors import DeployError
    from firedup.launch.keepalive import end_watch
    from firedup.launch.runs import current_run, stop_run
    from firedup.node.ssh import open_node

    inv = load_inventory(inventory)
    for spec in inv.select(selector):
        node = _reach(open_node, spec)
        if node is None:
            continue
        try:
            end_watch(node, spec)  # a watch would bring the stopped run back
            run = current_run(node, spec)
            if run is not None:
                stop_run(node, run, grace_s=2)
        except DeployError:
            pass
        finally:
            node.close()


def _reach(open_node: Callable[[Any], Any], spec: Any) -> Any:
    """A connection for a teardown, tried three times: a loaded sshd may turn one away (its
    MaxStartups), and a run left behind would outlive the test."""
    from firedup.errors import ConnectError

    for attempt in range(3):
        try:
            return open_node(spec)
        except ConnectError:
            if attempt == 2:
                raise
            time.sleep(0.5 * (attempt + 1))
    return None


# The story's deployment on the simulated node (v3 as launched; v4 and v5 add to it).
STORY_DEPLOYMENT: dict[str, Any] = {
    "engine": "sglang",
    "model": str(SIM_MODELS / "kimi-k25"),
    "tp": 8,
    "trust_remote_code": True,
    "context_length": 262144,
    "speculative": {
        "algorithm": "EAGLE3",
        "draft_model": str(SIM_MODELS / "kimi-k25-eagle3"),
        "num_steps": 3,
        "eagle_topk": 1,
        "num_draft_tokens": 4,
    },
}


def story_deployments(port: int) -> dict[str, dict[str, Any]]:
    """The story's three launches: v3 as it crashed, v4 with the override, v5 with the patch."""
    base = {**STORY_DEPLOYMENT, "port": port}
    return {
        "v3": base,
        "v4": {**base, "draft_context": "extend"},
        "v5": {**base, "draft_context": "extend", "patches": ["kimi-k25-eagle3-hooks"]},
    }


def story_hosts(sshd: Sshd, root: Path, deployments: list[str]) -> dict[str, dict[str, Any]]:
    """Hosts on one node (one workdir) whose engines are a node-local copy of sim/python under
    `root / "site"`, so that patches edit the copy, never the checkout."""
    site = root / "site"
    if not site.exists():
        shutil.copytree(REPO / "sim" / "python", site, ignore=shutil.ignore_patterns("__pycache__"))
    hosts = {}
    for name in deployments:
        entry = ssh_host(sshd, root / "node", name)
        entry["env"] = {**entry["env"], "PYTHONPATH": str(site)}
        hosts[name] = entry
    return hosts


# The reliability suite's counts (tests/reliability/tally.py), printed at the end of any run
# that included it. Here rather than in tests/reliability/conftest.py: under pytest-xdist the
# controller collects nothing, so only this conftest is loaded where the summary is written.
def _tally_root(config: Any) -> Path:
    """The run's shared temp root: a worker's basetemp is popen-gwN inside the controller's."""
    base = Path(config._tmp_path_factory.getbasetemp())
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def pytest_sessionfinish(session: Any) -> None:
    """Under pytest-xdist each worker counts its own tests: hand the counts to the controller."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and tally.COUNTS:
        path = _tally_root(session.config) / f"reliability-tally-{worker}.json"
        path.write_text(json.dumps(dict(tally.COUNTS)))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    counts = Counter(tally.COUNTS)
    for path in _tally_root(terminalreporter.config).glob("reliability-tally-*.json"):
        counts.update(json.loads(path.read_text()))
    if not counts:
        return
    terminalreporter.section("reliability: faults injected and bad inputs tried")
    for key in ("faults injected", "bad inputs tried"):
        terminalreporter.write_line(f"{key}: {counts[key]}")
    for key in sorted(k for k in counts if ":" in k):
        terminalreporter.write_line(f"  {key}: {counts[key]}")
