"""The story, replayed over real SSH on the simulated node: v3 and v4 crash the way they did,
v5 (the override and the patch) comes up. And the literal demo host, as the README runs it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import (
    REPO,
    Sshd,
    fab,
    free_port,
    session_members,
    stop_runs,
    story_deployments,
    story_hosts,
)

pytestmark = pytest.mark.ssh


@pytest.fixture
def story(sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]) -> Iterator[Path]:
    """Three hosts on one node (same workdir and port), one per launch of the story."""
    deployments = story_deployments(free_port())
    inv = write_inventory(story_hosts(sshd, tmp_path, list(deployments)), deployments)
    yield inv
    stop_runs(inv)


def start_and_wait(host: str, inventory: Path) -> subprocess.CompletedProcess[str]:
    """Launch without preflight, as a runbook's single steps do: the crash happens for real."""
    started = fab("start", "--host", host, "--inventory", str(inventory))
    assert started.returncode == 0, started.stderr
    return fab("wait", "--host", host, "--inventory", str(inventory))


def test_the_three_launches(story: Path, tmp_path: Path) -> None:
    v3 = start_and_wait("v3", story)
    assert v3.returncode == 8, v3.stderr
    assert "context_length" in v3.stderr
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in v3.stderr  # the hint says what to do
    assert "Traceback" not in v3.stderr.split("firedup:")[0]

    v4 = start_and_wait("v4", story)
    assert v4.returncode == 8, v4.stderr
    assert "missing_model_hook" in v4.stderr
    assert "set_eagle3_layers_to_capture" in v4.stderr

    v5 = fab("deploy", "--host", "v5", "--inventory", str(story))
    assert v5.returncode == 0, v5.stderr
    assert "kimi-k25-eagle3-hooks" in v5.stderr and "applied" in v5.stderr
    assert "v5: READY" in v5.stdout
    # The draft capture came and went on the way: progress, never a failure.
    assert "draft_cuda_graph" in v5.stderr

    # Without the patch the same launch crashes again: revert it and replay v4's failure.
    status = fab("status", "--host", "v5", "--inventory", str(story))
    assert "ready" in status.stdout
    assert fab("stop", "--host", "v5", "--inventory", str(story)).returncode == 0
    revert = fab("sync-patches", "--host", "v5", "--inventory", str(story), "--revert")
    assert revert.returncode == 0, revert.stderr
    again = start_and_wait("v4", story)
    assert again.returncode == 8 and "missing_model_hook" in again.stderr
    # Every launch kept its own run directory and log.
    assert len(list((tmp_path / "node" / "runs").iterdir())) == 4


def test_the_demo_host_as_the_readme_runs_it() -> None:
    subprocess.run([str(REPO / "scripts" / "demo-node.sh")], check=True)
    try:
        deploy = fab("deploy", "--host", "demo", "--restart")
        assert deploy.returncode == 0, deploy.stderr
        assert "demo: READY" in deploy.stdout
        status = fab("status", "--host", "demo")
        assert "ready" in status.stdout
        pid = int((REPO / ".firedup-demo" / "current" / "pid").read_text())
        assert pid in session_members(pid)
    finally:
        stop = fab("stop", "--host", "demo")
    assert stop.returncode == 0, stop.stderr
    assert session_members(pid) == []
