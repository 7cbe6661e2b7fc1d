"""SimRun: one launch of a scenario of the simulated node, in its own session.

It starts a stand-in engine as its own process group with a log file, a private GPU-state
directory and an events file, and stops it by that process group only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from scenarios import Scenario

SIM = Path(__file__).resolve().parent
REPO = SIM.parent
# The node's python: a plain interpreter, as on a real node (the sim needs only the stdlib).
NODE_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or sys.executable
PATCH = REPO / "patches" / "sglang" / "kimi-k25-eagle3-hooks" / "kimi-k25-eagle3-hooks.diff"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def patched_python(workdir: Path) -> Path:
    """A copy of sim/python with the Kimi-K2.5 EAGLE-3 hooks patch applied (as on a node)."""
    target = workdir / "python-patched"
    if not target.exists():
        shutil.copytree(SIM / "python", target, ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(
            ["patch", "-p1", "--quiet", "--forward", "-i", str(PATCH)], cwd=target, check=True
        )
    return target


def launch_argv(scenario: Scenario, port: int) -> list[str]:
    if scenario.engine == "sglang":
        return [NODE_PYTHON, "-m", "sglang.launch_server", *scenario.args, "--port", str(port)]
    vllm = str(SIM / "bin" / "vllm")
    return [NODE_PYTHON, vllm, "serve", *scenario.args, "--port", str(port)]


class SimRun:
    """One launch of a scenario in its own session; stop() kills only that process group."""

    def __init__(self, scenario: Scenario, workdir: Path, speed: float) -> None:
        self.scenario = scenario
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log_path = workdir / scenario.fixture_name
        self.events_path = workdir / "events.jsonl"
        self.blocker: socket.socket | None = None
        pythonpath = patched_python(workdir) if scenario.patched else SIM / "python"
        # A node's python writes .pyc files (stale ones are part of the story): let it.
        inherited = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("FIREDUP_SIM_") and k != "PYTHONDONTWRITEBYTECODE"
        }
        self.env = {
            **inherited,
            "PYTHONPATH": str(pythonpath),
            "PATH": f"{SIM / 'bin'}:{os.environ.get('PATH', '')}",
            "FIREDUP_SIM_SPEED": str(speed),
            "FIREDUP_SIM_STATE": str(workdir / "gpu-state"),
            "FIREDUP_SIM_EVENTS": str(self.events_path),
            **scenario.env,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> SimRun:
        if self.scenario.busy_port:
            self.blocker = socket.socket()
            self.blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.blocker.bind(("0.0.0.0", self.port))
            self.blocker.listen()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                launch_argv(self.scenario, self.port),
                cwd=REPO,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log(self) -> str:
        """The log as written: tqdm's '\\r' updates are kept (read_text would turn them to \\n)."""
        return self.log_path.read_bytes().decode(errors="replace")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def http_status(self, path: str, timeout_s: float = 2.0) -> int | None:
        """HTTP status of GET path, or None when nothing accepts connections."""
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as res:
                return int(res.status)
        except urllib.error.HTTPError as err:
            return int(err.code)
        except (OSError, TimeoutError):
            return None

    def post_json(self, path: str, payload: dict) -> dict:
        url = f"http://127.0.0.1:{self.port}{path}"
        data = json.dumps(payload).encode()
        req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as res:
            return json.loads(res.read())

    def wait_for(self, predicate, timeout_s: float, poll_s: float = 0.05) -> bool:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(poll_s)
        return bool(predicate())

    def wait_text(self, text: str, timeout_s: float) -> bool:
        return self.wait_for(lambda: text in self.log(), timeout_s)

    def wait_exit(self, timeout_s: float) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def wait_silence(self, quiet_s: float, timeout_s: float) -> bool:
        """True once the log has not grown for quiet_s seconds (the process may be alive)."""
        deadline = time.monotonic() + timeout_s
        size, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            now_size = self.log_path.stat().st_size
            if now_size != size:
                size, since = now_size, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return True
            time.sleep(0.05)
        return False

    def wait_hang(self, quiet_s: float, timeout_s: float) -> bool:
        """A hang: the scenario's texts are out, then the log stays still for quiet_s."""
        deadline = time.monotonic() + timeout_s
        for text in self.scenario.texts:
            if not self.wait_text(text, max(0.0, deadline - time.monotonic())):
                return False
        return self.wait_silence(quiet_s, max(0.0, deadline - time.monotonic()))

    def events(self) -> list[dict]:
        if not self.events_path.exists():
            return []
        return [json.loads(line) for line in self.events_path.read_text().splitlines()]

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM our process group, then SIGKILL it after grace_s."""
        if self.blocker is not None:
            self.blocker.close()
        if self.proc is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)
            if self.wait_exit(grace_s) is not None and not _group_alive(self.pid):
                break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
