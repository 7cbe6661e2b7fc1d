"""Several SSH hosts on one machine, each in its own network namespace (needs root).

For tests that need hosts with their own addresses and port spaces: multi-node rendezvous at a
real peer address, two servers on the same port. One bridge in the root namespace, one veth
pair per host (its far end is the host's eth0), addresses from 10.231.X.0/24 (bridge .1, hosts
.2, .3, ...), one OpenSSH sshd per namespace on the host's IP, port 22.

Teardown ends every process inside our namespaces: only our sshd and what the test started
through it can live there, so they are ours by construction. Each is signalled through a pidfd
after re-checking its namespace, so a recycled pid is never hit. A record per network under
/run lets a later run remove what a run killed without teardown (SIGKILL) left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import getpass
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.conftest import SSHD, Sshd, accepts_ssh, stop_process, wait_until

IP = shutil.which("ip", path="/usr/sbin:/sbin:/usr/bin:/bin") or "ip"
NSENTER = shutil.which("nsenter", path="/usr/bin:/bin:/usr/sbin:/sbin") or "nsenter"
STATE_DIR = Path("/run/firedup-netns")
NETNS_DIR = Path("/run/netns")
NET_PREFIX = "10.231"
START_TIMEOUT_S = 10.0
GRACE_S = 3.0
_CAPS = (("CAP_SYS_ADMIN", 21), ("CAP_NET_ADMIN", 12))
_DENIED = ("Operation not permitted", "Permission denied")


class NetnsUnavailable(RuntimeError):
    """This machine cannot give us network namespaces (not root, no iproute2): skip, not fail."""


@dataclass(frozen=True)
class NetnsHost(Sshd):
    """An `Sshd` at its own IP (`host`), port 22, living in network namespace `netns`."""

    netns: str
    netns_ino: int
    veth: str

    def exec_argv(self, *argv: str) -> list[str]:
        """A command run in this host's namespace directly, without SSH (for checks)."""
        return [IP, "netns", "exec", self.netns, *argv]


def unavailable_reason() -> str | None:
    """Why this process cannot make network namespaces, or None when it can."""
    if not os.path.exists(IP):
        return "iproute2 ('ip') is not installed"
    status = Path("/proc/self/status").read_text().splitlines()
    caps = int(next(line.split()[1] for line in status if line.startswith("CapEff:")), 16)
    missing = [name for name, bit in _CAPS if not caps >> bit & 1]
    if missing:
        return f"network namespaces need {' and '.join(missing)} (run the tests as root)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [IP, *args], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
    )
    if check and r.returncode != 0:
        message = f"ip {' '.join(args)}: {r.stderr.strip()}"
        if any(word in r.stderr for word in _DENIED):
            raise NetnsUnavailable(message)
        raise RuntimeError(message)
    return r


