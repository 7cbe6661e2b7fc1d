"""After ready with the real vLLM (issue 25): its EngineCore killed is noticed and restarted.

vLLM's API server process outlives a dead EngineCore for a moment (it logs "Engine core proc
EngineCore_DP0 died unexpectedly, shutting down client." and shuts down): the watch sees the
run die or lose its health, reads why, and starts the same launch.sh again in a new run.
Two real starts (about a minute each on 2 cores), under the machine's one vLLM lock.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

# The tier's fixtures (h21-tier, issue 21) come with tests/realengine/conftest.py: until that
# is merged this module has nothing to run on.
tier = pytest.importorskip("tests.realengine.conftest", reason="the real-engine tier's fixtures")

from firedup.readiness.keep_policy import deterministic  # noqa: E402
from tests.conftest import Sshd, fab, session_members, wait_until  # noqa: E402

RealEngine = tier.RealEngine
cpu_host, real_deployment, write_inventory = (
    tier.cpu_host,
    tier.real_deployment,
    tier.write_inventory,
)

pytestmark = [pytest.mark.ssh, pytest.mark.realengine]
START_S = 400


def _view(workdir: Path) -> dict[str, Any]:
    try:
        return json.loads((workdir / "current" / "watch.json").read_text())
    except (OSError, ValueError):
        return {}


def _engine_core(server: int) -> int:
    """The EngineCore process of the run's session (vLLM names it in its process title)."""
    for pid in session_members(server):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            comm = Path(f"/proc/{pid}/comm").read_text()
        except OSError:
            continue
        if b"EngineCore" in title or "EngineCore" in comm:
            return pid
    raise AssertionError(f"no EngineCore among {session_members(server)}")


def test_a_killed_engine_core_is_noticed_and_restarted(
    sshd: Sshd, real_engine: RealEngine, vllm_slot: Path
) -> None:
    root = vllm_slot
    workdir = root / "node"
    deployment = real_deployment(
        real_engine.model,
        restart={"on": "failure", "max": 1, "backoff_s": 1},
        watch={"every_s": 2, "health_fails": 2},
    )
    inv = write_inventory(root, {"cpu": cpu_host(sshd, real_engine, root)}, {"tiny": deployment})
    args = ("--host", "cpu", "--inventory", str(inv))
    try:
        done = fab("deploy", *args, timeout_s=START_S)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        first = os.path.realpath(workdir / "current")
        server = int((workdir / "current" / "pid").read_text())
        wait_until(lambda: _view(workdir).get("state") == "watching", 30, "the watch")
        os.kill(_engine_core(server), signal.SIGKILL)
        killed = time.monotonic()
        view = wait_until(
            lambda: (
                os.path.realpath(workdir / "current") != first
                and _view(workdir).get("state") == "watching"
                and _view(workdir)
            ),
            START_S,
            "the restarted run to be ready",
        )
        restart = view["restarts"][0]
        assert restart["from_run"] == os.path.basename(first)
        assert not deterministic(restart["reason"], True)
        port = deployment["port"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
            assert answer.status == 200
        print(f"noticed and ready again {time.monotonic() - killed:.0f}s after the kill; "
              f"reason {restart['reason']}")  # fmt: skip
        history = fab("history", *args)
        assert restart["reason"] in history.stdout and "restart" in history.stdout
    finally:
        stop = fab("stop", *args, timeout_s=120)
        assert stop.returncode == 0, stop.stdout + stop.stderr
    assert not (workdir / "watch" / "identity").exists()
