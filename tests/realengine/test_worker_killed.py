"""A real vLLM Worker SIGKILLed while it loads the model: `fab deploy` reports it within 1 s,
with the phase it died in (the issue's must-show)."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Sshd, session_members, wait_until
from tests.realengine.conftest import (
    RealEngine,
    cpu_host,
    deploy_events,
    holding_vllm_slot,
    real_deployment,
    write_inventory,
)

pytestmark = [pytest.mark.realengine, pytest.mark.ssh]
LOADING_LINE = b"Starting to load model"
REPORT_WITHIN_S = 1.0


# `(Worker pid=9213) INFO ... Starting to load model ...`: the log names the loading process.
LOADING = re.compile(rb"\((?:Vllm)?Worker[\w-]* pid=(\d+)\)[^\n]*Starting to load model")


def _worker(log: bytes, sid: int) -> int | None:
    """The Worker that logged the loading line, if it is a process of the run's session."""
    match = LOADING.search(log)
    if match is None:
        return None
    pid = int(match.group(1))
    return pid if pid in session_members(sid) else None


def _kill_worker_when_loading(workdir: Path, killed: dict[str, Any]) -> None:
    """Follow the run's log on disk; at the first loading line, SIGKILL the Worker."""
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline:
        for log in workdir.glob("runs/*/server.log"):
            text = log.read_bytes()
            pidfile = log.parent / "pid"
            if LOADING_LINE in text and pidfile.exists():
                sid = int(pidfile.read_text())
                worker = _worker(text, sid)
                if worker is not None:
                    os.kill(worker, signal.SIGKILL)
                    killed.update(at=time.time(), pid=worker, sid=sid)
                    return
        time.sleep(0.02)


@dataclass(frozen=True)
class Killed:
    verdict: dict[str, Any]
    exit_code: int
    late_s: float  # from the SIGKILL to the verdict event


@pytest.fixture(scope="module")
def killed_while_loading(
    sshd: Sshd, real_engine: RealEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Killed]:
    with holding_vllm_slot(tmp_path_factory.mktemp("worker-killed")) as root:
        tiny = real_deployment(real_engine.model)
        inventory = write_inventory(
            root, {"cpu": cpu_host(sshd, real_engine, root)}, {"tiny": tiny}
        )
        killed: dict[str, Any] = {}
        killer = threading.Thread(
            target=_kill_worker_when_loading, args=(root / "node", killed), daemon=True
        )
        killer.start()
        deploy, events = deploy_events(inventory)
        killer.join(5)
        assert killed, f"the Worker was never seen loading:\n{deploy.stdout[-2000:]}{deploy.stderr}"
        verdict = next(e for e in events if e["event"] == "verdict")
        late = datetime.fromisoformat(verdict["at"]).timestamp() - killed["at"]
        wait_until(lambda: not session_members(killed["sid"]), 30, "the run's processes to end")
        yield Killed(verdict, deploy.returncode, late)


def test_a_worker_killed_while_loading_fails_the_deploy_in_its_phase(
    killed_while_loading: Killed,
) -> None:
    verdict = killed_while_loading.verdict
    assert killed_while_loading.exit_code == 8, verdict
    assert verdict["outcome"] == "failed", verdict
    assert verdict["phase"] == "loading_weights", verdict


def test_a_worker_killed_while_loading_is_reported_within_a_second(
    killed_while_loading: Killed,
) -> None:
    late = killed_while_loading.late_s
    assert late <= REPORT_WITHIN_S, f"reported {late:.2f} s after the SIGKILL"
