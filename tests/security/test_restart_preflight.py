"""Issue 16 §8: `fab restart` (and `deploy --restart`) of the stock demo deployment: preflight
does not count what the run being replaced holds (its port, its GPU memory, its processes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, Sshd, fab, free_port, stop_runs, story_hosts

pytestmark = [pytest.mark.ssh]


def stock_demo(sshd: Sshd, root: Path, transport: str) -> Path:
    """The stock inventory's demo deployment (story-v5: mem_fraction 0.9 on 8 simulated GPUs,
    the hooks patch) on a node of its own: own workdir, GPU state and port; over SSH, or on
    this machine as the stock `demo` host is (transport: local)."""
    stock = yaml.safe_load((REPO / "inventory" / "hosts.yaml").read_text())
    text = yaml.safe_dump(stock["deployments"]["story-v5"])
    deployment: dict[str, Any] = yaml.safe_load(
        text.replace("${INVENTORY_DIR}", str(REPO / "inventory"))
    )
    deployment["port"] = free_port()
    hosts = story_hosts(sshd, root, ["demo"])
    hosts["demo"]["env"]["FIREDUP_SIM_SPEED"] = "50"
    if transport == "local":
        entry = hosts["demo"]
        keep = ("python", "workdir", "env", "deployment")
        hosts["demo"] = {"transport": "local", **{k: entry[k] for k in keep}}
    path = root / "hosts.yaml"
    path.write_text(yaml.safe_dump({"hosts": hosts, "deployments": {"demo": deployment}}))
    return path


@pytest.mark.parametrize("transport", ["ssh", "local"])
def test_restart_of_the_stock_demo_is_ready(ssshd: Sshd, tmp_path: Path, transport: str) -> None:
    inventory = stock_demo(ssshd, tmp_path, transport)
    env = {"HF_TOKEN": "hf_demo_token_for_tests"}
    try:
        first = fab("deploy", "--host", "demo", "--inventory", str(inventory), env=env)
        assert first.returncode == 0, first.stdout + first.stderr
        for args in (("restart",), ("deploy", "--restart")):
            again = fab(*args, "--host", "demo", "--inventory", str(inventory), env=env)
            output = again.stdout + again.stderr
            assert again.returncode == 0 and "READY" in again.stdout, output
            assert "another process holds memory" not in output, output
    finally:
        stop_runs(inventory)
