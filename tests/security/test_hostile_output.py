"""Issue 28 §2: other users of the node never write to the operator's terminal.

Over a real sshd, another account (`fdother`) runs an "engine" process whose command line is
escape sequences (leftovers) and a listener whose process name is (the port check, as root);
the server's log is full of them too (clear screen, window title, OSC 52 clipboard, a C1 CSI,
rich markup). No such byte reaches the operator from preflight, plan, deploy (plain and in a
real terminal), wait --follow and its "last lines", status, logs (without --raw), history or
explain-log: each shows the sequences as visible text. `fab logs --raw` still gives the bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import FAB, session_members, wait_until
from tests.reliability.helpers import Host
from tests.security.conftest import as_other
from tests.ssh.test_display import Tmux

pytestmark = [pytest.mark.ssh]

# comm holds 15 bytes: a title change and a screen clear fit.
NAME = "\x1b]0;pwned\x07\x1b[2J"
PAYLOAD = "\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07\x9b31m\u202e[bold]b[/bold]"
HOSTILE_BYTES = (b"\x1b", b"\x9b", b"\xc2\x9b", b"\x07")
VISIBLE = "\\x1b]0;pwned\\x07"  # how the operator sees it
LISTENER = (
    "import ctypes, socket, sys, time\n"
    "ctypes.CDLL(None).prctl(15, sys.argv[2].encode(), 0, 0, 0)\n"  # PR_SET_NAME: comm
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "s.listen()\n"
    "time.sleep(600)\n"
)


def inert(data: str | bytes, what: str) -> None:
    raw = data.encode() if isinstance(data, str) else data
    found = [b for b in HOSTILE_BYTES if b in raw]
    assert not found, f"{what}: {found} reached the terminal:\n{raw[:3000]!r}"


class Others:
    """Processes of the other account, each in its own group, ended by that group."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *argv: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(as_other(*argv), start_new_session=True)
        self.procs.append(proc)
        return proc

    def end(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def end_all(self) -> None:
        for proc in self.procs:
            self.end(proc)


@pytest.fixture
def others(other_user: str) -> Iterator[Others]:
    started = Others()
    yield started
    started.end_all()


@pytest.fixture
def listener_src(other_user: str) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="firedup-hostile-", dir="/tmp"))
    folder.chmod(0o755)
    src = folder / "listener.py"
    src.write_text(LISTENER)
    src.chmod(0o644)
    yield src
    shutil.rmtree(folder, ignore_errors=True)


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _leftover(others: Others) -> None:
    """An 'engine' of the other user, named with escape sequences (exec -a)."""
    others.start("bash", "-c", 'exec -a "$0" sleep 600', f"sglang::{PAYLOAD}")


def _in_tmux(tmp_path: Path, name: str, argv: list[str]) -> tuple[str, bytes, str]:
    """Run argv in a real terminal: (the screen, every byte written to it, the pane title)."""
    root = tmp_path / name
    root.mkdir()
    tmux = Tmux(root)
    raw = root / "raw"
    try:
        tmux.start(200, argv)
        tmux.tmux("pipe-pane", "-o", "-t", "t", f"cat >> {raw}")
        wait_until(tmux.dead, 120, f"{name} to end")
        time.sleep(0.3)  # the pipe drains what the pane already received
        title = tmux.tmux("display-message", "-p", "-t", "t", "#{pane_title}").strip()
        return tmux.screen(), raw.read_bytes() if raw.exists() else b"", title
    finally:
        tmux.kill()


def test_process_names_reach_the_operator_inert(
    make_host: Callable[..., Host], others: Others, listener_src: Path, tmp_path: Path
) -> None:
    host = make_host()
    port = host.deployment.port
    _leftover(others)
    others.start("/usr/bin/python3", str(listener_src), str(port), NAME)
    wait_until(lambda: _accepts(port), 10, "the other user's listener")
    preflight = host.cli("preflight")
    out = preflight.stdout + preflight.stderr
    assert preflight.returncode == 6, out
    inert(out, "preflight")
    # (the leftovers line lists six processes: on a busy machine ours may be past them)
    assert f"by {VISIBLE}\\x1b[2J pid" in out, out  # the port's holder, visible
    plan = host.cli("plan")
    inert(plan.stdout + plan.stderr, "plan")
    assert VISIBLE in plan.stdout + plan.stderr
    # The same in a real terminal: the title is untouched and the text is on screen.
    argv = host.cli_argv("preflight")
    screen, raw, title = _in_tmux(tmp_path, "preflight", argv)
    assert "pwned" not in title, title
    assert b"\x1b]" not in raw and b"\x1b[2J" not in raw and b"\x9b" not in raw, raw[:2000]
    assert VISIBLE in screen, screen


