"""What the watch looks at on the node, from /proc and over loopback. Stdlib, Python 3.8.

Each check reads a handful of small files (the run's session from /proc/*/stat, the listening
sockets from /proc/net/tcp*, the session's socket fds) or sends one request: no process is
forked, so a check costs the node milliseconds (bench/watch_cpu.py measures it).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request

LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a node's proxy


def stat_fields(pid: int) -> list | None:
    """/proc/PID/stat after the command name: [0] state, [3] session, [19] start time."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def leader_alive(pid: int, start: str | None) -> bool:
    """The run's leader exists, is no zombie, and is the process start.sh recorded."""
    fields = stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
        return False
    return start is None or fields[19] == start


def session_members(sid: int) -> set[int]:
    """Live (non-zombie) processes of session `sid`: the server and every child it made."""
    members = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = stat_fields(int(name))
        if fields and len(fields) > 3 and fields[3] == str(sid) and fields[0] not in ("Z", "X"):
            members.add(int(name))
    return members


def listening_inodes(port: int) -> set[str]:
    """Socket inodes that LISTEN on `port` (IPv4 and IPv6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == LISTEN and int(cols[1].rsplit(":", 1)[1], 16) == port:
                found.add(cols[9])
    return found


def holds_port(members: set[int], port: int) -> bool:
    """Whether a member of the run's session has a socket listening on `port` open."""
    inodes = listening_inodes(port)
    if not inodes:
        return False
    wanted = set("socket:[%s]" % inode for inode in inodes)
    for pid in members:
        base = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(base)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(base + "/" + fd) in wanted:
                    return True
            except OSError:
                continue
    return False


def health(url: str, timeout_s: float) -> int:
    """/health's status code from the node; 0 when nothing answered in time."""
    try:
        with _OPENER.open(url, timeout=timeout_s) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except Exception:  # refused, reset, timed out: no answer
        return 0


def generate(base_url: str, model: str, timeout_s: float) -> tuple[bool, float, str]:
    """One real completion of one token: (ok, milliseconds, what went wrong)."""
    body = {"prompt": "Hello", "max_tokens": 1, "temperature": 0}
    if model:
        body["model"] = model
    request = urllib.request.Request(
        base_url + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    began = time.monotonic()
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            reply = json.loads(response.read() or b"{}")
        ok = bool(reply.get("choices"))
        return ok, (time.monotonic() - began) * 1000, "" if ok else "no choices in the reply"
    except Exception as exc:  # an HTTP error, a timeout, a reset: the generation failed
        return False, (time.monotonic() - began) * 1000, str(exc)[:200]


def read_identity(path: str) -> tuple[int | None, str | None]:
    """`PID STARTTIME SID` as start.sh writes it."""
    try:
        with open(path) as fh:
            parts = fh.read().split()
    except OSError:
        return None, None
    pid = int(parts[0]) if parts and parts[0].isdigit() else None
    return pid, parts[1] if len(parts) > 1 else None


def check_map(members: int, lost: int, port: bool, code: int, fails: int) -> dict[str, object]:
    return {
        "procs": members,
        "lost_procs": lost,
        "port": port,
        "health": code,
        "health_fails": fails,
    }
