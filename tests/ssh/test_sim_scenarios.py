"""The simulated node's scenarios driven through firedup over a real sshd (issue 3): what
firedup sees of each engine, version and fault that test_readiness and test_story do not
already cover."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from firedup.errors import ForeignListenerError, NotReadyError, ServerCrashedError
from firedup.logscan import Phase
from firedup.ops.status import RunState, host_status
from tests.conftest import SIM_MODELS, session_members, sim_deployment, wait_until
from tests.ssh.test_readiness import Node
from tests.ssh.test_readiness import make_node as make_node  # the fixture

pytestmark = pytest.mark.ssh

KIMI_EAGLE3: dict[str, Any] = {
    "model": str(SIM_MODELS / "kimi-k25"),
    "tp": 8,
    "trust_remote_code": True,
    "speculative": {
        "algorithm": "EAGLE3",
        "draft_model": str(SIM_MODELS / "kimi-k25-eagle3"),
        "num_steps": 3,
    },
}


def vllm(**extra: Any) -> dict[str, Any]:
    return sim_deployment(engine="vllm", **extra)


@pytest.mark.parametrize(
    ("deployment", "env"),
    [
        (vllm(), {}),
        (vllm(**KIMI_EAGLE3), {}),
        (
            sim_deployment(**KIMI_EAGLE3, draft_context="extend"),
            {"FIREDUP_SIM_SGLANG_VERSION": "0.5.10"},
        ),
        (
            sim_deployment(**KIMI_EAGLE3, draft_context="extend"),
            {"FIREDUP_SIM_SGLANG_VERSION": "0.5.23"},
        ),
    ],
    ids=["vllm-tiny", "vllm-kimi-eagle3", "sglang-0.5.10-unpatched", "sglang-0.5.23-dialect"],
)
def test_ready_scenarios(
    make_node: Callable[..., Node], deployment: dict[str, Any], env: dict[str, str]
) -> None:
    node = make_node(deployment, **env)
    run = node.start()
    status, _ = node.wait(run)
    assert status.ready and status.scan.phase is Phase.READY
    assert status.signals.health == 200
    members = session_members(int(run.pid or 0))
    assert len(members) >= 2  # the launcher and its engine / rank processes
    log = (node.workdir / "runs" / run.run_id / "server.log").read_text()
    if deployment["engine"] == "vllm":
        # Ready without the line vLLM never prints (vllm#15915): its last startup line counts.
        assert "Uvicorn running on" not in log and "Application startup complete." in log
    else:
        assert "The server is fired up and ready to roll!" in log
    if "speculative" in deployment and deployment["engine"] == "sglang":
        assert "Capture draft" in log  # both capture dialects name the draft's graphs


def test_vllm_busy_port_fails_at_once(make_node: Callable[..., Node]) -> None:
    deployment = vllm()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", deployment["port"]))
        holder.listen()
        node = make_node(deployment)
        run = node.start()
        started = time.monotonic()
        with pytest.raises((ForeignListenerError, ServerCrashedError)) as err:
            node.wait(run)
        assert time.monotonic() - started < 10
    assert "port_in_use" in str(err.value) or "held by another process" in str(err.value)


@pytest.mark.parametrize(
    ("deployment", "env", "reason"),
    [
        (vllm(context_length=4096), {}, "context_length"),
        (sim_deployment(model=str(SIM_MODELS / "no-such-model")), {}, "model_not_found"),
        (
            sim_deployment(tp=2),
            {"FIREDUP_SIM_FAULT": "rank_killed", "FIREDUP_SIM_SGLANG_VERSION": "0.5.10"},
            "killed",
        ),
    ],
    ids=["vllm-max-model-len", "sglang-missing-model", "sglang-0.5.10-rank-killed"],
)
def test_crash_scenarios(
    make_node: Callable[..., Node], deployment: dict[str, Any], env: dict[str, str], reason: str
) -> None:
    node = make_node(deployment, **env)
    run = node.start()
    with pytest.raises(ServerCrashedError) as err:
        node.wait(run)
    assert f": {reason}" in str(err.value) or reason in str(err.value), str(err.value)
    wait_until(lambda: session_members(int(run.pid or 0)) == [], 10, "the tree to be gone")


def test_rank_killed_on_0_5_9_hangs_silently_and_is_not_ready(
    make_node: Callable[..., Node],
) -> None:
    node = make_node(sim_deployment(tp=2), FIREDUP_SIM_FAULT="rank_killed")
    run = node.start()
    with pytest.raises(NotReadyError) as err:
        node.wait(run, timeout_s=5, stall_after_s=1)
    assert "still running" in str(err.value)
    assert run.pid in session_members(int(run.pid or 0))  # the launcher hangs, alive


def test_crash_after_ready_shows_in_status(make_node: Callable[..., Node]) -> None:
    node = make_node(sim_deployment(tp=2), FIREDUP_SIM_FAULT="crash_after_ready")
    status, _ = node.wait(node.start())
    assert status.ready
    final = wait_until(
        # `unhealthy` may be seen on the way down (ready in the log, no longer answering).
        lambda: (
            (s := host_status(node.node, node.spec)).state
            not in {RunState.READY, RunState.UNHEALTHY}
            and s
        ),
        30,
        "the crash after ready",
    )
    assert final.state in {RunState.FAILED, RunState.EXITED}
    assert final.scan is not None and final.scan.reason is not None
