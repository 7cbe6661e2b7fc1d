"""Ready means it can serve: a real vLLM that passes the four signals and dies on its first
request (the tiny model with head_dim 16 on the CPU backend) is not called READY when the
deployment asks for the readiness generation (`ready_request: true`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Sshd
from tests.realengine.conftest import (
    RealEngine,
    cpu_host,
    deploy_events,
    real_deployment,
    write_inventory,
)

pytestmark = [pytest.mark.realengine, pytest.mark.ssh]


def test_a_server_that_fails_its_first_generation_is_not_ready(
    sshd: Sshd, real_engine: RealEngine, vllm_slot: Path
) -> None:
    tiny = real_deployment(real_engine.model_hd16, ready_request=True)
    inventory = write_inventory(
        vllm_slot, {"cpu": cpu_host(sshd, real_engine, vllm_slot)}, {"tiny": tiny}
    )
    deploy, events = deploy_events(inventory)
    verdict = next(e for e in events if e["event"] == "verdict")
    signals = [e for e in events if e["event"] == "signals"]
    assert signals and signals[-1]["health"] == 200, "the four signals agreed first"
    assert deploy.returncode == 8, (deploy.stdout[-2000:], deploy.stderr)
    assert verdict["outcome"] == "failed", verdict
    assert "first generation failed" in verdict["message"], verdict
    assert "head_dim=16" in "\n".join(verdict["excerpt"]) + verdict["message"], verdict