def _iptables(action: str, bridge: str) -> None:
    # Best effort: where it fails, the host-to-host reachability test says so.
    argv = ["iptables", "-w", action, "FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)


def _bridged_frames_filtered() -> bool:
    """br_netfilter sends bridged frames through iptables FORWARD, where Docker's DROP policy
    would cut host-to-host traffic: then we add an ACCEPT rule for our bridge."""
    try:
        on = Path("/proc/sys/net/bridge/bridge-nf-call-iptables").read_text().strip() == "1"
    except OSError:
        return False
    return on and shutil.which("iptables") is not None


def _start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _netns_ino(name: str) -> int | None:
    try:
        return os.stat(NETNS_DIR / name).st_ino
    except OSError:
        return None


def members(inos: set[int]) -> list[int]:
    """Live processes whose network namespace is one of `inos` (what `ip netns pids` reads)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.stat(f"/proc/{entry.name}/ns/net").st_ino in inos:
                    found.append(int(entry.name))
            except OSError:  # gone, or a zombie: it has no namespaces left
                continue
    return found


def _signal_member(pid: int, inos: set[int], sig: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        # Checked once the pidfd pins the process: a recycled pid cannot slip in between.
        if os.stat(f"/proc/{pid}/ns/net").st_ino in inos:
            signal.pidfd_send_signal(fd, sig)
    except OSError:
        pass
    finally:
        os.close(fd)


def _end_members(inos: set[int], exclude: set[int], grace_s: float) -> list[int]:
    """TERM every process in `inos` but `exclude`, KILL what outlives the grace; the survivors."""

    def others() -> list[int]:
        return [pid for pid in members(inos) if pid not in exclude]

    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = others()
        if not pids:
            return []
        for pid in pids:
            _signal_member(pid, inos, sig)
        with contextlib.suppress(AssertionError):
            wait_until(lambda: not others(), grace_s, "namespace processes to exit")
    return others()


@dataclass(frozen=True)
class _Plan:
    """Names of one network, recorded before anything exists so that any part can be undone."""

    tag: str
    bridge: str
    subnet: str
    netns: tuple[str, ...]
    veths: tuple[str, ...]
    owner: tuple[int, int | None]  # pid and start time: a dead owner means a stale network
    iptables: bool

    @property
    def path(self) -> Path:
        return STATE_DIR / f"{self.tag}.json"

    def ip(self, i: int) -> str:
        return f"{self.subnet}.{i + 2}"

    def save(self) -> None:
        self.path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> _Plan | None:
        try:
            d = json.loads(path.read_text())
            d.update(netns=tuple(d["netns"]), veths=tuple(d["veths"]), owner=tuple(d["owner"]))
            return cls(**d)
        except (OSError, ValueError, TypeError, KeyError):
            return None


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """Serializes subnet choice between concurrent runs, until the bridge holds the subnet."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with open(STATE_DIR / "lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _free_subnet() -> str:
    text = _ip("-4", "-o", "addr").stdout + _ip("-4", "route").stdout
    used = {int(x) for x in re.findall(rf"\b{re.escape(NET_PREFIX)}\.(\d+)\.", text)}
    free = [x for x in range(256) if x not in used]
    if not free:
        raise RuntimeError(f"no free /24 left in {NET_PREFIX}.0.0/16")
    return f"{NET_PREFIX}.{random.choice(free)}"


def _destroy(plan: _Plan, sshds: list[subprocess.Popen[bytes]], grace_s: float) -> list[str]:
    """Undo `plan`, whatever part of it exists; what could not be undone, as messages."""
    inos = {ino for ns in plan.netns if (ino := _netns_ino(ns)) is not None}
    # The test's processes first, then our sshds, then whatever a session forked meanwhile.
    _end_members(inos, {p.pid for p in sshds}, grace_s)
    for proc in sshds:
        stop_process(proc)
    if left := _end_members(inos, set(), 1):
        # Keep the names and the record: without them nothing could find these processes again.
        return [f"processes {left} outlived SIGKILL; kept {plan.path} for a later sweep"]
    errors = []
    for ns in plan.netns:
        if _netns_ino(ns) is not None and (r := _ip("netns", "del", ns, check=False)).returncode:
            errors.append(f"netns {ns}: {r.stderr.strip()}")
    for veth in plan.veths:  # normally gone with its namespace
        _ip("link", "del", veth, check=False)
    if plan.iptables:
        _iptables("-D", plan.bridge)
    _ip("link", "del", plan.bridge, check=False)
    errors += [f"link {n} remains" for n in (plan.bridge, *plan.veths) if _link_exists(n)]
    plan.path.unlink(missing_ok=True)
    return errors


def _link_exists(name: str) -> bool:
    return _ip("link", "show", "dev", name, check=False).returncode == 0


def sweep_stale(grace_s: float = GRACE_S) -> None:
    """Remove networks whose owning test process died without tearing them down."""
    if not STATE_DIR.is_dir():
        return
    with _locked():
        for path in STATE_DIR.glob("*.json"):
            plan = _Plan.load(path)
            if plan is None:
                path.unlink(missing_ok=True)
            elif _start_time(plan.owner[0]) != plan.owner[1]:
                _destroy(plan, [], grace_s)


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _sshd_config(home: Path, ip: str, authorized_keys: Path) -> Path:
    config = home / "sshd_config"
    lines = [
        *("Port 22", f"ListenAddress {ip}", f"HostKey {home / 'hostkey'}"),
        *(f"AuthorizedKeysFile {authorized_keys}", "PermitRootLogin prohibit-password"),
        *("PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no"),
        *("StrictModes no", f"PidFile {home / 'sshd.pid'}", "MaxSessions 50"),
        *("MaxStartups 50:30:100", "Subsystem sftp internal-sftp", "LogLevel VERBOSE"),
        # A quiet home, as tests/conftest.start_sshd gives: no rc-file work per command.
        f"SetEnv HOME={quiet_home(home)}",
    ]
    config.write_text("\n".join(lines) + "\n")
    return config


def quiet_home(root: Path) -> Path:
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / ".bashrc").write_text("# a quiet home: nothing to run per command\n")
    return home


