"""Deployments whose engine runs in a podman container, over a real sshd (issue 27)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import fab, wait_until
from tests.containers.conftest import container_deployment, containers_of
from tests.containers.image import podman

pytestmark = pytest.mark.ssh


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_deploy_status_stop_in_a_container(
    image: str, podman_inventory: Callable[..., Path], tmp_path: Path
) -> None:
    deployment = container_deployment(image)
    inv = podman_inventory(deployment)
    deploy = fab("deploy", "--host", "c", "--inventory", str(inv), timeout_s=180)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    assert "c: READY" in deploy.stdout
    current = tmp_path / "node" / "current"
    run_id = current.resolve().name
    name = f"firedup-{run_id}"
    assert podman("inspect", "--format", "{{.State.Status}}", name).stdout.strip() == "running"
    meta = json.loads((current / "meta.json").read_text())
    assert meta["runtime"] == "podman"
    status = fab("status", "--host", "c", "--inventory", str(inv))
    assert status.returncode == 0, status.stderr
    assert "ready" in status.stdout
    stop = fab("stop", "--host", "c", "--inventory", str(inv))
    assert stop.returncode == 0, stop.stderr
    assert name not in containers_of()
    wait_until(lambda: port_free(deployment["port"]), 10, "the port to be free")
