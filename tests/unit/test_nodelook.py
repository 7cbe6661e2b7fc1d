"""The look from /proc (firedup/readiness/nodelook.py) says what probe.sh says, on a real
process tree of this machine: a server in its own session with a child, listening on a port,
answering /health; and a listener that is not ours."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from firedup.logscan import Phase
from firedup.node.base import script_argv, script_text
from firedup.node.probe import Probe, parse_probe
from firedup.readiness import nodefacts, nodelook
from firedup.readiness.nodefacts import Run
from firedup.readiness.nodeside import Looker
from tests.conftest import free_port, wait_until

SERVER = """
import http.server, subprocess, sys
subprocess.Popen(["sleep", "60"])  # a child in the session, as an engine's workers
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, int, subprocess.Popen[bytes]]]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], start_new_session=True)
    (tmp_path / "pid").write_text(str(proc.pid))
    stat = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    (tmp_path / "identity").write_text(f"{proc.pid} {stat[19]} {proc.pid}\n")
    (tmp_path / "server.log").write_bytes(b"x" * 123)

    def up() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_until(up, 10, "the test server to listen")
    yield tmp_path, port, proc
    os.killpg(proc.pid, signal.SIGKILL)  # its own group: the server and its child, by id
    proc.wait(10)


def both(rundir: Path, port: int, url: str) -> tuple[Probe, Probe]:
    argv = script_argv("probe", str(rundir), str(port), "0", "0", *([url] if url else []))
    shell = parse_probe(subprocess.run(argv, capture_output=True, check=True).stdout)
    text = nodelook.look(str(rundir), port, url)
    assert text is not None
    return shell, parse_probe(text.encode())


def test_the_look_from_proc_is_probe_sh(served: tuple[Path, int, subprocess.Popen[bytes]]) -> None:
    rundir, port, proc = served
    wait_until(lambda: len(nodelook.members(proc.pid)) >= 2, 10, "the child to start")
    # A leader younger than the tick of /proc/uptime can read -1 cs old: let it age first.
    wait_until(lambda: both(rundir, port, "")[0].leader_age_s, 10, "the leader to age")
    shell, mine = both(rundir, port, f"http://127.0.0.1:{port}/health")
    assert mine.procs == shell.procs and len(mine.procs) >= 2
    assert mine.listening_ours and shell.listening_ours
    assert [lst.pids for lst in mine.listeners] == [lst.pids for lst in shell.listeners]
    assert mine.health == shell.health == 200
    assert mine.log_size == shell.log_size == 123
    assert mine.pid == shell.pid == proc.pid
    assert shell.leader_age_s is not None, shell
    assert mine.leader_age_s is not None, mine
    assert abs(mine.leader_age_s - shell.leader_age_s) < 0.5


def test_a_listener_of_another_session_is_foreign(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as other:
        port = other.getsockname()[1]
        sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
        try:
            (tmp_path / "pid").write_text(str(sleeper.pid))
            shell, mine = both(tmp_path, port, "")
        finally:
            sleeper.kill()
            sleeper.wait()
    assert not mine.listening_ours and not shell.listening_ours
    assert [lst.pids for lst in mine.foreign_listeners] == [
        lst.pids for lst in shell.foreign_listeners
    ]
    assert mine.health is None and mine.log_size is None


def test_a_release_without_the_cheap_liveness_check_is_asked_health_instead(
    served: tuple[Path, int, subprocess.Popen[bytes]],
) -> None:
    """SGLang 0.4.0 has no /server_info (a 404): the wait's look at the ready line and the
    status look ask /health then, and the wait keeps to /health from there on."""
    rundir, port, _ = served
    base = f"http://127.0.0.1:{port}"
    spec = {"script": script_text("probe"), "args": [str(rundir), str(port)], "inproc": True}
    looker = Looker({**spec, "health_url": base + "/health", "live_url": base + "/server_info"})
    assert "\nhealth=200\n" in "\n" + looker.look(Phase.READY, 0.0)
    assert looker.live_url == "" and looker.healthy_at_ready
    run = Run("/nowhere", f"meta={json.dumps({'run_id': 'r', 'port': port, 'engine': 'sglang'})}")
    run.rundir = str(rundir)
    looked = nodefacts._look(run, {"sglang": "/server_info"})
    assert looked is not None and parse_probe(base64.b64decode(looked)).health == 200