class NetnsNetwork:
    """`count` SSH hosts on one bridge; `start()` brings them up, `close()` removes everything.

    Also a context manager: `with NetnsNetwork(root, 2) as net: net.hosts ...`.
    """

    def __init__(self, root: Path, count: int = 2, *, grace_s: float = GRACE_S) -> None:
        if not 1 <= count <= 250:
            raise ValueError(f"count must be 1..250, got {count}")
        self.root, self.count, self.grace_s = root, count, grace_s
        self.hosts: list[NetnsHost] = []
        self.plan: _Plan | None = None
        self._sshds: list[subprocess.Popen[bytes]] = []
        self._closed = False

    def __enter__(self) -> NetnsNetwork:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> list[NetnsHost]:
        if reason := unavailable_reason():
            raise NetnsUnavailable(reason)
        sweep_stale(self.grace_s)
        atexit.register(self.close)  # the last resort, when a test run ends without teardown
        try:
            self._create_links()
            self._start_sshds()
            self.hosts = self._wait_hosts()
        except BaseException:
            self.close()
            raise
        return self.hosts

    def close(self) -> None:
        """End every process in our namespaces, then remove them, the veths and the bridge."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        errors = _destroy(self.plan, self._sshds, self.grace_s) if self.plan else []
        if errors:
            raise RuntimeError(f"netns teardown incomplete: {'; '.join(errors)}")

    def _create_links(self) -> None:
        tag = secrets.token_hex(3)
        names = range(self.count)
        with _locked():
            subnet = _free_subnet()
            plan = _Plan(
                tag,
                f"fdbr{tag}",
                subnet,
                tuple(f"fdns{tag}-{i}" for i in names),
                tuple(f"fdve{tag}{i}" for i in names),
                (os.getpid(), _start_time(os.getpid())),
                _bridged_frames_filtered(),
            )
            plan.save()
            self.plan = plan  # from here on, close() knows what to undo
            _ip("link", "add", plan.bridge, "type", "bridge")
            _ip("addr", "add", f"{subnet}.1/24", "dev", plan.bridge)
            _ip("link", "set", plan.bridge, "up")
        for i, (ns, veth) in enumerate(zip(plan.netns, plan.veths, strict=True)):
            _ip("netns", "add", ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "master", plan.bridge, "up")
            _ip("-n", ns, "addr", "add", f"{plan.ip(i)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        if plan.iptables:
            _iptables("-I", plan.bridge)

    def _home(self, i: int) -> Path:
        return self.root / f"host{i}"

    def _start_sshds(self) -> None:
        assert self.plan is not None
        self.root.mkdir(parents=True, exist_ok=True)
        _keygen(self.root / "client_key")
        shutil.copy(self.root / "client_key.pub", self.root / "authorized_keys")
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        for i, ns in enumerate(self.plan.netns):
            home = self._home(i)
            home.mkdir()
            _keygen(home / "hostkey")
            config = _sshd_config(home, self.plan.ip(i), self.root / "authorized_keys")
            # nsenter execs sshd in place (the Popen pid is sshd's own) in the namespace's
            # network only: `ip netns exec` would also give it a mount namespace with a fresh
            # /sys, without the cgroup file system a container runtime needs (runc: "no cgroup
            # mount found in mountinfo").
            argv = [NSENTER, f"--net={NETNS_DIR / ns}", SSHD, "-D", "-f", str(config)]
            log = ["-E", str(home / "sshd.log")]
            self._sshds.append(subprocess.Popen([*argv, *log], stdin=subprocess.DEVNULL))

    def _wait_hosts(self) -> list[NetnsHost]:
        plan = self.plan
        assert plan is not None
        waiting = set(range(self.count))

        def all_accept() -> bool:
            for i in sorted(waiting):
                if (rc := self._sshds[i].poll()) is not None:
                    log_file = self._home(i) / "sshd.log"
                    log = log_file.read_text(errors="replace") if log_file.exists() else ""
                    raise RuntimeError(f"sshd in {plan.netns[i]} exited {rc}: {log}")
                if accepts_ssh(22, plan.ip(i)):
                    waiting.discard(i)
            return not waiting

        wait_until(all_accept, START_TIMEOUT_S, f"sshd to accept in {plan.netns}")
        host_pubs = [
            (self._home(i) / "hostkey.pub").read_text().split()[:2] for i in range(self.count)
        ]
        known_hosts = self.root / "known_hosts"
        known_hosts.write_text(
            "".join(f"{plan.ip(i)} {' '.join(pub)}\n" for i, pub in enumerate(host_pubs))
        )
        return [
            NetnsHost(
                *(plan.ip(i), 22, getpass.getuser(), self.root / "client_key", known_hosts),
                *(" ".join(host_pubs[i]), self._home(i), self._sshds[i].pid),
                *(plan.netns[i], _netns_ino(plan.netns[i]) or 0, plan.veths[i]),
            )
            for i in range(self.count)
        ]
