"""The wait's look (firedup/node/sh/probe.sh) taken in the node-side python itself, from /proc:
no fork of bash, ps, awk, ss, base64, stat or curl (a dozen processes, ~25 ms of node CPU a
look, most of what a wait cost the node). Its output is probe.sh's, field for field, so one
parser reads both (firedup.node.probe.parse_probe). Where /proc cannot answer (no
/proc/net/tcp), None: the caller runs probe.sh. Stdlib only, Python 3.8.
"""

from __future__ import annotations

import base64
import os
import time
from typing import Any

HEALTH_TIMEOUT_S = 3.0
LISTEN = "0A"


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def stat_fields(pid: int) -> list[str]:
    text = _read(f"/proc/{pid}/stat")
    return text.rsplit(")", 1)[1].split() if ")" in text else []


def members(sid: int) -> list[int]:
    """Live (non-zombie) processes of session `sid`, as `ps -s SID` lists them."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = stat_fields(int(name))
            if len(fields) > 3 and fields[3] == str(sid) and fields[0] not in ("Z", "X"):
                out.append(int(name))
    return sorted(out)


def _address(hex_addr: str) -> str:
    ip_hex, port_hex = hex_addr.split(":")
    raw = bytes.fromhex(ip_hex)
    if len(raw) == 4:
        return f"{'.'.join(str(b) for b in raw[::-1])}:{int(port_hex, 16)}"
    words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]  # each 32-bit word is host order
    ip = b"".join(words).hex()
    groups = ":".join(ip[i : i + 4].lstrip("0") or "0" for i in range(0, 32, 4))
    return f"[{groups}]:{int(port_hex, 16)}"


def listeners(port: int) -> list[tuple[str, str]] | None:
    """(local address, socket inode) of every TCP socket in LISTEN on `port`; None when the
    kernel's tables cannot be read."""
    found, readable = [], False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        text = _read(table)
        readable = readable or bool(text)
        for line in text.splitlines()[1:]:
            cols = line.split()
            if len(cols) > 9 and cols[3] == LISTEN and cols[1].endswith(f":{port:04X}"):
                found.append((_address(cols[1]), cols[9]))
    return found if readable else None


def _holders(pids: list[int], inodes: set[str]) -> dict[str, list[int]]:
    held: dict[str, list[int]] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                held.setdefault(link[8:-1], []).append(pid)
    return held


def ss_lines(port: int, procs: list[int]) -> str | None:
    """`ss -Htlnp "sport = :PORT"` as far as firedup reads it: local address and holder pids.
    Our session's fds first; every process's only for a socket none of ours holds."""
    found = listeners(port)
    if found is None:
        return None
    inodes = {inode for _, inode in found}
    held = _holders(procs, inodes)
    if inodes - set(held):
        everyone = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        held = _holders(everyone, inodes)
    lines = []
    for local, inode in found:
        users = ",".join(f'("?",pid={pid},fd=0)' for pid in held.get(inode, []))
        lines.append(f"LISTEN 0 0 {local} *:*" + (f" users:({users})" if users else ""))
    return "".join(line + "\n" for line in lines)


def http_get(url: str, timeout_s: float, max_bytes: int = 0) -> tuple[int, bytes]:
    """GET `url` (http://HOST:PORT/PATH, as firedup builds it) from here: its status code and
    at most `max_bytes` of its body. http.client, not urllib.request: a third of the import
    (urllib.request pulls in tempfile, bz2, hashlib and email), no proxy to bypass. Raises
    OSError (http.client's errors included) when nothing answered."""
    import http.client

    rest = url.split("://", 1)[-1]
    where, _, path = rest.partition("/")
    host, _, port = where.rpartition(":")
    conn = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=timeout_s)
    try:
        conn.request("GET", "/" + path)
        reply = conn.getresponse()
        return reply.status, reply.read(max_bytes) if max_bytes else b""
    except http.client.HTTPException as exc:
        raise OSError(str(exc)) from exc
    finally:
        conn.close()


def health(url: str) -> str:
    try:
        return str(http_get(url, HEALTH_TIMEOUT_S)[0])
    except Exception:  # no answer, whatever the reason: probe.sh's 000
        return "000"


def _identity_ok(rundir: str, pid: int) -> bool:
    """The pid is still the server start.sh recorded (start time, /proc/PID/stat field 22)."""
    recorded = _read(os.path.join(rundir, "identity")).split()
    fields = stat_fields(pid)
    return len(recorded) < 2 or len(fields) < 20 or fields[19] == recorded[1]


def _leader_age_cs(rundir: str, pid: int) -> int | None:
    """The leader's age on the node's own clock, in hundredths (probe.sh's leader_age_cs:
    /proc/uptime against the start time in ticks, USER_HZ 100), when it is still the run's."""
    recorded = _read(os.path.join(rundir, "identity")).split()
    fields = stat_fields(pid)
    uptime = _read("/proc/uptime").split()
    if len(recorded) < 2 or len(fields) < 20 or fields[19] != recorded[1] or not uptime:
        return None
    return int(uptime[0].replace(".", "")) - int(fields[19])


def look(rundir: str, port: int, health_url: str = "") -> str | None:
    """probe.sh RUNDIR PORT 0 0 [HEALTH_URL], or None when /proc cannot tell the port."""
    pid_text = _read(os.path.join(rundir, "pid")).strip()
    pid = int(pid_text) if pid_text.isdigit() else None
    # After a crash the pid may be another process's: then the session is not the run. A dead
    # leader's session may live on in its children: they are the run's, as ps -s says.
    procs = members(pid) if pid is not None and _identity_ok(rundir, pid) else []
    ss = ss_lines(port, procs)
    if ss is None:
        return None
    out: list[Any] = [f"now={time.time()}", f"pid={pid_text}"]
    age = _leader_age_cs(rundir, pid) if pid is not None else None
    out += [f"leader_age_cs={age}"] if age is not None else []
    out += [
        f"procs={','.join(str(p) for p in procs)}",
        f"ss={base64.b64encode(ss.encode()).decode('ascii')}",
    ]
    try:
        info = os.stat(os.path.join(rundir, "server.log"))
        out.append(f"log_size={info.st_size}")
    except OSError:
        pass
    if health_url:
        out.append(f"health={health(health_url)}")
    return "".join(f"{line}\n" for line in out)
