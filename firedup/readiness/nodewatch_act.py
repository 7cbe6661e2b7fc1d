"""What the watch does on the node: take the node's lock, start a new run, write history,
post events. Stdlib, Python 3.8; the node scripts it runs come with its config (the
operator's own versions, like every command firedup runs there).

The lock is the very lock every operator takes (firedup/node/sh/lock_hold.sh): the watch runs
the holder as its child on a pipe, exactly as an operator's channel does, so the lock lives as
long as the watch reads the pipe and ends with it (a killed watch leaves no lock behind).
"""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import socket
import subprocess
import threading
import time
import urllib.request
from datetime import datetime, timezone
from typing import Any

MASK = "***"
POST_TRIES = 3
POST_TIMEOUT_S = 5.0
FLUSH_S = 15.0  # at exit, how long pending events may still take
ENDED_FLUSH_S = 3.0  # when ended by `fab stop`: it waits for this exit


def who() -> str:
    return "watch@" + socket.gethostname()


def bash(script: str, name: str, *args: str, timeout_s: float = 120.0) -> dict[str, str]:
    """Run a node script (`bash -c TEXT firedup-NAME ARG...`) and parse its key=value lines."""
    done = subprocess.run(
        ["bash", "-c", script, "firedup-" + name, *args],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout_s,
    )
    fields = {}
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key not in fields:
            fields[key] = value
    fields["_rc"] = str(done.returncode)
    fields["_err"] = done.stderr.decode("utf-8", "replace").strip()[-300:]
    return fields


class Lock:
    """The node's lock, held by lock_hold.sh on a pipe to this process."""

    def __init__(self, script: str, workdir: str, operation: str, detail: str) -> None:
        owner = {
            "operator": who(),
            "pid": os.getpid(),
            "operation": operation,
            "started_at": time.time(),
            "detail": detail,
        }
        self.proc = subprocess.Popen(
            ["bash", "-c", script, "firedup-lock_hold", workdir, json.dumps(owner), "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        self.held = False
        self.busy = ""
        assert self.proc.stdout is not None
        text = b""
        while True:
            line = self.proc.stdout.readline()
            if not line:
                break
            text += line
            if line.startswith(b"locked pid="):
                self.held = True
                break
        if not self.held:
            self.busy = text.decode("utf-8", "replace").strip()[:300] or "no answer"
            self.proc.wait()
            return
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while self.proc.stdout.read(64):
            pass

    def release(self) -> None:
        if self.held and self.proc.poll() is None:
            self.proc.terminate()  # its trap removes the record while the flock is still ours
        self.proc.wait()
        self.held = False


def new_run_id() -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return "%s-%s" % (stamp, secrets.token_hex(3))


def copy_run(workdir: str, old: str, new: str, secrets_text: str) -> None:
    """The new run's directory: the same launch.sh (rendered at deploy time), its meta.json
    with the new run's id, and the secrets the watch holds in memory (0600, as a deploy
    writes them). The old run's directory is left as it is: the death's evidence."""
    src, dst = os.path.join(workdir, "runs", old), os.path.join(workdir, "runs", new)
    os.makedirs(dst, mode=0o700)
    if secrets_text:
        write_file(os.path.join(dst, "secrets.env"), secrets_text.encode(), 0o600)
    with open(os.path.join(src, "launch.sh"), "rb") as fh:
        write_file(os.path.join(dst, "launch.sh"), fh.read(), 0o700)
    with open(os.path.join(src, "meta.json")) as fh:
        meta = json.load(fh)
    meta.update(run_id=new, started_at=time.time(), started_by=who(), pid=None)
    write_file(os.path.join(dst, "meta.json"), json.dumps(meta, sort_keys=True).encode(), 0o600)


def write_file(path: str, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def write_json(path: str, data: dict[str, Any]) -> None:
    """Atomically: a reader sees the old file or the new one, never half of one."""
    tmp = path + ".tmp"
    write_file(tmp, json.dumps(data, sort_keys=True).encode(), 0o600)
    os.replace(tmp, path)


def history_line(base: dict[str, Any], **fields: Any) -> str:
    """A record in docs/history.md's format: the deploy's own fields, this event's on top."""
    at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    record = dict(base, who=who(), at=at, **fields)
    return json.dumps(record, sort_keys=True, ensure_ascii=False)


class Masker:
    """Every secret value the watch holds becomes *** in whatever it sends or writes."""

    def __init__(self, secrets_text: str, extra: list[str]) -> None:
        values = re.findall(r"^[A-Za-z_][A-Za-z0-9_]*=(.*)$", secrets_text, re.M)
        found = [unquote(v) for v in values] + list(extra)
        self.values = sorted((v for v in found if len(v) >= 4), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, MASK)
        return text


def unquote(value: str) -> str:
    """A value as shlex.quote wrote it: bare, or in single quotes with '"'"' for a quote."""
    if value.startswith("'") and value.endswith("'"):
        return value[1:-1].replace("'\"'\"'", "'")
    return value


class Notifier:
    """One JSON POST per event to a Slack-compatible webhook, from a thread: a slow or dead
    receiver never holds a check up. Each post is tried POST_TRIES times with a backoff."""

    def __init__(self, notify: dict[str, Any] | None, mask: Masker, log: Any) -> None:
        self.url = str((notify or {}).get("webhook") or "")
        self.events = set((notify or {}).get("events") or ())
        self.mask, self.log = mask, log
        self.queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        if self.url:
            self.thread.start()

    def send(self, event: str, text: str, **fields: Any) -> None:
        if not self.url or event not in self.events:
            return
        body = {"event": event, "text": self.mask(text)}
        for key, value in fields.items():
            body[key] = self.mask(value) if isinstance(value, str) else value
        body["at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.queue.put(body)

    def _run(self) -> None:
        while True:
            body = self.queue.get()
            if body is None:
                return
            self._post(body)

    def _post(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        for attempt in range(POST_TRIES):
            try:
                request = urllib.request.Request(
                    self.url, data=data, headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(request, timeout=POST_TIMEOUT_S) as response:
                    if 200 <= int(response.status) < 300:
                        return
            except Exception as exc:  # refused, timed out, an HTTP error: try again
                self.log(
                    "notify: %s event not delivered (try %d): %s"
                    % (body["event"], attempt + 1, self.mask(str(exc))[:200])
                )
            time.sleep(2**attempt)

    def close(self, flush_s: float = FLUSH_S) -> None:
        """Let what is queued go out (within `flush_s`), then stop the thread."""
        if self.url:
            self.queue.put(None)
            self.thread.join(flush_s)
