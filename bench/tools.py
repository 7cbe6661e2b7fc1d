"""The tools under comparison, each started the way its user would: firedup's core API, the
story's bash loop, and Ansible (ansible-core in its own venv under bench/.venv-ansible)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.rig import Rig, descendants
from tests.conftest import NODE_PYTHON, wait_until

BENCH = Path(__file__).resolve().parent
LOOPS = BENCH / "loops"
ANSIBLE_VENV = BENCH / ".venv-ansible"
ANSIBLE_SPEC = "ansible-core>=2.17,<2.20"  # 2.20+ needs python 3.12 on the controller


def ensure_ansible(log: Any = print) -> Path:
    """ansible-playbook from the bench's own venv, created on first use (not the project's)."""
    exe = ANSIBLE_VENV / "bin" / "ansible-playbook"
    if not exe.exists():
        log(f"installing {ANSIBLE_SPEC} into {ANSIBLE_VENV} (once)")
        subprocess.run([sys.executable, "-m", "venv", str(ANSIBLE_VENV)], check=True)
        pip = [str(ANSIBLE_VENV / "bin" / "pip"), "install", "-q", ANSIBLE_SPEC]
        subprocess.run(pip, check=True)
    return exe


def ansible_version() -> str:
    out = subprocess.run(
        [str(ANSIBLE_VENV / "bin" / "ansible"), "--version"], capture_output=True, text=True
    ).stdout
    return out.splitlines()[0] if out else "?"


class TimedLines:
    """Reads a process's stdout in a thread, stamping each line with the wall clock."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[tuple[float, str]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    def wait(self, timeout_s: float) -> None:
        self.proc.wait(timeout_s)
        self.thread.join(5)

    def first(self, *prefixes: str) -> tuple[float, str] | None:
        for stamp, line in self.lines:
            if line.startswith(prefixes):
                return stamp, line
        return None


@dataclass
class Ansible:
    """ansible-playbook against the rig's sshd, with its state kept under the rig's root."""

    rig: Rig
    exe: Path
    runs: int = 0

    def inventory(self, port: int | None = None) -> Path:
        s = self.rig.sshd
        host = {
            "ansible_host": s.host,
            "ansible_port": port or s.port,
            "ansible_user": s.user,
            "ansible_ssh_private_key_file": str(s.client_key),
            "ansible_python_interpreter": NODE_PYTHON,
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={s.known_hosts} "
            "-o StrictHostKeyChecking=yes",
        }
        path = self.rig.root / f"ansible-inventory-{port or s.port}.yaml"
        path.write_text(yaml.safe_dump({"nodes": {"hosts": {"node": host}}}))
        return path

    def env(self) -> dict[str, str]:
        home = self.rig.root / "ansible-home"
        # A control directory per run: each playbook opens its own connection, as a first run
        # does, instead of riding on the previous run's ControlPersist master.
        self.runs += 1
        return {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "ANSIBLE_HOME": str(home),
            "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
            "ANSIBLE_REMOTE_TEMP": str(self.rig.root / "ansible-remote-tmp"),
            "ANSIBLE_HOST_KEY_CHECKING": "True",
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(home / f"cp{self.runs}"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_DEPRECATION_WARNINGS": "0",
        }

    def start(self, playbook: str, extra: dict[str, Any], port: int | None = None) -> TimedLines:
        argv = [str(self.exe), "-i", str(self.inventory(port)), str(BENCH / "ansible" / playbook)]
        argv += ["-e", yaml.safe_dump(extra, default_flow_style=True).strip()]
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=self.env(),
            cwd=self.rig.root,
        )
        return TimedLines(proc)

    def wait_module_running(self, timeout_s: float = 60) -> None:
        """Until wait_for runs on the node: its startup is then behind it, not in the latency."""

        def running() -> bool:
            for pid in descendants(self.rig.sshd_pid):
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"AnsiballZ_wait_for" in cmdline:
                    return True
            return False

        wait_until(running, timeout_s, "ansible's wait_for to run on the node")


def start_loop(
    rig: Rig, interval_s: float, first_s: float, timeout_s: float, log: str, port: int | None = None
) -> TimedLines:
    argv = [
        str(LOOPS / "story_loop.sh"),
        str(interval_s),
        f"{first_s:.3f}",
        str(int(timeout_s)),
        log,
        *rig.ssh_argv(port),
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=rig.root
    )
    return TimedLines(proc)
