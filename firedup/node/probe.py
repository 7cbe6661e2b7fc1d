"""Facts about a run in one round trip: a remote command plus a pure parser.

Like pyinfra's facts: `probe_argv` is what runs on the node (firedup/node/sh/probe.sh), and
`parse_probe` turns its output into a `Probe` value; the parser is tested on recorded output.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from firedup.node.base import Node, parse_fields, run_script

MAX_LOG_CHUNK = 4 * 1024 * 1024
PROBE_KEYS = frozenset({"now", "pid", "procs", "ss", "log_size", "log", "health", "leader_age_cs"})
_SS_USER = re.compile(r"pid=(\d+)")


@dataclass(frozen=True)
class Listener:
    """A socket in LISTEN on the probed port, with the pids that hold it (empty if hidden)."""

    local: str
    pids: frozenset[int]


@dataclass(frozen=True)
class Probe:
    node_time: float
    pid: int | None
    procs: frozenset[int]
    listeners: tuple[Listener, ...]
    ss_available: bool
    log_size: int | None
    log_chunk: bytes
    health: int | None = None  # HTTP status of the health endpoint; 0 = no answer; None = not asked
    leader_age_s: float | None = None  # how long the run's leader has run, on the node's clock

    @property
    def alive(self) -> bool:
        """The run's session still has a live (non-zombie) process."""
        return bool(self.procs)

    @property
    def listening_ours(self) -> bool:
        """The port is in LISTEN by a process of our run's session."""
        return any(lst.pids & self.procs for lst in self.listeners)

    @property
    def foreign_listeners(self) -> tuple[Listener, ...]:
        """Listeners on the port that do not belong to our run (stale servers, other users)."""
        return tuple(lst for lst in self.listeners if not lst.pids & self.procs)


class ProbeParseError(ValueError):
    pass


def parse_listeners(ss_output: str) -> tuple[Listener, ...]:
    """Parse `ss -Htlnp` lines.

    Example: `LISTEN 0 5 127.0.0.1:8000 0.0.0.0:* users:(("python3",pid=1,fd=3))`.
    """
    listeners = []
    for line in ss_output.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        pids = frozenset(int(p) for p in _SS_USER.findall(line))
        listeners.append(Listener(local=fields[3], pids=pids))
    return tuple(listeners)


def _b64(value: str, key: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProbeParseError(f"probe field {key!r} is not base64: {exc}") from None


def _int_set(value: str) -> frozenset[int]:
    return frozenset(int(p) for p in value.split(",") if p.strip().isdigit())


def parse_probe(stdout: bytes) -> Probe:
    """Parse probe.sh output. Lines that are not `key=value` (rc-file noise) are ignored."""
    fields = parse_fields(stdout, PROBE_KEYS)
    if "now" not in fields:
        raise ProbeParseError(f"probe output lacks 'now=': {stdout[:200]!r}")
    ss = fields.get("ss", "")
    ss_available = ss != "missing"
    listeners = parse_listeners(_b64(ss, "ss").decode("utf-8", "replace")) if ss_available else ()
    pid = fields.get("pid", "")
    size = fields.get("log_size", "")
    health = fields.get("health")
    return Probe(
        node_time=float(fields["now"]),
        pid=int(pid) if pid.isdigit() else None,
        procs=_int_set(fields.get("procs", "")),
        listeners=listeners,
        ss_available=ss_available,
        log_size=int(size) if size.isdigit() else None,
        log_chunk=_b64(fields.get("log", ""), "log"),
        health=int(health) if health is not None and health.isdigit() else None,
        leader_age_s=int(age) / 100 if (age := fields.get("leader_age_cs", "")).isdigit() else None,
    )


def probe_run(
    node: Node,
    rundir: str,
    port: int,
    offset: int,
    *,
    max_bytes: int = MAX_LOG_CHUNK,
    health_url: str = "",
    timeout_s: float = 30.0,
) -> Probe:
    args = (rundir, str(port), str(offset), str(max_bytes), health_url)
    result = run_script(node, "probe", *args, timeout_s=timeout_s, what="probe")
    return parse_probe(result.stdout)
