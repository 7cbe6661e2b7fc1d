"""One node, one slot: host entries that share a node and workdir (a YAML `<<:` merge, as the
demo's story hosts do) see each other's run for what it is, and stop refuses to end another
entry's server without --force."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from firedup.config.inventory import load_inventory
from firedup.node.slot import slot_mates
from tests.conftest import REPO, Sshd, fab, sim_deployment, ssh_host, stop_runs

pytestmark = pytest.mark.ssh


def test_demo_story_hosts_are_one_slot() -> None:
    mates = slot_mates(load_inventory(REPO / "inventory" / "hosts.yaml").hosts.values())
    assert set(mates["demo"]) == {"story-v3", "story-v4"}
    assert mates["gpu-node"] == ()


@pytest.fixture
def merged_inventory(sshd: Sshd, tmp_path: Path) -> Path:
    base = ssh_host(sshd, tmp_path / "node", "a")
    base["env"]["FIREDUP_SIM_SPEED"] = "4"  # a quick startup (4x): the slot is the subject
    text = (
        "hosts:\n"
        f"  a: &a {json.dumps(base)}\n"
        "  b:\n    <<: *a\n    deployment: b\n"
        "deployments:\n"
        f"  a: {json.dumps(sim_deployment(tp=1, ready_timeout_s=60))}\n"
        f"  b: {json.dumps(sim_deployment(tp=1, ready_timeout_s=60))}\n"
    )
    path = tmp_path / "hosts.yaml"
    path.write_text(text)
    assert yaml.safe_load(text)["hosts"]["b"]["workdir"] == base["workdir"]
    yield path
    stop_runs(path, "a")


def test_status_and_stop_name_the_other_hosts_run(merged_inventory: Path) -> None:
    inv = str(merged_inventory)
    deploy = fab("deploy", "--host", "a", "--inventory", inv)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr

    status = fab("status", "--host", "b", "--inventory", inv)
    assert status.returncode == 0, status.stderr
    assert "runs a's deployment a (same node and workdir)" in status.stdout
    assert "one slot with a" in status.stdout

    refused = fab("stop", "--host", "b", "--inventory", inv)
    assert refused.returncode == 7, refused.stdout + refused.stderr
    assert "a's: run" in refused.stderr and "--force" in refused.stderr
    still = fab("status", "--host", "a", "--inventory", inv)
    assert "ready" in still.stdout, still.stdout

    forced = fab("stop", "--host", "b", "--force", "--inventory", inv)
    assert forced.returncode == 0, forced.stderr
    assert "stopped" in forced.stdout


def test_restart_refuses_to_replace_another_hosts_live_run(merged_inventory: Path) -> None:
    inv = str(merged_inventory)
    deploy = fab("deploy", "--host", "a", "--inventory", inv)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr

    for argv in (("deploy", "--restart"), ("restart",), ("start", "--restart")):
        refused = fab(*argv, "--host", "b", "--inventory", inv)
        assert refused.returncode == 7, (argv, refused.stdout + refused.stderr)
        assert "a's: run" in refused.stderr and "--force" in refused.stderr, refused.stderr
        still = fab("status", "--host", "a", "--inventory", inv)
        assert "ready" in still.stdout, (argv, still.stdout)

    forced = fab("deploy", "--restart", "--force", "--host", "b", "--inventory", inv)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    status = fab("status", "--host", "a", "--inventory", inv)
    assert "runs b's deployment b" in status.stdout, status.stdout
    stop_runs(merged_inventory, "b")
