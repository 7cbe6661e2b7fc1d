"""Preflight, the dry run, quoting on the node, and secrets (issue 6), over a real sshd."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    SIM_MODELS,
    Sshd,
    fab,
    free_port,
    ssh_host,
    stop_runs,
    story_deployments,
    story_hosts,
)

pytestmark = pytest.mark.ssh


class Story:
    def __init__(self, root: Path, inventory: Path) -> None:
        self.root = root
        self.inventory = inventory
        self.workdir = root / "node"
        self.site = root / "site"

    def fab(self, *args: str, env: dict[str, str] | None = None) -> Any:
        return fab(*args, "--inventory", str(self.inventory), env=env)


@pytest.fixture
def story(sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]) -> Iterator[Story]:
    port = free_port()
    deployments: dict[str, Any] = {
        **story_deployments(port),
        "tiny": {"engine": "sglang", "model": str(SIM_MODELS / "tiny-llama"), "port": port},
    }
    inv = write_inventory(story_hosts(sshd, tmp_path, list(deployments)), deployments)
    story = Story(tmp_path, inv)
    yield story
    stop_runs(inv)


def test_preflight_catches_the_first_two_crashes_before_any_launch(story: Story) -> None:
    v3 = story.fab("preflight", "--host", "v3")
    assert v3.returncode == 6
    assert "FAIL  context length" in v3.stdout and "long_context: allow" in v3.stdout
    assert "FAIL  model hooks" in v3.stdout and "kimi-k25-eagle3-hooks" in v3.stdout

    v4 = story.fab("preflight", "--host", "v4")
    assert v4.returncode == 6
    assert "PASS  context length" in v4.stdout and "FAIL  model hooks" in v4.stdout

    v5 = story.fab("preflight", "--host", "v5")
    assert v5.returncode == 0, v5.stdout + v5.stderr
    assert "FAIL" not in v5.stdout
    assert "will be applied by deploy" in v5.stdout

    # deploy refuses at preflight: nothing was launched, no run directory exists.
    refused = story.fab("deploy", "--host", "v3")
    assert refused.returncode == 6 and "nothing was launched" in refused.stderr
    assert not (story.workdir / "runs").exists()

    ok = story.fab("deploy", "--host", "v5")
    assert ok.returncode == 0, ok.stderr
    # Now the port is ours: another deploy needs --restart, and preflight says so.
    again = story.fab("preflight", "--host", "v5")
    assert again.returncode == 6 and "held by our running server" in again.stdout
    assert story.fab("preflight", "--host", "v5", "--restart").returncode == 0


def _tree_digest(*roots: Path) -> dict[str, str]:
    digest = {}
    for root in roots:
        for path in sorted(root.rglob("*")) if root.exists() else []:
            if path.is_file() and "__pycache__" not in path.parts:
                info = path.stat()
                content = hashlib.sha256(path.read_bytes()).hexdigest()
                digest[str(path)] = f"{content}:{stat.S_IMODE(info.st_mode):o}:{info.st_mtime_ns}"
    return digest


def test_a_dry_run_changes_nothing_on_the_node(story: Story) -> None:
    assert story.fab("deploy", "--host", "tiny").returncode == 0
    before = _tree_digest(story.workdir, story.site)
    for args in (("deploy", "--host", "v5", "--dry-run"), ("plan", "--host", "v5", "--restart")):
        result = story.fab(*args)
        assert "--- diff of kimi-k25-eagle3-hooks ---" in result.stdout
        assert "--- launch.sh" in result.stdout and "actions on the node:" in result.stdout
        assert "stop run" in result.stdout or args[0] == "deploy"
    assert _tree_digest(story.workdir, story.site) == before


def test_a_hostile_argument_reaches_the_server_as_one_word(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    marker = Path(f"/tmp/pwned-{uuid.uuid4().hex}")
    evil = f"x'; touch {marker}; echo '"
    port = free_port()
    inv = write_inventory(
        {"n": ssh_host(sshd, tmp_path / "node", "d")},
        {
            "d": {
                "engine": "sglang",
                "model": str(SIM_MODELS / "tiny-llama"),
                "port": port,
                "args": {"served-model-name": evil},
            }
        },
    )
    try:
        result = fab("deploy", "--host", "n", "--inventory", str(inv))
        assert result.returncode == 0, result.stderr
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as resp:
            models = json.load(resp)
        assert models["data"][0]["id"] == evil
        assert not marker.exists()
    finally:
        stop_runs(inv)
        marker.unlink(missing_ok=True)


def test_a_secret_reaches_the_server_and_nothing_else(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    secret = f"hf_{uuid.uuid4().hex}"
    workdir = tmp_path / "node"
    inv = write_inventory(
        {"n": ssh_host(sshd, workdir, "d")},
        {
            "d": {
                "engine": "sglang",
                "model": str(SIM_MODELS / "tiny-llama"),
                "port": free_port(),
                "secrets": {"HF_TOKEN": {"env": "FIREDUP_TEST_HF_TOKEN"}},
            }
        },
    )
    env = {"FIREDUP_TEST_HF_TOKEN": secret}
    outputs = []
    try:
        for args in (("render",), ("plan",), ("deploy",), ("status",), ("logs",)):
            result = fab(*args, "--host", "n", "--inventory", str(inv), env=env)
            outputs.append(result.stdout + result.stderr)
        assert "READY" in outputs[2], outputs[2]
        pid = int((workdir / "current" / "pid").read_text())
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"HF_TOKEN={secret}".encode() in environ  # it did reach the server
    finally:
        outputs.append(fab("stop", "--host", "n", "--inventory", str(inv), env=env).stdout)
    assert all(secret not in out for out in outputs)
    # secrets.env (0600) lived only until the launch read it (issue 16): no copy is left.
    holders = [p for p in workdir.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert holders == []
    # Without the variable on the operator's machine, deploy says which one, and stops.
    assert "FIREDUP_TEST_HF_TOKEN" not in os.environ
    missing = fab("deploy", "--host", "n", "--inventory", str(inv), "--restart")
    assert missing.returncode == 2
    assert "FIREDUP_TEST_HF_TOKEN, which is not set here" in missing.stderr