def _hostile_requests(port: int, count: int) -> None:
    """Requests whose path is escape sequences: the server's access log writes the request
    line as it came (uvicorn logs the decoded path), so anyone who reaches the port writes
    to the log."""
    for _ in range(count):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            request = b"GET /" + PAYLOAD.encode() + b" HTTP/1.1\r\nHost: x\r\n"
            conn.sendall(request + b"Connection: close\r\n\r\n")
            while conn.recv(4096):  # all of the answer: a close with unread data is a reset
                pass


def _requests_once_listening(port: int, stop: threading.Event) -> threading.Thread:
    def work() -> None:
        while not stop.is_set():
            if _accepts(port):
                _hostile_requests(port, 20)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_log_lines_and_history_reach_the_operator_inert(
    make_host: Callable[..., Host], others: Others, tmp_path: Path
) -> None:
    host = make_host(FIREDUP_SIM_SPEED="2")
    _leftover(others)  # a warning during deploy: printed in the live display
    stop = threading.Event()
    appender = _requests_once_listening(host.deployment.port, stop)
    screen, raw, title = _in_tmux(tmp_path, "deploy", host.cli_argv("deploy"))
    stop.set()
    appender.join()
    assert "READY" in screen, screen
    assert "pwned" not in title, title
    assert b"\x1b]" not in raw and b"\x1b[2J" not in raw and b"\x9b" not in raw, raw[:2000]
    run_id = host.current()
    assert run_id is not None
    log = host.workdir / "runs" / run_id / "server.log"
    _hostile_requests(host.deployment.port, 5)
    assert b"\x1b]0;pwned\x07" in log.read_bytes()

    for args in (("status",), ("status", "--json"), ("logs",), ("logs", "--lines", "5")):
        result = host.cli(*args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        inert(result.stdout + result.stderr, " ".join(args))
    assert VISIBLE in host.cli("logs").stdout
    assert "\x1b]0;pwned\x07" in host.cli("logs", "--raw").stdout  # the explicit way to the bytes

    # A history record written on the node with escape sequences in its fields.
    history = host.workdir / "history.jsonl"
    record = json.loads(history.read_text().splitlines()[-1])
    record.update(who=NAME, detail=PAYLOAD, reason=PAYLOAD, run_id=f"r{NAME}")
    with history.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    for args in (("history",), ("history", "--json")):
        result = host.cli(*args)
        assert result.returncode == 0, result.stdout + result.stderr
        inert(result.stdout + result.stderr, " ".join(args))
    assert "\\x1b]0;pwned" in host.cli("history").stdout

    # wait --follow prints what the log gets, then the server dies: its last lines.
    waiting = subprocess.Popen(
        host.cli_argv("wait", "--follow", "--timeout", "60"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(1.0)
    _hostile_requests(host.deployment.port, 20)
    for pid in session_members(host.runs()[run_id] or 0):
        os.kill(pid, signal.SIGKILL)
    out, err = waiting.communicate(timeout=60)
    inert(out + err, "wait --follow")
    follow = subprocess.Popen(host.cli_argv("logs", "--follow"), stdout=subprocess.PIPE)
    follow_out, _ = follow.communicate(timeout=60)  # the server is gone: it ends
    inert(follow_out, "logs --follow")
    assert VISIBLE.encode() in follow_out
    status = host.cli("status")
    inert(status.stdout + status.stderr, "status after the crash")

    local = tmp_path / "server.log"
    shutil.copy(log, local)
    with local.open("ab") as fh:  # a crash whose "last lines" are hostile
        fh.write(f"{PAYLOAD}\n".encode() * 12)
    for args in ((str(local),), (str(local), "--json")):
        result = subprocess.run(
            [FAB, "explain-log", *args], capture_output=True, text=True, timeout=60
        )
        inert(result.stdout + result.stderr, "explain-log")
